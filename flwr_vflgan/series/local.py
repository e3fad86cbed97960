"""A VFLGAN-TS run in one process: every party and the server, the protocol's exact order.

:func:`train_local` runs :class:`~flwr_vflgan.gan.exchanges.LocalVFLGAN` over
:class:`~flwr_vflgan.series.training.SeriesParty` and
:class:`~flwr_vflgan.series.training.SeriesServer`: the same forward, server and apply
halves a federated run exchanges, with no transport. It is the reference the federated
runtimes are compared with, and what the sine measurements in docs/series.md ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from flwr_vflgan.data.series import SeriesTable, block_to_channels
from flwr_vflgan.gan.exchanges import LocalVFLGAN
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.privacy.config import plan_privacy

from .training import SeriesParty, SeriesRunSettings, SeriesServer

EvaluateFn = Callable[[np.ndarray], dict[str, Any]]
"""Scores a synthetic ``(n, C, T)`` array (for example :func:`~flwr_vflgan.series.metrics.series_report`
bound to the real table)."""

PUBLISH_DRAW = 0
"""The evaluation-noise draw of the published series, as the federated strategy's
(epochs use draws 1, 2, ...)."""


@dataclass
class SeriesResult:
    """What a run produced."""

    synthetic: np.ndarray
    """``(n, C, T)`` float32 in the table's channel order."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """One record per evaluated epoch: ``epoch``, ``step``, ``seconds`` and the scores."""
    steps: int = 0
    seconds: float = 0.0


def build(
    config: SeriesRunSettings, table: SeriesTable, shared_seed: int, server_seed: int
) -> tuple[list[SeriesParty], SeriesServer, Schedule]:
    """The parties (``shared_seed``: the seed they share), the server (its own seed) and
    the schedule, as a federated run with those seeds builds them; under
    ``dp=vflgan_gaussian`` each party plans its noise for the whole schedule as a
    federated party does (its ``C_i + 1`` first layers in one account)."""
    schedule = Schedule.of(table.n_series, config.train)
    parties = []
    for index in range(len(table.parties)):
        plan = None
        if config.dp.enabled:
            plan = plan_privacy(
                config.dp,
                dataset_size=table.n_series,
                batch_size=schedule.batch_size,
                planned_steps=schedule.d_steps_before(schedule.total_steps),
                parts=table.party_channels(index) + 1,
            )
        block = torch.from_numpy(table.party_block(index))
        parties.append(
            SeriesParty(
                config, table.party_channels(index), table.length, block, shared_seed, index, plan
            )
        )
    return parties, SeriesServer(config, len(parties), server_seed), schedule


def synthesize(
    parties: Sequence[SeriesParty], table: SeriesTable, n_series: int, draw: int
) -> np.ndarray:
    """``n_series`` synthetic series, every party's channels put back in table order."""
    out = np.empty((n_series, len(table.channels), table.length), dtype=np.float32)
    for party, held in zip(parties, table.parties, strict=True):
        block = party.generate(n_series, draw).numpy()
        out[:, list(held), :] = block_to_channels(block, len(held))
    return out


def train_local(
    config: SeriesRunSettings,
    table: SeriesTable,
    shared_seed: int,
    server_seed: int,
    *,
    evaluate: EvaluateFn | None = None,
    eval_every: int = 0,
) -> SeriesResult:
    """Train on ``table`` and return ``table.n_series`` synthetic series from the last
    epoch (in generation order: the federated strategy then shuffles them); with ``evaluate`` and ``eval_every > 0`` every ``eval_every``-th epoch (and the
    last) is scored into the history."""
    parties, server, schedule = build(config, table, shared_seed, server_seed)
    local = LocalVFLGAN(parties, server, schedule, 1)
    started = time.monotonic()
    result = SeriesResult(np.empty(0, dtype=np.float32))
    for block in local.blocks():
        local.run_block(block)
        step = block.stop - 1
        if evaluate is not None and schedule.evaluation_due(step, eval_every):
            epoch = schedule.epoch_of(step)
            scores = evaluate(synthesize(parties, table, table.n_series, epoch))
            elapsed = time.monotonic() - started
            result.history.append(
                {"epoch": epoch, "step": block.stop, "seconds": elapsed, **scores}
            )
    result.synthetic = synthesize(parties, table, table.n_series, PUBLISH_DRAW)
    result.steps = schedule.total_steps
    result.seconds = time.monotonic() - started
    return result
