"""Regenerate paper 000's Table 1 (AI-training utility), paper 001's VT-GAN rows and
paper 002's Table 2 (GAFM and its baselines) over several seeds.

    python -m simulations.reproduce                       # Adult + German credit, 3 seeds
    python -m simulations.reproduce reproduce.seeds=[0] reproduce.datasets=[german_credit]
    python -m simulations.reproduce reproduce.jobs=2 evaluation.statistics=true
    python -m simulations.reproduce reproduce.datasets=[adult] reproduce.algorithms=[ctgan,vtgan] \\
        reproduce.n_parties=[2,3] reproduce.seeds=[0] reproduce.out_dir=runs/reproduce-vtgan
    python -m simulations.reproduce reproduce.datasets=[spambase] \\
        reproduce.algorithms=[gafm,marvell,maxnorm,splitnn] reproduce.out_dir=runs/reproduce-gafm

For every dataset x algorithm x seed it trains (or reuses a finished run in
``<out_dir>/<dataset>/<algorithm>/seed<k>/`` whose configuration matches), evaluates
the published table with the ``evaluation`` node (paper 000's random-forest settings
with 10-fold cross-validation, and the Frechet distance), and writes
``<out_dir>/table1.md`` (mean and spread over seeds next to the paper's numbers) and
``<out_dir>/table1.json``. Runs are independent processes, so ``reproduce.jobs`` runs
several at once.

Every algorithm's runs are configured by its own ``algorithm=<name>`` group (VT-GAN's
batch 500 and Adam 2e-4 come from ``conf/algorithm/vtgan.yaml``), then the command line's
overrides. ``ctgan`` and ``vtgan`` make paper 001's table instead (per client count
``reproduce.n_parties``, epochs ``reproduce.vtgan_epochs``, ``<out_dir>/paper001.md``; see
:mod:`~flwr_vflgan.simulations.reproduce_vtgan`).
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.config import Variant
from flwr_vflgan.runtime.party_data import all_blocks, load_full_table
from flwr_vflgan.simulations import reproduce_gafm, reproduce_vtgan
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import (
    ReproduceConfig,
    RunSpec,
    register_configs,
    to_run_spec,
)
from flwr_vflgan.simulations.outputs import json_default
from flwr_vflgan.simulations.pipeline import effective_evaluation, evaluate_run, run_experiment
from flwr_vflgan.simulations.seed_summary import dataset_name
from flwr_vflgan.simulations.seed_summary import mean_spread as _mean_spread

log = logging.getLogger(__name__)
register_configs()

SETTINGS = ("trtr", "tsts", "trts", "tstr")

# Paper 000, Table 1 (non-DP part): (accuracy, F1) per setting and the Total Difference.
PAPER_TABLE1: dict[str, dict[str, dict[str, Any]]] = {
    "adult": {
        "wgan_gp": {"trtr": (0.82, 0.72), "tsts": (0.82, 0.74), "trts": (0.81, 0.71), "tstr": (0.72, 0.69), "total": 0.17},
        "vflgan_base": {"trtr": (0.82, 0.72), "tsts": (0.81, 0.66), "trts": (0.80, 0.68), "tstr": (0.76, 0.72), "total": 0.19},
        "vflgan": {"trtr": (0.82, 0.72), "tsts": (0.82, 0.65), "trts": (0.79, 0.65), "tstr": (0.79, 0.54), "total": 0.38},
    },
    "german_credit": {
        "wgan_gp": {"trtr": (0.75, 0.67), "tsts": (0.68, 0.55), "trts": (0.67, 0.56), "tstr": (0.67, 0.53), "total": 0.60},
        "vflgan_base": {"trtr": (0.75, 0.67), "tsts": (0.72, 0.67), "trts": (0.64, 0.51), "tstr": (0.63, 0.58), "total": 0.51},
        "vflgan": {"trtr": (0.75, 0.67), "tsts": (0.77, 0.45), "trts": (0.69, 0.48), "tstr": (0.70, 0.42), "total": 0.79},
    },
}  # fmt: skip
# Paper 000, Table 1, DP part: (10, 1e-5)-DP on Adult, (10, 1e-3)-DP on Credit.
PAPER_TABLE1_DP: dict[str, dict[str, dict[str, Any]]] = {
    "adult": {
        "wgan_gp": {"trtr": (0.82, 0.72), "tsts": (0.84, 0.78), "trts": (0.82, 0.72), "tstr": (0.75, 0.71), "total": 0.16},
        "vflgan_base": {"trtr": (0.82, 0.72), "tsts": (0.82, 0.72), "trts": (0.80, 0.69), "tstr": (0.82, 0.72), "total": 0.05},
        "vflgan": {"trtr": (0.82, 0.72), "tsts": (0.83, 0.78), "trts": (0.82, 0.73), "tstr": (0.75, 0.71), "total": 0.16},
    },
    "german_credit": {
        "wgan_gp": {"trtr": (0.75, 0.67), "tsts": (0.78, 0.70), "trts": (0.74, 0.63), "tstr": (0.71, 0.63), "total": 0.19},
        "vflgan_base": {"trtr": (0.75, 0.67), "tsts": (0.66, 0.43), "trts": (0.63, 0.49), "tstr": (0.69, 0.45), "total": 0.93},
        "vflgan": {"trtr": (0.75, 0.67), "tsts": (0.72, 0.65), "trts": (0.67, 0.54), "tstr": (0.67, 0.56), "total": 0.45},
    },
}  # fmt: skip
PAPER_DP_EPSILON = 10.0
NAMES = {"wgan_gp": "WGAN-GP", "vflgan_base": "VFLGAN-base", "vflgan": "VFLGAN"}


def method_key(algorithm: str, epsilon: float | None) -> str:
    """A table row's key: the algorithm, with ``@dp<epsilon>`` for a DP row."""
    return algorithm if epsilon is None else f"{algorithm}@dp{epsilon:g}"


