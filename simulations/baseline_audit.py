"""Paper 000's Table 3 attacks on the command line: ``python -m simulations.audit
audit.scheme=baselines``.

    python -m simulations.audit audit.scheme=baselines dataset=california_housing \\
        audit.train_rows=100 audit.reference_rows=10000 train.epochs=300

With ``audit.seed`` the audit shuffles the dataset and takes ``audit.train_rows`` rows to
train on (the members, ``train.parquet``), as many rows to judge beside them (the
non-members) and ``audit.reference_rows`` rows for the attacker; it trains one run on the
members exactly as ``simulations.run`` would (in ``run/``, reused when it finished under
the same configuration), and every attack of :mod:`flwr_vflgan.privacy.baselines` scores
members and non-members from the published table. ``baselines.json`` and
``baselines.md`` hold each attack's AUC and accuracy.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.evaluation.plots import plot_roc
from flwr_vflgan.privacy.baselines import ATTACKS, attack_scores, score_attacks
from flwr_vflgan.runtime.party_data import load_full_table
from flwr_vflgan.simulations.audit_config import (
    AuditConfig,
    audit_header,
    audit_seed,
    training_spec,
)
from flwr_vflgan.simulations.config import RunSpec
from flwr_vflgan.simulations.families import run_experiment
from flwr_vflgan.simulations.outputs import run_directory_lock, write_json
from flwr_vflgan.simulations.reproduce_vflgan import finished_metrics

NAMES = {
    "logan_0": "LOGAN 0",
    "logan_d1": "LOGAN D1",
    "mc": "MC",
    "gan_leaks_0": "GAN-leaks 0",
    "gan_leaks_cal": "GAN-leaks CAL",
    "domias": "DOMIAS",
}
"""Table 3's column names."""
PAPER_HOUSING = {
    100: (0.51, 0.52, 0.54, 0.57, 0.55, 0.60, 0.81),
    200: (0.54, 0.54, 0.50, 0.51, 0.50, 0.50, 0.89),
}
"""Paper 000, Table 3, Housing (N1 / 10,000): the six baselines' AUC, then ASSD's."""


def split_rows(
    frame: pd.DataFrame, members: int, reference: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Members, as many non-members, and the reference rows: disjoint, drawn at random.

    Raises
    ------
    ValueError
        The table has fewer than ``2 * members + reference`` rows.
    """
    needed = 2 * members + reference
    if needed > len(frame):
        raise ValueError(
            f"audit.scheme=baselines needs 2 x audit.train_rows + audit.reference_rows = "
            f"{needed} rows and the dataset has {len(frame)}: lower audit.train_rows or "
            "audit.reference_rows"
        )
    order = np.random.default_rng(seed).permutation(len(frame))
    chosen = [frame.iloc[np.sort(p)].reset_index(drop=True) for p in
              np.split(order[:needed], [members, 2 * members])]  # fmt: skip
    return chosen[0], chosen[1], chosen[2]


def trained_on(
    spec: RunSpec,
    audit_dir: Path,
    table: pd.DataFrame,
    report: Callable[[str], None],
    what: str,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The metrics and published table of ``spec`` trained on ``table`` in
    ``audit_dir/run``, reusing a run finished there under the same configuration;
    ``report`` gets ``what`` and where it trains first."""
    train = training_spec(spec, audit_dir, table)
    report(f"{what}; training in {train.run_dir}")
    metrics = finished_metrics(train) or run_experiment(train)
    return metrics, pd.read_csv(train.run_dir / "synthetic.csv")


def run_baselines(
    spec: RunSpec, audit: AuditConfig, audit_dir: Path, report: Callable[[str], None] = print
) -> dict[str, Any]:
    """Train on the members (or reuse the finished run), attack, write
    ``baselines.json`` and ``baselines.md``; returns what the JSON file holds."""
    assert audit.train_rows is not None  # AuditConfig refuses baselines without it
    audit_dir.mkdir(parents=True, exist_ok=True)
    with run_directory_lock(audit_dir):
        dataset, _ = load_full_table(spec.data)
        seed = audit_seed(spec, audit)
        members, non_members, reference = split_rows(
            dataset.frame, audit.train_rows, audit.reference_rows, seed
        )
        metrics, synthetic = trained_on(
            spec,
            audit_dir,
            members,
            report,
            f"baselines: {len(members)} members, {len(non_members)} non-members, "
            f"{len(reference)} reference rows",
        )
        attacks = audit.attacks or tuple(ATTACKS)
        scores = attack_scores(
            members, non_members, synthetic, reference, dataset.schema, seed, attacks
        )
        summary = {
            **audit_header(spec, metrics, "baselines"),
            "members": len(members),
            "reference_rows": len(reference),
            "synthetic_rows": len(synthetic),
            "attacks": {k: v.to_dict() for k, v in score_attacks(scores, len(members)).items()},
        }
        truth = (np.arange(len(members) + len(non_members)) < len(members)).astype(int)
        plot_roc(
            {NAMES[a]: (truth, values) for a, values in scores.items()},
            audit_dir / "baselines-roc.png",
            f"Table 3 attacks: {len(members)} members, {len(non_members)} non-members",
        )
        write_json(audit_dir / "baselines.json", summary)
        write_atomically(
            audit_dir / "baselines.md", lambda p: p.write_text(baselines_markdown(summary))
        )
    return summary


def baselines_markdown(summary: dict[str, Any]) -> str:
    """Table 3's row of this run: each attack's AUC (and accuracy), and the paper's row
    for Housing at the same size."""
    attacks = summary["attacks"]
    head = " | ".join(NAMES[a] for a in attacks)
    aucs = " | ".join(f"{r['auc']:.2f} ({r['accuracy']:.2f})" for r in attacks.values())
    lines = [
        f"# Membership attacks (paper 000, Table 3): {summary['algorithm']} on "
        f"{summary['dataset']}",
        "",
        f"dp: {summary['dp']}; {summary['members']} members and as many non-members, "
        f"{summary['reference_rows']} reference rows, {summary['synthetic_rows']} synthetic "
        "rows. AUC (accuracy at the median score); 0.5 is no better than a coin.",
        "",
        f"| run | {head} |",
        "|---|" + "---|" * len(attacks),
        f"| this run | {aucs} |",
    ]
    tail = ["", "![ROC curves](baselines-roc.png)"]
    paper = PAPER_HOUSING.get(summary["members"])
    if paper is not None and list(attacks) == list(NAMES):
        lines.append(
            f"| paper 000, Housing ({summary['members']}/10000) | "
            + " | ".join(f"{v:.2f}" for v in paper[:6])
            + f" |\n\nPaper 000's ASSD on the same split: AUC {paper[6]:.2f}."
        )
    return "\n".join([*lines, *tail, ""])


def baselines_summary_line(summary: dict[str, Any]) -> str:
    """The command's closing line: each attack's AUC."""
    parts = ", ".join(f"{NAMES[a]} {r['auc']:.2f}" for a, r in summary["attacks"].items())
    return f"baselines: AUC {parts}"
