"""Paper 000's Table 1 in ``python -m simulations.reproduce``: the VFLGAN family's
reproduction (AI-training utility of VFLGAN, VFLGAN-base and the centralized WGAN-GP,
with and without DP, next to the paper's numbers).

Each run is ``<out_dir>/<dataset>/<algorithm>[-dp<epsilon>]/seed<k>/``; a finished run of
the same configuration is reused (and evaluated again if the evaluation settings
changed). ``<out_dir>/table1.md`` and ``table1.json`` hold the table.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.config import Variant, settings_as_read_now
from flwr_vflgan.privacy import Mechanism
from flwr_vflgan.runtime.checkpoint import read_settings
from flwr_vflgan.runtime.party_data import all_blocks, load_full_table
from flwr_vflgan.simulations.config import ReproduceConfig, RunSpec, to_run_spec
from flwr_vflgan.simulations.outputs import write_json
from flwr_vflgan.simulations.pipeline import effective_evaluation, evaluate_run, run_gan
from flwr_vflgan.simulations.reproduce_thesis import write_paper004
from flwr_vflgan.simulations.seed_summary import dataset_name
from flwr_vflgan.simulations.seed_summary import mean_spread as _mean_spread

log = logging.getLogger(__name__)

TABLE = "table1"

SETTINGS = ("trtr", "tsts", "trts", "tstr")

# Paper 000, Table 1 (non-DP part): (accuracy, F1) per setting and the Total Difference.
PAPER_TABLE1: dict[str, dict[str, dict[str, Any]]] = {
    "adult": {
        "wgan_gp": {"trtr": (0.82, 0.72), "tsts": (0.82, 0.74), "trts": (0.81, 0.71), "tstr": (0.72, 0.69), "total": 0.17},
        "vertigan": {"trtr": (0.82, 0.72), "tsts": (0.59, 0.37), "trts": (0.53, 0.48), "tstr": (0.75, 0.43), "total": 1.47},
        "vflgan_base": {"trtr": (0.82, 0.72), "tsts": (0.81, 0.66), "trts": (0.80, 0.68), "tstr": (0.76, 0.72), "total": 0.19},
        "vflgan": {"trtr": (0.82, 0.72), "tsts": (0.82, 0.65), "trts": (0.79, 0.65), "tstr": (0.79, 0.54), "total": 0.38},
    },
    "german_credit": {
        "wgan_gp": {"trtr": (0.75, 0.67), "tsts": (0.68, 0.55), "trts": (0.67, 0.56), "tstr": (0.67, 0.53), "total": 0.60},
        "vertigan": {"trtr": (0.75, 0.67), "tsts": (0.67, 0.47), "trts": (0.64, 0.46), "tstr": (0.68, 0.42), "total": 0.92},
        "vflgan_base": {"trtr": (0.75, 0.67), "tsts": (0.72, 0.67), "trts": (0.64, 0.51), "tstr": (0.63, 0.58), "total": 0.51},
        "vflgan": {"trtr": (0.75, 0.67), "tsts": (0.77, 0.45), "trts": (0.69, 0.48), "tstr": (0.70, 0.42), "total": 0.79},
    },
    "wine_red": {
        "wgan_gp": {"trtr": (0.59, 0.26), "tsts": (0.57, 0.28), "trts": (0.55, 0.25), "tstr": (0.58, 0.26), "total": 0.09},
        "vertigan": {"trtr": (0.59, 0.26), "tsts": (0.53, 0.21), "trts": (0.51, 0.19), "tstr": (0.39, 0.14), "total": 0.58},
        "vflgan_base": {"trtr": (0.59, 0.26), "tsts": (0.55, 0.27), "trts": (0.51, 0.21), "tstr": (0.55, 0.27), "total": 0.23},
        "vflgan": {"trtr": (0.59, 0.26), "tsts": (0.56, 0.26), "trts": (0.54, 0.24), "tstr": (0.58, 0.26), "total": 0.11},
    },
    "wine_white": {
        "wgan_gp": {"trtr": (0.53, 0.21), "tsts": (0.53, 0.24), "trts": (0.53, 0.21), "tstr": (0.53, 0.20), "total": 0.04},
        "vertigan": {"trtr": (0.53, 0.21), "tsts": (0.53, 0.16), "trts": (0.48, 0.16), "tstr": (0.47, 0.14), "total": 0.28},
        "vflgan_base": {"trtr": (0.53, 0.21), "tsts": (0.53, 0.21), "trts": (0.52, 0.20), "tstr": (0.52, 0.20), "total": 0.04},
        "vflgan": {"trtr": (0.53, 0.21), "tsts": (0.51, 0.20), "trts": (0.50, 0.19), "tstr": (0.51, 0.19), "total": 0.12},
    },
    "hcv": {
        "wgan_gp": {"trtr": (0.23, 0.20), "tsts": (0.29, 0.17), "trts": (0.23, 0.21), "tstr": (0.24, 0.16), "total": 0.15},
        "vertigan": {"trtr": (0.23, 0.20), "tsts": (0.30, 0.21), "trts": (0.25, 0.22), "tstr": (0.24, 0.14), "total": 0.19},
        "vflgan_base": {"trtr": (0.23, 0.20), "tsts": (0.31, 0.26), "trts": (0.24, 0.20), "tstr": (0.27, 0.17), "total": 0.22},
        "vflgan": {"trtr": (0.23, 0.20), "tsts": (0.29, 0.22), "trts": (0.28, 0.24), "tstr": (0.25, 0.17), "total": 0.22},
    },
}  # fmt: skip
# Paper 000, Table 1, DP part: (10, 1e-5)-DP on Adult, (10, 1e-3)-DP on Credit, (10, 5e-4),
# (10, 2e-4) and (10, 8e-4) on red wine, white wine and HCV.
PAPER_TABLE1_DP: dict[str, dict[str, dict[str, Any]]] = {
    "adult": {
        "wgan_gp": {"trtr": (0.82, 0.72), "tsts": (0.84, 0.78), "trts": (0.82, 0.72), "tstr": (0.75, 0.71), "total": 0.16},
        "vertigan": {"trtr": (0.82, 0.72), "tsts": (0.66, 0.40), "trts": (0.56, 0.50), "tstr": (0.75, 0.43), "total": 1.32},
        "dplt": {"trtr": (0.82, 0.72), "tsts": (0.60, 0.55), "trts": (0.48, 0.44), "tstr": (0.31, 0.30), "total": 1.94},
        "vflgan_base": {"trtr": (0.82, 0.72), "tsts": (0.82, 0.72), "trts": (0.80, 0.69), "tstr": (0.82, 0.72), "total": 0.05},
        "vflgan": {"trtr": (0.82, 0.72), "tsts": (0.83, 0.78), "trts": (0.82, 0.73), "tstr": (0.75, 0.71), "total": 0.16},
    },
    "german_credit": {
        "wgan_gp": {"trtr": (0.75, 0.67), "tsts": (0.78, 0.70), "trts": (0.74, 0.63), "tstr": (0.71, 0.63), "total": 0.19},
        "vertigan": {"trtr": (0.75, 0.67), "tsts": (0.70, 0.44), "trts": (0.64, 0.48), "tstr": (0.69, 0.42), "total": 0.89},
        "dplt": {"trtr": (0.75, 0.67), "tsts": (0.54, 0.45), "trts": (0.53, 0.48), "tstr": (0.65, 0.53), "total": 1.08},
        "vflgan_base": {"trtr": (0.75, 0.67), "tsts": (0.66, 0.43), "trts": (0.63, 0.49), "tstr": (0.69, 0.45), "total": 0.93},
        "vflgan": {"trtr": (0.75, 0.67), "tsts": (0.72, 0.65), "trts": (0.67, 0.54), "tstr": (0.67, 0.56), "total": 0.45},
    },
    "wine_red": {
        "wgan_gp": {"trtr": (0.59, 0.26), "tsts": (0.56, 0.27), "trts": (0.56, 0.25), "tstr": (0.56, 0.24), "total": 0.13},
        "vertigan": {"trtr": (0.59, 0.26), "tsts": (0.62, 0.13), "trts": (0.46, 0.16), "tstr": (0.40, 0.10), "total": 0.74},
        "dplt": {"trtr": (0.59, 0.26), "tsts": (0.37, 0.26), "trts": (0.36, 0.22), "tstr": (0.31, 0.16), "total": 0.87},
        "vflgan_base": {"trtr": (0.59, 0.26), "tsts": (0.59, 0.23), "trts": (0.59, 0.23), "tstr": (0.57, 0.21), "total": 0.13},
        "vflgan": {"trtr": (0.59, 0.26), "tsts": (0.61, 0.22), "trts": (0.60, 0.24), "tstr": (0.55, 0.20), "total": 0.19},
    },
    "wine_white": {
        "wgan_gp": {"trtr": (0.53, 0.21), "tsts": (0.55, 0.24), "trts": (0.53, 0.20), "tstr": (0.52, 0.20), "total": 0.08},
        "vertigan": {"trtr": (0.53, 0.21), "tsts": (0.70, 0.22), "trts": (0.48, 0.17), "tstr": (0.38, 0.12), "total": 0.51},
        "dplt": {"trtr": (0.53, 0.21), "tsts": (0.43, 0.15), "trts": (0.42, 0.17), "tstr": (0.49, 0.14), "total": 0.42},
        "vflgan_base": {"trtr": (0.53, 0.21), "tsts": (0.54, 0.19), "trts": (0.53, 0.19), "tstr": (0.52, 0.17), "total": 0.10},
        "vflgan": {"trtr": (0.53, 0.21), "tsts": (0.52, 0.16), "trts": (0.51, 0.19), "tstr": (0.51, 0.17), "total": 0.16},
    },
    "hcv": {
        "wgan_gp": {"trtr": (0.23, 0.20), "tsts": (0.28, 0.22), "trts": (0.26, 0.23), "tstr": (0.24, 0.12), "total": 0.22},
        "vertigan": {"trtr": (0.23, 0.20), "tsts": (0.29, 0.19), "trts": (0.25, 0.22), "tstr": (0.26, 0.12), "total": 0.22},
        "dplt": {"trtr": (0.23, 0.20), "tsts": (0.41, 0.17), "trts": (0.30, 0.25), "tstr": (0.25, 0.11), "total": 0.44},
        "vflgan_base": {"trtr": (0.23, 0.20), "tsts": (0.31, 0.25), "trts": (0.24, 0.21), "tstr": (0.24, 0.10), "total": 0.26},
        "vflgan": {"trtr": (0.23, 0.20), "tsts": (0.31, 0.20), "trts": (0.23, 0.21), "tstr": (0.25, 0.17), "total": 0.14},
    },
}  # fmt: skip
PAPER_DP_EPSILON = 10.0
NAMES = {
    "wgan_gp": "WGAN-GP",
    "gs_wgan": "GS-WGAN",
    "vertigan": "VertiGAN",
    "vdgan": "VDGAN",
    "vflgan_base": "VFLGAN-base",
    "vflgan": "VFLGAN",
    "aim": "AIM",
    "mst": "MST",
    "dplt": "DPLT",
}
MARGINAL = (Variant.AIM.value, Variant.MST.value, Variant.DPLT.value)
"""The baselines that are DP by construction (AIM and MST, the marginal ones, and
DPLT): DP rows only, always ``dp=end_to_end``."""
PURE = (Variant.DPLT.value,)
"""The baselines whose guarantee is pure epsilon-DP (their rows show delta 0)."""


def method_key(algorithm: str, epsilon: float | None, mechanism: str = "vflgan_gaussian") -> str:
    """A table row's key: the algorithm, with ``@dp<epsilon>`` for a DP row and the
    mechanism after it unless it is paper 000's (or the marginal baselines' own)."""
    if epsilon is None:
        return algorithm
    suffix = "" if mechanism == "vflgan_gaussian" or algorithm in MARGINAL else f"-{mechanism}"
    return f"{algorithm}@dp{epsilon:g}{suffix}"


def mechanism_of(algorithm: str, rc: ReproduceConfig) -> str:
    """The mechanism of ``algorithm``'s DP rows (GS-WGAN's is its own sanitization)."""
    if algorithm == Variant.GS_WGAN.value:
        return Mechanism.GS_WGAN.value
    return "end_to_end" if algorithm in MARGINAL else rc.dp_mechanism


def specs(
    base: DictConfig, rc: ReproduceConfig, dataset: str, algorithm: str, epsilon: float | None
) -> list[RunSpec]:
    """One run per seed of ``algorithm`` on ``dataset``; ``epsilon`` makes it a DP row
    (DP-VFLGAN's first-layer Gaussian mechanism at the paper's deltas; AIM and MST, which
    have DP rows only, at their own end-to-end guarantee)."""
    if algorithm in MARGINAL and epsilon is None:
        return []
    specs = []
    for seed in rc.seeds:
        override: dict[str, Any] = {
            "seed": seed,
            "algorithm": {"variant": algorithm},
            "dataset": {"source": dataset},
        }
        if dataset in rc.epochs:
            override["train"] = {"epochs": int(rc.epochs[dataset])}
        if epsilon is not None:
            name = dataset_name(dataset)
            if name not in rc.dp_delta:
                raise ValueError(
                    f"reproduce.dp_delta has no delta for {name}; set reproduce.dp_delta.{name}=..."
                )
            override["dp"] = {
                "mechanism": mechanism_of(algorithm, rc),
                "target_epsilon": epsilon,
                "delta": float(rc.dp_delta[name]),
            }
        run_dir = (
            Path(rc.out_dir)
            / dataset_name(dataset)
            / method_key(algorithm, epsilon, mechanism_of(algorithm, rc)).replace("@", "-")
            / f"seed{seed}"
        )
        specs.append(to_run_spec(OmegaConf.merge(base, override), run_dir))
    return specs


def _identity(config: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in config.get("data", {}).items() if k not in ("data_dir", "file")}
    # A section only other families read (another family's defaults) does not count, nor
    # does a setting added since the run was written (it takes its default).
    algorithm = read_settings(json.loads(settings_as_read_now(json.dumps(config.get("algorithm")))))
    return {"algorithm": algorithm, "data": data, "seed": config.get("seed")}


def finished_metrics(spec: RunSpec) -> dict[str, Any] | None:
    """The metrics of a finished run of exactly this configuration, else ``None``."""
    metrics_path, config_path = spec.run_dir / "metrics.json", spec.run_dir / "config.json"
    if not (
        metrics_path.exists() and config_path.exists() and (spec.run_dir / "synthetic.csv").exists()
    ):
        return None
    # Through JSON, as config.json was written (tuples become lists).
    wanted = _identity(
        json.loads(
            json.dumps(
                {
                    "algorithm": spec.algorithm.to_dict(),
                    "data": json.loads(spec.data.to_json()),
                    "seed": spec.seed,
                }
            )
        )
    )
    if _identity(json.loads(config_path.read_text())) != wanted:
        log.warning("%s holds a run of another configuration: training again", spec.run_dir)
        return None
    return json.loads(metrics_path.read_text())


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Train (unless a matching finished run exists) and evaluate one run; a reused run
    whose evaluation settings differ is evaluated again."""
    metrics = finished_metrics(spec)
    if metrics is None:
        return run_gan(spec)
    evaluation = metrics.get("evaluation", {})
    if evaluation.get("settings", {}).get("config") != effective_evaluation(spec).to_dict():
        table = load_full_table(spec.data)
        synthetic = pd.read_csv(spec.run_dir / "synthetic.csv")
        metrics["evaluation"] = evaluate_run(
            spec,
            table[0],
            synthetic,
            all_blocks(spec.data, table),
            metrics.get("history", []),
            metrics.get("privacy"),
        )
        write_json(spec.run_dir / "metrics.json", metrics)
    return metrics