def _variants(rc: ReproduceConfig) -> list[float | None]:
    return ([None] if rc.non_dp else []) + list(rc.dp_epsilons)


def compose_per_algorithm(
    rc: ReproduceConfig, overrides: Sequence[str], config_name: str = "reproduce"
) -> dict[str, DictConfig]:
    """The configuration of each algorithm's runs: its ``algorithm=`` group, then ``overrides``.

    Needs an initialised Hydra (inside :func:`main`, or ``initialize_config_module``).
    """
    return {
        algorithm: compose(config_name, overrides=[*overrides, f"algorithm={algorithm}"])
        for algorithm in rc.algorithms
    }


def run_specs(configs: Mapping[str, DictConfig], rc: ReproduceConfig) -> list[RunSpec]:
    """One validated run spec per dataset x algorithm x seed (paper 001's algorithms: see
    :func:`~flwr_vflgan.simulations.reproduce_vtgan.paper001_specs`).

    ``configs`` maps each algorithm to its composed configuration
    (:func:`compose_per_algorithm`).
    """
    missing = [a for a in rc.algorithms if a not in configs]
    if missing:
        raise ValueError(f"no composed configuration for reproduce.algorithms {missing}")
    specs = []
    for dataset in rc.datasets:
        for epsilon in _variants(rc):
            for algorithm in rc.algorithms:
                cfg = configs[algorithm]
                base = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "reproduce"])
                if reproduce_vtgan.is_paper001(algorithm):
                    if epsilon is None:
                        specs += reproduce_vtgan.paper001_specs(base, rc, dataset, algorithm)
                    continue
                if reproduce_gafm.is_paper002(algorithm):
                    if epsilon is None:
                        specs += reproduce_gafm.paper002_specs(base, rc, dataset, algorithm)
                    continue
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
                                f"reproduce.dp_delta has no delta for {name}; "
                                f"set reproduce.dp_delta.{name}=..."
                            )
                        override["dp"] = {
                            "mechanism": "vflgan_gaussian",
                            "target_epsilon": epsilon,
                            "delta": float(rc.dp_delta[name]),
                        }
                    run_dir = (
                        Path(rc.out_dir)
                        / dataset_name(dataset)
                        / method_key(algorithm, epsilon).replace("@", "-")
                        / f"seed{seed}"
                    )
                    specs.append(to_run_spec(OmegaConf.merge(base, override), run_dir))
    return specs


def _identity(config: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in config.get("data", {}).items() if k != "data_dir"}
    return {"algorithm": config.get("algorithm"), "data": data, "seed": config.get("seed")}


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
    """Train (unless a matching finished run exists) and evaluate one run."""
    if spec.algorithm.is_gafm:
        return reproduce_gafm.finished(spec) or run_experiment(spec)
    metrics = finished_metrics(spec)
    if metrics is None:
        return run_experiment(spec)
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
        write_atomically(
            spec.run_dir / "metrics.json",
            lambda p: p.write_text(json.dumps(metrics, indent=2, default=json_default)),
        )
    return metrics


