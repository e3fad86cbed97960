"""Bad input gets an error that names what is wrong; nothing hangs; no half-written outputs."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from flwr.app import ConfigRecord, Message, RecordDict

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data import load_dataset, write_party_files
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import tensors_to_record
from flwr_vflgan.runtime.messages import PACKED
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.outputs import LOCK_NAME, RunDirectoryBusy, run_directory_lock
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VFLGANStrategy, VTGANStrategy

CONFIG = VFLGANConfig.from_dict({"train": {"epochs": 1, "max_steps": 4, "eval_every": 0}})
K3 = VFLGANConfig.from_dict(
    {"train": {"epochs": 1, "max_steps": 4, "eval_every": 0, "steps_per_exchange": 3}}
)


def _setup_grid(
    adult_small: Path, config: VFLGANConfig = CONFIG, **node: object
) -> tuple[InProcessGrid, VFLGANStrategy]:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = InProcessGrid(
        make_client_app(), [{"partition-id": i, "shared-seed": 7, **node} for i in range(2)]
    )
    strategy = VFLGANStrategy(config, n_parties=2, data_spec=spec)
    for message in strategy.configure_setup(sorted(grid.get_node_ids()), P.NO_STEP):
        grid.push_messages([message])
    return grid, strategy


def _send(
    grid: InProcessGrid, node: int, fields: dict, packed: np.ndarray | None = None
) -> Message:
    content = RecordDict({P.CONFIG: ConfigRecord(fields)})
    if packed is not None:
        content[P.GRADS] = tensors_to_record({PACKED: packed})
    ids = list(grid.push_messages([Message(content, node, P.STEP)]))
    (reply,) = grid.pull_messages(ids)
    return reply


def _step(apply: int, forward: int, apply_count: int = 1, forward_count: int = 1) -> dict:
    return {
        "apply_start": apply,
        "apply_count": 0 if apply == P.NO_STEP else apply_count,
        "forward_start": forward,
        "forward_count": 0 if forward == P.NO_STEP else forward_count,
        "eval_draw": P.NO_STEP,
        "eval_rows": 0,
        "checkpoint": False,
        "promote_best": False,
    }


def test_out_of_order_and_malformed_step_messages_get_error_replies(adult_small: Path) -> None:
    grid, _ = _setup_grid(adult_small)
    node = sorted(grid.get_node_ids())[0]
    reply = _send(grid, node, _step(P.NO_STEP, 3))
    assert (
        reply.has_error()
        and "out-of-order" in reply.error.reason
        and "expected step 0" in reply.error.reason
    )
    # Step 0 is a discriminator step: real then fake features, 64 rows each.
    reply = _send(grid, node, _step(0, P.NO_STEP), np.zeros((128, 128)))
    assert reply.has_error() and "apply step 0" in reply.error.reason
    assert not _send(grid, node, _step(P.NO_STEP, 0)).has_error()
    reply = _send(grid, node, _step(0, 1), np.zeros((128, 7)))
    assert reply.has_error() and "must have shape (128, 128)" in reply.error.reason
    reply = _send(grid, node, _step(0, 1), np.zeros((64, 128)))
    assert reply.has_error() and "must have shape (128, 128)" in reply.error.reason
    bad = np.zeros((128, 128))
    bad[3, 5] = np.nan
    reply = _send(grid, node, _step(0, 1), bad)
    assert reply.has_error() and "non-finite" in reply.error.reason
    reply = _send(grid, node, {"apply_start": 0})
    assert reply.has_error() and "apply_count" in reply.error.reason
    reply = _send(grid, node, _step(0, 1, apply_count=-2))
    assert reply.has_error() and "invalid step block" in reply.error.reason


def test_blocks_longer_than_steps_per_exchange_are_refused(adult_small: Path) -> None:
    """A party computes exactly the blocks its own train.steps_per_exchange defines."""
    grid, _ = _setup_grid(adult_small)
    node = sorted(grid.get_node_ids())[0]
    reply = _send(grid, node, _step(P.NO_STEP, 0, forward_count=3))
    assert reply.has_error() and "steps_per_exchange=1" in reply.error.reason
    grid, _ = _setup_grid(adult_small, config=K3)
    reply = _send(grid, node, _step(P.NO_STEP, 0, forward_count=4))
    assert reply.has_error() and "ends before step 3" in reply.error.reason
    reply = _send(grid, node, _step(P.NO_STEP, 0, forward_count=3))
    assert not reply.has_error()
    # Three discriminator steps of 64 rows each: 3 x (64 real + 64 fake) rows of 128
    # float32 features, packed into the reply's config record.
    assert len(reply.content[P.CONFIG][PACKED]) == 384 * 128 * 4
    assert reply.content[P.CONFIG]["batch_rows"] == [64, 64, 64]
    reply = _send(grid, node, _step(0, 3, apply_count=3), np.zeros((256, 128)))
    assert reply.has_error() and "must have shape (384, 128)" in reply.error.reason
    reply = _send(grid, node, _step(0, 3, apply_count=3, forward_count=1), np.zeros((384, 128)))
    assert not reply.has_error() and reply.content[P.CONFIG]["forward_count"] == 1


def test_a_step_before_setup_is_refused(adult_small: Path) -> None:
    grid = InProcessGrid(make_client_app(), [{"partition-id": 0, "shared-seed": 1}])
    reply = _send(grid, 1001, _step(P.NO_STEP, 0))
    assert reply.has_error() and "before setup" in reply.error.reason


def test_node_without_partition_id_is_named(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = InProcessGrid(
        make_client_app(), [{"shared-seed": 1}, {"partition-id": 1, "shared-seed": 1}]
    )
    with pytest.raises(RunStopped, match="partition-id"):
        VFLGANStrategy(CONFIG, n_parties=2, data_spec=spec, timeout=30).start(grid)


@pytest.mark.parametrize("algorithm", ["vflgan", "vtgan"])
def test_parties_with_different_shared_seeds_stop_at_setup(adult_small: Path, algorithm: str):
    # Each would train to the end and publish rows that do not line up across parties.
    spec = DataSpec(source=str(adult_small), n_parties=3)
    seeds = [7, 7, 8]
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": seed} for i, seed in enumerate(seeds)],
        observer=(seen := []).append,
    )
    if algorithm == "vflgan":
        strategy: VFLGANStrategy | VTGANStrategy = VFLGANStrategy(
            CONFIG, n_parties=3, data_spec=spec, timeout=30
        )
    else:
        config = VFLGANConfig.from_dict({"variant": "vtgan", "train": {"max_steps": 2}})
        strategy = VTGANStrategy(config, n_parties=3, data_spec=spec, timeout=30)
    match = r"hold different shared seeds \(partitions \[0, 1\] / \[2\] agree"
    with pytest.raises(RunStopped, match=match):
        strategy.start(grid)
    # Nothing but the setup exchange ran.
    assert {m.metadata.message_type for m in seen} == {
        P.SETUP if algorithm == "vflgan" else P.VT_SETUP
    }


def test_a_party_started_with_another_partys_file_stops_at_setup(tmp_path: Path) -> None:
    # Same IDs, same rows: only the columns tell that party 1 was given party 0's file.
    dataset = load_dataset("adult")
    frame = dataset.frame.iloc[:300].reset_index(drop=True)
    small = type(dataset)(name="adult", frame=frame, schema=dataset.schema)
    files = write_party_files(small, [dataset.schema.names[:8], dataset.schema.names[8:]], tmp_path)
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": 1, "data-path": str(files[0])} for i in range(2)],
    )
    shared = re.escape(
        f"partitions 0 and 1 both hold columns {dataset.schema.names[:5]} and 3 more"
    )
    with pytest.raises(RunStopped, match=shared):
        VFLGANStrategy(CONFIG, n_parties=2, timeout=30).start(grid)


def test_parties_whose_ids_do_not_line_up_stop_the_run(adult_small: Path, tmp_path: Path) -> None:
    dataset = load_dataset("adult")
    frame = dataset.frame.iloc[:300].reset_index(drop=True)
    small = type(dataset)(name="adult", frame=frame, schema=dataset.schema)
    parts = [dataset.schema.names[:8], dataset.schema.names[8:]]
    good = write_party_files(small, parts, tmp_path / "a")
    shifted = write_party_files(small, parts, tmp_path / "b", ids=list(range(1, 301)))
    grid = InProcessGrid(
        make_client_app(),
        [
            {"partition-id": 0, "shared-seed": 1, "data-path": str(good[0])},
            {"partition-id": 1, "shared-seed": 1, "data-path": str(shifted[1])},
        ],
    )
    with pytest.raises(RunStopped, match=r"do not line up.*party 1"):
        VFLGANStrategy(CONFIG, n_parties=2, timeout=30).start(grid)


def test_parties_with_different_row_counts_stop_the_run(tmp_path: Path) -> None:
    dataset = load_dataset("adult")
    parts = [dataset.schema.names[:8], dataset.schema.names[8:]]
    files = []
    for rows, name in ((300, "a"), (290, "b")):
        frame = dataset.frame.iloc[:rows].reset_index(drop=True)
        files.append(
            write_party_files(
                type(dataset)(name="adult", frame=frame, schema=dataset.schema),
                parts,
                tmp_path / name,
            )
        )
    grid = InProcessGrid(
        make_client_app(),
        [
            {"partition-id": 0, "shared-seed": 1, "data-path": str(files[0][0])},
            {"partition-id": 1, "shared-seed": 1, "data-path": str(files[1][1])},
        ],
    )
    with pytest.raises(RunStopped, match="party 1 has 290 rows, party 0 has 300"):
        VFLGANStrategy(CONFIG, n_parties=2, timeout=30).start(grid)


def test_missing_party_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "party-0.csv"
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": 1, "data-path": str(missing)} for i in range(2)],
    )
    with pytest.raises(RunStopped, match=r"party-0\.csv"):
        VFLGANStrategy(CONFIG, n_parties=2, timeout=30).start(grid)


def test_dataset_and_partition_errors_name_the_problem(adult_small: Path) -> None:
    from flwr_vflgan.runtime.party_data import party_block

    with pytest.raises(ValueError, match="neither a registered dataset"):
        party_block(DataSpec(source="adultx", n_parties=2), 0)
    with pytest.raises(ValueError, match="n_parties=16 but only 15 columns"):
        party_block(DataSpec(source=str(adult_small), n_parties=16), 0)
    with pytest.raises(ValueError, match="unknown partition 'columns'"):
        DataSpec(source="adult", partition="columns")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_parties must be an integer >= 1"):
        DataSpec(source="adult", n_parties=0)
    # One party holds every column (latent_diffusion's centralized reference); the
    # families that split columns refuse partition.n_parties=1 at the command line.
    whole = party_block(DataSpec(source=str(adult_small), n_parties=1), 0)
    assert whole.schema.names == list(pd.read_csv(adult_small, nrows=1).columns)
    with pytest.raises(ValueError, match="partition-id 1 is out of range for 1 parties"):
        party_block(DataSpec(source=str(adult_small), n_parties=1), 1)


def test_non_finite_values_in_a_party_table_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pd.DataFrame({"a": [1.0, np.inf, 2.0, 3.0], "b": ["x", "y", "x", "y"]}).to_csv(
        path, index=False
    )
    from flwr_vflgan.runtime.party_data import party_block

    with pytest.raises(ValueError, match="'a'"):
        party_block(DataSpec(source=str(path), n_parties=2), 0)


def _run_spec(adult_small: Path, tmp_path: Path, train: dict, evaluate: bool = True) -> Any:
    """A run of VFLGAN on the small Adult table in ``tmp_path/run``, without checkpoints."""
    from flwr_vflgan.simulations.config import OutputConfig, RunSpec, RuntimeConfig

    return RunSpec(
        algorithm=VFLGANConfig.from_dict({"train": train}),
        data=DataSpec(source=str(adult_small), n_parties=2),
        runtime=RuntimeConfig(),
        output=OutputConfig(checkpoint=False, evaluate=evaluate),
        seed=0,
        run_dir=tmp_path / "run",
    )


def test_a_failed_run_leaves_no_outputs(adult_small: Path, tmp_path: Path) -> None:
    from flwr_vflgan.simulations.families import run_experiment

    def explode(record: dict) -> None:
        raise RuntimeError("interrupted")

    spec = _run_spec(adult_small, tmp_path, {"epochs": 2, "eval_rows": 100})
    with pytest.raises(RuntimeError, match="interrupted"):
        run_experiment(spec, progress=explode)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [LOCK_NAME]


def test_a_second_run_in_a_held_run_directory_is_refused_at_once(
    adult_small: Path, tmp_path: Path
) -> None:
    from flwr_vflgan.simulations.families import run_experiment

    spec = _run_spec(adult_small, tmp_path, {"epochs": 1, "max_steps": 2})
    with run_directory_lock(spec.run_dir):
        with pytest.raises(RunDirectoryBusy, match=r"give this one another hydra\.run\.dir"):
            run_experiment(spec)
        assert sorted(p.name for p in spec.run_dir.iterdir()) == [LOCK_NAME]


def test_a_run_killed_in_evaluation_publishes_nothing_and_keeps_the_last_run(
    adult_small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flwr_vflgan.simulations import pipeline

    spec = _run_spec(adult_small, tmp_path, {"epochs": 1, "max_steps": 2}, evaluate=False)
    pipeline.run_gan(spec)
    before = {p.name: p.read_bytes() for p in spec.run_dir.iterdir() if p.is_file()}
    assert {"synthetic.csv", "config.json", "metrics.json"} <= set(before)

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # as SIGINT would, in the middle of the evaluation

    monkeypatch.setattr(pipeline, "evaluate_tables", killed)
    again = replace(spec, seed=1, output=replace(spec.output, evaluate=True))
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_gan(again)
    after = {p.name: p.read_bytes() for p in spec.run_dir.iterdir() if p.is_file()}
    assert after == before, "a run stopped in its evaluation changed the published outputs"
    assert not [p for p in spec.run_dir.iterdir() if p.name.startswith(".publish-")]


def test_an_error_in_training_names_the_party_not_only_its_node(adult_small: Path) -> None:
    real = make_client_app()

    def app(message: Message, context: object) -> Message:
        partition = context.node_config["partition-id"]  # type: ignore[attr-defined]
        if message.metadata.message_type == P.STEP and partition == 1:
            raise OSError("disk full")
        return real(message, context)  # type: ignore[arg-type]

    grid = InProcessGrid(app, [{"partition-id": i, "shared-seed": 7} for i in range(2)])  # type: ignore[arg-type]
    node = sorted(grid.get_node_ids())[1]
    spec = DataSpec(source=str(adult_small), n_parties=2)
    with pytest.raises(
        RunStopped, match=rf"party 1 \(node {node}\) replied with an error: OSError"
    ):
        VFLGANStrategy(CONFIG, n_parties=2, data_spec=spec, timeout=30).start(grid)
