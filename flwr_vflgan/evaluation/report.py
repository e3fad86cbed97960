"""``report.md`` and its PNG plots for one evaluated real/synthetic pair.

The report renders :class:`~flwr_vflgan.evaluation.suite.Evaluation` as markdown tables
(the numbers are the ones in ``metrics.json``) and links the plots written beside it.
Every file is written under a temporary name and renamed, so a failure leaves no
half-written report.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data.schema import Schema
from flwr_vflgan.evaluation import plots
from flwr_vflgan.evaluation.config import CLASSIFIERS
from flwr_vflgan.evaluation.suite import Evaluation

__all__ = ["format_value", "render_report", "write_report"]

log = logging.getLogger(__name__)

_TITLES = {
    "fidelity": "Fidelity (paper 000, eq. 23)",
    "statistics": "Statistical similarity (paper 001, Section 4.2.2)",
    "avd": "k-AVD and correlation-matrix distance (paper 004, eqs. 5.1-5.2)",
    "ai_utility": "AI-training utility with random forests (paper 000, Section 5.2.2)",
    "ml_efficacy": "Machine-learning utility (paper 001, Section 4.2.1)",
    "privacy": "Distance to closest record (copying check)",
    "images": "Image metrics (paper 000, Section 5.1.3)",
}
_LOWER_IS_BETTER = {
    "fidelity": "lower is better",
    "statistics": "lower is better",
    "avd": "lower is better (both in [0, 1])",
    "ai_utility": "differences from TRTR; lower Total Difference is better",
    "ml_efficacy": "differences real - synthetic; closer to 0 is better",
    "privacy": "synthetic distances close to the holdout's mean no copying; 0 means a copied row",
    "images": "lower image FD and higher inception score are better",
}


def format_value(value: Any) -> str:
    """Numbers to 4 significant digits; ``None`` as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        return f"{value:.4g}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(format_value(v) for v in row) + " |" for row in rows]
    return lines


def _key_values(metrics: dict[str, Any]) -> list[str]:
    scalars = [(k, v) for k, v in metrics.items() if not isinstance(v, dict)]
    return _table(["metric", "value"], scalars)


def _ai_utility(m: dict[str, Any]) -> list[str]:
    settings = ("trtr", "tsts", "trts", "tstr")
    regression = "trtr_r2" in m  # a continuous label (flwr_vflgan.metrics.regression)
    scores = ("r2",) if regression else ("accuracy", "f1")
    row: list[Any] = []
    for s in settings:
        for metric in scores:
            value = format_value(m.get(f"{s}_{metric}"))
            diff = m.get(f"{s}_{metric}_difference")
            row.append(value if diff is None else f"{value} ({format_value(diff)})")
    row.append(m.get("total_difference"))
    names = ("R²",) if regression else ("Acc", "F1")
    header = [f"{s.upper()} {metric}" for s in settings for metric in names]
    folds = m.get("folds")
    split = "shuffled" if regression else "stratified"
    note = (
        f"TRTR and TSTS by {int(folds)}-fold cross-validation"
        if folds
        else f"TRTR and TSTS on one {split} 80/20 split (evaluation.cv_folds=0)"
    )
    if regression:
        note = "Random-forest regressors scored by R² (the label is continuous). " + note
    return [*_table([*header, "Total Difference"], [row]), "", note + "."]


def _ml_efficacy(m: dict[str, Any]) -> list[str]:
    rows = []
    for c in CLASSIFIERS:
        if f"{c}_real_accuracy" not in m:
            continue
        rows.append(
            [c]
            + [
                m[f"{c}_{side}_{metric}"]
                for metric in ("accuracy", "f1", "auc")
                for side in ("real", "synthetic")
            ]
        )
    rows.append(
        [
            "mean difference",
            m.get("accuracy_difference"),
            None,
            m.get("f1_difference"),
            None,
            m.get("auc_difference"),
            None,
        ]
    )
    header = [
        "classifier",
        "Acc real",
        "Acc synthetic",
        "F1 real",
        "F1 synthetic",
        "AUC real",
        "AUC synthetic",
    ]
    return _table(header, rows)


