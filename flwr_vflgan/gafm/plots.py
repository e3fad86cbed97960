"""Paper 002's Figure 2 (and Figures C.1-C.3): each row's prediction against the gradient
its non-label party received, coloured by label; for GAFM also the GAN and CE terms that
sum to it (their class centres pull in opposite directions, which mixes the classes)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from flwr_vflgan.evaluation.plots import pyplot, save_figure

__all__ = ["TRACE_PANELS", "plot_delta_ratios", "plot_gradients", "trace_frame"]

TRACE_PANELS = (
    ("gradient", "gradient received"),
    ("gan", "GAN term (gamma-weighted)"),
    ("ce", "CE term"),
)
"""The trace's gradient columns, in the figure's order, and their axis names."""


def trace_frame(trace: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The trace as a table: ``label``, ``prediction`` and the gradient columns it has."""
    columns = ["label", "prediction", *(key for key, _ in TRACE_PANELS if key in trace)]
    return pd.DataFrame({key: np.asarray(trace[key]) for key in columns})


def plot_gradients(trace: Mapping[str, np.ndarray], path: Path, title: str) -> Path:
    """One panel per gradient column of ``trace``: prediction (x) against gradient (y),
    label 0 and label 1 in two colours, with each class's centre marked."""
    frame = trace_frame(trace)
    panels = [(key, name) for key, name in TRACE_PANELS if key in frame]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (key, name) in zip(axes[0], panels, strict=True):
        for label, colour in ((0, "tab:blue"), (1, "tab:orange")):
            rows = frame[frame["label"] == label]
            ax.scatter(
                rows["prediction"], rows[key], s=4, alpha=0.4, c=colour, label=f"y = {label}"
            )
            if len(rows):
                ax.scatter(
                    rows["prediction"].mean(), rows[key].mean(), marker="X", s=90,
                    c=colour, edgecolors="black",
                )  # fmt: skip
        ax.set_xlabel("prediction")
        ax.set_ylabel(name)
        ax.axhline(0.0, color="grey", linewidth=0.5)
    axes[0][0].legend(loc="best", fontsize="small")
    fig.suptitle(title)
    return save_figure(fig, path)


def plot_delta_ratios(
    subset: Mapping[float, float],
    full: Mapping[float, float] | None,
    chosen: float,
    path: Path,
    title: str,
) -> Path:
    """Paper 002's Figure D.1: the average ``leak AUC / train AUC`` ratio of each
    ``Delta`` on subsets and (``full``) on the whole table, the ``Delta`` the subsets
    choose marked, and the three smallest full-table ratios ringed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    deltas = sorted(subset)
    ax.plot(deltas, [subset[d] for d in deltas], marker="o", label="subsets")
    if full:
        ax.plot(deltas, [full[d] for d in deltas], marker="s", label="whole table")
        for d in sorted(full, key=lambda d: (full[d], d))[:3]:
            ax.scatter(d, full[d], s=160, facecolors="none", edgecolors="black")
    ax.axvline(
        chosen, color="grey", linestyle="--", linewidth=0.8, label=f"chosen Delta {chosen:g}"
    )
    ax.set_xlabel("Delta")
    ax.set_ylabel("leak AUC / train AUC")
    ax.legend(loc="best", fontsize="small")
    fig.suptitle(title)
    return save_figure(fig, path)
