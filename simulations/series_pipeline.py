"""The series family's ``run``: VFLGAN-TS trained over a Flower runtime, its series
published, scored and written to the run directory.

The parties train through VFLGAN's strategy and party client (the same forward/apply
exchange; :mod:`flwr_vflgan.series.training` supplies the party's and the server's
halves), so every runtime runs it, and
``train.steps_per_exchange``, checkpoints and resumption behave as for VFLGAN.

Outputs: ``synthetic.csv`` (long format: ``series``, ``t`` and one column per channel),
``metrics.json``, ``config.json`` and, when evaluated, ``report.md`` with ``series.png``
and ``amplitudes.png``. On real nodes (``runtime=deployment``, ``flwr run``) each party
reads its own series file (``python -m simulations.export_parties algorithm=vflgan_ts``
writes them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from flwr.serverapp import Grid

from flwr_vflgan.data.series import (
    SeriesEncoder,
    SeriesTable,
    block_to_channels,
    series_long_frame,
    wide_to_series,
)
from flwr_vflgan.data.series_files import wide_layout
from flwr_vflgan.gan.schedule import describe_length
from flwr_vflgan.runtime.party_data import PartyEncoder, series_blocks, series_table
from flwr_vflgan.series.metrics import series_report
from flwr_vflgan.series.report import SeriesSelection, write_series_report
from flwr_vflgan.strategies.vflgan import VFLGANResult, VFLGANStrategy

from .config import RunSpec
from .launch import start_on_runtime, strategy_settings
from .outputs import holding_run, json_default, published_outputs
from .pipeline import privacy_metrics, privacy_rows, run_config

Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class RealSeries:
    """What the server reads of the real series when it may (a simulation's data spec,
    or ``output.evaluate=true``): the table, the parties' encoders, the selection score."""

    table: SeriesTable
    encoders: list[PartyEncoder]
    selection: SeriesSelection

    @classmethod
    def of(cls, spec: RunSpec) -> RealSeries | None:
        """``None`` on real nodes without evaluation: there the server reads no data."""
        if spec.runtime.kind == "deployment" and not spec.output.evaluate:
            return None
        table = series_table(spec.data)
        encoders = [block.encoder for block in series_blocks(spec.data)]
        return cls(table, encoders, SeriesSelection(encoded(table, encoders, table.values)))

    def fd(self, synthetic: np.ndarray) -> float:
        """The pooled FD of ``(n, C, T)`` synthetic series in the parties' units."""
        return self.selection.fd(encoded(self.table, self.encoders, synthetic).values)


def run_series(
    spec: RunSpec,
    *,
    grid: Grid | None = None,
    progress: Progress | None = None,
    observer: Callable | None = None,
) -> dict[str, Any]:
    """Train VFLGAN-TS on ``spec``'s series, publish, score and write the run directory
    (held throughout); returns what ``metrics.json`` holds.

    On real nodes (``runtime=deployment``) each party reads its own series file and the
    server reads no data unless ``output.evaluate=true``; the published channels and
    length then come from the parties' columns. With ``runtime.align_ids=true`` the
    parties first keep the series whose ``series`` IDs they all hold, in party 0's order.
    """
    with holding_run(spec):
        started = time.monotonic()
        real = RealSeries.of(spec)
        result = _train(spec, real, progress, observer, grid)
        channels, length = (
            (real.table.channels, real.table.length)
            if real is not None
            else wide_layout(result.synthetic.columns)
        )
        synthetic = wide_to_series(result.synthetic, channels, length)
        fd = real.fd(synthetic) if real is not None else None
        metrics = _metrics(spec, result, fd, time.monotonic() - started)
        with published_outputs(spec.run_dir) as out:
            series_long_frame(synthetic, channels).to_csv(out / "synthetic.csv", index=False)
            (out / "config.json").write_text(json.dumps(run_config(spec), indent=2))
            if spec.output.evaluate and real is not None:
                metrics["series"] = _evaluate(spec, real.table, synthetic, metrics, out)
            (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=json_default))
        return metrics


