"""Run split classification (GAFM and its baselines) from a validated RunSpec.

The label party (this process, the ServerApp) takes the labels from its own
configuration: the label column of the dataset spec in simulation, ``gafm.labels_path``
in a deployment. Writes ``metrics.json`` (every seed, the summary, the history),
``report.md`` (Table 2's columns next to the paper's numbers where it has them) and
``config.json``, each atomically.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from flwr.serverapp import Grid

from flwr_vflgan.gafm.config import Method
from flwr_vflgan.gafm.data import labels_file, spec_labels
from flwr_vflgan.gafm.paper import paper_cells, paper_row
from flwr_vflgan.gafm.plots import plot_gradients, trace_frame
from flwr_vflgan.gafm.training import ATTACKS, TRACE_ROWS
from flwr_vflgan.strategies.gafm import GAFMResult, GAFMStrategy

from .config import RunSpec
from .launch import start_on_runtime, strategy_settings
from .outputs import holding_run, json_default, published_outputs


def run_gafm(
    spec: RunSpec,
    *,
    grid: Grid | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    observer: Callable | None = None,
) -> dict[str, Any]:
    """GAFM's family ``run``: train every repetition over the chosen runtime and write the
    run directory, which it holds throughout; returns what ``metrics.json`` holds."""
    with holding_run(spec):
        return _run_gafm(spec, grid, progress, observer)


def _run_gafm(
    spec: RunSpec,
    grid: Grid | None,
    progress: Callable[[dict[str, Any]], None] | None,
    observer: Callable | None,
) -> dict[str, Any]:
    settings = spec.algorithm.gafm
    labels, ids, label = _labels(spec)
    strategy = GAFMStrategy(
        Method(spec.algorithm.variant.value),
        settings,
        labels=labels,
        label_ids=ids,
        label=label,
        checkpoint_dir=spec.run_dir / "checkpoints" if spec.output.checkpoint else None,
        **strategy_settings(spec, progress),
    )
    result = start_on_runtime(strategy, spec, grid=grid, observer=observer)
    metrics = {
        "algorithm": spec.algorithm.variant.value,
        "dataset": spec.data.source,
        "runtime": spec.runtime.kind,
        "n_parties": spec.data.n_parties,
        "cut": settings.combine(spec.data.n_parties),
        "seed": spec.seed,
        "label": label,
        "positive_label": result.extra["positive_label"],
        "positive_rate": result.positive_rate,
        "rows": result.n_rows,
        "exchanges": result.exchanges,
        "resumed_repetitions": result.extra["resumed_repetitions"],
        "wall_seconds": result.wall_seconds,
        "summary": result.summary,
        "ablation": settings.ablation,
        # An ablation is not Table 2's GAFM: no paper row beside it.
        "paper": None
        if settings.ablation
        else paper_row(spec.data.source, result.method, spec.data.n_parties),
        "repetitions": [r.to_dict() for r in result.repetitions],
    }
    config = {
        "algorithm": spec.algorithm.to_dict(),
        "data": json.loads(spec.data.to_json()),
        "runtime": asdict(spec.runtime),
        "seed": spec.seed,
    }
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    with published_outputs(spec.run_dir) as out:
        # The staging folder is this run's alone and moves in whole: plain writes suffice.
        (out / "config.json").write_text(json.dumps(config, indent=2))
        traced = _write_gradients(out, spec, result)
        (out / "report.md").write_text(report(spec, result, metrics, traced))
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=json_default))
    return metrics


def _write_gradients(out: Path, spec: RunSpec, result: GAFMResult) -> int | None:
    """Paper 002's Figure 2 for the first repetition that traced its last epoch (one
    restored from a checkpoint did not): ``gradients.csv`` and, with plots on,
    ``gradients.png``. Returns that repetition's seed, or ``None``."""
    traced = next((r for r in result.repetitions if r.gradient_trace is not None), None)
    if traced is None or traced.gradient_trace is None:
        return None
    trace_frame(traced.gradient_trace).to_csv(out / "gradients.csv", index=False)
    if spec.evaluation.plots:
        title = f"{result.method} on {spec.data.source}, seed {traced.seed}: last epoch"
        plot_gradients(traced.gradient_trace, out / "gradients.png", title)
    return traced.seed


def _labels(spec: RunSpec) -> tuple[Any, Any, str]:
    """The label party's labels, row IDs and label name: ``gafm.labels_path`` if set,
    else (in simulation) the label column of the dataset spec."""
    if spec.algorithm.gafm.labels_path:
        return labels_file(spec.algorithm.gafm.labels_path)
    if spec.runtime.kind == "deployment":
        raise ValueError(
            "runtime=deployment: the label party reads its labels from gafm.labels_path (a CSV "
            "of row ID and label); the parties' files must not contain the label"
        )
    return spec_labels(spec.data)


HEADER = "Norm | Cosine | Mean | Median (eq. 9) | Median split"
"""Column names of the attacks, in :data:`ATTACKS` order."""
NOTE = (
    'The paper\'s "Median Attack" numbers come from its reference code, which splits each '
    "batch at its median gradient: they sit under *Median split*; eq. 9's class-median "
    "attack and the cosine attack have no paper column."
)


def _pm(stat: dict[str, float]) -> str:
    return f"{stat['mean']:.3f} ± {stat['std']:.3f}"


