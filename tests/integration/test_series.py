"""VFLGAN-TS over the real Flower path: the strategy and party client on the in-process
grid do the one-process loop's math bit for bit, and only features, their gradients and
the published channels cross the wire."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import ArrayRecord, Message

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import ModelConfig, TrainConfig, Variant, VFLGANConfig
from flwr_vflgan.data.series import load_series, wide_to_series
from flwr_vflgan.gan.exchanges import LocalVFLGAN
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.runtime.rng import Stream, numpy_generator
from flwr_vflgan.series.config import SeriesModelConfig, SeriesSettings, SeriesTrainConfig
from flwr_vflgan.series.local import build, synthesize
from flwr_vflgan.strategies.grid import InProcessGrid
from flwr_vflgan.strategies.vflgan import VFLGANStrategy

REPO = Path(__file__).resolve().parents[2]
SHARED_SEED, SERVER_SEED, ROWS = 77, 5, 40
SMALL = [
    "series.model.generator_hidden=16",
    "series.model.attribute_hidden=[8,4]",
    "series.model.extractor_hidden=[4]",
    "series.model.shared_hidden=[8,4]",
    "model.feature_dim=8",
]


def _config(steps: int = 6, dp: dict | None = None, loss: str = "bce") -> VFLGANConfig:
    model = SeriesModelConfig(
        generator_hidden=16, attribute_hidden=(8, 4), extractor_hidden=(4,), shared_hidden=(8, 4)
    )
    return VFLGANConfig(
        variant=Variant.VFLGAN_TS,
        model=ModelConfig(feature_dim=8),
        train=TrainConfig(
            epochs=1, max_steps=steps, batch_size=64, n_critic=1, betas=(0.5, 0.9), eval_every=0
        ),
        series=SeriesSettings(model=model, train=SeriesTrainConfig(loss=loss)),
        dp=dp or {},
    )


def _grid_run(config: VFLGANConfig, observer=None):
    nodes = [{P.NODE_PARTITION_ID: i, P.NODE_SHARED_SEED: SHARED_SEED} for i in range(2)]
    strategy = VFLGANStrategy(
        config,
        n_parties=2,
        seed=SERVER_SEED,
        data_spec=DataSpec(source="sine6", n_parties=2),
        publish_rows=ROWS,
    )
    return strategy.start(InProcessGrid(make_client_app(), nodes, observer=observer))


DPVFLGAN_TS = {"mechanism": "vflgan_gaussian", "target_epsilon": 10.0}


@pytest.mark.parametrize(
    ("dp", "loss"), [(None, "bce"), (DPVFLGAN_TS, "bce"), (DPVFLGAN_TS, "wgan_gp")]
)
def test_the_grid_does_what_the_one_process_loop_does_bit_for_bit(dp, loss):
    """Without DP, and with DPVFLGAN-TS: the same noise, planned the same way (the
    WGAN-GP loss too: its penalties' masks and interpolates are drawn alike)."""
    config = _config(dp=dp, loss=loss)
    table = load_series("sine6", 2)
    result = _grid_run(config)
    parties, server, schedule = build(config, table, SHARED_SEED, SERVER_SEED)
    local = LocalVFLGAN(parties, server, schedule, 1)
    for block in local.blocks():
        local.run_block(block)
    expected = synthesize(parties, table, ROWS, 0)
    expected = expected[numpy_generator(SERVER_SEED, Stream.PUBLISH).permutation(ROWS)]
    published = wide_to_series(result.synthetic, table.channels, table.length)
    assert result.steps == 6 and result.published == "last"
    np.testing.assert_array_equal(published, expected)
    if dp:  # both sides noised: each party's 3 attribute discriminators and extractor
        assert [p["parts"] for p in result.privacy] == [4, 4]
        assert all(party.privacy is not None for party in parties)
    # The parties trained: the published series are not the untrained generators'.
    fresh, _, _ = build(config, table, SHARED_SEED, SERVER_SEED)
    assert not np.allclose(synthesize(fresh, table, ROWS, 0), synthesize(parties, table, ROWS, 0))


def test_the_wire_carries_features_their_gradients_and_the_published_channels_only():
    log: list[Message] = []
    config = _config(steps=4)
    _grid_run(config, log.append)
    table = load_series("sine6", 2)
    steps = [m for m in log if m.metadata.message_type == P.STEP]
    assert steps, "no step message was seen"
    for message in steps:
        assert not message.has_error()
        for record in message.content.values():
            if isinstance(record, ArrayRecord):
                for array in (a.numpy() for a in record.values()):
                    # Batches of 64 features (real and fake) or their gradients: never a
                    # channel (800 steps) or a party's block.
                    assert array.dtype == np.float32 and array.shape[1] == 8, array.shape
                    assert array.shape[0] % 64 == 0
    setups = [
        m for m in log if m.metadata.message_type == P.SETUP and m.metadata.reply_to_message_id
    ]
    published = [
        m for m in log if m.metadata.message_type == P.GENERATE and m.metadata.reply_to_message_id
    ]
    assert len(setups) == len(published) == 2
    for party, message in enumerate(published):
        block = pd.read_parquet(io.BytesIO(message.content[P.SYNTHETIC]["parquet"]))
        held = [table.channels[c] for c in table.parties[party]]
        # Each party publishes its own channels of the synthetic series, nothing else.
        assert {name.split("@")[0] for name in block.columns} == set(held)
        assert block.shape == (ROWS, len(held) * table.length)


def _run(*overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, "-m", "simulations.run", *overrides],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_run_command_publishes_series_with_a_report(tmp_path: Path):
    done = _run(
        "algorithm=vflgan_ts",
        "dataset=sine6",
        "train.max_steps=20",
        "train.eval_every=1",
        "train.eval_rows=256",
        "output.publish_rows=300",
        *SMALL,
        f"hydra.run.dir={tmp_path}",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for name in ("synthetic.csv", "metrics.json", "config.json", "report.md", "series.png"):
        assert (tmp_path / name).is_file(), name
    synthetic = pd.read_csv(tmp_path / "synthetic.csv")
    assert list(synthetic.columns) == ["series", "t", "x11", "x12", "x13", "x21", "x22", "x23"]
    assert len(synthetic) == 300 * 800 and synthetic["series"].nunique() == 300
    report = (tmp_path / "report.md").read_text()
    assert "discriminative_score" in report and "cross_party_amplitude_correlation" in report
    assert "discriminative score" in done.stdout


def test_a_table_with_vflgan_ts_and_series_with_another_algorithm_are_refused():
    done = _run("algorithm=vflgan_ts", "dataset=adult")
    assert done.returncode == 2
    assert "algorithm=vflgan_ts trains on multivariate series" in done.stderr
    assert "Traceback" not in done.stderr
    done = _run("dataset=sine6")
    assert done.returncode == 2 and "add algorithm=vflgan_ts" in done.stderr


def test_dpvflgan_ts_accounts_each_partys_first_layers_jointly_and_says_what_it_covers(
    tmp_path: Path,
):
    done = _run(
        "algorithm=vflgan_ts",
        "dataset=sine6",
        "dp=vflgan_gaussian",
        "dp.target_epsilon=10",
        "train.max_steps=8",
        "output.evaluate=false",
        "output.publish_rows=50",
        *SMALL,
        f"hydra.run.dir={tmp_path}",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    privacy = json.loads((tmp_path / "metrics.json").read_text())["privacy"]
    assert privacy["mechanism"] == "vflgan_gaussian" and privacy["guarantee"] == "first_layer"
    assert "attribute discriminator" in privacy["covers"]
    assert any("shared discriminator" in item for item in privacy["not_covered"])
    # The sine data trains unscaled: no fitted scaling to leave out.
    assert not any("minimum and maximum" in item for item in privacy["not_covered"])
    # 3 channels per party: 3 attribute discriminators and the extractor, one account;
    # 8 steps of which 4 are discriminator steps (n_critic = 1).
    assert [(p["parts"], p["steps"]) for p in privacy["parties"]] == [(4, 4), (4, 4)]
    assert 0 < privacy["epsilon"] <= 10.0
    assert "privacy      epsilon covers first_layer" in done.stdout


def test_basic_motions_under_dp_names_the_parties_fitted_scaling_as_not_covered(
    tmp_path: Path,
):
    """The bundled real series train end to end; their parties fit a per-channel scaling
    on their private series, which a DP run's metrics.json, console and report.md list
    among what its epsilon does not cover."""
    done = _run(
        "algorithm=vflgan_ts",
        "dataset=basic_motions",
        "dp=vflgan_gaussian",
        "dp.target_epsilon=10",
        "train.max_steps=4",
        "train.eval_every=1",
        "evaluation.plots=false",
        *SMALL,
        f"hydra.run.dir={tmp_path}",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    scaling = "each party's per-channel minimum and maximum"
    assert any(item.startswith(scaling) for item in metrics["privacy"]["not_covered"])
    assert scaling in done.stdout
    report = (tmp_path / "report.md").read_text()
    assert "| not covered by epsilon |" in report and scaling in report
    assert "| dp guarantee | first_layer" in report
    synthetic = pd.read_csv(tmp_path / "synthetic.csv")
    assert list(synthetic.columns)[2:] == ["accel_x", "accel_y", "accel_z"] + [
        f"gyro_{a}" for a in "xyz"
    ]
    assert len(synthetic) == 80 * 100
    assert 0 <= metrics["series"]["real_cross_party_amplitude_correlation"] <= 1


def _three_epoch_runs(average: float | None = None):
    """A function running a 3-epoch sine6 job (evaluated every epoch) on the in-process
    grid, with the strategy's keyword arguments (checkpoints, progress) it is given."""
    import dataclasses

    from flwr_vflgan.series.report import SeriesSelection

    base = _config()
    train = dataclasses.replace(
        base.train,
        epochs=3,
        max_steps=None,
        batch_size=512,
        eval_every=1,
        eval_rows=64,
        generator_average=average,
    )
    config = dataclasses.replace(base, train=train)
    selection = SeriesSelection(load_series("sine6", 2))

    def run(**kwargs):
        nodes = [{P.NODE_PARTITION_ID: i, P.NODE_SHARED_SEED: SHARED_SEED} for i in range(2)]
        strategy = VFLGANStrategy(
            config,
            n_parties=2,
            seed=SERVER_SEED,
            data_spec=DataSpec(source="sine6", n_parties=2),
            publish_rows=ROWS,
            evaluate_fn=selection,
            **kwargs,
        )
        return strategy.start(InProcessGrid(make_client_app(), nodes))

    return run


@pytest.mark.parametrize("average", [None, 1.0])
def test_an_interrupted_series_run_resumes_to_the_same_series(tmp_path: Path, average):
    """Checkpoints go through VFLGAN's machinery: the parties' series models and Adam
    moments (and the generators' average), the server's shared discriminator and the
    evaluations."""
    from interrupt import Interrupt, stop_in_epoch

    run = _three_epoch_runs(average)

    reference = run()
    ckpt = tmp_path / "ckpt"
    with pytest.raises(Interrupt):
        run(checkpoint_dir=ckpt, party_checkpoint_root=ckpt, progress=stop_in_epoch(2))
    resumed = run(checkpoint_dir=ckpt, party_checkpoint_root=ckpt)
    assert resumed.resumed_from_step == 8  # 4 discriminator and 4 generator steps an epoch
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)
    assert [h["fd"] for h in resumed.history] == [h["fd"] for h in reference.history]
    assert resumed.best_epoch == reference.best_epoch


def _rewrite_saved_configs(directory: Path, change) -> int:
    """Apply ``change`` to the algorithm configuration stored in every checkpoint under
    ``directory`` (server's and parties'), as an older version would have written it."""
    count = 0
    for path in sorted(directory.rglob("*.npz")):
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        meta = json.loads(bytes(arrays["__meta__"]).decode())
        saved = json.loads(meta["config"])
        change(saved)
        meta["config"] = json.dumps(saved, sort_keys=True)
        encoded = json.dumps(meta, sort_keys=True).encode()
        arrays["__meta__"] = np.frombuffer(encoded, dtype=np.uint8)
        np.savez(path, **arrays)
        count += 1
    return count


@pytest.mark.parametrize("saved", ["absent", 2.0])
def test_a_checkpoint_from_before_generator_smoothing_resumes(tmp_path: Path, saved):
    """Checkpoints written before ``series.model.generator_smoothing`` existed (no key, on
    the server and at both parties) resume under this version to the series of an
    uninterrupted run; checkpoints written with a filter are refused, naming it."""
    from interrupt import Interrupt, stop_in_epoch

    run = _three_epoch_runs()
    ckpt = tmp_path / "ckpt"
    with pytest.raises(Interrupt):
        run(checkpoint_dir=ckpt, party_checkpoint_root=ckpt, progress=stop_in_epoch(2))

    def older(algorithm: dict) -> None:
        model = algorithm["series"]["model"]
        if saved == "absent":
            del model["generator_smoothing"]
        else:
            model["generator_smoothing"] = saved

    assert _rewrite_saved_configs(ckpt, older) >= 3  # the server's and both parties'
    if saved != "absent":
        with pytest.raises(ValueError, match=r"generator_smoothing: 2\.0 in the checkpoint"):
            run(checkpoint_dir=ckpt, party_checkpoint_root=ckpt)
        return
    resumed = run(checkpoint_dir=ckpt, party_checkpoint_root=ckpt)
    assert resumed.resumed_from_step == 8
    pd.testing.assert_frame_equal(resumed.synthetic, run().synthetic)


def test_a_users_long_format_file_trains_and_publishes_in_its_own_units(tmp_path: Path):
    """Two channels of very different scales, split by name; each party scales its own
    channels, so the published series are back in the file's units."""
    rng = np.random.default_rng(0)
    t = np.arange(40)
    rows = []
    for k in range(128):
        amplitude = rng.normal(1.0, 0.2)
        for step in t:
            pulse = 70 + 10 * amplitude * np.sin(2 * np.pi * step / 20)
            pressure = 120 + 30 * amplitude * np.cos(2 * np.pi * step / 10)
            rows.append(
                {"patient": f"p{k:03d}", "minute": step, "pulse": pulse, "pressure": pressure}
            )
    path = tmp_path / "vitals.csv"
    pd.DataFrame(rows).sample(frac=1.0, random_state=1).to_csv(path, index=False)
    out = tmp_path / "run"
    done = _run(
        "algorithm=vflgan_ts",
        "dataset=series_csv",
        f"dataset.source={path}",
        "dataset.id_column=patient",
        "dataset.time_column=minute",
        "partition=explicit",
        "partition.columns=[[pressure],[pulse]]",
        "train.batch_size=32",
        "train.epochs=2",
        *SMALL,
        f"hydra.run.dir={out}",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    synthetic = pd.read_csv(out / "synthetic.csv")
    assert list(synthetic.columns) == ["series", "t", "pulse", "pressure"]
    assert len(synthetic) == 128 * 40
    # In the file's units: pulse around 70, pressure around 120 (a scaled block would
    # lie in [-1, 1]).
    assert 50 < synthetic["pulse"].mean() < 90 and 90 < synthetic["pressure"].mean() < 150
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["series"]["discriminative_score"] >= 0


def test_a_bad_series_file_stops_with_one_line(tmp_path: Path):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"series": ["a", "a", "b"], "t": [0, 1, 0], "x": [1.0, 2.0, 3.0]}).to_csv(
        path, index=False
    )
    done = _run("algorithm=vflgan_ts", "dataset=series_csv", f"dataset.source={path}")
    assert done.returncode == 2
    assert "series 'b' has 1 of the 2 steps" in done.stderr and "Traceback" not in done.stderr


def _deployed_on_the_grid(tmp_path: Path, overrides: str) -> tuple[dict, dict, Path]:
    """The run of ``overrides`` twice with the same parties and shared seed: in process
    (the server hands the parties their blocks) and as a deployment over the in-process
    grid (each party reads its exported file, the server reads no data); returns both
    metrics and the deployment's run directory."""
    from flwr_vflgan.simulations.config import ExportConfig, compose_run_config, to_run_spec
    from flwr_vflgan.simulations.export_parties import export_parties
    from flwr_vflgan.simulations.launch import inprocess_nodes, shared_seed_for
    from flwr_vflgan.simulations.series_pipeline import run_series

    base = f"algorithm=vflgan_ts {overrides} {' '.join(SMALL)} output.evaluate=false"
    base += " train.steps_per_exchange=4"  # runtime=deployment's default, in both
    spec = to_run_spec(compose_run_config(base), tmp_path / "inprocess")
    reference = run_series(spec)
    exported = export_parties(spec.data, ExportConfig(out_dir=str(tmp_path / "parties")))
    nodes = inprocess_nodes(2, shared_seed_for(spec.seed))
    for node, path in zip(nodes, exported.data_files, strict=True):
        node[P.NODE_DATA_PATH] = str(path)
    deployed = to_run_spec(compose_run_config(f"{base} runtime=deployment"), tmp_path / "dep")
    metrics = run_series(deployed, grid=InProcessGrid(make_client_app(), nodes))
    return reference, metrics, deployed.run_dir


@pytest.mark.parametrize(
    ("overrides", "fitted"),
    [
        ("dataset=sine6 train.max_steps=6 output.publish_rows=40", False),
        (
            "dataset=basic_motions train.max_steps=6 dp=vflgan_gaussian dp.target_epsilon=10",
            True,
        ),
    ],
    ids=["sine6", "basic-motions-dp"],
)
def test_parties_reading_their_own_series_files_publish_the_simulated_runs_series(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: str, fitted: bool
):
    """runtime=deployment for VFLGAN-TS, the Flower networking aside: the parties read the
    files export_parties wrote and publish the in-process run's series bit for bit, the
    server never reads the series (its readers are blocked) and takes the channels from
    the published columns, and a DP run's parties report their fitted scaling."""
    import flwr_vflgan.simulations.series_pipeline as pipeline

    real_table, real_blocks = pipeline.series_table, pipeline.series_blocks
    reads: list[str] = []

    def watched(reader):
        def read(spec):
            reads.append(spec.source)
            return reader(spec)

        return read

    monkeypatch.setattr(pipeline, "series_table", watched(real_table))
    monkeypatch.setattr(pipeline, "series_blocks", watched(real_blocks))
    reference, metrics, run_dir = _deployed_on_the_grid(tmp_path, overrides)
    source = overrides.split()[0].removeprefix("dataset=")
    assert reads == [source, source]  # the in-process run's server only
    inprocess = pd.read_csv(tmp_path / "inprocess" / "synthetic.csv")
    pd.testing.assert_frame_equal(pd.read_csv(run_dir / "synthetic.csv"), inprocess)
    assert metrics["runtime"] == "deployment" and metrics["fd"] is None
    assert metrics["steps"] == reference["steps"] == 6
    privacy = metrics["privacy"]
    if privacy is not None:
        assert privacy["not_covered"] == reference["privacy"]["not_covered"]
        scaling = any("minimum and maximum" in item for item in privacy["not_covered"])
        assert scaling == fitted
        assert privacy["epsilon"] == reference["privacy"]["epsilon"]


def _deploy_files(tmp_path: Path, files: list[Path], overrides: str) -> pd.DataFrame:
    """A deployment of ``overrides`` over the in-process grid whose parties read
    ``files`` (the shared seed of an in-process run of seed 0); its synthetic series."""
    from flwr_vflgan.simulations.config import compose_run_config, to_run_spec
    from flwr_vflgan.simulations.launch import inprocess_nodes, shared_seed_for
    from flwr_vflgan.simulations.series_pipeline import run_series

    spec = to_run_spec(compose_run_config(overrides), tmp_path)
    nodes = inprocess_nodes(2, shared_seed_for(spec.seed))
    for node, path in zip(nodes, files, strict=True):
        node[P.NODE_DATA_PATH] = str(path)
    run_series(spec, grid=InProcessGrid(make_client_app(), nodes))
    return pd.read_csv(tmp_path / "synthetic.csv")


def test_series_parties_holding_different_series_align_them_by_id(tmp_path: Path):
    """runtime.align_ids=true on series files: party 0 lacks the first 300 series, party
    1 the last 248 and holds its rows shuffled. The parties keep the series both hold,
    in party 0's order, and publish bit for bit what parties given exactly those series
    in that order publish."""
    import shutil

    from flwr_vflgan.data.files import domain_sidecar
    from flwr_vflgan.simulations.config import ExportConfig, compose_run_config, to_run_spec
    from flwr_vflgan.simulations.export_parties import export_parties

    base = (
        f"algorithm=vflgan_ts dataset=sine6 runtime=deployment train.max_steps=6 "
        f"output.publish_rows=40 output.evaluate=false {' '.join(SMALL)}"
    )
    spec = to_run_spec(compose_run_config(base), tmp_path / "unused")
    exported = export_parties(spec.data, ExportConfig(out_dir=str(tmp_path / "parties")))
    first, second = (pd.read_csv(path) for path in exported.data_files)
    first = first.iloc[300:]
    second = second.iloc[:1800].sample(frac=1.0, random_state=3)
    common = first["series"][first["series"].isin(second["series"])].tolist()
    assert len(common) == 1500
    uneven, aligned = tmp_path / "uneven", tmp_path / "aligned"
    for folder, frames in (
        (uneven, (first, second)),
        (aligned, tuple(f.set_index("series").loc[common].reset_index() for f in (first, second))),
    ):
        folder.mkdir()
        for i, frame in enumerate(frames):
            frame.to_csv(folder / f"party-{i}.csv", index=False)
            shutil.copy(domain_sidecar(exported.data_files[i]), folder / f"party-{i}.domain.json")
    by_id = _deploy_files(
        tmp_path / "by-id",
        [uneven / f"party-{i}.csv" for i in range(2)],
        f"{base} runtime.align_ids=true",
    )
    given = _deploy_files(tmp_path / "given", [aligned / f"party-{i}.csv" for i in range(2)], base)
    pd.testing.assert_frame_equal(by_id, given)
    metrics = json.loads((tmp_path / "by-id" / "metrics.json").read_text())
    assert metrics["train_rows"] == 1500, metrics
