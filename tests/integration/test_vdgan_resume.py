"""VDGAN checkpoints: an interrupted run resumes to the uninterrupted run's table, its
evaluations and its best epoch (VDGAN-DPSGD's spent steps and VDGAN-PATE's teachers
included), and a client lost mid-run rejoins from the last checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from interrupt import CrashAt, Interrupt, stop_in_epoch

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.vd_messages import VDStep
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.simulations.pipeline import Evaluator
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VDGANStrategy

SHARED = 31337
DP = {
    "none": {},
    "dpsgd": {"mechanism": "dpsgd", "target_epsilon": 10.0, "delta": 1e-4},
    "pate": {"mechanism": "pate", "target_epsilon": 10.0, "delta": 1e-4, "pate_teachers": 2},
}


def _config(dp: str = "none") -> VFLGANConfig:
    """640 rows at batch 64 and 5 critic steps: 2 iterations an epoch, 4 epochs."""
    train = {"epochs": 4, "eval_rows": 200}
    values: dict = {"variant": "vdgan", "train": train}
    if DP[dp]:
        values["dp"] = DP[dp]
    return VFLGANConfig.from_dict(values)


def _crash(iteration: int) -> CrashAt:
    """Lose client 1 when iteration ``iteration`` reaches it."""
    return CrashAt(P.VD_STEP, lambda m: int(m.content[P.CONFIG]["iteration"]) == iteration)


def _run(source: Path, config: VFLGANConfig, crash: CrashAt | None = None, **kwargs: object):
    spec = DataSpec(source=str(source), n_parties=2)
    nodes = [{"partition-id": i, "shared-seed": SHARED, "noise-seed": 5 + i} for i in range(2)]
    grid = InProcessGrid(make_client_app(), nodes, observer=crash)
    if crash is not None:
        crash.grid = grid
    evaluator = Evaluator(all_blocks(spec))
    strategy = VDGANStrategy(
        config,
        n_parties=2,
        seed=9,
        data_spec=spec,
        evaluate_fn=evaluator.encoded_fd,
        publish_rows=150,
        **kwargs,  # type: ignore[arg-type]
    )
    return strategy.start(grid)


def _checkpoints(path: Path) -> dict[str, object]:
    return {"checkpoint_dir": path, "party_checkpoint_root": path}


@pytest.mark.parametrize("dp", ["none", "dpsgd", "pate"])
def test_an_interrupted_vdgan_run_resumes_to_the_same_table(
    adult_small: Path, tmp_path: Path, dp: str
) -> None:
    config = _config(dp)
    reference = _run(adult_small, config)
    with pytest.raises(Interrupt):
        _run(adult_small, config, progress=stop_in_epoch(3), **_checkpoints(tmp_path))
    # Stopped at epoch 3's evaluation, before its checkpoint: the last resumes at 4.
    assert sorted(p.name for p in tmp_path.glob("server-*.npz")) == ["server-2.npz", "server-4.npz"]
    # The clients wrote theirs for iteration 6 during its exchange; the server's comes last.
    party = tmp_path / "party-1"
    assert sorted(p.name for p in party.glob("*.npz")) == ["step-4.npz", "step-6.npz"]
    with np.load(party / "step-4.npz") as saved:
        spent = saved["counters"].tolist()
    assert spent == ([0] if dp == "none" else [4 * 5])  # 4 iterations of 5 critic steps
    resumed = _run(adult_small, config, **_checkpoints(tmp_path))
    assert resumed.resumed_from_step == 4 and reference.resumed_from_step is None
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)
    assert [h["fd"] for h in resumed.history] == [h["fd"] for h in reference.history]
    assert (resumed.best_epoch, resumed.published) == (reference.best_epoch, reference.published)
    assert resumed.privacy == reference.privacy


def test_a_lost_vdgan_client_rejoins_and_the_table_is_unchanged(
    adult_small: Path, tmp_path: Path
) -> None:
    config = _config()
    reference = _run(adult_small, config)
    crash = _crash(5)  # epoch 3; the last checkpoint resumes at iteration 4
    result = _run(adult_small, config, crash, rejoin_grace=5.0, **_checkpoints(tmp_path))
    assert crash.crashes == 1 and result.resumed_from_step == 4
    pd.testing.assert_frame_equal(result.synthetic, reference.synthetic)


def test_a_vdgan_checkpoint_of_another_configuration_is_refused(
    adult_small: Path, tmp_path: Path
) -> None:
    with pytest.raises(Interrupt):
        _run(adult_small, _config(), progress=stop_in_epoch(2), **_checkpoints(tmp_path))
    with pytest.raises(
        ValueError, match=r"different configuration: .*dp\.mechanism: 'none' in the checkpoint"
    ):
        _run(adult_small, _config("dpsgd"), **_checkpoints(tmp_path))


def test_without_checkpoints_a_lost_vdgan_client_stops_the_run(adult_small: Path) -> None:
    with pytest.raises(RunStopped, match="cannot take the party back: it keeps no checkpoints"):
        _run(adult_small, _config(), _crash(5), rejoin_grace=5.0)


def test_the_checkpoint_request_round_trips_and_an_older_step_asks_for_none() -> None:
    fake = np.zeros((4, 3), np.float32)
    sent = VDStep(7, fake, checkpoint=True)
    assert VDStep.from_content(sent.to_content(), 4, 3).checkpoint
    older = sent.to_content()
    del older[P.CONFIG]["checkpoint"]
    assert not VDStep.from_content(older, 4, 3).checkpoint


EPOCH_FDS = {1: 1.0, 2: 0.5, 3: 2.0, 4: 3.0}


class _EpochFD:
    """A stand-in evaluator whose Frechet distance is set per epoch (:data:`EPOCH_FDS`:
    epoch 2 best), for a run whose first evaluation is of epoch ``first``."""

    def __init__(self, first: int) -> None:
        self.epoch = first

    def __call__(self, blocks: object) -> dict[str, float]:
        fd = EPOCH_FDS[self.epoch]
        self.epoch += 1
        return {"fd": fd}


def test_the_best_epoch_before_the_checkpoint_is_the_one_published_after_resuming(
    adult_small: Path, tmp_path: Path
) -> None:
    """Epoch 2 scores best and is checkpointed with the generator of that epoch; the
    resumed run (epochs 3-4, both worse) publishes it, as the uninterrupted run does."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    nodes = [{"partition-id": i, "shared-seed": SHARED} for i in range(2)]

    def run(first: int, **kwargs: object):
        strategy = VDGANStrategy(
            _config(), n_parties=2, seed=9, data_spec=spec, evaluate_fn=_EpochFD(first),
            publish_rows=150, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip
        return strategy.start(InProcessGrid(make_client_app(), nodes))

    reference = run(1)
    assert (reference.best_epoch, reference.published) == (2, "best_fd")
    with pytest.raises(Interrupt):
        run(1, progress=stop_in_epoch(3), **_checkpoints(tmp_path))
    resumed = run(3, **_checkpoints(tmp_path))
    assert (resumed.best_epoch, resumed.published) == (2, "best_fd")
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)
