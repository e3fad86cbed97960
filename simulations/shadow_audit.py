"""Paper 000's ASSD on the command line: ``python -m simulations.audit audit.scheme=assd``.

    python -m simulations.audit audit.scheme=assd train.epochs=100 hydra.run.dir=runs/assd
    python -m simulations.audit audit.scheme=assd audit.shadows=100 audit.executor=ray \\
        audit.target=outliers dp=vflgan_gaussian dp.target_epsilon=10

The audit keeps ``audit.train_rows`` rows of the dataset (the training table ``X``,
``train.parquet``), picks the target record (``audit.target``), writes ``X`` without it
(``train-without-target.parquet``), and trains ``audit.shadows`` generators on each
table, each with a fresh seed, exactly as ``simulations.run`` would (same algorithm,
runtime and ``dp`` groups), into ``shadows/without-<k>/`` and ``shadows/with-<k>/``. A
shadow whose run finished under the same configuration is reused, so an interrupted
audit resumes where it stopped. The adversary then reads every published table
(:mod:`flwr_vflgan.privacy.shadow`) and ``audit.json``/``audit.md`` hold its accuracy
and AUC per feature map.

With ``audit.executor=ray`` the shadows train as Ray tasks of one CPU each, on this
machine (``audit.jobs`` CPUs) or on the cluster at ``audit.ray_address``; every node of
that cluster needs this package installed and the dataset at the same path.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.evaluation.plots import plot_roc
from flwr_vflgan.privacy.shadow import (
    AttackResult,
    attack_tables,
    shadow_seeds,
    training_tables,
)
from flwr_vflgan.privacy.vulnerable import vulnerable_records
from flwr_vflgan.runtime.party_data import all_blocks, load_full_table
from flwr_vflgan.simulations.audit_config import (
    SPLIT_DISCRIMINATORS,
    AuditConfig,
    audit_header,
    audit_seed,
    kept_rows,
    load_newest,
    table_spec,
)
from flwr_vflgan.simulations.config import RunSpec
from flwr_vflgan.simulations.families import run_experiment
from flwr_vflgan.simulations.outputs import run_directory_lock, write_json
from flwr_vflgan.simulations.reproduce_vflgan import finished_metrics

PAPER_TABLE_2 = {
    "none": ("0.65 (0.09)", "0.59 (0.05)", "0.58 (0.10)", "0.55 (0.11)"),
    "10": ("0.46 (0.06)", "0.47 (0.13)", "0.51 (0.12)", "0.44 (0.10)"),
    "5": ("0.50 (0.09)", "0.49 (0.10)", "0.50 (0.08)", "0.48 (0.11)"),
}
"""Paper 000, Table 2, Adult: accuracy (std) for Record 1 naive, correlation, Record 2
naive, correlation; rows without DP and with DP-VFLGAN at epsilon 10 and 5."""
PAPER_TABLE_4 = {
    "none": ("0.49 (0.12)", "0.58 (0.09)", "0.53 (0.09)", "0.55 (0.12)"),
    "10": ("0.49 (0.14)", "0.50 (0.08)", "0.54 (0.11)", "0.48 (0.12)"),
    "5": ("0.49 (0.03)", "0.50 (0.12)", "0.54 (0.09)", "0.51 (0.10)"),
}
"""Paper 000, Table 4, Adult: the same layout for ASIF."""
PAPER = {"assd": (2, PAPER_TABLE_2), "asif": (4, PAPER_TABLE_4)}


def paper_row(summary: dict[str, Any]) -> str:
    """The closing line's comparison: paper 000's row for this audit's privacy setting
    (no DP, or DP-VFLGAN's ``vflgan_gaussian`` at epsilon 10 or 5, the only rows it
    has), else its non-DP row, saying that the paper has no row for this setting."""
    number, table = PAPER[summary["scheme"]]
    claimed, dp = summary["claimed_epsilon"], summary["dp"]
    if dp == "none":
        key, setting = "none", "non-DP VFLGAN"
    elif dp == "vflgan_gaussian" and any(
        claimed is not None and abs(claimed - e) < 0.01 for e in (10, 5)
    ):
        key, setting = str(round(claimed)), f"DP-VFLGAN at epsilon {round(claimed)}"
    else:
        key, setting = "none", f"non-DP VFLGAN; it has no row for dp={dp} at this epsilon"
    cells = table[key]
    return (
        f"Paper 000, Table {number}, accuracy on Record 1: {cells[0]} (naive), {cells[1]} "
        f"(correlation); Record 2: {cells[2]}, {cells[3]} (Adult, {setting}, 100 shadows per "
        "world, 0.7 of them training the forest)."
    )


WORLDS = ("without", "with")
"""The two worlds of the game: generators trained without the target, and with it."""


def audit_table(spec: RunSpec, audit: AuditConfig) -> tuple[pd.DataFrame, Schema, int]:
    """The table trained on (``audit.train_rows`` rows of the dataset), its schema and the
    target's row position in it."""
    dataset, _ = load_full_table(spec.data)
    rng = np.random.default_rng(audit_seed(spec, audit))
    table = kept_rows(dataset.frame, audit.train_rows, rng).reset_index(drop=True)
    if isinstance(audit.target, str):
        target = vulnerable_records(table, dataset.schema, audit.target)[0]  # type: ignore[arg-type]
    else:
        target = int(audit.target)
        if target >= len(table):
            raise ValueError(
                f"audit.target={target} is not a row of the {len(table)}-row table trained on "
                "(audit.train_rows): give a smaller position, or distance or outliers"
            )
    return table, dataset.schema, target


