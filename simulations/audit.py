"""Audit a run's privacy empirically: a lower bound on epsilon from one training run, or
paper 000's membership audits.

    python -m simulations.audit                                         # VFLGAN, no DP
    python -m simulations.audit dp=end_to_end dp.target_epsilon=1
    python -m simulations.audit dp=vflgan_gaussian dp.target_epsilon=10 audit.canaries=500
    python -m simulations.audit algorithm=wgan_gp dp=end_to_end hydra.run.dir=runs/audit-wgan
    python -m simulations.audit audit.scheme=assd train.epochs=100      # paper 000's ASSD
    python -m simulations.audit audit.scheme=asif train.epochs=100      # ... and ASIF
    python -m simulations.audit audit.scheme=baselines audit.train_rows=100 \
        dataset=california_housing train.batch_size=16                  # Table 3's attacks
    python -m simulations.audit audit.scheme=thesis_mia algorithm=vdgan \
        audit.train_rows=10000 train.epochs=30                          # paper 004's attack

Schemes ``assd`` and ``asif`` are :mod:`~flwr_vflgan.simulations.shadow_audit`'s,
``baselines`` is :mod:`~flwr_vflgan.simulations.baseline_audit`'s, ``thesis_mia``
:mod:`~flwr_vflgan.simulations.thesis_audit`'s; the rest of this
module is the one-run audit.

Scheme ``one_run`` (Steinke, Nasr and Jagielski 2023; :mod:`flwr_vflgan.privacy.audit`):
``audit.canaries`` rows drawn uniformly from the columns' public ranges each join the
training table on a fair coin (``audit.seed``, default the run's seed), the run trains on
``audit.train_rows`` rows of the dataset plus the included canaries exactly as
``simulations.run`` would (same algorithm, runtime and ``dp`` groups), and every canary
is scored on the published table. Guessing "in" for the ``k`` best scores and "out" for
the ``k`` worst, for each ``k`` of ``audit.guesses``, gives the lower bound on epsilon
at ``audit.confidence`` (Bonferroni over the ``k`` tried), which the audit sets beside
the run's claimed epsilon.

The run directory (``hydra.run.dir``) holds ``train.parquet`` (the table trained on),
``canaries.parquet`` (the canaries with their coin), the training run in ``run/`` and
``audit.json``/``audit.md``; a second invocation reuses a finished training run of the
same configuration and only scores it again.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import pandas as pd
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data.domain import PublicDomain, bundled_domain
from flwr_vflgan.privacy.audit import draw_canaries, membership_scores, one_run_audit
from flwr_vflgan.runtime.party_data import all_blocks, is_series_spec, load_full_table
from flwr_vflgan.simulations.audit_config import (
    SCORES,
    SPLIT_DISCRIMINATORS,
    AuditConfig,
    AuditGame,
    audit_config,
    audit_header,
    audit_seed,
    kept_rows,
    load_newest,
    training_spec,
)
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import RunSpec, to_run_spec
from flwr_vflgan.simulations.families import run_experiment
from flwr_vflgan.simulations.outputs import run_directory_lock, write_json
from flwr_vflgan.simulations.reproduce_vflgan import finished_metrics

log = logging.getLogger(__name__)


def audit_tables(
    spec: RunSpec, audit: AuditConfig
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The rows kept of the dataset, the canaries and their coins (True: trained on)."""
    seed = audit_seed(spec, audit)
    dataset, _ = load_full_table(spec.data)
    rng = np.random.default_rng(seed)
    frame = kept_rows(dataset.frame, audit.train_rows, rng)
    # The canaries come from the public ranges when there are any (the same canaries
    # with and without DP), else from the table's.
    domain = (
        PublicDomain.from_mapping(spec.data.domain)
        if spec.data.domain
        else bundled_domain(spec.data.source)
        if spec.data.is_registered
        else None
    )
    canaries = draw_canaries(dataset.schema, frame, audit.canaries, seed + 1, domain)
    included = rng.random(audit.canaries) < 0.5
    return frame.reset_index(drop=True), canaries, included