def encoded(table: SeriesTable, encoders: list[PartyEncoder], values: np.ndarray) -> SeriesTable:
    """``values`` in the parties' scaled units (what they train and are scored on)."""
    out = np.empty_like(values)
    for encoder, held in zip(encoders, table.parties, strict=True):
        assert isinstance(encoder, SeriesEncoder)  # series_blocks builds them
        block = encoder.encode(values[:, list(held)])
        out[:, list(held), :] = block_to_channels(block, len(held))
    return SeriesTable(out, table.channels, table.parties)


def _train(
    spec: RunSpec,
    real: RealSeries | None,
    progress: Progress | None,
    observer: Callable | None,
    grid: Grid | None,
) -> VFLGANResult:
    """VFLGAN's strategy over the spec's runtime (or ``grid``), the pooled FD picking the
    epoch where the server holds the real series and evaluates."""
    checkpoints = spec.run_dir / "checkpoints" if spec.output.checkpoint else None
    deployed = spec.runtime.kind == "deployment"
    strategy = VFLGANStrategy(
        spec.algorithm,
        evaluate_fn=real.selection if real is not None and spec.output.evaluate else None,
        publish_rows=spec.output.publish_rows,
        checkpoint_dir=checkpoints,
        party_checkpoint_root=None if deployed else checkpoints,
        **strategy_settings(spec, progress),
    )
    result: VFLGANResult = start_on_runtime(strategy, spec, grid=grid, observer=observer)
    return result


def reported_preprocessing(result: VFLGANResult) -> tuple[str, ...]:
    """What the parties report their data's preparation read from their private series
    outside the mechanism (a DP run's publication replies: a fitted per-channel scaling,
    :data:`~flwr_vflgan.privacy.guarantee.SERIES_SCALING`), each named once."""
    named = [item for party in result.privacy for item in party.get("preprocessing", ())]
    return tuple(dict.fromkeys(named))


def _metrics(
    spec: RunSpec, result: VFLGANResult, fd: float | None, wall_seconds: float
) -> dict[str, Any]:
    """``metrics.json``'s fields (the GAN families' names; ``fd`` is the pooled FD;
    ``preprocessing`` is listed as not covered by a DP run's epsilon)."""
    return {
        "algorithm": spec.algorithm.variant.value,
        "dataset": spec.data.source,
        "runtime": spec.runtime.kind,
        "n_parties": spec.data.n_parties,
        "seed": spec.seed,
        "fd": fd,
        "best_fd": result.best_fd,
        "best_epoch": result.best_epoch,
        "steps": result.steps,
        "exchanges": result.exchanges,
        "wall_seconds": wall_seconds,
        "train_seconds": result.train_seconds,
        "steps_per_exchange": spec.algorithm.train.steps_per_exchange,
        "train_rows": result.n_rows,
        "synthetic_rows": result.synthetic.shape[0],
        "resumed_from_step": result.resumed_from_step,
        "published_generator": result.published,
        "privacy": privacy_metrics(spec, result, preprocessing=reported_preprocessing(result)),
        "history": result.history,
    }


def _evaluate(
    spec: RunSpec, table: SeriesTable, synthetic: np.ndarray, metrics: dict[str, Any], out: Path
) -> dict[str, Any]:
    """The series scores, and ``report.md`` with its plots in ``out`` (a DP run's rows say
    what its epsilon covers, as the tabular report's do)."""
    scores = series_report(table.values, synthetic, table.parties, seed=spec.seed)
    write_series_report(
        out,
        table,
        synthetic,
        scores,
        title=f"{spec.algorithm.variant.value} on {spec.data.source}",
        run={
            "algorithm": spec.algorithm.variant.value,
            "dataset": spec.data.source,
            "parties": spec.data.n_parties,
            "seed": spec.seed,
            "epochs": describe_length(spec.algorithm.train).removeprefix("epochs="),
            "runtime": spec.runtime.kind,
            "published generator": metrics["published_generator"],
            **privacy_rows(metrics["privacy"]),
        },
        plots=spec.evaluation.plots,
    )
    return scores