def shadow_specs(
    spec: RunSpec, audit: AuditConfig, audit_dir: Path, table: pd.DataFrame, target: int
) -> list[list[RunSpec]]:
    """The shadow runs of each world (:data:`WORLDS`), their tables written beside them.

    Raises
    ------
    FileExistsError
        ``audit_dir`` holds the tables of another audit (other rows or target).
    """
    without, whole = training_tables(table, target)
    audit_dir.mkdir(parents=True, exist_ok=True)
    bases = [
        table_spec(spec, audit_dir / "train-without-target.parquet", without, audit_dir),
        table_spec(spec, audit_dir / "train.parquet", whole, audit_dir),
    ]
    seeds = shadow_seeds(audit_seed(spec, audit), audit.shadows)
    return [
        [
            replace(base, seed=seed, run_dir=audit_dir / "shadows" / f"{world}-{k:03d}")
            for k, seed in enumerate(seeds[w])
        ]
        for w, (world, base) in enumerate(zip(WORLDS, bases, strict=True))
    ]


def train_shadow(spec: RunSpec) -> None:
    """Train one shadow (a Ray task's body; :func:`train_shadows` has left out the
    finished ones)."""
    run_experiment(spec)


def train_shadows(
    specs: Sequence[RunSpec], audit: AuditConfig, report: Callable[[str], None]
) -> None:
    """Train every shadow with ``audit.executor``, reporting progress after each."""
    todo = [s for s in specs if finished_metrics(s) is None]
    if len(todo) < len(specs):
        report(f"{audit.scheme}: {len(specs) - len(todo)} of {len(specs)} shadows already trained")
    progress = Progress(len(todo), report, audit.scheme)
    if audit.executor == "ray":
        _train_on_ray(todo, audit, progress)
    else:
        for spec in todo:
            train_shadow(spec)
            progress.done()


class Progress:
    """Shadows trained of those to train, and an estimate of the time left."""

    def __init__(self, total: int, report: Callable[[str], None], prefix: str) -> None:
        self.total, self.finished, self.report, self.prefix = total, 0, report, prefix
        self.start = time.perf_counter()

    def done(self) -> None:
        """One more shadow trained: report the count and the time left at this pace."""
        self.finished += 1
        elapsed = time.perf_counter() - self.start
        left = elapsed / self.finished * (self.total - self.finished)
        self.report(
            f"{self.prefix}: {self.finished}/{self.total} shadows trained, about "
            f"{left / 60:.1f} min left"
        )