def _statistics(m: dict[str, Any]) -> list[str]:
    lines = _key_values(m)
    per_column = [(c, "JSD", v) for c, v in m.get("jsd_by_column", {}).items()] + [
        (c, "WD", v) for c, v in m.get("wd_by_column", {}).items()
    ]
    if per_column:
        lines += ["", "Per column:", "", *_table(["column", "metric", "value"], per_column)]
    return lines


def render_report(
    evaluation: Evaluation,
    *,
    title: str,
    run: dict[str, Any] | None = None,
    figures: dict[str, str] | None = None,
) -> str:
    """The markdown text of a report (see :func:`write_report`)."""
    figures = figures or {}
    s = evaluation.settings
    lines = [f"# {title}", ""]
    if run:
        lines += [*_table(["run", "value"], list(run.items())), ""]
    lines += [
        f"Real rows: {s.get('real_rows')}, synthetic rows: {s.get('synthetic_rows')}, "
        f"label: {s.get('label') or '-'}, test/holdout rows: {s.get('holdout')}"
        + (f" ({s['holdout_rows']} rows)" if s.get("holdout_rows") else ""),
        "",
    ]
    if "fd_history" in figures:
        lines += ["![Frechet distance over training](" + figures["fd_history"] + ")", ""]
    for group, metrics in evaluation.metrics.items():
        lines += [
            f"## {_TITLES.get(group, group)}",
            "",
            f"_{_LOWER_IS_BETTER.get(group, '')}; {evaluation.seconds.get(group, 0):.1f} s_",
            "",
        ]
        if group == "ai_utility":
            lines += _ai_utility(metrics)
        elif group == "ml_efficacy":
            lines += _ml_efficacy(metrics)
        elif group == "statistics":
            lines += _statistics(metrics)
        else:
            lines += _key_values(metrics)
        lines.append("")
        if group == "statistics" and "associations" in figures:
            lines += ["![Association matrices](" + figures["associations"] + ")", ""]
    for name, caption in (("marginals", "Marginals, real vs synthetic"), ("samples", "Samples")):
        if name in figures:
            lines += [f"## {caption}", "", f"![{caption}]({figures[name]})", ""]
    if evaluation.skipped:
        lines += [
            "## Not computed",
            "",
            *_table(["metric group", "why"], list(evaluation.skipped.items())),
            "",
        ]
    return "\n".join(lines)


def write_report(
    out_dir: str | Path,
    evaluation: Evaluation,
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    title: str,
    history: Sequence[dict[str, Any]] | None = None,
    run: dict[str, Any] | None = None,
    plots_enabled: bool = True,
    image_shape: tuple[int, int] | None = None,
) -> list[Path]:
    """Write ``report.md`` and the plots into ``out_dir``; returns the paths written.

    Plots: ``fd_history.png`` (with a training history), ``marginals.png`` and
    ``associations.png`` (tables), ``samples.png`` (images).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    figures: dict[str, str] = {}
    if plots_enabled:
        made: dict[str, Path | None] = {}
        if history:
            made["fd_history"] = plots.plot_fd_history(history, out / "fd_history.png")
        if image_shape is not None:
            pixels = [n for n in schema.names if n != schema.label]
            made["samples"] = plots.plot_image_samples(
                real[pixels].to_numpy(float),
                synthetic[pixels].to_numpy(float),
                image_shape,
                out / "samples.png",
            )
        else:
            made["marginals"] = plots.plot_marginals(real, synthetic, schema, out / "marginals.png")
            if evaluation.associations is not None:
                made["associations"] = plots.plot_associations(
                    *evaluation.associations, out / "associations.png"
                )
        for name, path in made.items():
            if path is not None:
                figures[name] = path.name
                written.append(path)
    text = render_report(evaluation, title=title, run=run, figures=figures)
    report = out / "report.md"
    write_atomically(report, lambda tmp: tmp.write_text(text))
    written.append(report)
    log.info("wrote %s", ", ".join(p.name for p in written))
    return written
