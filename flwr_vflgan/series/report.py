"""What a VFLGAN-TS run reports: the score that picks the published epoch, ``report.md``
and its plots.

**The selection score** (``fd`` in the training history, lower is better) is the Frechet
distance of paper 000's eq. 23 between the real and the synthetic series, each channel
first average-pooled to at most :data:`POOLED_STEPS` points and the channels of all
parties concatenated. Decision (paper 003 is silent; its reference code picks the epoch
whose fitted sine amplitudes are closest to the real ones, which only the sine data
allow): the pooled FD works for any series, is cheap enough to compute every epoch, and,
because it compares the joint covariance of all channels, it rises when the parties'
channels stop moving together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data.series import SeriesTable, block_to_channels
from flwr_vflgan.evaluation.plots import pyplot, save_figure
from flwr_vflgan.metrics.frechet import GaussianStats, frechet_distance

POOLED_STEPS = 64
"""Points per channel the selection score compares (average pooling)."""
PLOTTED_SERIES = 4
"""Series per panel of ``series.png``."""


def pooled(values: np.ndarray, steps: int = POOLED_STEPS) -> np.ndarray:
    """``(n, C, T)`` series as ``(n, C * m)`` rows, each channel average-pooled to
    ``m = min(steps, T)`` points (the last window takes the remainder)."""
    n, c, t = values.shape
    m = min(steps, t)
    edges = np.linspace(0, t, m + 1).round().astype(int)
    means = np.add.reduceat(values.astype(np.float64), edges[:-1], axis=2)
    means /= np.diff(edges)[None, None, :]
    return means.reshape(n, c * m)


class SeriesSelection:
    """The selection score against one real table (the experimenter's oracle: the server
    of a simulation holds it; parties never see it).

    Called with each party's synthetic block in party order, as the strategy's
    ``evaluate_fn``; returns ``{"fd": ...}``.
    """

    def __init__(self, table: SeriesTable) -> None:
        self.table = table
        self.real = GaussianStats.of(pooled(table.values))

    def assemble(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        """The parties' blocks as ``(n, C, T)`` in the table's channel order."""
        if len(blocks) != len(self.table.parties):
            raise ValueError(f"{len(blocks)} blocks for {len(self.table.parties)} parties")
        n = int(blocks[0].shape[0])
        out = np.empty((n, len(self.table.channels), self.table.length), dtype=np.float32)
        for block, held in zip(blocks, self.table.parties, strict=True):
            out[:, list(held), :] = block_to_channels(np.asarray(block), len(held))
        return out

    def fd(self, synthetic: np.ndarray) -> float:
        """The selection score of ``(n, C, T)`` synthetic series."""
        return frechet_distance(self.real, pooled(synthetic))

    def __call__(self, blocks: Sequence[np.ndarray]) -> dict[str, float]:
        return {"fd": self.fd(self.assemble(blocks))}


def write_series_report(
    out_dir: Path,
    real: SeriesTable,
    synthetic: np.ndarray,
    scores: Mapping[str, Any],
    *,
    title: str,
    run: Mapping[str, Any],
    plots: bool = True,
) -> list[Path]:
    """``report.md`` (the run, the scores, what they mean) and, with ``plots``,
    ``series.png`` (real and synthetic series per channel) and ``amplitudes.png`` (the
    first channel's fitted amplitude against the last's, across parties)."""
    written = []
    figures = []
    if plots:
        written.append(_plot_series(real, synthetic, out_dir / "series.png"))
        figures.append("series.png")
        if len(real.parties) > 1:
            written.append(_plot_amplitudes(real, synthetic, out_dir / "amplitudes.png"))
            figures.append("amplitudes.png")
    lines = [f"# {title}", "", "| run | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in run.items()]
    lines += ["", "| score | real vs synthetic |", "|---|---|"]
    for key, value in scores.items():
        shown = ", ".join(f"{v:.4f}" for v in value) if isinstance(value, list) else f"{value:.4f}"
        lines.append(f"| {key} | {shown} |")
    lines += [
        "",
        "discriminative_score: |accuracy - 0.5| of a classifier telling real from synthetic",
        "(0 best). predictive_score: MAE on the real series of a next-step model trained on",
        "the synthetic ones. Amplitude correlations are of the series' fitted sine amplitudes,",
        "synthetic beside real (the real_ rows; the sine data's is 1). See docs/series.md.",
        "",
    ]
    lines += [f"![{name}]({name})" for name in figures]
    path = out_dir / "report.md"
    write_atomically(path, lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"), ".md")
    return [path, *written]


def _plot_series(real: SeriesTable, synthetic: np.ndarray, path: Path) -> Path:
    plt = pyplot()
    channels = len(real.channels)
    fig, axes = plt.subplots(channels, 2, figsize=(9, 1.4 * channels), sharex=True, squeeze=False)
    for c, name in enumerate(real.channels):
        for column, (label, values) in enumerate((("real", real.values), ("synthetic", synthetic))):
            ax = axes[c][column]
            for k in range(min(PLOTTED_SERIES, len(values))):
                ax.plot(values[k, c], linewidth=0.8)
            ax.set_ylabel(name, fontsize=8)
            if c == 0:
                ax.set_title(label)
    return save_figure(fig, path)


def _plot_amplitudes(real: SeriesTable, synthetic: np.ndarray, path: Path) -> Path:
    from .metrics import fit_amplitudes

    first, last = real.parties[0][0], real.parties[-1][-1]
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.4), sharex=True, sharey=True)
    for ax, (label, values) in zip(
        axes, (("real", real.values), ("synthetic", synthetic)), strict=True
    ):
        n = min(1024, len(values))
        ax.scatter(
            fit_amplitudes(values[:n, first]), fit_amplitudes(values[:n, last]), s=3, alpha=0.5
        )
        ax.set_title(label)
        ax.set_xlabel(f"{real.channels[first]} amplitude (party 0)")
    axes[0].set_ylabel(f"{real.channels[last]} amplitude (party {len(real.parties) - 1})")
    return save_figure(fig, path)
