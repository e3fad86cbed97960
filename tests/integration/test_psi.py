"""Parties holding different people, in different orders, align their rows by ID through
the private set intersection before setup (runtime.align_ids) and train on the people
they all hold; the server sees blinded points and positions, never an ID."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import Message

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.clients.common import aligned_rows
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import ExportConfig, compose_run_config, to_run_spec
from flwr_vflgan.simulations.export_parties import export_parties
from flwr_vflgan.strategies import (
    InProcessGrid,
    RunStopped,
    VDGANStrategy,
    VFLGANStrategy,
    VTGANStrategy,
)

SHARED = 77
CONFIG = VFLGANConfig.from_dict({"train": {"epochs": 1, "eval_rows": 100}})


def _party_files(tmp_path: Path, adult_small: Path, keep: list[np.ndarray]) -> list[Path]:
    """The even split of the first 640 Adult rows, party ``i`` keeping rows ``keep[i]`` in
    that order (its IDs are the row numbers)."""
    spec = DataSpec(source=str(adult_small), n_parties=len(keep))
    files = export_parties(spec, ExportConfig(out_dir=str(tmp_path / "parties"))).data_files
    for path, rows in zip(files, keep, strict=True):
        frame = pd.read_csv(path)
        frame.iloc[rows].to_csv(path, index=False)
    return list(files)


def _run(files: list[Path], observer=None):
    nodes = [
        {"partition-id": i, "shared-seed": SHARED, "data-path": str(f)} for i, f in enumerate(files)
    ]
    grid = InProcessGrid(make_client_app(), nodes, observer=observer)
    strategy = VFLGANStrategy(CONFIG, n_parties=len(files), publish_rows=50, align_ids=True)
    return strategy.start(grid), grid


def test_parties_with_different_rows_train_on_the_rows_they_share(
    tmp_path: Path, adult_small: Path
):
    rng = np.random.default_rng(3)
    keep = [
        np.arange(0, 500),  # party 0: rows 0-499 in order
        rng.permutation(np.arange(100, 640)),  # party 1: rows 100-639, shuffled
        rng.permutation(np.r_[np.arange(50, 450), np.arange(600, 640)]),  # party 2
    ]
    files = _party_files(tmp_path, adult_small, keep)
    seen: list[Message] = []
    result, grid = _run(files, observer=seen.append)
    # Rows 100-449 are the only ones all three hold: training saw exactly those.
    assert result.n_rows == 350
    ids = []
    for node in grid.get_node_ids():
        context = grid.context(node)
        rows = aligned_rows(context)
        assert rows is not None and len(rows) == 350
        party_ids = pd.read_csv(context.node_config["data-path"])["row_id"].to_numpy()
        ids.append(party_ids[rows].tolist())
    assert ids[0] == ids[1] == ids[2] == list(range(100, 450))  # one order, party 0's
    _check_no_id_crossed(seen)


def _check_no_id_crossed(messages: list[Message]) -> None:
    """The alignment messages hold the PSI record only, with blinded points (bytes) and
    positions; no party's ID column or its text ever crosses."""
    kinds = {P.PSI_BLIND, P.PSI_CROSS, P.PSI_MATCH, P.PSI_APPLY}
    psi_messages = [m for m in messages if m.metadata.message_type in kinds]
    assert len(psi_messages) == 2 * (3 + 3 + 1 + 2)  # instructions and replies
    for message in psi_messages:
        assert list(message.content.keys()) == [P.PSI], message.metadata.message_type
        record = message.content[P.PSI]
        for key, value in record.items():
            assert key in {
                "salt",
                "partition_id",
                "blinded",
                "lists",
                "own",
                "parties",
                "kept",
                "series",
            } or (key.startswith("p") and key[1:].isdigit()), key
            assert not isinstance(value, str), (key, value)


def test_parties_with_no_one_in_common_stop_before_training(tmp_path: Path, adult_small: Path):
    files = _party_files(tmp_path, adult_small, [np.arange(0, 300), np.arange(300, 640)])
    with pytest.raises(RunStopped, match="no ID in common"):
        _run(files)