def summarise(results: Sequence[tuple[RunSpec, dict[str, Any]]]) -> dict[str, Any]:
    """Mean and sample standard deviation over seeds of each Table 1 cell and the FD."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for spec, metrics in results:
        dp = spec.algorithm.dp
        epsilon = dp.target_epsilon if dp.enabled else None
        key = (
            dataset_name(spec.data.source),
            method_key(spec.algorithm.variant.value, epsilon, dp.mechanism.value),
        )
        grouped.setdefault(key, []).append(metrics)
    table: dict[str, Any] = {}
    for (dataset, algorithm), runs in grouped.items():
        cells: dict[str, Any] = {"seeds": [m["seed"] for m in runs]}
        utility = [m.get("evaluation", {}).get("ai_utility", {}) for m in runs]
        for setting in SETTINGS:
            for metric in ("accuracy", "f1"):
                name = f"{setting}_{metric}"
                cells[name] = _mean_spread([u.get(name, math.nan) for u in utility])
        cells["total_difference"] = _mean_spread(
            [u.get("total_difference", math.nan) for u in utility]
        )
        cells["fd"] = _mean_spread([m.get("fd", math.nan) for m in runs])
        cells["best_epoch"] = [m.get("best_epoch") for m in runs]
        cells["train_seconds"] = _mean_spread([m.get("wall_seconds", math.nan) for m in runs])
        spent = [(m.get("privacy") or {}).get("epsilon") for m in runs]
        cells["epsilon_spent"] = max((e for e in spent if e is not None), default=None)
        table.setdefault(dataset, {})[algorithm] = cells
    return table


def _cell(value: tuple[float, float]) -> str:
    mean, spread = value
    return "-" if math.isnan(mean) else f"{mean:.2f} ± {spread:.2f}"


def render_table(table: dict[str, Any], rc: ReproduceConfig, folds: int) -> str:
    """Markdown: per dataset, our mean ± spread per method and the paper's row under it."""
    header = "| Method | TRTR Acc | TRTR F1 | TSTS Acc | TSTS F1 | TRTS Acc | TRTS F1 | TSTR Acc | TSTR F1 | Total Difference | FD of published table |"
    lines = [
        "# Paper 000, Table 1: AI-training utility (random forests)",
        "",
        *_dp_note(rc),
        f"Mean ± sample standard deviation over seeds {list(rc.seeds)}"
        + (" (one seed: ± 0.00 is no measured spread)" if len(rc.seeds) == 1 else "")
        + "; rows marked *paper* are the published values (one run each). TRTR/TSTS: "
        + (
            f"{folds}-fold cross-validation."
            if folds
            else "one stratified 80/20 split (evaluation.cv_folds=0)."
        ),
        "",
    ]
    for dataset, methods in table.items():
        epochs = rc.epochs.get(dataset)
        lines += [
            f"## {dataset}" + (f" ({epochs} epochs)" if epochs else ""),
            "",
            header,
            "|" + "---|" * 11,
        ]
        for epsilon in rc.variants:
            for algorithm in rc.algorithms:
                key = method_key(algorithm, epsilon, mechanism_of(algorithm, rc))
                if key not in methods:
                    continue
                lines += _method_rows(dataset, algorithm, epsilon, methods[key], rc)
        lines.append("")
    return "\n".join(lines)