def _train_on_ray(specs: Sequence[RunSpec], audit: AuditConfig, progress: Progress) -> None:
    """Each shadow a Ray task of one CPU; Ray is started here unless it already runs."""
    import ray

    started = not ray.is_initialized()
    if started:
        # The shadows use no accelerator; Ray's warning about its future default is noise.
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        ray.init(
            address=audit.ray_address,
            num_cpus=None if audit.ray_address else audit.jobs,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(train_shadow)
        pending = [remote.remote(spec) for spec in specs]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                ray.get(ready[0])
            except ray.exceptions.RayTaskError as error:
                # A shadow's own error (a bad setting, a bad table) stops the audit as it
                # would in one process, without Ray's wrapping.
                cause = error.cause
                raise cause if isinstance(cause, Exception) else error from None
            progress.done()
    finally:
        if started:
            ray.shutdown()


def run_shadow_audit(
    spec: RunSpec, audit: AuditConfig, audit_dir: Path, report: Callable[[str], None] = print
) -> dict[str, Any]:
    """Pick the target, train (or reuse) the shadows, attack with ``audit.scheme`` (ASSD
    or ASIF); writes ``<scheme>.json`` and ``<scheme>.md`` into ``audit_dir`` and returns
    what the JSON file holds. The two schemes share the shadows of one directory."""
    if audit.scheme == "asif" and spec.algorithm.variant not in SPLIT_DISCRIMINATORS:
        raise ValueError(
            f"audit.scheme=asif reads the features of VFLGAN's split discriminators; "
            f"algorithm={spec.algorithm.variant.value} has none: use audit.scheme=assd"
        )
    if audit.scheme == "asif" and not spec.output.checkpoint:
        raise ValueError(
            "audit.scheme=asif reads each shadow's discriminators from its checkpoints: "
            "keep output.checkpoint=true"
        )
    audit_dir.mkdir(parents=True, exist_ok=True)
    with run_directory_lock(audit_dir):
        table, schema, target = audit_table(spec, audit)
        worlds = shadow_specs(spec, audit, audit_dir, table, target)
        report(
            f"{audit.scheme}: target row {target} ({audit.target}); {audit.shadows} shadows "
            f"per world into {audit_dir / 'shadows'}"
        )
        train_shadows([s for world in worlds for s in world], audit, report)
        attack = attack_features if audit.scheme == "asif" else attack_published
        results = attack(worlds, table, schema, audit, audit_seed(spec, audit))
        summary = _summary(spec, audit, worlds, table, target)
        summary["attacks"] = {label: result.to_dict() for label, result in results.items()}
        name = audit.scheme
        write_json(audit_dir / f"{name}.json", summary)
        plot_roc(
            {label: (np.array(r.labels), np.array(r.scores)) for label, r in results.items()},
            audit_dir / f"{name}-roc.png",
            f"{name.upper()}, target row {target}: held-out shadow tables, all repetitions",
        )
        write_atomically(audit_dir / f"{name}.md", lambda p: p.write_text(shadow_markdown(summary)))
    return summary


def attack_published(
    worlds: Sequence[Sequence[RunSpec]],
    table: pd.DataFrame,
    schema: Schema,
    audit: AuditConfig,
    seed: int,
) -> dict[str, AttackResult]:
    """ASSD: the adversary reads each shadow's published table, per feature map."""
    tables = [[pd.read_csv(s.run_dir / "synthetic.csv") for s in world] for world in worlds]
    return attack_tables(
        tables, table, schema, audit.feature_maps, seed, audit.repetitions, audit.train_fraction
    )


def attack_features(
    worlds: Sequence[Sequence[RunSpec]],
    table: pd.DataFrame,
    schema: Schema,
    audit: AuditConfig,
    seed: int,
) -> dict[str, AttackResult]:
    """ASIF (Appendix A.3): the whole table ``X`` goes through each shadow's first
    discriminator parts; the adversary reads one party's intermediate features (the rows'
    ``D_i^1(x_i)``, what that party sends the server) as a table of numbers, per party and
    feature map."""
    features = [[intermediate_features(s, table) for s in world] for world in worlds]
    results: dict[str, AttackResult] = {}
    for party in range(len(features[0][0])):
        width = features[0][0][party].shape[1]
        names = [f"f{j}" for j in range(width)]
        numbers = Schema(tuple(ColumnSpec(n, ColumnKind.CONTINUOUS) for n in names))
        tables = [[pd.DataFrame(f[party], columns=names) for f in world] for world in features]
        found = attack_tables(
            tables,
            tables[0][0],
            numbers,
            audit.feature_maps,
            seed,
            audit.repetitions,
            audit.train_fraction,
        )
        results.update({f"party {party} {kind}": r for kind, r in found.items()})
    return results


def intermediate_features(spec: RunSpec, table: pd.DataFrame) -> list[np.ndarray]:
    """Each party's ``D_i^1`` features of every row of ``table``, with the shadow run
    ``spec``'s newest checkpoints and each party's encoder of its training table."""
    from flwr_vflgan.gan.vflgan import PartyTrainer

    features = []
    for party, block in enumerate(all_blocks(spec.data)):
        trainer = PartyTrainer(spec.algorithm, block.encoder.spans, block.encoded, 0, party)
        load_newest(trainer.state, spec.run_dir / "checkpoints" / f"party-{party}", "step")
        encoded = encode_leniently(block.encoder, table[block.schema.names])
        x = torch.as_tensor(encoded, dtype=torch.float32)
        with torch.no_grad():
            features.append(trainer.discriminator.features(x).numpy().astype(np.float64))
    return features


def encode_leniently(encoder: Any, frame: pd.DataFrame) -> np.ndarray:
    """``encoder.transform(frame)``, where a category the encoder never saw (the target's
    own, in a shadow trained without it) encodes as an all-zero one-hot block instead of
    an error, as a one-hot encoder that ignores unknown categories would."""
    state = encoder.state_dict()
    known = (
        {n: (c["categories"], c["has_missing"]) for n, c in state["categorical"].items()}
        if "categorical" in state
        else {n: (c, state["missing_category"][n]) for n, c in state["categories"].items()}
    )
    frame = frame.copy()
    unknown: dict[str, np.ndarray] = {}
    for name, (categories, has_missing) in known.items():
        column = frame[name]
        seen = column.isin(categories) | (column.isna() & has_missing)
        if not seen.all():
            unknown[name] = ~seen.to_numpy()
            frame[name] = column.where(seen, categories[0])
    encoded = encoder.transform(frame)
    for span in encoder.spans:
        if span.column in unknown:
            encoded[unknown[span.column], span.start : span.stop] = 0.0
    return encoded


def _summary(
    spec: RunSpec,
    audit: AuditConfig,
    worlds: Sequence[Sequence[RunSpec]],
    table: pd.DataFrame,
    target: int,
) -> dict[str, Any]:
    """What the audit's JSON file holds besides the attacks."""
    metrics = json.loads((worlds[1][0].run_dir / "metrics.json").read_text())
    return {
        **audit_header(spec, metrics, audit.scheme),
        "train_rows": len(table),
        "target": {
            "row": target,
            "chosen_by": audit.target,
            "record": json.loads(table.iloc[[target]].to_json(orient="records"))[0],
        },
        "shadows_per_world": audit.shadows,
    }


def shadow_markdown(summary: dict[str, Any]) -> str:
    """The Markdown of an ASSD or ASIF audit: the target, then accuracy and AUC per feature
    map (and party) in paper 000's Tables 2 and 4 form (mean and standard deviation over
    the repetitions)."""
    claimed = summary["claimed_epsilon"]
    target = summary["target"]
    record = ", ".join(f"{k}={v}" for k, v in dict(target["record"]).items())
    lines = [
        f"# Privacy audit ({summary['scheme'].upper()}): {summary['algorithm']} on "
        f"{summary['dataset']}",
        "",
        f"dp: {summary['dp']} ({summary['guarantee'] or 'no guarantee'}); claimed epsilon: "
        f"{'none' if claimed is None else f'{claimed:.4g}'}; training rows: "
        f"{summary['train_rows']}; shadows: {summary['shadows_per_world']} per world.",
        "",
        f"Target: row {target['row']} (chosen by {target['chosen_by']}): {record}.",
        "",
        "| adversary reads | accuracy | AUC | tables per world (train / test) |",
        "|---|---|---|---|",
    ]
    for kind, r in summary["attacks"].items():
        lines.append(
            f"| {kind} | {r['accuracy_mean']:.2f} ({r['accuracy_std']:.2f}) "
            f"| {r['auc_mean']:.2f} ({r['auc_std']:.2f}) "
            f"| {r['train_tables_per_world']} / {r['test_tables_per_world']} |"
        )
    lines += [
        "",
        f"![ROC curves]({summary['scheme']}-roc.png)",
        "",
        "0.5 is an adversary that learns nothing about the target's presence; 1 always knows.",
        paper_row(summary),
    ]
    return "\n".join([*lines, ""])


def shadow_summary_line(summary: dict[str, Any]) -> str:
    """The command's closing line: each adversary's AUC and accuracy."""
    parts = ", ".join(
        f"{kind} AUC {r['auc_mean']:.2f} ± {r['auc_std']:.2f} (accuracy {r['accuracy_mean']:.2f})"
        for kind, r in summary["attacks"].items()
    )
    return f"{summary['scheme']}: target row {summary['target']['row']}: {parts}"
