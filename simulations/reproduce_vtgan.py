"""Paper 001's rows of ``python -m simulations.reproduce``: VT-GAN next to its centralized
CTGAN baseline, per number of clients.

    python -m simulations.reproduce reproduce.datasets=[adult] reproduce.algorithms=[ctgan,vtgan] \\
        reproduce.n_parties=[2,3] reproduce.seeds=[0] reproduce.out_dir=runs/reproduce-vtgan

VT-GAN trains once per client count and seed, in
``<out_dir>/<dataset>/vtgan-<partition>-<n>parties/seed<k>/`` (``partition`` is paper 001's
``D^{n3}_{n4} G^{n1}_{n2}`` as ``D2_0-G0_2``); CTGAN, which has no clients, trains once per
seed in ``<out_dir>/<dataset>/ctgan/seed<k>/`` (its own run's report uses the split of
``partition.n_parties``, 2 by default). Both are evaluated with paper 001's groups
(``statistics`` and ``ml_efficacy`` on, paper 000's 10-fold ``ai_utility`` off). The table
lists CTGAN under every client count, with its Avg-/Across-client association differences
recomputed on that count's split, so each VT-GAN row sits next to a baseline measured the
same way. ``<out_dir>/paper001.md`` and ``paper001.json`` hold the table.

Paper 001 publishes figures, not tables: its one number in the text (Section 4.3.1) is
that ``D^2_0 G^2_0`` reaches an F1-score only 2.7% lower than the centralized method
(mean over five datasets, two clients, 300 epochs). That is the only paper reference the
table carries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.config import Variant
from flwr_vflgan.evaluation import EvaluationConfig
from flwr_vflgan.metrics.similarity import association_difference
from flwr_vflgan.runtime.party_data import load_full_table, split_columns
from flwr_vflgan.simulations import reproduce_vflgan
from flwr_vflgan.simulations.config import ReproduceConfig, RunSpec, to_run_spec
from flwr_vflgan.simulations.seed_summary import dataset_name, mean_spread

PAPER001_ALGORITHMS = (Variant.CTGAN.value, Variant.VTGAN.value)
"""The algorithms whose rows this module builds (the rest are paper 000's Table 1)."""

EVALUATION = {"statistics": True, "ml_efficacy": True, "ai_utility": False}
"""Paper 001's metric groups, switched on whatever the ``evaluation`` node says; paper 000's
random-forest utility is switched off (with reproduce's 10-fold CV it costs minutes per run
and is not a paper 001 metric)."""

STATISTICS = ("avg_jsd", "avg_wd", "diff_corr", "diff_corr_avg_client", "diff_corr_across_client")
UTILITY = ("accuracy_difference", "f1_difference", "auc_difference")
ASSOCIATION = {"diff_corr_avg_client": "avg_client", "diff_corr_across_client": "across_client"}
"""The statistics keys that depend on the split, and their :func:`association_difference` keys."""

PAPER_F1_GAP = 0.027
"""Paper 001, Section 4.3.1: ``D^2_0 G^2_0``'s F1-score is only 2.7% lower than centralized."""


def is_paper001(algorithm: str) -> bool:
    """Whether the algorithm's rows belong to paper 001's table."""
    return algorithm in PAPER001_ALGORITHMS


def paper001_specs(
    base: DictConfig, rc: ReproduceConfig, dataset: str, algorithm: str
) -> list[RunSpec]:
    """The runs of one paper 001 algorithm on one dataset: per client count and seed for
    VT-GAN, per seed for CTGAN (whose own run keeps ``partition.n_parties``: the table
    measures it on every count's split, see :func:`centralized_rows`, so changing
    ``reproduce.n_parties`` never trains it again).

    ``base`` is the composed configuration with ``algorithm=<algorithm>`` chosen, so the
    group's training settings (batch 500, Adam 2e-4, ...) and the user's overrides apply.
    """
    counts: list[int | None] = [None] if algorithm == Variant.CTGAN.value else list(rc.n_parties)
    name = dataset_name(dataset)
    specs = []
    for n_parties in counts:
        for seed in rc.seeds:
            override: dict[str, Any] = {
                "seed": seed,
                "algorithm": {"variant": algorithm},
                "dataset": {"source": dataset},
                "evaluation": dict(EVALUATION),
            }
            if n_parties is not None:
                override["partition"] = {"n_parties": n_parties}
            if name in rc.vtgan_epochs:
                override["train"] = {"epochs": int(rc.vtgan_epochs[name])}
            spec = to_run_spec(OmegaConf.merge(base, override), Path(rc.out_dir))
            run_dir = Path(rc.out_dir) / name / method_directory(spec) / f"seed{seed}"
            specs.append(replace(spec, run_dir=run_dir))
    return specs


def method_directory(spec: RunSpec) -> str:
    """``ctgan``, or ``vtgan-<partition>-<n>parties`` (``vtgan-D2_0-G0_2-3parties``)."""
    if spec.algorithm.variant is Variant.CTGAN:
        return Variant.CTGAN.value
    partition = spec.algorithm.vtgan.partition_name
    return f"{spec.algorithm.variant.value}-{partition}-{spec.data.n_parties}parties"


def with_association(metrics: dict[str, Any], association: dict[str, float]) -> dict[str, Any]:
    """A copy of ``metrics`` whose Avg-/Across-client differences are ``association``'s."""
    evaluation = dict(metrics.get("evaluation", {}))
    statistics = dict(evaluation.get("statistics", {}))
    for key, source in ASSOCIATION.items():
        statistics[key] = association.get(source)
    evaluation["statistics"] = statistics
    return {**metrics, "evaluation": evaluation}


def centralized_rows(
    spec: RunSpec, metrics: dict[str, Any], n_parties: Sequence[int]
) -> list[tuple[RunSpec, dict[str, Any]]]:
    """CTGAN's run once per client count: the spec with that count and the metrics with
    the association differences measured on that count's split of the published table.

    The run's own split keeps its stored numbers; another count reads ``synthetic.csv``
    and the real table again (about a second each on Adult).
    """
    rows = []
    table: tuple[Any, pd.DataFrame] | None = None
    for count in n_parties:
        data = replace(spec.data, n_parties=count)
        if count == spec.data.n_parties:
            rows.append((replace(spec, data=data), metrics))
            continue
        if table is None:
            real = load_full_table(spec.data)[0]
            table = (real, pd.read_csv(spec.run_dir / "synthetic.csv"))
        real, synthetic = table
        parties = split_columns(data, real.schema)
        association = association_difference(real.frame, synthetic, real.schema, parties)
        rows.append((replace(spec, data=data), with_association(metrics, association)))
    return rows


def summarise(results: Sequence[tuple[RunSpec, dict[str, Any]]]) -> dict[str, Any]:
    """Mean and sample standard deviation over seeds, per dataset, client count and method.

    Returns ``{dataset: {"<n>": {algorithm: cells}}}``; CTGAN's entries come from
    :func:`centralized_rows` (one spec per client count).
    """
    grouped: dict[tuple[str, int, str], list[tuple[RunSpec, dict[str, Any]]]] = {}
    for spec, metrics in results:
        group = (dataset_name(spec.data.source), spec.data.n_parties, spec.algorithm.variant.value)
        grouped.setdefault(group, []).append((spec, metrics))
    table: dict[str, Any] = {}
    # Datasets in the order they ran, client counts ascending within each.
    for (dataset, n_parties, algorithm), runs in sorted(grouped.items(), key=lambda g: g[0][1]):
        evaluations = [m.get("evaluation", {}) for _, m in runs]
        spec = runs[0][0]
        cells: dict[str, Any] = {
            "seeds": [m.get("seed") for _, m in runs],
            "epochs": spec.algorithm.train.epochs,
            "partition": (
                paper_notation(spec) if spec.algorithm.variant is Variant.VTGAN else None
            ),
        }
        for name, keys in (("statistics", STATISTICS), ("ml_efficacy", UTILITY)):
            for key in keys:
                cells[key] = mean_spread([e.get(name, {}).get(key) for e in evaluations])
        cells["train_seconds"] = mean_spread([m.get("wall_seconds") for _, m in runs])
        cells["evaluation_seconds"] = mean_spread(
            [sum(e.get("seconds", {}).values()) for e in evaluations]
        )
        cells["final_cond_loss"] = mean_spread(
            [(m.get("history") or [{}])[-1].get("cond_loss") for _, m in runs]
        )
        table.setdefault(dataset, {}).setdefault(str(n_parties), {})[algorithm] = cells
    return table


def paper_notation(spec: RunSpec) -> str:
    """VT-GAN's network partition as paper 001 writes it: ``D^2_0 G^0_2``."""
    v = spec.algorithm.vtgan
    return f"D^{v.d_server_blocks}_{v.d_client_blocks} G^{v.g_server_blocks}_{v.g_client_blocks}"


def _cell(value: tuple[float, float], digits: int = 3) -> str:
    mean, spread = value
    return "-" if math.isnan(mean) else f"{mean:.{digits}f} ± {spread:.{digits}f}"


def _method_name(algorithm: str, cells: dict[str, Any]) -> str:
    if algorithm == Variant.CTGAN.value:
        return "CTGAN (centralized)"
    return f"VT-GAN {cells['partition']}"


HEADER = (
    "| Method | Clients | Avg JSD | Avg WD | Diff. Corr. | Avg-client | Across-client "
    "| Acc. diff | F1 diff | AUC diff | Train (min) |"
)


def render(table: dict[str, Any], rc: ReproduceConfig, evaluation: EvaluationConfig) -> str:
    """Markdown: per dataset, per client count, CTGAN's row then VT-GAN's, and the notes.

    ``evaluation`` is the runs' evaluation configuration (the classifiers and the test
    share named in the notes).
    """
    lines = [
        "# Paper 001: VT-GAN next to its centralized baseline",
        "",
        _legend(rc, evaluation),
        "",
    ]
    for dataset, counts in table.items():
        lines += _dataset_rows(dataset, counts)
    lines += [
        "*Paper 001* publishes figures only. Its one number in the text (Section 4.3.1, "
        "mean over five datasets, two clients, 300 epochs): D^2_0 G^2_0 reaches an F1-score "
        f"only {PAPER_F1_GAP:.1%} lower than the centralized method.",
        "",
    ]
    return "\n".join(lines)


def _legend(rc: ReproduceConfig, evaluation: EvaluationConfig) -> str:
    seeds = list(rc.seeds)
    classifiers = ", ".join(c.replace("_", " ") for c in evaluation.classifiers)
    return (
        f"Mean ± sample standard deviation over seeds {seeds}"
        + (" (one seed: ± 0.000 is no measured spread)" if len(seeds) == 1 else "")
        + ". Lower is better in every column. Statistical similarity (paper 001 Section "
        "4.2.2): mean Jensen-Shannon divergence over categorical columns, mean Wasserstein "
        "distance over numeric ones (min-max scaled), and the Frobenius norm of the "
        "association-matrix difference over all columns, within each client (Avg-client) "
        "and across clients (Across-client). ML utility (Section 4.2.1): real-trained minus "
        f"synthetic-trained accuracy, macro F1 and AUC, averaged over the classifiers "
        f"({classifiers}), tested on a stratified {evaluation.holdout_fraction:.0%} of the "
        "real table (which the generators trained on too; paper 001 holds it out). CTGAN "
        "has no clients: it is trained once per seed and listed under every client count, "
        "its Avg-/Across-client measured on that count's split. Train: training wall time "
        "(evaluation excluded)."
    )


def _dataset_rows(dataset: str, counts: dict[str, dict[str, Any]]) -> list[str]:
    """One dataset's table and the F1 gap of VT-GAN to CTGAN per client count."""
    epochs = sorted({c["epochs"] for methods in counts.values() for c in methods.values()})
    lines = [
        f"## {dataset} ({', '.join(str(e) for e in epochs)} epochs)",
        "",
        HEADER,
        "|" + "---|" * 11,
    ]
    gaps = []
    for count, methods in counts.items():
        for algorithm in PAPER001_ALGORITHMS:
            if algorithm in methods:
                lines.append(_row(algorithm, count, methods[algorithm]))
        if all(a in methods for a in PAPER001_ALGORITHMS):
            vertical, central = (methods[a]["f1_difference"][0] for a in ("vtgan", "ctgan"))
            gaps.append(f"{count} clients {vertical - central:+.3f}")
    lines.append("")
    if gaps:
        lines += [
            "F1 difference of VT-GAN minus CTGAN's (how much lower VT-GAN's synthetic "
            f"data scores than the centralized baseline's): {', '.join(gaps)}.",
            "",
        ]
    return lines


def _row(algorithm: str, count: str, cells: dict[str, Any]) -> str:
    numbers = [_cell(cells[k]) for k in (*STATISTICS, *UTILITY)]
    minutes = tuple(v / 60 for v in cells["train_seconds"])
    return (
        f"| {_method_name(algorithm, cells)} | {count} | "
        + " | ".join(numbers)
        + f" | {_cell((minutes[0], minutes[1]), 1)} |"
    )


def announce(spec: RunSpec, metrics: dict[str, Any]) -> str:
    """One progress line of a finished paper 001 run."""
    evaluation = metrics.get("evaluation", {})
    statistics, utility = evaluation.get("statistics", {}), evaluation.get("ml_efficacy", {})

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    return (
        f"{spec.data.source:14s} {method_directory(spec):24s} seed {spec.seed}: "
        f"avg_jsd {number(statistics.get('avg_jsd'))}  "
        f"diff_corr {number(statistics.get('diff_corr'))}  "
        f"f1_difference {number(utility.get('f1_difference'))}  "
        f"train {metrics.get('wall_seconds', 0.0) / 60:.1f} min"
    )


TABLE = "paper001"


def specs(
    base: DictConfig, rc: ReproduceConfig, dataset: str, algorithm: str, epsilon: float | None
) -> list[RunSpec]:
    """Paper 001's runs (:func:`paper001_specs`); it has no DP rows."""
    return paper001_specs(base, rc, dataset, algorithm) if epsilon is None else []


def run_one(spec: RunSpec) -> dict[str, Any]:
    """A finished run of the same configuration (evaluated again if the evaluation settings
    changed), else a new one: as the VFLGAN family's reproduction does it."""
    return reproduce_vflgan.run_one(spec)


def rows(
    spec: RunSpec, metrics: dict[str, Any], rc: ReproduceConfig
) -> list[tuple[RunSpec, dict[str, Any]]]:
    """A VT-GAN run is one row; CTGAN's is one per client count (:func:`centralized_rows`)."""
    if spec.algorithm.variant is Variant.CTGAN:
        return centralized_rows(spec, metrics, rc.n_parties)
    return [(spec, metrics)]


def write(
    results: Sequence[tuple[RunSpec, dict[str, Any]]], rc: ReproduceConfig
) -> tuple[str, dict[str, Any]]:
    """Paper 001's table: markdown and JSON."""
    table = summarise(results)
    return render(table, rc, results[0][0].evaluation), table
