"""PNG plots of a run: Frechet distance over training, marginals, association heatmaps,
image samples. matplotlib is imported lazily with its non-interactive backend."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data.schema import ColumnKind, Schema
from flwr_vflgan.metrics.tables import category_strings

__all__ = [
    "plot_associations",
    "plot_fd_history",
    "plot_image_samples",
    "plot_marginals",
    "pyplot",
    "save_figure",
]

MAX_MARGINAL_COLUMNS = 24
"""Columns shown in ``marginals.png`` (the first ones in table order)."""
MAX_CATEGORIES = 12
"""Bars per categorical column (the real table's most frequent categories)."""


def pyplot() -> Any:
    """matplotlib's pyplot with the non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` atomically and close it."""
    # Written under a temporary name and renamed, so a crash leaves no partial PNG.
    try:
        write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=100, bbox_inches="tight"), ".png")
    finally:
        pyplot().close(fig)
    return path


def plot_fd_history(history: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Frechet distance per evaluation epoch; ``None`` (nothing written) without history."""
    points = [(h["epoch"], h["fd"]) for h in history if h.get("fd") is not None]
    if not points:
        return None
    plt = pyplot()
    epochs, fds = zip(*points, strict=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(epochs, fds, marker="o", markersize=3)
    best = int(np.argmin(fds))
    ax.scatter([epochs[best]], [fds[best]], color="red", zorder=3, label=f"best {fds[best]:.3f}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("Frechet distance")
    ax.set_yscale("log" if max(fds) / max(min(fds), 1e-12) > 20 else "linear")
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def plot_marginals(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, path: Path) -> Path:
    """One panel per column: overlaid histograms (numbers) or paired bars (categories)."""
    plt = pyplot()
    columns = schema.names[:MAX_MARGINAL_COLUMNS]
    n_cols = min(4, len(columns))
    n_rows = math.ceil(len(columns) / n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(4 * n_cols, 2.8 * n_rows), squeeze=False)
    for ax, column in zip(axes.flat, columns, strict=False):
        if schema.kind_of(column) is ColumnKind.CATEGORICAL:
            _bars(ax, category_strings(real[column]), category_strings(synthetic[column]))
        else:
            _histograms(ax, real[column].to_numpy(float), synthetic[column].to_numpy(float))
        ax.set_title(column, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(columns) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def _histograms(ax: Any, real: np.ndarray, synthetic: np.ndarray) -> None:
    # Missing values have no bar: the histograms show the present values (the missing
    # rates are measured by the suite's "<name> is missing" columns).
    real, synthetic = real[~np.isnan(real)], synthetic[~np.isnan(synthetic)]
    if real.size == 0:
        return
    low, high = float(np.min(real)), float(np.max(real))
    if high <= low:
        high = low + 1.0
    bins = np.linspace(low, high, 31)
    # Synthetic values outside the real range are clipped into the end bins so they show.
    ax.hist(real, bins=bins, density=True, alpha=0.5, label="real")
    ax.hist(np.clip(synthetic, low, high), bins=bins, density=True, alpha=0.5, label="synthetic")


def _bars(ax: Any, real: np.ndarray, synthetic: np.ndarray) -> None:
    top = pd.Series(real).value_counts().index[:MAX_CATEGORIES]
    real_share = pd.Series(real).value_counts(normalize=True).reindex(top, fill_value=0.0)
    synth_share = pd.Series(synthetic).value_counts(normalize=True).reindex(top, fill_value=0.0)
    x = np.arange(len(top))
    ax.bar(x - 0.2, real_share.to_numpy(), width=0.4, label="real")
    ax.bar(x + 0.2, synth_share.to_numpy(), width=0.4, label="synthetic")
    ax.set_xticks(x)
    ax.set_xticklabels([str(t)[:12] for t in top], rotation=60, ha="right", fontsize=6)


def plot_associations(real: pd.DataFrame, synthetic: pd.DataFrame, path: Path) -> Path:
    """Heatmaps of the real and synthetic association matrices and their difference."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    panels = (
        (real, "real", -1.0, 1.0, "coolwarm"),
        (synthetic, "synthetic", -1.0, 1.0, "coolwarm"),
        ((real - synthetic).abs(), "|real - synthetic|", 0.0, 1.0, "viridis"),
    )
    for ax, (matrix, title, vmin, vmax, cmap) in zip(axes, panels, strict=True):
        image = ax.imshow(matrix.to_numpy(float), vmin=vmin, vmax=vmax, cmap=cmap)
        ax.set_title(title)
        ticks = np.arange(len(matrix.columns))
        labels = [str(c)[:14] for c in matrix.columns]
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, rotation=90, fontsize=6)
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=6)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_image_samples(
    real: np.ndarray, synthetic: np.ndarray, image_shape: tuple[int, int], path: Path
) -> Path:
    """Grids of 64 real and 64 synthetic images side by side.

    The real images are 64 rows evenly spaced through the table, so a table sorted by its
    label shows every label rather than its first; the published synthetic rows are
    already in random order and their first 64 are shown.
    """
    from flwr_vflgan.metrics.images import image_grid

    plt = pyplot()
    # Both grids on the real table's pixel scale, so a washed-out generator shows as such.
    value_range = (float(np.min(real)), float(np.max(real)))
    shown = real[np.unique(np.linspace(0, len(real) - 1, num=min(64, len(real))).astype(int))]
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.3))
    for ax, pixels, title in ((axes[0], shown, "real"), (axes[1], synthetic, "synthetic")):
        grid = image_grid(pixels, image_shape, value_range=value_range)
        ax.imshow(grid, cmap="gray", vmin=0.0, vmax=1.0)
        ax.set_title(title)
        ax.axis("off")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_roc(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], path: Path, title: str) -> Path:
    """ROC curves of membership attacks: per name, the true labels (1: member) and the
    scores (higher: more likely a member), with each curve's AUC in the legend."""
    from sklearn.metrics import roc_auc_score, roc_curve

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for name, (labels, scores) in curves.items():
        fpr, tpr, _ = roc_curve(labels, scores)
        ax.plot(fpr, tpr, label=f"{name} (AUC {roc_auc_score(labels, scores):.2f})")
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="chance")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    return save_figure(fig, path)