_GUARANTEES = {
    "vflgan_gaussian": (
        "DP-VFLGAN's first-layer Gaussian mechanism (paper 000 eqs. 20-21); its guarantee "
        "is `first_layer`, the paper's argument: the shared discriminator, the later "
        "discriminator layers and the encoders read real rows un-noised"
    ),
    "dpsgd": (
        "DP-SGD on every discriminator a party holds (`local_discriminators`; the "
        "centralized WGAN-GP's `critic_updates`): the shared discriminator and the encoders "
        "are not covered"
    ),
    "end_to_end": (
        "`dp=end_to_end`: every update that reads real rows, the server's included, with "
        "encoders from public metadata (`end_to_end`)"
    ),
    "pate": (
        "VDGAN-PATE (paper 004 Algorithms 4-5): each client's noisy, thresholded votes of "
        "its teachers' gradient signs (`noisy_votes`); the teachers, trained un-noised, "
        "never leave their client, and the encoders are not covered"
    ),
}


def _dp_note(rc: ReproduceConfig) -> list[str]:
    """The paragraph that says what the DP rows' epsilon covers."""
    if not rc.dp_epsilons:
        return []
    return [
        f"DP rows: {_GUARANTEES[rc.dp_mechanism]}; noise calibrated to the budget; the "
        "last epoch's generators are published (docs/privacy.md). *spent* is the largest "
        "epsilon any data holder spent. AIM and MST rows (centralized, marginals coded from "
        "public metadata) are `end_to_end` in zCDP over add/remove-one neighbours; DPLT's "
        "(vertical, bits coded from public metadata) pure epsilon-DP over replace-one "
        "neighbours, not against the server, which sees each row's latent states.",
        "",
    ]


