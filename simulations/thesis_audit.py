"""Paper 004's membership attack on the command line (Figure 5.7): ``python -m
simulations.audit audit.scheme=thesis_mia``.

    python -m simulations.audit audit.scheme=thesis_mia algorithm=vdgan train.epochs=30 \\
        audit.train_rows=10000 audit.targets=100 audit.repetitions=10 \\
        output.publish_rows=100000

``train.epochs`` matters: ``conf/audit.yaml`` sets 600 for the one-run audit.

With ``audit.seed`` the audit shuffles the dataset and trains on its first
``audit.train_rows`` rows (``train.parquet``), exactly as ``simulations.run`` would (in
``run/``, reused when it finished under the same configuration); the rows it never saw
are the pool of unseen targets. For each share of ``audit.outlier_shares`` it draws
``audit.targets`` training targets holding that share of outliers and as many unseen
ones, ``audit.repetitions`` times, and scores them from the published table
(:mod:`flwr_vflgan.privacy.thesis_mia`). ``thesis_mia.json``, ``thesis_mia.md`` and the
box plot ``thesis_mia.png`` hold each share's accuracies.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.evaluation.plots import pyplot, save_figure
from flwr_vflgan.privacy.thesis_mia import (
    ThesisMIAResult,
    attribute_codes,
    thesis_mia,
    thesis_outliers,
)
from flwr_vflgan.runtime.party_data import load_full_table
from flwr_vflgan.simulations.audit_config import (
    AuditConfig,
    audit_header,
    audit_seed,
)
from flwr_vflgan.simulations.baseline_audit import trained_on
from flwr_vflgan.simulations.config import RunSpec
from flwr_vflgan.simulations.outputs import run_directory_lock, write_json


def split_members(
    frame: pd.DataFrame, members: int, targets: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The training rows and the rows never trained on, drawn at random (each in table
    order).

    Raises
    ------
    ValueError
        Fewer than ``targets`` rows would be left unseen.
    """
    if members + targets > len(frame):
        raise ValueError(
            f"audit.scheme=thesis_mia trains on audit.train_rows={members} rows and needs "
            f"audit.targets={targets} unseen ones; the dataset has {len(frame)}: lower "
            "audit.train_rows or audit.targets"
        )
    order = np.random.default_rng(seed).permutation(len(frame))
    trained, unseen = np.sort(order[:members]), np.sort(order[members:])
    return frame.iloc[trained].reset_index(drop=True), frame.iloc[unseen].reset_index(drop=True)


def run_thesis_mia(
    spec: RunSpec, audit: AuditConfig, audit_dir: Path, report: Callable[[str], None] = print
) -> dict[str, Any]:
    """Train on the members (or reuse the finished run), attack, write
    ``thesis_mia.json``, ``thesis_mia.md`` and ``thesis_mia.png``; returns the JSON."""
    assert audit.train_rows is not None  # AuditConfig refuses thesis_mia without it
    audit_dir.mkdir(parents=True, exist_ok=True)
    with run_directory_lock(audit_dir):
        dataset, _ = load_full_table(spec.data)
        seed = audit_seed(spec, audit)
        members, unseen = split_members(dataset.frame, audit.train_rows, audit.targets, seed)
        is_outlier = thesis_outliers(members, dataset.schema)
        metrics, synthetic = trained_on(
            spec,
            audit_dir,
            members,
            report,
            f"thesis_mia: {len(members)} training rows ({int(is_outlier.sum())} outliers), "
            f"{len(unseen)} unseen",
        )
        trained, never, published = attribute_codes(
            [members, unseen, synthetic], dataset.schema, synthetic
        )
        results = thesis_mia(
            trained,
            never,
            published,
            is_outlier,
            targets=audit.targets,
            shares=audit.outlier_shares,
            repetitions=audit.repetitions,
            seed=seed,
            unseen_outlier=(
                thesis_outliers(unseen, dataset.schema, members) if audit.unseen_outliers else None
            ),
        )
        summary = {
            **audit_header(spec, metrics, "thesis_mia"),
            "train_rows": len(members),
            "outliers": int(is_outlier.sum()),
            "unseen_rows": len(unseen),
            "synthetic_rows": len(synthetic),
            "targets": audit.targets,
            "repetitions": audit.repetitions,
            "unseen_outliers": audit.unseen_outliers,
            "results": [r.to_dict() for r in results],
        }
        plot_thesis_mia(results, audit_dir / "thesis_mia.png", summary)
        write_json(audit_dir / "thesis_mia.json", summary)
        write_atomically(
            audit_dir / "thesis_mia.md", lambda p: p.write_text(thesis_mia_markdown(summary))
        )
    return summary


def plot_thesis_mia(results: list[ThesisMIAResult], path: Path, summary: dict[str, Any]) -> Path:
    """Figure 5.7's panel for this run: the accuracies of each share as a box."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ax.boxplot([r.accuracies for r in results])
    ax.set_xticks(range(1, len(results) + 1), [f"{r.outlier_share:.0%}" for r in results])
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("outliers among the training targets")
    ax.set_ylabel("MIA accuracy")
    ax.set_title(f"{summary['algorithm']}, dp={summary['dp']}", fontsize=9)
    return save_figure(fig, path)


def thesis_mia_markdown(summary: dict[str, Any]) -> str:
    """Each share's accuracy (mean, spread, every repetition) and how to read it."""
    claimed = summary["claimed_epsilon"]
    unseen = (
        "with the same share of outliers"
        if summary.get("unseen_outliers")
        else "drawn uniformly, as the thesis does"
    )
    lines = [
        f"# Membership attack (paper 004, Figure 5.7): {summary['algorithm']} on "
        f"{summary['dataset']}",
        "",
        f"dp: {summary['dp']}, claimed epsilon "
        f"{'none' if claimed is None else f'{claimed:.4g}'}; {summary['train_rows']} training "
        f"rows ({summary['outliers']} outliers), {summary['synthetic_rows']} synthetic rows; "
        f"{summary['targets']} training and {summary['targets']} unseen targets "
        f"({unseen}), "
        f"{summary['repetitions']} draws per share. Accuracy is the training records' share "
        "of the targets the attack ranks first; 0.5 is a coin.",
        "",
        "| outliers among the training targets | accuracy (mean ± std) | each draw |",
        "|---|---|---|",
    ]
    for r in summary["results"]:
        each = ", ".join(f"{a:.2f}" for a in r["accuracies"])
        lines.append(
            f"| {r['outlier_share']:.0%} | {r['accuracy_mean']:.3f} ± {r['accuracy_std']:.3f} "
            f"| {each} |"
        )
    return "\n".join([*lines, "", "![MIA accuracy](thesis_mia.png)", ""])


def thesis_mia_summary_line(summary: dict[str, Any]) -> str:
    """The command's closing line: each share's mean accuracy."""
    parts = ", ".join(
        f"{r['outlier_share']:.0%} outliers {r['accuracy_mean']:.3f}" for r in summary["results"]
    )
    return f"thesis_mia: accuracy {parts}"
