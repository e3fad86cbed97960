"""A party process that dies mid-run and is restarted rejoins within the grace period:
every holder resumes from the last checkpoint, and the published table is the one an
uninterrupted run publishes, bit for bit. Past the grace the run stops saying how to
resume, and the rerun does."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from flwr.app import Message

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.simulations.pipeline import Evaluator
from flwr_vflgan.strategies import (
    InProcessGrid,
    RunStopped,
    VDGANStrategy,
    VFLGANStrategy,
    VTGANStrategy,
)

SHARED = 4242
CONFIG = VFLGANConfig.from_dict({"train": {"epochs": 4, "eval_rows": 200}})


class Crash:
    """Kill partition ``partition``'s node when the step block starting at ``step`` reaches
    it (or the first message of type ``kind``, without ``step``), ``times`` times,
    restarting it unless ``restart`` is false."""

    def __init__(
        self,
        step: int | None,
        partition: int = 1,
        restart: bool = True,
        times: int = 1,
        kind: str = P.STEP,
    ):
        self.step, self.partition, self.restart, self.left = step, partition, restart, times
        self.kind = kind
        self.grid: InProcessGrid | None = None
        self.crashes = 0

    def __call__(self, message: Message) -> None:
        meta = message.metadata
        if self.left == 0 or meta.reply_to_message_id or meta.message_type != self.kind:
            return
        assert self.grid is not None
        node = meta.dst_node_id
        if (self.step is not None and meta.group_id != str(self.step)) or node in self.grid._failed:
            return
        if self.grid.context(node).node_config["partition-id"] != self.partition:
            return
        self.left -= 1
        self.crashes += 1
        self.grid.fail_node(node, restart=self.restart)


def _run(spec: DataSpec, crash: Crash | None = None, **kwargs: object):
    evaluator = Evaluator(all_blocks(spec))
    nodes = [{"partition-id": i, "shared-seed": SHARED} for i in range(spec.n_parties)]
    grid = InProcessGrid(make_client_app(), nodes, observer=crash)
    if crash is not None:
        crash.grid = grid
    strategy = VFLGANStrategy(
        CONFIG,
        n_parties=spec.n_parties,
        data_spec=spec,
        evaluate_fn=evaluator.encoded_fd,
        publish_rows=150,
        **kwargs,  # type: ignore[arg-type]
    )
    return strategy.start(grid)


@pytest.fixture
def reference(adult_small: Path):
    return _run(DataSpec(source=str(adult_small), n_parties=2))


def _checkpoints(tmp_path: Path) -> dict[str, object]:
    return {"checkpoint_dir": tmp_path, "party_checkpoint_root": tmp_path}


def test_a_restarted_party_rejoins_and_the_table_is_unchanged(
    adult_small: Path, tmp_path: Path, reference
):
    spec = DataSpec(source=str(adult_small), n_parties=2)
    crash = Crash(step=30)  # epoch 3 of 12-step epochs: the last checkpoint is step 24
    result = _run(spec, crash, rejoin_grace=5.0, **_checkpoints(tmp_path))
    assert crash.crashes == 1
    assert result.resumed_from_step == 24
    pd.testing.assert_frame_equal(result.synthetic, reference.synthetic)
    assert [h["fd"] for h in result.history] == [h["fd"] for h in reference.history]


def test_a_loss_in_the_first_epoch_starts_over_and_still_matches(
    adult_small: Path, tmp_path: Path, reference
):
    spec = DataSpec(source=str(adult_small), n_parties=2)
    result = _run(spec, Crash(step=5, partition=0), rejoin_grace=5.0, **_checkpoints(tmp_path))
    pd.testing.assert_frame_equal(result.synthetic, reference.synthetic)


@pytest.mark.parametrize("kind", [P.SETUP, P.GENERATE])
def test_a_party_lost_at_setup_or_publication_rejoins_too(
    adult_small: Path, tmp_path: Path, reference, kind: str
):
    spec = DataSpec(source=str(adult_small), n_parties=2)
    crash = Crash(step=None, kind=kind)
    result = _run(spec, crash, rejoin_grace=5.0, **_checkpoints(tmp_path))
    assert crash.crashes == 1
    pd.testing.assert_frame_equal(result.synthetic, reference.synthetic)


def test_past_the_grace_the_run_stops_and_a_rerun_resumes(
    adult_small: Path, tmp_path: Path, reference
):
    spec = DataSpec(source=str(adult_small), n_parties=2)
    with pytest.raises(RunStopped) as stopped:
        _run(spec, Crash(step=30, restart=False), rejoin_grace=0.3, **_checkpoints(tmp_path))
    message = str(stopped.value)
    assert "party 1 (node" in message and "is unavailable" in message
    assert "not all back within runtime.rejoin_grace = 0 s" in message
    assert "run the same command again in the same run directory" in message
    resumed = _run(spec, **_checkpoints(tmp_path))
    assert resumed.resumed_from_step == 24
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)


def test_no_grace_no_checkpoints_or_a_party_that_keeps_dying_stops_the_run(
    adult_small: Path, tmp_path: Path
):
    spec = DataSpec(source=str(adult_small), n_parties=2)
    with pytest.raises(RunStopped, match=r"runtime\.rejoin_grace is 0"):
        _run(spec, Crash(step=30), rejoin_grace=0.0, **_checkpoints(tmp_path / "a"))
    with pytest.raises(RunStopped, match="cannot take the party back: it keeps no checkpoints"):
        _run(spec, Crash(step=30), rejoin_grace=5.0)
    crash = Crash(step=30, times=10)
    with pytest.raises(RunStopped, match="parties were lost 4 times"):
        _run(spec, crash, rejoin_grace=5.0, **_checkpoints(tmp_path / "b"))
    assert crash.crashes == 4


def test_agreed_seeds_or_no_checkpoints_keep_a_lost_party_out_of_every_gan_family(
    tmp_path: Path,
):
    refusal = "it keeps no checkpoints (output.checkpoint=false)"
    for strategy_class, variant in (
        (VFLGANStrategy, "vflgan"),
        (VTGANStrategy, "vtgan"),
        (VDGANStrategy, "vdgan"),
    ):
        config = VFLGANConfig.from_dict({"variant": variant})
        assert strategy_class(config, n_parties=2).cannot_resume() == refusal, variant
        kept = strategy_class(config, n_parties=2, checkpoint_dir=tmp_path)
        assert kept.cannot_resume() is None, variant
        agreed = strategy_class(config, n_parties=2, key_agreement=True, checkpoint_dir=tmp_path)
        assert "runtime.key_agreement" in (agreed.cannot_resume() or ""), variant
