"""VFLGAN-TS's rows of the reproduction harness: paper 003's sine experiment with and
without the shared discriminator.

    python -m simulations.reproduce reproduce.datasets=[sine6] reproduce.algorithms=[vflgan_ts] \\
        reproduce.out_dir=runs/reproduce-series

Per seed it trains VFLGAN-TS twice (the shared discriminator on, and off: the
reference's ``--withSD`` ablation, where each party's extractor head judges its own
channels), or reuses a finished run of the same configuration, and writes
``<out_dir>/series.md`` and ``series.json``: mean and sample standard deviation over
seeds of each score (:func:`~flwr_vflgan.series.metrics.series_report`).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .config import ReproduceConfig, RunSpec, to_run_spec
from .reproduce_vflgan import finished_metrics
from .series_pipeline import run_series

TABLE = "series"
SCORES = (
    ("discriminative_score", "discriminative score (0 best)"),
    ("predictive_score", "predictive score (MAE, real data)"),
    ("cross_party_amplitude_correlation", "cross-party amplitude correlation"),
    ("within_party_amplitude_correlation", "within-party amplitude correlation"),
    ("mean_channel_wasserstein", "mean channel W1"),
)


def specs(
    base: DictConfig, rc: ReproduceConfig, dataset: str, algorithm: str, epsilon: float | None
) -> list[RunSpec]:
    """Per seed, a run with the shared discriminator and one without; no DP rows yet."""
    if epsilon is not None:
        return []
    out = []
    for shared in (True, False):
        for seed in rc.seeds:
            override: dict[str, Any] = {
                "seed": seed,
                "algorithm": {"variant": algorithm},
                "dataset": {"source": dataset},
                "series": {"train": {"shared_discriminator": shared}},
            }
            if dataset in rc.epochs:
                override["train"] = {"epochs": int(rc.epochs[dataset])}
            method = algorithm if shared else f"{algorithm}-without-sd"
            run_dir = Path(rc.out_dir) / dataset / method / f"seed{seed}"
            merged = OmegaConf.merge(base, override)
            assert isinstance(merged, DictConfig)  # merging dicts gives a dict
            out.append(to_run_spec(merged, run_dir))
    return out


def run_one(spec: RunSpec) -> dict[str, Any]:
    """A finished run of the same configuration, else a new one."""
    return finished_metrics(spec) or run_series(spec)


def method(spec: RunSpec) -> str:
    """The table's name of a run's configuration."""
    shared = spec.algorithm.series.train.shared_discriminator
    return "VFLGAN-TS" if shared else "VFLGAN-TS without shared discriminator"


def summarise(rows: Sequence[tuple[RunSpec, dict[str, Any]]]) -> dict[str, Any]:
    """Per dataset and method: each score's mean, sample sd and per-seed values."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for spec, metrics in rows:
        scores = {**metrics.get("series", {}), "fd": metrics.get("fd")}
        grouped.setdefault((spec.data.source, method(spec)), []).append(scores)
    table: dict[str, Any] = {}
    for (dataset, name), runs in grouped.items():
        cells = {}
        for key in (*(k for k, _ in SCORES), "fd"):
            values = [float(r[key]) for r in runs if r.get(key) is not None]
            if values:
                sd = statistics.stdev(values) if len(values) > 1 else 0.0
                cells[key] = {"mean": statistics.fmean(values), "sd": sd, "values": values}
        table.setdefault(dataset, {})[name] = cells
    return table


def write(rows: Sequence[tuple[RunSpec, dict[str, Any]]], rc: ReproduceConfig) -> tuple[str, dict]:
    """The table's markdown and its JSON form."""
    table = summarise(rows)
    header = ["method", *(label for _, label in SCORES), "pooled FD"]
    lines = [
        f"# VFLGAN-TS (paper 003), seeds {list(rc.seeds)}: mean +- sd",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for dataset, methods in table.items():
        for name, cells in methods.items():
            shown = [
                f"{cells[k]['mean']:.3f} +- {cells[k]['sd']:.3f}" if k in cells else "-"
                for k in (*(k for k, _ in SCORES), "fd")
            ]
            lines.append(f"| {dataset}: {name} | " + " | ".join(shown) + " |")
    lines += ["", "Scores: docs/series.md. Real sine data: amplitude correlations 1.0."]
    return "\n".join(lines) + "\n", json.loads(json.dumps(table))


def announce(spec: RunSpec, metrics: dict[str, Any]) -> str:
    """One line as a run finishes."""
    scores = metrics.get("series", {})
    shown = ", ".join(
        f"{key} {scores[key]:.3f}" for key, _ in SCORES[:3] if scores.get(key) is not None
    )
    return f"{spec.data.source} {method(spec)} seed {spec.seed}: {shown or 'not evaluated'}"
