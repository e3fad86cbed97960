"""Progress within a long epoch: the strategies tick (the command line draws a bar)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.strategies import InProcessGrid, VFLGANStrategy, VTGANStrategy


@pytest.mark.parametrize("variant", ["vflgan", "vtgan"])
def test_long_epochs_tick_the_progress_without_changing_the_run(adult_small: Path, variant: str):
    """Within an epoch the strategy reports how far it is (the command line's bar), at most
    every ``tick_seconds``; the table is the same with or without ticks."""
    train = {"epochs": 1, "max_steps": 6, "batch_size": 64}
    if variant == "vflgan":
        train["eval_rows"] = 100
    config = VFLGANConfig.from_dict({"variant": variant, "train": train})
    spec = DataSpec(source=str(adult_small), n_parties=2)
    nodes = [{P.NODE_PARTITION_ID: i, P.NODE_SHARED_SEED: 5} for i in range(2)]
    cls = VTGANStrategy if config.is_vtgan else VFLGANStrategy
    tables, ticks = [], []
    for seconds in (0.0, 3600.0):
        records: list[dict] = []
        strategy = cls(config, n_parties=2, seed=3, data_spec=spec, publish_rows=50,
                       progress=records.append)  # fmt: skip
        strategy.tick_seconds = seconds
        tables.append(strategy.start(InProcessGrid(make_client_app(), nodes)).synthetic)
        ticks.append([r for r in records if r.get("tick")])
    steps = [r["step"] for r in ticks[0]]
    assert steps == sorted(steps) and steps[-1] == 6 and len(steps) >= 3
    assert all(r["total_steps"] == 6 for r in ticks[0])
    assert not ticks[1]  # throttled: a run shorter than tick_seconds never ticks
    assert tables[0].equals(tables[1])
