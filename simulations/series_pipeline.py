"""The series family's ``run``: VFLGAN-TS trained over a Flower runtime, its series
published, scored and written to the run directory.

The parties train through VFLGAN's strategy and party client (the same forward/apply
exchange; :mod:`flwr_vflgan.series.training` supplies the party's and the server's
halves), so ``runtime=inprocess`` and ``runtime=simulation`` both run it, and
``train.steps_per_exchange``, checkpoints and resumption behave as for VFLGAN.

Outputs: ``synthetic.csv`` (long format: ``series``, ``t`` and one column per channel),
``metrics.json``, ``config.json`` and, when evaluated, ``report.md`` with ``series.png``
and ``amplitudes.png``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
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
from flwr_vflgan.gan.schedule import describe_length
from flwr_vflgan.privacy.guarantee import SERIES_SCALING
from flwr_vflgan.runtime.party_data import PartyEncoder, series_blocks, series_table
from flwr_vflgan.series.metrics import series_report
from flwr_vflgan.series.report import SeriesSelection, write_series_report
from flwr_vflgan.strategies.vflgan import VFLGANResult, VFLGANStrategy

from .config import RunSpec
from .launch import start_on_runtime, strategy_settings
from .outputs import holding_run, json_default, published_outputs
from .pipeline import privacy_metrics, privacy_rows, run_config

Progress = Callable[[dict[str, Any]], None]

DEPLOYMENT_NOT_BUILT = (
    "algorithm=vflgan_ts runs with runtime=inprocess or runtime=simulation; on real nodes "
    "each party would read its own series file, which is not built yet"
)


def run_series(
    spec: RunSpec,
    *,
    grid: Grid | None = None,
    progress: Progress | None = None,
    observer: Callable | None = None,
) -> dict[str, Any]:
    """Train VFLGAN-TS on ``spec``'s series, publish, score and write the run directory
    (held throughout); returns what ``metrics.json`` holds.

    Raises
    ------
    ValueError
        ``runtime=deployment`` or a grid from ``flwr run`` (not built for series yet).
    """
    if spec.runtime.kind == "deployment" or grid is not None:
        raise ValueError(DEPLOYMENT_NOT_BUILT)
    with holding_run(spec):
        started = time.monotonic()
        table = series_table(spec.data)
        encoders = [block.encoder for block in series_blocks(spec.data)]
        selection = SeriesSelection(encoded(table, encoders, table.values))
        result = _train(spec, selection, progress, observer)
        synthetic = wide_to_series(result.synthetic, table.channels, table.length)
        fd = selection.fd(encoded(table, encoders, synthetic).values)
        metrics = _metrics(spec, result, fd, time.monotonic() - started, fitted_scaling(encoders))
        with published_outputs(spec.run_dir) as out:
            series_long_frame(synthetic, table.channels).to_csv(out / "synthetic.csv", index=False)
            (out / "config.json").write_text(json.dumps(run_config(spec), indent=2))
            if spec.output.evaluate:
                metrics["series"] = _evaluate(spec, table, synthetic, metrics, out)
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
    selection: SeriesSelection,
    progress: Progress | None,
    observer: Callable | None,
) -> VFLGANResult:
    """VFLGAN's strategy over the spec's runtime, the pooled FD picking the epoch."""
    checkpoints = spec.run_dir / "checkpoints" if spec.output.checkpoint else None
    strategy = VFLGANStrategy(
        spec.algorithm,
        evaluate_fn=selection if spec.output.evaluate else None,
        publish_rows=spec.output.publish_rows,
        checkpoint_dir=checkpoints,
        party_checkpoint_root=checkpoints,
        **strategy_settings(spec, progress),
    )
    result: VFLGANResult = start_on_runtime(strategy, spec, observer=observer)
    return result


def fitted_scaling(encoders: list[PartyEncoder]) -> tuple[str, ...]:
    """What the parties' series encoders read from their private series: their fitted
    per-channel scaling (none for the sine data, which trains unscaled)."""
    fitted = any(isinstance(e, SeriesEncoder) and e.low and not e.public for e in encoders)
    return (SERIES_SCALING,) if fitted else ()


def _metrics(
    spec: RunSpec,
    result: VFLGANResult,
    fd: float,
    wall_seconds: float,
    preprocessing: tuple[str, ...],
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
        "privacy": privacy_metrics(spec, result, preprocessing=preprocessing),
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