def summarise(results: Sequence[tuple[RunSpec, dict[str, Any]]]) -> dict[str, Any]:
    """Mean and sample standard deviation over seeds of each Table 1 cell and the FD."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for spec, metrics in results:
        dp = spec.algorithm.dp
        epsilon = dp.target_epsilon if dp.enabled else None
        key = (dataset_name(spec.data.source), method_key(spec.algorithm.variant.value, epsilon))
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
        *(
            [
                "DP rows: DP-VFLGAN's first-layer Gaussian mechanism (paper 000 eqs. 20-21), "
                "noise calibrated to the budget; the last epoch's generators are published "
                "(docs/privacy.md). *spent* is the largest epsilon any party spent. Its "
                "guarantee is `first_layer`, the paper's argument: the shared discriminator, "
                "the later discriminator layers and the encoders read real rows un-noised.",
                "",
            ]
            if rc.dp_epsilons
            else []
        ),
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
        for epsilon in _variants(rc):
            for algorithm in rc.algorithms:
                key = method_key(algorithm, epsilon)
                if key not in methods:
                    continue
                lines += _method_rows(dataset, algorithm, epsilon, methods[key], rc)
        lines.append("")
    return "\n".join(lines)


def _method_rows(
    dataset: str, algorithm: str, epsilon: float | None, c: dict[str, Any], rc: ReproduceConfig
) -> list[str]:
    """Our row for one method and, where the paper has one, the paper's row."""
    cells = [_cell(c[f"{s}_{m}"]) for s in SETTINGS for m in ("accuracy", "f1")]
    name = NAMES[algorithm]
    if epsilon is not None:
        delta = rc.dp_delta.get(dataset)
        spent = c.get("epsilon_spent")
        name = f"DP-{name} (ε={epsilon:g}, δ={delta:g}" + (
            f"; spent ≤ {spent:.2f})" if spent is not None else ")"
        )
    lines = [
        f"| {name} | "
        + " | ".join(cells)
        + f" | {_cell(c['total_difference'])} | {_cell(c['fd'])} |"
    ]
    if epsilon is None:
        paper = PAPER_TABLE1.get(dataset, {}).get(algorithm)
    elif epsilon == PAPER_DP_EPSILON:
        paper = PAPER_TABLE1_DP.get(dataset, {}).get(algorithm)
    else:
        paper = None
    if paper:
        published = [f"{paper[s][i]:.2f}" for s in SETTINGS for i in (0, 1)]
        lines.append("| *paper* | " + " | ".join(published) + f" | {paper['total']:.2f} | - |")
    return lines


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="reproduce", version_base=None)
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    raw = OmegaConf.to_container(cfg.reproduce, resolve=True)
    assert isinstance(raw, dict)
    rc = ReproduceConfig(**{str(k): v for k, v in raw.items()})
    hydra_config = HydraConfig.get()
    configs = compose_per_algorithm(
        rc, list(hydra_config.overrides.task), hydra_config.job.config_name or "reproduce"
    )
    specs = run_specs(configs, rc)
    print(f"reproduce: {len(specs)} runs into {rc.out_dir} ({rc.jobs} at a time)", flush=True)
    results: list[tuple[RunSpec, dict[str, Any]]] = []
    if rc.jobs == 1:
        for spec in specs:
            results.append((spec, _announce(spec, run_one(spec))))
    else:
        with ProcessPoolExecutor(rc.jobs, mp_context=get_context("spawn")) as pool:
            for spec, metrics in zip(specs, pool.map(run_one, specs), strict=True):
                results.append((spec, _announce(spec, metrics)))
    paper000 = [
        r
        for r in results
        if not reproduce_vtgan.is_paper001(r[0].algorithm.variant) and not r[0].algorithm.is_gafm
    ]
    if paper000:
        table = summarise(paper000)
        text = render_table(table, rc, paper000[0][0].evaluation.cv_folds)
        _write_table(Path(rc.out_dir), "table1", text, table)
    paper001 = []
    for spec, metrics in results:
        if spec.algorithm.variant is Variant.CTGAN:
            paper001 += reproduce_vtgan.centralized_rows(spec, metrics, rc.n_parties)
        elif spec.algorithm.variant is Variant.VTGAN:
            paper001.append((spec, metrics))
    if paper001:
        table = reproduce_vtgan.summarise(paper001)
        text = reproduce_vtgan.render(table, rc, paper001[0][0].evaluation)
        _write_table(Path(rc.out_dir), "paper001", text, table)
    paper002 = [r for r in results if r[0].algorithm.is_gafm]
    if paper002:
        table = reproduce_gafm.summarise(paper002)
        _write_table(Path(rc.out_dir), "paper002", reproduce_gafm.render(table), table)


def _write_table(out: Path, name: str, text: str, table: dict[str, Any]) -> None:
    write_atomically(out / f"{name}.md", lambda p: p.write_text(text))
    write_atomically(
        out / f"{name}.json",
        lambda p: p.write_text(json.dumps(table, indent=2, default=json_default)),
    )
    print(text, flush=True)
    print(f"wrote {out / name}.md and {name}.json", flush=True)


def _announce(spec: RunSpec, metrics: dict[str, Any]) -> dict[str, Any]:
    if spec.algorithm.is_gafm:
        print(reproduce_gafm.announce(spec, metrics), flush=True)
        return metrics
    if reproduce_vtgan.is_paper001(spec.algorithm.variant):
        print(reproduce_vtgan.announce(spec, metrics), flush=True)
        return metrics
    evaluation = metrics.get("evaluation", {})
    utility = evaluation.get("ai_utility", {})
    if "ai_utility" in evaluation.get("skipped", {}):
        print(
            f"warning: no Table 1 metrics for {spec.run_dir}: {evaluation['skipped']['ai_utility']}"
        )
    print(
        f"{spec.data.source:14s} {spec.algorithm.variant.value:12s} seed {spec.seed}: "
        f"FD {metrics.get('fd', math.nan):.4f}  Total Difference {utility.get('total_difference', math.nan):.3f}",
        flush=True,
    )
    return metrics


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.reproduce", main))
