"""Split classification's checkpoints: the label party keeps the finished repetitions, so
a party lost mid-run rejoins and a stopped run resumes at the first unfinished repetition
(whose setup gives every party fresh models from its seed), with the uninterrupted run's
results."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SHARED_DATASETS
from flwr.app import Message
from interrupt import CrashAt

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.gafm.config import GAFMSettings, Method
from flwr_vflgan.gafm.data import spec_labels
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.strategies import InProcessGrid, RunStopped
from flwr_vflgan.strategies.gafm import GAFMResult, GAFMStrategy

# Its tests share a module fixture: one worker runs them all (pyproject: loadgroup).
pytestmark = pytest.mark.xdist_group("test_gafm_resume")

SPAMBASE = DataSpec(source="spambase", n_parties=2, data_dir=str(SHARED_DATASETS))
SETTINGS = GAFMSettings(epochs=2, batch_size=256, repetitions=3, eval_every=1)


class Stop(Exception):
    """Cuts a run short from its progress callback."""


def _crash(repetition: int, nth: int = 5) -> CrashAt:
    """Lose party 1 at its ``nth`` step message of repetition ``repetition`` (each
    repetition's first step message is for step 0)."""
    seen = {"repetition": 0, "steps": 0}

    def when(message: Message) -> bool:
        if int(message.content[P.CONFIG]["step"]) == 0:
            seen["repetition"] += 1
            seen["steps"] = 0
        seen["steps"] += 1
        return seen["repetition"] == repetition and seen["steps"] == nth

    return CrashAt(P.GF_STEP, when)


def _run(crash: CrashAt | None = None, seed: int = 7, **kwargs: object) -> GAFMResult:
    labels, ids, label = spec_labels(SPAMBASE)
    nodes = [{P.NODE_PARTITION_ID: i, "num-partitions": 2} for i in range(2)]
    grid = InProcessGrid(make_client_app(), nodes, observer=crash)
    if crash is not None:
        crash.grid = grid
    strategy = GAFMStrategy(
        Method.GAFM,
        kwargs.pop("settings", SETTINGS),  # type: ignore[arg-type]
        n_parties=2,
        seed=seed,
        labels=labels,
        label_ids=ids,
        label=label,
        data_spec=SPAMBASE,
        timeout=60,
        **kwargs,  # type: ignore[arg-type]
    )
    return strategy.start(grid)


def _outcomes(result: GAFMResult) -> list[tuple]:
    return [
        (r.seed, r.train_auc, r.test_auc, r.flipped, r.leak_auc_per_party, r.steps)
        for r in result.repetitions
    ]


@pytest.fixture(scope="module")
def reference() -> GAFMResult:
    return _run()


def test_a_party_lost_in_a_repetition_rejoins_and_the_results_are_unchanged(
    tmp_path: Path, reference: GAFMResult
) -> None:
    crash = _crash(repetition=2)
    result = _run(crash, checkpoint_dir=tmp_path, rejoin_grace=5.0)
    assert crash.crashes == 1
    # Repetition 1 came from the checkpoint; repetition 2 started again from its setup.
    assert result.extra["resumed_repetitions"] == 1
    assert _outcomes(result) == _outcomes(reference)
    assert result.summary["test_auc"] == reference.summary["test_auc"]


def test_a_stopped_run_resumes_at_its_first_unfinished_repetition(
    tmp_path: Path, reference: GAFMResult
) -> None:
    def stop(record: dict) -> None:
        if record["seed"] == 9:  # the third repetition's first evaluation
            raise Stop

    with pytest.raises(Stop):
        _run(checkpoint_dir=tmp_path, progress=stop)
    assert sorted(p.name for p in tmp_path.glob("server-*.npz")) == [
        "server-1.npz",
        "server-2.npz",
    ]
    resumed = _run(checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_repetitions"] == 2
    assert _outcomes(resumed) == _outcomes(reference)
    # No checkpoint follows the last repetition: nothing is left to resume.
    assert not (tmp_path / "server-3.npz").exists()


def test_a_checkpoint_of_another_run_is_refused(tmp_path: Path) -> None:
    short = replace(SETTINGS, epochs=1, repetitions=2)

    def stop(record: dict) -> None:
        if record["seed"] == 8:
            raise Stop

    with pytest.raises(Stop):
        _run(checkpoint_dir=tmp_path, progress=stop, settings=short)
    with pytest.raises(
        ValueError, match=r"different configuration: seed: 7 in the checkpoint, 8 now"
    ):
        _run(checkpoint_dir=tmp_path, settings=short, seed=8)


def test_without_checkpoints_a_lost_party_stops_the_run() -> None:
    with pytest.raises(RunStopped, match="cannot take the party back: it keeps no checkpoints"):
        _run(_crash(repetition=1), rejoin_grace=5.0)
