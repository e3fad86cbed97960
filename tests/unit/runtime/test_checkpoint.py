"""Party and server checkpoints: atomic, pickle-free, the last two kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flwr_vflgan.runtime.checkpoint import (
    CHECKPOINT_SCHEMA_VERSION,
    latest_server_checkpoint,
    load_party_checkpoint,
    save_party_checkpoint,
    save_server_checkpoint,
)

CONFIG = json.dumps({"variant": "vflgan", "train": {"batch_size": 8}})


def _flat(value: float) -> np.ndarray:
    return np.full(6, value, dtype=np.float32)


def _names(directory, pattern: str = "*") -> list[str]:
    return sorted(p.name for p in directory.glob(pattern))


def test_party_round_trip(tmp_path):
    extra = {"last_eval": np.arange(4, dtype=np.float32), "best": np.ones((2, 3), dtype=np.float32)}
    path = save_party_checkpoint(tmp_path / "p0", 12, _flat(1.5), [3, 9], extra, CONFIG)
    assert path == tmp_path / "p0" / "step-12.npz"
    arrays, steps = load_party_checkpoint(tmp_path / "p0", 12, CONFIG)
    assert steps == [3, 9]
    assert sorted(arrays) == ["best", "flat", "last_eval"]
    np.testing.assert_array_equal(arrays["flat"], _flat(1.5))
    assert arrays["flat"].dtype == np.float32
    np.testing.assert_array_equal(arrays["last_eval"], extra["last_eval"])
    np.testing.assert_array_equal(arrays["best"], extra["best"])
    assert _names(tmp_path / "p0") == ["step-12.npz"]  # no temporary file left behind


def test_party_config_is_compared_as_json_not_as_text(tmp_path):
    save_party_checkpoint(tmp_path, 1, _flat(0), [0, 0], {}, CONFIG)
    reordered = json.dumps({"train": {"batch_size": 8}, "variant": "vflgan"}, indent=2)
    load_party_checkpoint(tmp_path, 1, reordered)  # same configuration
    other = json.dumps({"variant": "vflgan", "train": {"batch_size": 16}})
    with pytest.raises(
        ValueError,
        match=r"step-1\.npz was written for a different configuration: train\.batch_size: 8 in "
        r"the checkpoint, 16 now; rerun with the checkpoint's settings",
    ):
        load_party_checkpoint(tmp_path, 1, other)


def test_config_differences_name_every_leaf_that_differs():
    from flwr_vflgan.runtime.checkpoint import config_differences

    saved = {"seed": 1, "train": {"lr": 0.1, "epochs": 3}, "dp": None, "gone": 1}
    now = {"seed": 1, "train": {"lr": 0.2, "epochs": 3}, "dp": {"mechanism": "dpsgd"}, "new": 2}
    assert config_differences(saved, now) == [
        "dp: None in the checkpoint, {'mechanism': 'dpsgd'} now",
        "gone: 1 in the checkpoint, absent now",
        "new: absent in the checkpoint, 2 now",
        "train.lr: 0.1 in the checkpoint, 0.2 now",
    ]
    assert config_differences(saved, saved) == []


def test_another_familys_settings_do_not_block_a_resume(tmp_path):
    """A VFLGAN checkpoint written before latent diffusion's defaults changed resumes;
    a latent-diffusion checkpoint with other latent settings is still refused."""
    from flwr_vflgan.runtime.checkpoint import refuse_other_config

    def config(variant: str, diffusion_lr: float, lr: float = 0.1) -> str:
        algorithm = {
            "variant": variant,
            "train": {"lr": lr},
            "latent": {"diffusion_lr": diffusion_lr},
        }
        return json.dumps({"algorithm": algorithm, "seed": 0})

    refuse_other_config(tmp_path, config("vflgan", 0.001), config("vflgan", 0.004))
    with pytest.raises(ValueError, match=r"algorithm\.train\.lr: 0\.1 in the checkpoint, 0\.2 now"):
        refuse_other_config(tmp_path, config("vflgan", 0.001), config("vflgan", 0.004, lr=0.2))
    with pytest.raises(
        ValueError, match=r"algorithm\.latent\.diffusion_lr: 0\.001 in the checkpoint"
    ):
        refuse_other_config(
            tmp_path, config("latent_diffusion", 0.001), config("latent_diffusion", 0.004)
        )


def test_vtgans_new_default_blocks_only_its_own_resumes(tmp_path):
    """A VFLGAN checkpoint written before VT-GAN's mixed-type encoder was on by default
    resumes; a VT-GAN or ctgan one is refused, since its encoding differs."""
    from flwr_vflgan.runtime.checkpoint import refuse_other_config

    vtgan_before = {"max_modes": 10}  # no point_mass_share key: saved before it existed
    vtgan_now = {"max_modes": 10, "point_mass_share": 0.1}

    def config(variant: str, vtgan: dict) -> str:
        return json.dumps({"algorithm": {"variant": variant, "vtgan": vtgan}, "seed": 0})

    refuse_other_config(tmp_path, config("vflgan", vtgan_before), config("vflgan", vtgan_now))
    for variant in ("vtgan", "ctgan"):
        with pytest.raises(
            ValueError, match=r"algorithm\.vtgan\.point_mass_share: absent in the checkpoint"
        ):
            refuse_other_config(tmp_path, config(variant, vtgan_before), config(variant, vtgan_now))


def test_a_setting_added_with_the_old_behaviour_as_default_does_not_block_a_resume(tmp_path):
    """A checkpoint written before ``series.model.generator_smoothing`` existed is read as
    one without the filter (the setting's default), so it resumes; one written with a
    filter, or an unlisted new setting (VT-GAN's ``point_mass_share``), is still refused."""
    from flwr_vflgan.config import (
        SETTINGS_ADDED_SINCE,
        Variant,
        VFLGANConfig,
        settings_as_read_now,
    )
    from flwr_vflgan.runtime.checkpoint import refuse_other_config

    assert SETTINGS_ADDED_SINCE == {
        "train.generator_steps": 1,
        "series.train.loss": "bce",
        "series.model.generator_smoothing": None,
    }
    now = VFLGANConfig(variant=Variant.VFLGAN_TS).to_dict()
    current = json.dumps(now, sort_keys=True)
    before = json.loads(current)
    del before["series"]["model"]["generator_smoothing"]
    del before["series"]["train"]["loss"]  # written before either setting existed
    refuse_other_config(tmp_path, json.dumps(before), current, settings_as_read_now)
    with pytest.raises(ValueError, match=r"generator_smoothing: absent in the checkpoint, None"):
        refuse_other_config(tmp_path, json.dumps(before), current)  # without the reading
    smoothed = json.loads(current)
    smoothed["series"]["model"]["generator_smoothing"] = 3.0
    with pytest.raises(ValueError, match=r"generator_smoothing: 3\.0 in the checkpoint, None now"):
        refuse_other_config(tmp_path, json.dumps(smoothed), current, settings_as_read_now)
    old_vtgan = json.loads(json.dumps(VFLGANConfig(variant=Variant.VTGAN).to_dict()))
    del old_vtgan["vtgan"]["point_mass_share"]
    with pytest.raises(ValueError, match=r"vtgan\.point_mass_share: absent in the checkpoint"):
        refuse_other_config(
            tmp_path,
            json.dumps(old_vtgan),
            json.dumps(VFLGANConfig(variant=Variant.VTGAN).to_dict()),
            settings_as_read_now,
        )
    # A VFLGAN checkpoint from before train.generator_steps: one generator step a cycle.
    vflgan_now = json.dumps(VFLGANConfig().to_dict(), sort_keys=True)
    vflgan_before = json.loads(vflgan_now)
    del vflgan_before["train"]["generator_steps"]
    refuse_other_config(tmp_path, json.dumps(vflgan_before), vflgan_now, settings_as_read_now)
    three = json.loads(vflgan_now)
    three["train"]["generator_steps"] = 3
    with pytest.raises(ValueError, match=r"generator_steps: 3 in the checkpoint, 1 now"):
        refuse_other_config(tmp_path, json.dumps(three), vflgan_now, settings_as_read_now)
    # Not an algorithm configuration (GAFM's run identity), or one that lacks the section:
    # read as written.
    assert settings_as_read_now('{"method": "gafm", "seed": 1}') == '{"method": "gafm", "seed": 1}'
    no_series = json.dumps({"variant": "vflgan"})
    assert json.loads(settings_as_read_now(no_series)) == {"variant": "vflgan"}


def test_missing_party_step_names_what_was_found(tmp_path):
    for step in (3, 5):
        save_party_checkpoint(tmp_path, step, _flat(step), [step, step], {}, CONFIG)
    with pytest.raises(
        FileNotFoundError,
        match=r"no checkpoint for step 4 at .*step-4\.npz; found \['step-3\.npz', 'step-5\.npz'\]",
    ):
        load_party_checkpoint(tmp_path, 4, CONFIG)
    with pytest.raises(FileNotFoundError, match=r"no checkpoint for step 0 at .*; found \[\]"):
        load_party_checkpoint(tmp_path / "nowhere", 0, CONFIG)


def test_only_the_last_two_party_checkpoints_are_kept(tmp_path):
    # Steps 2, 3, 10: numeric order (a text sort would put "step-10" first and keep 2, 3).
    for step in (2, 3, 10):
        save_party_checkpoint(tmp_path, step, _flat(step), [step, 0], {}, CONFIG)
    assert _names(tmp_path) == ["step-10.npz", "step-3.npz"]
    arrays, steps = load_party_checkpoint(tmp_path, 10, CONFIG)
    np.testing.assert_array_equal(arrays["flat"], _flat(10))
    assert steps == [10, 0]


def test_server_round_trip_and_latest(tmp_path):
    assert latest_server_checkpoint(tmp_path / "nowhere") is None
    assert latest_server_checkpoint(tmp_path) is None
    for step in (4, 8, 12):
        meta = {
            "optimizer_steps": [step - 1],
            "history": [{"epoch": 1, "fd": 0.5}],
            "best_fd": None,
        }
        path = save_server_checkpoint(tmp_path, step, {"flat": _flat(step)}, meta)
        assert path.name == f"server-{step}.npz"
    assert _names(tmp_path) == ["server-12.npz", "server-8.npz"]
    found = latest_server_checkpoint(tmp_path)
    assert found is not None
    arrays, meta = found
    assert sorted(arrays) == ["flat"]
    np.testing.assert_array_equal(arrays["flat"], _flat(12))
    assert meta == {
        "schema_version": CHECKPOINT_SCHEMA_VERSION,
        "next_step": 12,
        "optimizer_steps": [11],
        "history": [{"epoch": 1, "fd": 0.5}],
        "best_fd": None,
    }


def test_party_and_server_checkpoints_share_a_directory(tmp_path):
    save_party_checkpoint(tmp_path, 5, _flat(5), [1, 1], {}, CONFIG)
    save_server_checkpoint(tmp_path, 7, {"flat": _flat(7)}, {})
    save_server_checkpoint(tmp_path, 9, {"flat": _flat(9)}, {})
    save_server_checkpoint(tmp_path, 11, {"flat": _flat(11)}, {})
    assert _names(tmp_path) == ["server-11.npz", "server-9.npz", "step-5.npz"]


def test_leftover_temporary_files_are_never_read(tmp_path):
    save_server_checkpoint(tmp_path, 4, {"flat": _flat(4)}, {})
    save_party_checkpoint(tmp_path, 4, _flat(4), [0, 0], {}, CONFIG)
    # A crash mid-write leaves "<name>.tmp": a valid-looking newer checkpoint, and garbage.
    with open(tmp_path / "server-99.npz.tmp", "wb") as handle:
        np.savez(handle, flat=_flat(99))
    (tmp_path / "server-100.npz.tmp").write_bytes(b"half a zip")
    (tmp_path / "step-99.npz.tmp").write_bytes(b"half a zip")

    found = latest_server_checkpoint(tmp_path)
    assert found is not None and found[1]["next_step"] == 4
    np.testing.assert_array_equal(found[0]["flat"], _flat(4))
    with pytest.raises(FileNotFoundError, match=r"found \['step-4\.npz'\]"):
        load_party_checkpoint(tmp_path, 99, CONFIG)
    # Pruning ignores them too (and does not crash on their names).
    save_party_checkpoint(tmp_path, 5, _flat(5), [0, 0], {}, CONFIG)
    save_party_checkpoint(tmp_path, 6, _flat(6), [0, 0], {}, CONFIG)
    assert _names(tmp_path, "step-*") == ["step-5.npz", "step-6.npz", "step-99.npz.tmp"]


def test_foreign_or_future_files_are_rejected(tmp_path):
    np.savez(tmp_path / "step-1.npz", flat=_flat(1))
    with pytest.raises(
        ValueError, match=r"step-1\.npz is not a flwr-vflgan checkpoint \(no metadata\)"
    ):
        load_party_checkpoint(tmp_path, 1, CONFIG)
    meta = json.dumps({"schema_version": CHECKPOINT_SCHEMA_VERSION + 1, "next_step": 2})
    np.savez(
        tmp_path / "server-2.npz",
        flat=_flat(2),
        __meta__=np.frombuffer(meta.encode(), dtype=np.uint8),
    )
    with pytest.raises(
        ValueError, match=rf"server-2\.npz has checkpoint schema {CHECKPOINT_SCHEMA_VERSION + 1}"
    ):
        latest_server_checkpoint(tmp_path)


def test_checkpoints_load_without_pickle(tmp_path):
    path = save_party_checkpoint(tmp_path, 1, _flat(1), [0, 0], {}, CONFIG)
    with np.load(path, allow_pickle=False) as data:
        assert sorted(data.files) == ["__meta__", "flat"]
        assert data["__meta__"].dtype == np.uint8