def _method_rows(
    dataset: str, algorithm: str, epsilon: float | None, c: dict[str, Any], rc: ReproduceConfig
) -> list[str]:
    """Our row for one method and, where the paper has one, the paper's row."""
    cells = [_cell(c[f"{s}_{m}"]) for s in SETTINGS for m in ("accuracy", "f1")]
    name = NAMES[algorithm]
    if epsilon is not None:
        delta = 0.0 if algorithm in PURE else rc.dp_delta.get(dataset)
        spent = c.get("epsilon_spent")
        prefix = "" if algorithm in MARGINAL else "DP-"
        mechanism = mechanism_of(algorithm, rc)
        own = mechanism == "vflgan_gaussian" or algorithm in MARGINAL
        shown = "" if own else f" [{mechanism}]"
        name = f"{prefix}{name}{shown} (ε={epsilon:g}, δ={delta:g}" + (
            f"; spent ≤ {spent:.2f})" if spent is not None else ")"
        )
    lines = [
        f"| {name} | "
        + " | ".join(cells)
        + f" | {_cell(c['total_difference'])} | {_cell(c['fd'])} |"
    ]
    if epsilon is None:
        paper = PAPER_TABLE1.get(dataset, {}).get(algorithm)
    elif epsilon == PAPER_DP_EPSILON and (
        mechanism_of(algorithm, rc) == "vflgan_gaussian" or algorithm in PURE
    ):
        paper = PAPER_TABLE1_DP.get(dataset, {}).get(algorithm)
    else:
        paper = None
    if paper:
        published = [f"{paper[s][i]:.2f}" for s in SETTINGS for i in (0, 1)]
        lines.append("| *paper* | " + " | ".join(published) + f" | {paper['total']:.2f} | - |")
    return lines