def report(
    spec: RunSpec, result: GAFMResult, metrics: dict[str, Any], traced: int | None = None
) -> str:
    """``report.md``: the run, Table 2's columns, the paper's row, every seed, and (when a
    repetition was traced) the prediction-against-gradient figure."""
    lines = _run_rows(spec, result, metrics) + _summary_rows(spec, result, metrics)
    lines += _seed_rows(spec, result)
    if traced is not None:
        lines += [
            "",
            "## Prediction against gradient (paper 002, Figure 2)",
            "",
            f"Seed {traced}, the last epoch's last {TRACE_ROWS:,} rows at most: each row's "
            "prediction and the gradient its non-label party (party 0) received, summed over "
            "the cut"
            + (
                "; then the GAN and CE terms that add up to it"
                if result.method == "gafm" and not spec.algorithm.gafm.marvell
                else ""
            )
            + ". Crosses mark the class centres. Rows in `gradients.csv`.",
            "",
            *(["![gradients](gradients.png)"] if spec.evaluation.plots else []),
        ]
    return "\n".join(lines) + "\n"


def _run_rows(spec: RunSpec, result: GAFMResult, metrics: dict[str, Any]) -> list[str]:
    """The heading and the table that describes the run."""
    settings = spec.algorithm.gafm
    lines = [
        f"# {result.method} on {spec.data.source}",
        "",
        "| run | |",
        "|---|---|",
        f"| algorithm | {result.method} |",
        f"| dataset | {spec.data.source} ({result.n_rows} rows, positive rate {result.positive_rate:.3f}, label {metrics['label']!r} = {metrics['positive_label']!r}) |",
        f"| parties | label party + {spec.data.n_parties} non-label part{'y' if spec.data.n_parties == 1 else 'ies'}, F = {metrics['cut']} |",
        f"| runtime | {spec.runtime.kind}, {result.exchanges} exchanges, {result.wall_seconds:.0f} s |",
        f"| schedule | {settings.epochs} epochs, batch {settings.batch_size}, test fraction {settings.test_fraction} |",
    ]
    if result.method == "gafm":
        lines.append(
            f"| GAFM | gamma {settings.gamma}, Delta {settings.delta}, sigma {settings.sigma}, clip {settings.clip}"
            + (", + Marvell (G-M)" if settings.marvell else "")
            + (f", ablation {settings.ablation} (paper 002, Figure 3)" if settings.ablation else "")
            + " |"
        )
    if result.method == "marvell" or (result.method == "gafm" and settings.marvell):
        lines.append(
            f"| Marvell | power scale {settings.marvell_scale}, covariance model {settings.marvell_uv} |"
        )
    return lines


def _summary_rows(spec: RunSpec, result: GAFMResult, metrics: dict[str, Any]) -> list[str]:
    """Table 2's columns over the seeds, the paper's row under ours, the train AUC."""
    s = result.summary
    auc, leak = s["test_auc"], s["leak_auc"]
    lines = [
        "",
        f"## Utility and privacy over {s['repetitions']} seeds (seeds {s['seeds'][0]}..{s['seeds'][-1]})",
        "",
        "Test AUC of the label party's prediction; leak AUC (eq. 10, flipped) of each attack on the "
        "gradients the non-label parties received in the last epoch, the largest over the parties.",
        "",
        f"| | Avg. AUC | Worst AUC | Best AUC | {HEADER} |",
        "|---|---|---|---|" + "---|" * len(ATTACKS),
        f"| this run | {auc['mean']:.3f} | {auc['worst']:.3f} | {auc['best']:.3f} | "
        + " | ".join(_pm(leak[a]) for a in ATTACKS)
        + " |",
    ]
    paper = metrics.get("paper")
    if paper:
        worst = f"{paper['worst']:.2f}" if "worst" in paper else "-"
        best = f"{paper['best']:.2f}" if "best" in paper else "-"
        table = "Table 2" if spec.data.n_parties == 1 else "Table C.1"
        lines.append(
            f"| paper 002, {table} | {paper['auc']:.2f}"
            + (f" ± {paper['auc_std']:.2f}" if "auc_std" in paper else "")
            + f" | {worst} | {best} | "
            + " | ".join(paper_cells(paper, ATTACKS))
            + " |"
        )
    return [
        *lines,
        "",
        *([NOTE, ""] if paper else []),
        f"Train AUC {s['train_auc']['mean']:.3f} ± {s['train_auc']['std']:.3f}.",
    ]


def _seed_rows(spec: RunSpec, result: GAFMResult) -> list[str]:
    """Every seed's numbers, and each party's leak AUC when there are several."""
    lines = [
        "",
        "## Per seed",
        "",
        f"| seed | train AUC | test AUC | {HEADER} | steps | seconds |",
        "|---|---|---|" + "---|" * len(ATTACKS) + "---|---|",
    ]
    for r in result.repetitions:
        lines.append(
            f"| {r.seed} | {r.train_auc:.4f} | {r.test_auc:.4f} | "
            + " | ".join(f"{r.leak_auc[a]:.3f}" for a in ATTACKS)
            + f" | {r.steps} | {r.seconds:.1f} |"
        )
    if spec.data.n_parties > 1:
        lines += [
            "",
            "## Leak AUC per party (each seed)",
            "",
            f"| seed | party | {HEADER} |",
            "|---|---|" + "---|" * len(ATTACKS),
        ]
        for r in result.repetitions:
            for p, party in enumerate(r.leak_auc_per_party):
                lines.append(
                    f"| {r.seed} | {p} | " + " | ".join(f"{party[a]:.3f}" for a in ATTACKS) + " |"
                )
    return lines
