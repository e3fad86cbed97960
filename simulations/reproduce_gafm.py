"""Paper 002's rows of ``python -m simulations.reproduce``: GAFM next to Marvell, Max Norm
and vanilla split learning on Spambase, in the two-party setting (Table 2: one
non-label party, ``F`` the identity) and with three non-label parties (Table C.1, ``F``
the average).

    python -m simulations.reproduce reproduce.datasets=[spambase] \\
        reproduce.algorithms=[gafm,marvell,maxnorm,splitnn] reproduce.out_dir=runs/reproduce-gafm

Each (method, party count) is one run of ``gafm.repetitions`` seeds (10 by default,
starting at the first of ``reproduce.seeds``) in
``<out_dir>/<dataset>/<method>-<n>party/``; a finished run of the same configuration is
reused. ``<out_dir>/paper002.md`` and ``paper002.json`` hold the table, with the paper's
numbers under each row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.config import Variant
from flwr_vflgan.evaluation.plots import pyplot, save_figure
from flwr_vflgan.gafm.attacks import ATTACKS
from flwr_vflgan.gafm.paper import paper_cells, paper_row
from flwr_vflgan.simulations.config import ReproduceConfig, RunSpec, to_run_spec
from flwr_vflgan.simulations.gafm_pipeline import HEADER, NOTE, run_gafm
from flwr_vflgan.simulations.seed_summary import dataset_name

PAPER002_ALGORITHMS = (
    Variant.GAFM.value,
    Variant.MARVELL.value,
    Variant.MAXNORM.value,
    Variant.SPLITNN.value,
)
NAMES = {
    "gafm": "GAFM",
    "gafm-gan_only": "GAN-only",
    "gafm-ce_only": "CE-only",
    "marvell": "Marvell",
    "maxnorm": "Max Norm",
    "splitnn": "Vanilla",
}
"""The table's methods in its order: GAFM, its ablations (``reproduce.gafm_ablations``),
then the baselines."""
ABLATIONS = ("gan_only", "ce_only")


def method_key(spec: RunSpec) -> str:
    """A run's method in the table: its variant, and GAFM's ablation if any."""
    ablation = spec.algorithm.gafm.ablation
    return spec.algorithm.variant.value + (f"-{ablation}" if ablation else "")


def is_paper002(algorithm: str) -> bool:
    """Whether the algorithm's rows belong to paper 002's table."""
    return algorithm in PAPER002_ALGORITHMS


def paper002_specs(
    base: DictConfig, rc: ReproduceConfig, dataset: str, algorithm: str
) -> list[RunSpec]:
    """One run per non-label party count of ``reproduce.gafm_parties`` (each run holds all
    its seeds); for ``gafm`` with ``reproduce.gafm_ablations`` also its GAN-only and
    CE-only runs."""
    ablations: tuple[str | None, ...] = (None,)
    if algorithm == Variant.GAFM.value and rc.gafm_ablations:
        ablations = (None, *ABLATIONS)
    specs = []
    for n_parties in rc.gafm_parties:
        for ablation in ablations:
            override: dict[str, Any] = {
                "seed": rc.seeds[0],
                "algorithm": {"variant": algorithm},
                "dataset": {"source": dataset},
                "partition": {"n_parties": n_parties},
            }
            if ablation is not None:
                override["gafm"] = {"ablation": ablation}
            spec = to_run_spec(OmegaConf.merge(base, override), Path(rc.out_dir))
            suffix = "party" if n_parties == 1 else "parties"
            name = f"{method_key(spec)}-{n_parties}{suffix}"
            specs.append(replace(spec, run_dir=Path(rc.out_dir) / dataset_name(dataset) / name))
    return specs


def finished(spec: RunSpec) -> dict[str, Any] | None:
    """The metrics of a finished run of exactly this configuration, else ``None``."""
    metrics_path, config_path = spec.run_dir / "metrics.json", spec.run_dir / "config.json"
    if not (metrics_path.exists() and config_path.exists()):
        return None
    saved = json.loads(config_path.read_text())
    wanted = json.loads(json.dumps({"algorithm": spec.algorithm.to_dict(), "seed": spec.seed}))
    data = {k: v for k, v in saved.get("data", {}).items() if k not in ("data_dir", "file")}
    want_data = {
        k: v for k, v in json.loads(spec.data.to_json()).items() if k not in ("data_dir", "file")
    }
    if (
        saved.get("algorithm") != wanted["algorithm"]
        or saved.get("seed") != spec.seed
        or data != want_data
    ):
        return None
    metrics: dict[str, Any] = json.loads(metrics_path.read_text())
    if set(metrics.get("summary", {}).get("leak_auc", {})) != set(ATTACKS):
        return None  # written before an attack was added: train again
    return metrics


def announce(spec: RunSpec, metrics: dict[str, Any]) -> str:
    """One line per finished run."""
    s = metrics["summary"]
    leak = s["leak_auc"]
    return (
        f"{spec.data.source:10s} {spec.algorithm.variant.value:8s} {spec.data.n_parties} non-label "
        f"part{'y' if spec.data.n_parties == 1 else 'ies'}, {s['repetitions']} seeds: test AUC "
        f"{s['test_auc']['mean']:.3f}  leak norm {leak['norm']['mean']:.3f} mean "
        f"{leak['mean']['mean']:.3f} median {leak['median']['mean']:.3f}"
    )


def summarise(results: Sequence[tuple[RunSpec, dict[str, Any]]]) -> dict[str, Any]:
    """``{dataset: {n_parties: {method: {"ours": summary, "paper": row}}}}``."""
    table: dict[str, Any] = {}
    for spec, metrics in results:
        cell = table.setdefault(dataset_name(spec.data.source), {}).setdefault(
            str(spec.data.n_parties), {}
        )
        key = method_key(spec)
        cell[key] = {
            "ours": metrics["summary"],
            # An ablation is not one of Table 2's rows.
            "paper": None
            if spec.algorithm.gafm.ablation
            else paper_row(
                dataset_name(spec.data.source), spec.algorithm.variant.value, spec.data.n_parties
            ),
            "run_dir": str(spec.run_dir),
        }
    return table


def _pm(stat: dict[str, float]) -> str:
    return f"{stat['mean']:.2f} ± {stat['std']:.2f}"


def render(table: dict[str, Any]) -> str:
    """Markdown: Table 2's columns per dataset and party count, the paper's row under ours."""
    lines = [
        "# Paper 002: utility and label leakage of split classification",
        "",
        "Test AUC over the seeds (mean, worst, best) and leak AUC (eq. 10, flipped; mean ± std over "
        "the seeds) of the norm, cosine, mean and median attacks on the gradients the non-label "
        "parties received in the last epoch. Paper rows: Table 2 (one non-label party) and Table C.1 "
        "(three; it gives the AUC as mean ± std).",
        "",
        NOTE,
    ]
    for dataset, by_count in table.items():
        for count, methods in sorted(by_count.items(), key=lambda kv: int(kv[0])):
            n = int(count)
            setting = (
                "two-party (one non-label party, F = identity)"
                if n == 1
                else f"{n} non-label parties"
            )
            lines += [
                "",
                f"## {dataset}, {setting}",
                "",
                f"| method | | Avg. AUC | Worst AUC | Best AUC | {HEADER} |",
                "|---|---|---|---|---|" + "---|" * len(ATTACKS),
            ]
            for method in NAMES:
                if method not in methods:
                    continue
                ours, paper = methods[method]["ours"], methods[method]["paper"]
                auc = ours["test_auc"]
                lines.append(
                    f"| {NAMES[method]} | ours ({ours['repetitions']} seeds) | {auc['mean']:.2f} | "
                    f"{auc['worst']:.2f} | {auc['best']:.2f} | "
                    + " | ".join(_pm(ours["leak_auc"][a]) for a in ATTACKS)
                    + " |"
                )
                if paper:
                    avg = f"{paper['auc']:.2f}" + (
                        f" ± {paper['auc_std']:.2f}" if "auc_std" in paper else ""
                    )
                    lines.append(
                        f"| | paper | {avg} | {paper.get('worst', '-')} | {paper.get('best', '-')} | "
                        + " | ".join(paper_cells(paper, ATTACKS))
                        + " |"
                    )
    return "\n".join(lines) + "\n"


TABLE = "paper002"


def specs(
    base: DictConfig, rc: ReproduceConfig, dataset: str, algorithm: str, epsilon: float | None
) -> list[RunSpec]:
    """Paper 002's runs (:func:`paper002_specs`); it has no DP rows."""
    return paper002_specs(base, rc, dataset, algorithm) if epsilon is None else []