def announce(spec: RunSpec, metrics: dict[str, Any]) -> str:
    """One line per finished run. A value the evaluation could not compute (``null`` in
    metrics.json, e.g. TSTS of a table with one class) prints as ``undefined``."""
    evaluation = metrics.get("evaluation", {})
    utility = evaluation.get("ai_utility", {})
    warning = ""
    if "ai_utility" in evaluation.get("skipped", {}):
        warning = f"warning: no Table 1 metrics for {spec.run_dir}: {evaluation['skipped']['ai_utility']}\n"
    return warning + (
        f"{spec.data.source:14s} {spec.algorithm.variant.value:12s} seed {spec.seed}: "
        f"FD {_shown(metrics.get('fd'), 4)}  "
        f"Total Difference {_shown(utility.get('total_difference'), 3)}"
    )


def _shown(value: float | None, digits: int) -> str:
    return "undefined" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def write(
    results: Sequence[tuple[RunSpec, dict[str, Any]]], rc: ReproduceConfig
) -> tuple[str, dict[str, Any]]:
    """Table 1's markdown and JSON; beside them, paper 004's measures over epsilon for
    each dataset whose runs have them (:mod:`~flwr_vflgan.simulations.reproduce_thesis`)."""
    table = summarise(results)
    for path in write_paper004(Path(rc.out_dir), list(table)):
        print(f"wrote {path}", flush=True)
    return render_table(table, rc, results[0][0].evaluation.cv_folds), table


def _variants(rc: ReproduceConfig) -> list[float | None]:
    return ([None] if rc.non_dp else []) + list(rc.dp_epsilons)