def run_audit(spec: RunSpec, audit: AuditConfig, audit_dir: Path) -> dict[str, Any]:
    """Draw, train (or reuse a finished run), score and bound; writes ``audit.json`` and
    ``audit.md`` into ``audit_dir`` and returns what ``audit.json`` holds. Series
    (``algorithm=vflgan_ts``) play the game of
    :mod:`~flwr_vflgan.simulations.series_audit`, tables :func:`table_game`'s."""
    series = is_series_spec(spec.data)
    chosen = scorers(spec, audit, series)  # a refused score leaves no directory behind
    audit_dir.mkdir(parents=True, exist_ok=True)
    with run_directory_lock(audit_dir):
        if series:
            from flwr_vflgan.simulations.series_audit import series_game

            game = series_game(spec, audit, audit_dir, tuple(chosen))
        else:
            game = table_game(spec, audit, audit_dir, chosen)
        metrics = finished_metrics(game.train) or run_experiment(game.train)
        delta = audit.delta if audit.delta is not None else spec.algorithm.dp.delta
        results = {
            name: one_run_audit(
                score(), game.included, audit.guesses, delta, audit.confidence
            ).to_dict()
            for name, score in game.scores.items()
        }
        summary = {
            **audit_header(spec, metrics, audit.scheme),
            "train_rows": game.rows,
            "audits": results,
            "fd": metrics.get("fd"),
        }
        write_json(audit_dir / "audit.json", summary)
        write_atomically(audit_dir / "audit.md", lambda p: p.write_text(audit_markdown(summary)))
    return summary


def table_game(
    spec: RunSpec, audit: AuditConfig, audit_dir: Path, chosen: dict[str, Scorer]
) -> AuditGame:
    """The one-run game on a table, judged by the scores ``chosen`` (:func:`scorers`):
    canaries drawn from the columns' ranges (:func:`audit_tables`), the training table
    written to ``train.parquet`` and the canaries with their coins to
    ``canaries.parquet``."""
    kept, canaries, included = audit_tables(spec, audit)
    table = pd.concat([kept, canaries[included]], ignore_index=True)
    order = np.random.default_rng(audit.seed if audit.seed is not None else spec.seed)
    table = table.iloc[order.permutation(len(table))].reset_index(drop=True)
    train = training_spec(spec, audit_dir, table)  # refuses another audit's directory
    marked = canaries.assign(_included=included)
    write_atomically(
        audit_dir / "canaries.parquet",
        lambda p: marked.to_parquet(p, index=False),
        suffix=".parquet",
    )
    return AuditGame(
        train,
        len(table),
        included,
        {name: partial(score, train, canaries, kept) for name, score in chosen.items()},
    )


Scorer = Callable[[RunSpec, pd.DataFrame, pd.DataFrame], np.ndarray]


def scorers(spec: RunSpec, audit: AuditConfig, series: bool = False) -> dict[str, Scorer]:
    """The scores to audit a table by, by name: ``audit.scores``, or every one the
    algorithm has (``series``: only checks which scores the series game plays; it
    scores with its own functions).

    Raises
    ------
    ValueError
        ``critic`` was asked for an algorithm without split discriminators (VFLGAN's,
        VFLGAN-base's, VFLGAN-TS's).
    """
    has_critic = spec.algorithm.variant in SPLIT_DISCRIMINATORS or (
        series and spec.algorithm.is_series
    )
    if audit.scores is not None and "critic" in audit.scores and not has_critic:
        raise ValueError(
            f"audit.scores=[critic] reads the split discriminators of VFLGAN, VFLGAN-base "
            f"or VFLGAN-TS; algorithm={spec.algorithm.variant.value} has none: use "
            "audit.scores=[table]"
        )
    wanted = audit.scores or (SCORES if has_critic else ("table",))
    every: dict[str, Scorer] = {"table": table_scores, "critic": critic_scores}
    return {name: every[name] for name in wanted}


def table_scores(train: RunSpec, canaries: pd.DataFrame, kept: pd.DataFrame) -> np.ndarray:
    """Black-box scores from the published ``synthetic.csv`` of the training run ``train``
    (:func:`~flwr_vflgan.privacy.audit.membership_scores`)."""
    synthetic = pd.read_csv(train.run_dir / "synthetic.csv")
    return membership_scores(canaries, synthetic, kept, load_full_table(train.data)[0].schema)


def critic_scores(spec: RunSpec, canaries: pd.DataFrame, kept: pd.DataFrame) -> np.ndarray:
    """The trained critic's score of every canary: each party's local score (VFLGAN) plus
    ``lambda_1`` times the shared discriminator's, with the models of the newest
    checkpoints of the training run ``spec`` and each party's encoder of its table
    (``kept`` is not needed).

    Raises
    ------
    ValueError
        The run left no checkpoints.
    """
    from flwr_vflgan.gan.vflgan import PartyTrainer, ServerTrainer

    config = spec.algorithm
    root = spec.run_dir / "checkpoints"
    blocks = all_blocks(spec.data)
    score = torch.zeros(len(canaries))
    features = []
    for party, block in enumerate(blocks):
        trainer = PartyTrainer(config, block.encoder.spans, block.encoded, 0, party)
        load_newest(trainer.state, root / f"party-{party}", "step")
        x = torch.as_tensor(
            block.encoder.transform(canaries[block.schema.names]), dtype=torch.float32
        )
        with torch.no_grad():
            features.append(trainer.discriminator.features(x))
            if config.has_local_head:
                score += trainer.discriminator.score(features[-1]).reshape(-1)
    server = ServerTrainer(config, len(blocks), 0)
    load_newest(server.state, root, "server")
    with torch.no_grad():
        shared = server.discriminator(torch.cat(features, dim=1)).reshape(-1)
    return (score + config.train.shared_d_weight * shared).numpy().astype(np.float64)