def run_one(spec: RunSpec) -> dict[str, Any]:
    """A finished run of the same configuration, else a new one."""
    return finished(spec) or run_gafm(spec)


def write(
    results: Sequence[tuple[RunSpec, dict[str, Any]]], rc: ReproduceConfig
) -> tuple[str, dict[str, Any]]:
    """Paper 002's table: markdown and JSON; with GAFM's ablations among the results, also
    Figure 3 (``paper002_figure3.png`` in ``reproduce.out_dir``)."""
    table = summarise(results)
    text = render(table)
    if any(spec.algorithm.gafm.ablation for spec, _ in results):
        path = plot_figure3(table, Path(rc.out_dir) / "paper002_figure3.png")
        text += f"\n![Figure 3: test AUC against leak AUC]({path.name})\n"
    return text, table


def plot_figure3(table: dict[str, Any], path: Path) -> Path:
    """Paper 002's Figure 3: each method's mean test AUC against its mean leak AUC (the
    mean attack, eq. 10), one panel per dataset and party count."""
    panels = [
        (dataset, count, methods)
        for dataset, by_count in table.items()
        for count, methods in sorted(by_count.items(), key=lambda kv: int(kv[0]))
    ]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, (dataset, count, methods) in zip(axes[0], panels, strict=True):
        for method, cell in methods.items():
            ours = cell["ours"]
            x, y = ours["leak_auc"]["mean"]["mean"], ours["test_auc"]["mean"]
            ax.scatter([x], [y], s=40)
            ax.annotate(
                NAMES.get(method, method), (x, y), textcoords="offset points", xytext=(4, 4)
            )
        ax.set_xlabel("leak AUC (mean attack)")
        ax.set_ylabel("test AUC")
        ax.set_title(f"{dataset}, {count} non-label part{'y' if count == '1' else 'ies'}")
    return save_figure(fig, path)