@pytest.mark.parametrize("algorithm", ["vtgan", "vdgan", "vflgan"])
def test_gans_aligned_by_id_publish_the_table_of_pre_aligned_files(
    tmp_path: Path, adult_small: Path, algorithm: str
):
    """With the parties holding different people in different orders, the published
    table is the one of party files that hold exactly the common people in party 0's
    order: training and each party's encoder see the common rows alone."""
    rng = np.random.default_rng(5)
    keep = [np.arange(0, 500), rng.permutation(np.arange(100, 640))]
    files = _party_files(tmp_path / "mixed", adult_small, keep)
    common = _party_files(tmp_path / "common", adult_small, [np.arange(100, 500)] * 2)
    train = {"epochs": 1, "max_steps": 8, "batch_size": 64, "eval_every": 0}
    config = VFLGANConfig.from_dict({"variant": algorithm, "train": train})
    strategy_class = {"vtgan": VTGANStrategy, "vdgan": VDGANStrategy}.get(algorithm, VFLGANStrategy)

    def run(party_files: list[Path], align: bool):
        nodes = [
            {"partition-id": i, "shared-seed": SHARED, "data-path": str(f)}
            for i, f in enumerate(party_files)
        ]
        grid = InProcessGrid(make_client_app(), nodes)
        return strategy_class(config, n_parties=2, publish_rows=60, align_ids=align, seed=2).start(
            grid
        )

    aligned = run(files, align=True)
    assert aligned.n_rows == 400
    pd.testing.assert_frame_equal(aligned.synthetic, run(common, align=False).synthetic)


def test_alignment_needs_party_files_and_the_vflgan_family(tmp_path: Path, adult_small: Path):
    nodes = [{"partition-id": i, "shared-seed": SHARED} for i in range(2)]
    grid = InProcessGrid(make_client_app(), nodes)
    spec = DataSpec(source=str(adult_small), n_parties=2)
    strategy = VFLGANStrategy(CONFIG, n_parties=2, data_spec=spec, align_ids=True)
    with pytest.raises(RunStopped, match=r"runtime\.align_ids aligns the parties' own files"):
        strategy.start(grid)
    config = compose_run_config("algorithm=wgan_gp runtime.align_ids=true")
    with pytest.raises(ValueError, match=r"algorithm=wgan_gp trains on one table in one process"):
        to_run_spec(config, tmp_path / "wgan_gp")


def test_split_classification_aligns_to_the_label_partys_ids(tmp_path: Path, adult_small: Path):
    """GAFM's label party (the server) holds IDs of its own and leads the intersection:
    it keeps the labels of the people every party holds, in its own order, and the
    repetition's results equal those of files that hold exactly those people."""
    from flwr_vflgan.gafm.config import GAFMSettings, Method
    from flwr_vflgan.gafm.data import labels_file
    from flwr_vflgan.strategies.gafm import GAFMStrategy

    spec = DataSpec(source=str(adult_small), n_parties=2, label="income")
    rng = np.random.default_rng(9)
    label_rows = rng.permutation(np.arange(0, 600))  # the label party: rows 0-599, shuffled
    keep = [rng.permutation(np.arange(50, 640)), np.arange(0, 560)]

    def run(out: Path, parties: list[np.ndarray], labelled: np.ndarray, align: bool):
        result = export_parties(spec, ExportConfig(out_dir=str(out)), label_party=True)
        for path, rows in zip(result.data_files, parties, strict=True):
            pd.read_csv(path).iloc[rows].to_csv(path, index=False)
        assert result.labels_file is not None
        labels, ids, label = labels_file(result.labels_file)
        nodes = [{"partition-id": i, "data-path": str(f)} for i, f in enumerate(result.data_files)]
        strategy = GAFMStrategy(
            Method.GAFM,
            GAFMSettings(epochs=1, batch_size=128, repetitions=1, eval_every=0),
            n_parties=2,
            seed=4,
            labels=labels.iloc[labelled].reset_index(drop=True),
            label_ids=ids.iloc[labelled].reset_index(drop=True),
            label=label,
            align_ids=align,
        )
        return strategy.start(InProcessGrid(make_client_app(), nodes))

    aligned = run(tmp_path / "mixed", keep, label_rows, align=True)
    common = label_rows[(label_rows >= 50) & (label_rows < 560)]  # the label party's order
    assert aligned.n_rows == len(common) == 510
    pre = run(tmp_path / "common", [common, common], common, align=False)
    assert aligned.repetitions[0].test_auc == pre.repetitions[0].test_auc
    assert aligned.repetitions[0].leak_auc_per_party == pre.repetitions[0].leak_auc_per_party