def audit_markdown(summary: dict[str, Any]) -> str:
    """``audit.md``: the claim beside each audited bound, with the guesses behind it."""
    claimed = summary["claimed_epsilon"]
    lines = [
        f"# Privacy audit ({summary['scheme']}): {summary['algorithm']} on {summary['dataset']}",
        "",
        f"dp: {summary['dp']} ({summary['guarantee'] or 'no guarantee'}); claimed epsilon: "
        f"{'none' if claimed is None else f'{claimed:.4g}'}; training rows: "
        f"{summary['train_rows']}.",
        "",
        "| score | audited lower bound on epsilon | confidence | delta | canaries (trained on) "
        "| guesses | correct | correct by guesses tried |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, result in summary["audits"].items():
        tried = ", ".join(f"{g}: {c}" for g, c in result["correct_by_guesses"].items())
        lines.append(
            f"| {name} | {result['epsilon_lower_bound']:.4g} | {result['confidence']:.0%} "
            f"| {result['delta']:g} | {result['canaries']} ({result['included']}) "
            f"| {result['guesses']} | {result['correct']} | {tried} |"
        )
    return "\n".join([*lines, ""])


def summary_line(summary: dict[str, Any]) -> str:
    """The command's closing line: every score's bound beside the claim."""
    claimed = summary["claimed_epsilon"]
    bounds = ", ".join(
        f"{name} epsilon >= {r['epsilon_lower_bound']:.3f} ({r['correct']} of {r['guesses']} "
        "guesses right)"
        for name, r in summary["audits"].items()
    )
    first = next(iter(summary["audits"].values()))
    return (
        f"audit: {bounds} at {first['confidence']:.0%} confidence, {first['canaries']} "
        f"canaries; claimed {'none' if claimed is None else f'{claimed:.3f}'}"
    )


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="audit", version_base=None)
def main(cfg: DictConfig) -> float:
    """Hydra entry point; returns the highest audited lower bound on epsilon (one-run) or
    the highest attack AUC (ASSD, ASIF, baselines) or mean accuracy (thesis_mia)."""
    audit_dir = Path(HydraConfig.get().runtime.output_dir)
    audit = audit_config(cfg)
    spec = to_run_spec(OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "audit"]), audit_dir)
    if audit.scheme == "baselines":
        from flwr_vflgan.simulations.baseline_audit import baselines_summary_line, run_baselines

        attacked = run_baselines(spec, audit, audit_dir, lambda line: print(line, flush=True))
        written = audit_dir / "baselines.md"
        print(f"{baselines_summary_line(attacked)}; wrote {written}", flush=True)
        return max(float(r["auc"]) for r in attacked["attacks"].values())
    if audit.scheme == "thesis_mia":
        from flwr_vflgan.simulations.thesis_audit import run_thesis_mia, thesis_mia_summary_line

        found = run_thesis_mia(spec, audit, audit_dir, lambda line: print(line, flush=True))
        print(f"{thesis_mia_summary_line(found)}; wrote {audit_dir / 'thesis_mia.md'}", flush=True)
        return max(float(r["accuracy_mean"]) for r in found["results"])
    if audit.scheme in ("assd", "asif"):
        from flwr_vflgan.simulations.shadow_audit import run_shadow_audit, shadow_summary_line

        report = run_shadow_audit(spec, audit, audit_dir, lambda line: print(line, flush=True))
        written = audit_dir / f"{audit.scheme}.md"
        print(f"{shadow_summary_line(report)}; wrote {written}", flush=True)
        return max(float(r["auc_mean"]) for r in report["attacks"].values())
    summary = run_audit(spec, audit, audit_dir)
    print(f"{summary_line(summary)}; wrote {audit_dir / 'audit.md'}", flush=True)
    return max(float(r["epsilon_lower_bound"]) for r in summary["audits"].values())


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.audit", main))
