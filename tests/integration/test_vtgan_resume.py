"""VT-GAN checkpoints: an interrupted run resumes to the uninterrupted run's table, bit
for bit (shuffled row orders, trailing critic steps, K steps per exchange and DP-SGD's
spent steps included), and a client lost mid-run rejoins from the last checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from interrupt import CrashAt, Interrupt, stop_in_epoch

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import latest_checkpoint
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VTGANStrategy

SHARED = 987654321123


def _config(batch: int = 56, k: int = 1, dp: bool = False) -> VFLGANConfig:
    """640 rows at batch 56: 11 critic steps an epoch, so an epoch is two cycles of
    5 critic steps and a generator step, then one more critic step."""
    values: dict = {
        "variant": "vtgan",
        "train": {"epochs": 4, "batch_size": batch, "n_critic": 5, "steps_per_exchange": k},
        "vtgan": {"latent_dim": 16, "generator_width": 32, "discriminator_width": 32},
    }
    if dp:
        values["dp"] = {"mechanism": "dpsgd", "target_epsilon": 10.0, "delta": 1e-4}
    return VFLGANConfig.from_dict(values)


def _crash(step: int) -> CrashAt:
    """Lose client 1 when the block starting at ``step`` reaches it."""
    return CrashAt(P.VT_STEP, lambda m: m.metadata.group_id == str(step))


def _run(source: Path, config: VFLGANConfig, crash: CrashAt | None = None, **kwargs: object):
    spec = DataSpec(source=str(source), n_parties=2)
    nodes = [{"partition-id": i, "shared-seed": SHARED, "noise-seed": 7 + i} for i in range(2)]
    grid = InProcessGrid(make_client_app(), nodes, observer=crash)
    if crash is not None:
        crash.grid = grid
    strategy = VTGANStrategy(
        config,
        n_parties=2,
        seed=3,
        data_spec=spec,
        publish_rows=150,
        **kwargs,  # type: ignore[arg-type]
    )
    return strategy.start(grid)


def _checkpoints(path: Path) -> dict[str, object]:
    return {"checkpoint_dir": path, "party_checkpoint_root": path}


@pytest.mark.parametrize(("k", "dp"), [(1, False), (4, False), (1, True)])
def test_an_interrupted_vtgan_run_resumes_to_the_same_table(
    adult_small: Path, tmp_path: Path, k: int, dp: bool
) -> None:
    """The checkpoint follows each epoch's last generator step (step 11 of a 13-step
    epoch): the resumed run redoes the trailing critic step, and its epoch's mean losses
    carry the steps before the checkpoint."""
    config = _config(k=k, dp=dp)
    reference = _run(adult_small, config)
    with pytest.raises(Interrupt):
        _run(adult_small, config, progress=stop_in_epoch(3), **_checkpoints(tmp_path))
    servers = sorted(p.name for p in tmp_path.glob("server-*.npz"))
    assert servers == ["server-25.npz", "server-38.npz"]
    for party in ("party-0", "party-1"):
        assert sorted(p.name for p in (tmp_path / party).glob("*.npz")) == [
            "step-25.npz",
            "step-38.npz",
        ]
    resumed = _run(adult_small, config, **_checkpoints(tmp_path))
    assert resumed.resumed_from_step == 38 and reference.resumed_from_step is None
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)
    keys = ("epoch", "step", "d_loss", "g_loss", "cond_loss")
    assert [[h[k] for k in keys] for h in resumed.history] == [
        [h[k] for k in keys] for h in reference.history
    ]
    assert resumed.privacy == reference.privacy


def test_the_client_checkpoint_holds_the_shuffled_order_and_the_round(
    adult_small: Path, tmp_path: Path
) -> None:
    with pytest.raises(Interrupt):
        _run(adult_small, _config(), progress=stop_in_epoch(1), **_checkpoints(tmp_path))
    found = latest_checkpoint(tmp_path / "party-1")
    assert found is not None
    arrays, meta = found
    assert meta["next_step"] == 12
    # Two generator steps so far: two rounds of training-with-shuffling.
    assert arrays["counters"].tolist() == [2, 0]
    order = arrays["order"]
    assert sorted(order.tolist()) == list(range(640)) and not np.array_equal(order, np.arange(640))


def test_a_lost_vtgan_client_rejoins_and_the_table_is_unchanged(
    adult_small: Path, tmp_path: Path
) -> None:
    config = _config()
    reference = _run(adult_small, config)
    crash = _crash(30)  # epoch 3; the last checkpoint is at step 25
    result = _run(adult_small, config, crash, rejoin_grace=5.0, **_checkpoints(tmp_path))
    assert crash.crashes == 1 and result.resumed_from_step == 25
    pd.testing.assert_frame_equal(result.synthetic, reference.synthetic)


def test_a_vtgan_checkpoint_of_another_configuration_is_refused(
    adult_small: Path, tmp_path: Path
) -> None:
    with pytest.raises(Interrupt):
        _run(adult_small, _config(), progress=stop_in_epoch(1), **_checkpoints(tmp_path))
    with pytest.raises(
        ValueError,
        match=r"written for a different configuration: train\.batch_size: 56 in the checkpoint, "
        r"64 now",
    ):
        _run(adult_small, _config(batch=64), **_checkpoints(tmp_path))


def test_without_checkpoints_a_lost_vtgan_client_stops_the_run(adult_small: Path) -> None:
    with pytest.raises(RunStopped, match="cannot take the party back: it keeps no checkpoints"):
        _run(adult_small, _config(), _crash(30), rejoin_grace=5.0)


def test_a_vtgan_run_rerun_in_its_directory_resumes_from_its_checkpoints(
    adult_small: Path, tmp_path: Path
) -> None:
    """The run command's path: output.checkpoint writes the server's and every client's
    checkpoints under the run directory, and a rerun after an interruption resumes."""
    from dataclasses import replace

    from flwr_vflgan.simulations.config import OutputConfig, RunSpec, RuntimeConfig
    from flwr_vflgan.simulations.families import run_experiment

    def spec(run_dir: Path) -> RunSpec:
        return RunSpec(
            algorithm=replace(_config(), train=replace(_config().train, epochs=3)),
            data=DataSpec(source=str(adult_small), n_parties=2),
            runtime=RuntimeConfig(),
            output=OutputConfig(publish_rows=100, evaluate=False),
            seed=0,
            run_dir=run_dir,
        )

    reference = run_experiment(spec(tmp_path / "reference"))
    with pytest.raises(Interrupt):
        run_experiment(spec(tmp_path / "run"), progress=stop_in_epoch(2))
    checkpoints = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "party-0",
        "party-1",
        "server-12.npz",
        "server-25.npz",
    ]
    metrics = run_experiment(spec(tmp_path / "run"))
    assert metrics["resumed_from_step"] == 25 and reference["resumed_from_step"] is None
    assert (tmp_path / "run" / "synthetic.csv").read_bytes() == (
        tmp_path / "reference" / "synthetic.csv"
    ).read_bytes()
