"""Run one experiment from a validated :class:`~simulations.config.RunSpec`.

Loads the table, builds the evaluator (the experimenter's view with every column, as in
the paper's evaluation), trains on the chosen runtime, and writes into the run
directory ``synthetic.csv``, ``metrics.json`` and ``config.json``. The run holds its
directory for its whole length, writes its outputs into a hidden folder and moves them in
only after it succeeded, ``metrics.json`` last, so a failed or killed run leaves the
previous outputs as they were (checkpoints excepted: they exist to resume it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from flwr.serverapp import Grid

from flwr_vflgan.config import Variant, VFLGANConfig
from flwr_vflgan.data import Dataset, TabularEncoder
from flwr_vflgan.data.registry import image_shape_of
from flwr_vflgan.evaluation import EvaluationConfig, evaluate_tables
from flwr_vflgan.evaluation.report import write_report
from flwr_vflgan.gan.gs_wgan import CentralizedGSWGAN, gs_wgan_plan
from flwr_vflgan.gan.plain import CentralizedWGANGP
from flwr_vflgan.gan.schedule import (
    Evaluations,
    Schedule,
    StepKind,
    announce_length,
    budget_schedule,
    describe_length,
)
from flwr_vflgan.metrics.frechet import GaussianStats, frechet_distance
from flwr_vflgan.nn.models import joint_spans
from flwr_vflgan.privacy import Mechanism, PrivacyPlan, plan_privacy
from flwr_vflgan.privacy.guarantee import (
    against_parties_description,
    describe_guarantee,
    spent_description,
)
from flwr_vflgan.runtime.party_data import PartyData, all_blocks, load_full_table
from flwr_vflgan.runtime.rng import Stream, numpy_generator
from flwr_vflgan.strategies import (
    DPLTStrategy,
    LatentDiffusionStrategy,
    RunStopped,
    VDGANStrategy,
    VFLGANResult,
    VFLGANStrategy,
    VTGANStrategy,
)

from .config import RunSpec
from .launch import start_on_runtime, strategy_settings
from .outputs import holding_run, json_default, published_outputs

log = logging.getLogger(__name__)
Progress = Callable[[dict[str, Any]], None]
CENTRALIZED = (Variant.WGAN_GP, Variant.GS_WGAN, Variant.CTGAN, Variant.AIM, Variant.MST)
"""The algorithms that train on the whole table in one process."""


class Evaluator:
    """Frechet distance (paper 000, eq. 23) against the real table, always in the
    :class:`~flwr_vflgan.data.encoder.TabularEncoder` encoding the run's numeric scaling
    names for it (``standard`` unless ``minmax``).

    With ``dataset.numeric_scaling=mode`` (or ``quantile``) the parties train in another
    encoding, but the FD (and so the best-epoch choice) is measured as for every other run:
    each generated block is decoded by the party's encoder and re-encoded with a
    standardising encoder fitted on the same real rows, so FDs compare across encodings.
    """

    def __init__(self, blocks: Sequence[PartyData]) -> None:
        self.blocks = list(blocks)
        self.measures = [
            b.encoder
            if isinstance(b.encoder, TabularEncoder) and b.encoder.numeric_scaling != "quantile"
            else TabularEncoder().fit(b.frame, b.schema)
            for b in self.blocks
        ]
        real = [
            b.encoded if m is b.encoder else torch.from_numpy(m.transform(b.frame))
            for b, m in zip(self.blocks, self.measures, strict=True)
        ]
        self.real = GaussianStats.of(torch.cat(real, dim=1).numpy())

    def encoded_fd(self, blocks: Sequence[np.ndarray]) -> dict[str, float]:
        """FD of encoded synthetic blocks (party order, in the parties' encodings)."""
        measured = [
            x if m is b.encoder else m.transform(b.encoder.inverse_transform(x))
            for b, m, x in zip(self.blocks, self.measures, blocks, strict=True)
        ]
        return {"fd": frechet_distance(self.real, np.concatenate(measured, axis=1))}

    def table_fd(self, synthetic: pd.DataFrame) -> float:
        """FD of a decoded synthetic table, encoded with each party's measuring encoder."""
        encoded = [
            m.transform(synthetic[b.schema.names])
            for b, m in zip(self.blocks, self.measures, strict=True)
        ]
        return frechet_distance(self.real, np.concatenate(encoded, axis=1))


def run_gan(
    spec: RunSpec,
    *,
    grid: Grid | None = None,
    progress: Progress | None = None,
    observer: Callable | None = None,
) -> dict[str, Any]:
    """The VFLGAN and VT-GAN families' ``run``: train (federated, or centralized for
    ``wgan_gp``, ``gs_wgan`` and ``ctgan``), publish, evaluate and write the run directory, which it
    holds throughout (:func:`~simulations.outputs.holding_run`); returns what
    ``metrics.json`` holds.

    ``grid`` is the Grid of a running Flower ServerApp (``flwr run``); without it the
    runtime named by the spec is started here.

    Raises
    ------
    RunDirectoryBusy
        Another run holds the directory.
    """
    with holding_run(spec):
        started = time.monotonic()
        real, blocks, evaluator = _real_table(spec)
        result = _train_gan(spec, real, blocks, evaluator, grid, progress, observer)
        synthetic = conform(result.synthetic, real.frame) if real is not None else result.synthetic
        metrics = {
            "algorithm": spec.algorithm.variant.value,
            "dataset": spec.data.source,
            "runtime": spec.runtime.kind,
            "n_parties": spec.data.n_parties,
            "seed": spec.seed,
            "fd": evaluator.table_fd(synthetic) if evaluator is not None else None,
            "best_fd": result.best_fd,
            "best_epoch": result.best_epoch,
            "steps": result.steps,
            "exchanges": result.exchanges,
            "wall_seconds": time.monotonic() - started,
            "train_seconds": result.train_seconds,
            "steps_per_exchange": spec.algorithm.train.steps_per_exchange,
            "train_rows": result.n_rows,
            "synthetic_rows": len(synthetic),
            "resumed_from_step": result.resumed_from_step,
            "published_generator": result.published,
            **({"phases": result.phases} if result.phases else {}),
            "privacy": privacy_metrics(spec, result),
            "history": result.history,
        }
        with published_outputs(spec.run_dir) as out:
            # The staging folder is this run's alone and moves in whole: plain writes suffice.
            synthetic.to_csv(out / "synthetic.csv", index=False)
            (out / "config.json").write_text(json.dumps(run_config(spec), indent=2))
            if spec.output.evaluate and real is not None:
                metrics["evaluation"] = evaluate_run(
                    spec, real, synthetic, blocks, result.history, metrics["privacy"], out
                )
            (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=json_default))
        return metrics


def run_config(spec: RunSpec) -> dict[str, Any]:
    """``config.json``: the settings a run was made with (what a reused run must match)."""
    return {
        "algorithm": spec.algorithm.to_dict(),
        "data": json.loads(spec.data.to_json()),
        "runtime": asdict(spec.runtime),
        "output": asdict(spec.output),
        "evaluation": spec.evaluation.to_dict(),
        "seed": spec.seed,
    }


def _real_table(spec: RunSpec) -> tuple[Dataset | None, list[PartyData], Evaluator | None]:
    """The real table, its party blocks and the evaluator, where the run evaluates or
    trains centrally (both read every column); else nothing."""
    if not (spec.output.evaluate or spec.algorithm.variant in CENTRALIZED):
        return None, [], None
    table = load_full_table(spec.data)
    blocks = all_blocks(spec.data, table)
    return table[0], blocks, Evaluator(blocks)


def _train_gan(
    spec: RunSpec,
    real: Dataset | None,
    blocks: list[PartyData],
    evaluator: Evaluator | None,
    grid: Grid | None,
    progress: Progress | None,
    observer: Callable | None,
) -> VFLGANResult:
    if spec.algorithm.variant not in CENTRALIZED:
        return train_federated(spec, evaluator, progress, observer, grid)
    if spec.runtime.kind != "inprocess" or grid is not None:
        raise ValueError(
            f"algorithm={spec.algorithm.variant.value} is centralized and runs only with "
            f"runtime=inprocess, got {spec.runtime.kind}"
        )
    assert evaluator is not None and real is not None
    if spec.algorithm.variant is Variant.CTGAN:
        return train_ctgan(spec, real, progress)
    if spec.algorithm.is_marginal:
        return train_marginals(spec, real)
    return train_centralized(spec, blocks, evaluator, progress)


def effective_evaluation(spec: RunSpec) -> EvaluationConfig:
    """The run's evaluation settings, with the image shape of a built-in image dataset."""
    shape = image_shape_of(spec.data.source)
    if spec.evaluation.image_shape is None and shape is not None:
        return replace(spec.evaluation, image_shape=shape)
    return spec.evaluation


def evaluate_run(
    spec: RunSpec,
    real: Dataset,
    synthetic: pd.DataFrame,
    blocks: Sequence[PartyData],
    history: Sequence[dict[str, Any]],
    privacy: dict[str, Any] | None = None,
    out_dir: Path | None = None,
) -> dict[str, Any]:
    """The metric suite on the published table; writes ``report.md`` and the plots into
    ``out_dir`` (default: the run directory)."""
    config = effective_evaluation(spec)
    evaluation = evaluate_tables(
        real.frame,
        synthetic,
        real.schema,
        config=config,
        parties=[b.schema.names for b in blocks],
    )
    write_report(
        out_dir or spec.run_dir,
        evaluation,
        real.frame,
        synthetic,
        real.schema,
        title=f"{spec.algorithm.variant.value} on {spec.data.source}",
        history=history,
        run={
            "algorithm": spec.algorithm.variant.value,
            "dataset": spec.data.source,
            "parties": spec.data.n_parties,
            "seed": spec.seed,
            "epochs": describe_length(spec.algorithm.train).removeprefix("epochs="),
            "runtime": spec.runtime.kind,
            **privacy_rows(privacy),
        },
        plots_enabled=config.plots,
        image_shape=config.image_shape,
    )
    return evaluation.to_dict()


def train_federated(
    spec: RunSpec,
    evaluator: Evaluator | None,
    progress: Progress | None,
    observer: Callable | None,
    grid: Grid | None = None,
) -> VFLGANResult:
    """VFLGAN / VFLGAN-base / VertiGAN / VDGAN / VT-GAN / latent diffusion over the chosen
    Flower runtime (or the given grid)."""
    checkpoints = spec.run_dir / "checkpoints" if spec.output.checkpoint else None
    kind: type[
        VFLGANStrategy | VTGANStrategy | VDGANStrategy | LatentDiffusionStrategy | DPLTStrategy
    ]
    kind, scored = VFLGANStrategy, True  # scored: the strategy keeps the best epoch by FD
    if spec.algorithm.is_latent:
        kind, scored = LatentDiffusionStrategy, False
    elif spec.algorithm.is_dplt:
        kind, scored = DPLTStrategy, False
    elif spec.algorithm.is_vdgan:
        kind = VDGANStrategy
    elif spec.algorithm.is_vtgan:
        kind, scored = VTGANStrategy, False
    own = {"evaluate_fn": evaluator.encoded_fd} if scored and evaluator is not None else {}
    strategy = kind(
        spec.algorithm,
        publish_rows=spec.output.publish_rows,
        checkpoint_dir=checkpoints,
        party_checkpoint_root=None if spec.runtime.kind == "deployment" else checkpoints,
        **own,
        **strategy_settings(spec, progress),
    )
    return start_on_runtime(strategy, spec, grid=grid, observer=observer)


def train_centralized(
    spec: RunSpec, blocks: Sequence[PartyData], evaluator: Evaluator, progress: Progress | None
) -> VFLGANResult:
    """The centralized WGAN-GP reference (or GS-WGAN on its networks) with the same
    schedule, evaluation and publication."""
    started = time.monotonic()
    data = torch.cat([b.encoded for b in blocks], dim=1)
    cfg, train = spec.algorithm, spec.algorithm.train
    schedule = Schedule.of(data.shape[0], train)
    announce_length(schedule, train)
    plan, schedule, budget_stop = _centralized_privacy(cfg, blocks, schedule)
    spans = joint_spans([b.encoder.spans for b in blocks])
    model: CentralizedWGANGP
    if cfg.variant is Variant.GS_WGAN:
        model = CentralizedGSWGAN(cfg, spans, data, len(blocks), spec.seed, cfg.gs_wgan, plan)
    else:
        model = CentralizedWGANGP(cfg, spans, data, len(blocks), spec.seed, privacy=plan)
    widths = np.cumsum([b.encoder.output_dim for b in blocks])[:-1]
    evaluations, best = Evaluations(), None
    for step in range(schedule.total_steps):
        model.step(step, schedule.kind(step))
        if schedule.evaluation_due(step, train.eval_every):
            epoch = schedule.epoch_of(step)
            rows = model.generate(train.eval_rows or data.shape[0], epoch).numpy()
            fd = evaluator.encoded_fd(np.split(rows, widths, axis=1))["fd"]
            record, improved = evaluations.add(epoch, step + 1, fd, time.monotonic() - started)
            if improved:
                best = {k: v.clone() for k, v in model.published.state_dict().items()}
            if progress is not None:
                progress(
                    {**record, "best_fd": evaluations.best_fd, "total_steps": schedule.total_steps}
                )
    trained = time.monotonic() - started
    use_best = evaluations.publishes_best(cfg.dp.enabled, cfg.dp.select_by_fd)
    if use_best:
        assert best is not None
        model.published.load_state_dict(best)
    rows = model.generate(spec.output.publish_rows or data.shape[0], 0).numpy()
    parts = [
        b.encoder.inverse_transform(x)
        for b, x in zip(blocks, np.split(rows, widths, axis=1), strict=True)
    ]
    table = pd.concat(parts, axis=1)
    order = numpy_generator(spec.seed, Stream.PUBLISH).permutation(len(table))
    accounted = schedule.steps_before(schedule.total_steps, _accounted_kind(cfg))
    return VFLGANResult(
        synthetic=table.iloc[order].reset_index(drop=True),
        history=evaluations.history,
        best_epoch=evaluations.best_epoch,
        best_fd=evaluations.best_fd,
        steps=schedule.total_steps,
        exchanges=0,
        wall_seconds=time.monotonic() - started,
        train_seconds=trained,
        n_rows=int(data.shape[0]),
        privacy=[plan.summary("centralized", accounted)] if plan else [],
        budget_stop=budget_stop,
        published="best_fd" if use_best else "last",
    )


def _centralized_privacy(
    cfg: VFLGANConfig, blocks: Sequence[PartyData], schedule: Schedule
) -> tuple[PrivacyPlan | None, Schedule, str | None]:
    """The one data holder's plan (the whole table, accounted like a party's) and the
    schedule cut to its budget; nothing without DP."""
    if not cfg.dp.enabled:
        return None, schedule, None
    if cfg.dp.mechanism is Mechanism.END_TO_END and not all(b.encoder.public for b in blocks):
        raise RunStopped(
            "dp=end_to_end needs encoders built from public metadata (dataset.domain), "
            "but they were fitted on the rows"
        )
    kind = _accounted_kind(cfg)
    planned = schedule.steps_before(schedule.total_steps, kind)
    if cfg.variant is Variant.GS_WGAN:
        plan = gs_wgan_plan(cfg, cfg.gs_wgan, schedule.n_rows, planned)
    else:
        plan = plan_privacy(
            cfg.dp,
            dataset_size=schedule.n_rows,
            batch_size=schedule.batch_size,
            planned_steps=planned,
        )
    cut, budget_stop = budget_schedule(schedule, {0: plan.allowed_steps}, kind)
    return plan, cut, budget_stop


def _accounted_kind(cfg: VFLGANConfig) -> StepKind:
    """The steps a centralized run's epsilon counts: GS-WGAN's generator steps (only
    they release sanitized gradients), the critic's steps otherwise."""
    return StepKind.GENERATOR if cfg.variant is Variant.GS_WGAN else StepKind.DISCRIMINATOR


def train_ctgan(spec: RunSpec, real: Dataset, progress: Progress | None) -> VFLGANResult:
    """VT-GAN's centralized baseline on the whole table (same blocks and schedule)."""
    from flwr_vflgan.vtgan.centralized import train_ctgan as train_table

    started = time.monotonic()

    def on_epoch(epoch: int, record: dict[str, float]) -> None:
        if progress is not None:
            progress({**record, "elapsed": time.monotonic() - started})

    outcome = train_table(
        spec.algorithm,
        real.frame.reset_index(drop=True),
        real.schema,
        spec.seed,
        spec.output.publish_rows,
        on_epoch,
    )
    return VFLGANResult(
        synthetic=outcome.synthetic,
        history=outcome.history,
        steps=outcome.steps,
        wall_seconds=time.monotonic() - started,
        n_rows=len(real.frame),
        train_seconds=time.monotonic() - started,
        privacy=outcome.privacy,
    )


def train_marginals(spec: RunSpec, real: Dataset) -> VFLGANResult:
    """AIM or MST on the whole table, coded from the run's public domain; AIM's rounds
    are logged (they are not epochs, so the run's epoch progress is not called)."""
    from flwr_vflgan.data.domain import PublicDomain
    from flwr_vflgan.marginals.synthesis import synthesize

    assert spec.data.domain is not None  # dp=end_to_end resolved one (simulations.config)
    dp = spec.algorithm.dp
    assert dp.target_epsilon is not None
    outcome = synthesize(
        spec.algorithm.variant.value,
        real.frame.reset_index(drop=True),
        real.schema,
        PublicDomain.from_mapping(spec.data.domain),
        epsilon=dp.target_epsilon,
        delta=dp.delta,
        settings=spec.algorithm.marginals,
        seed=spec.seed,
        rows=spec.output.publish_rows,
        progress=lambda r: log.info(
            "%s: round %d measured %s; %.0f%% of the budget used",
            spec.algorithm.variant.value,
            r["round"],
            "/".join(r["clique"]),
            100 * r["rho_used"],
        ),
    )
    order = numpy_generator(spec.seed, Stream.PUBLISH).permutation(len(outcome.synthetic))
    return VFLGANResult(
        synthetic=outcome.synthetic.iloc[order].reset_index(drop=True),
        history=[],
        steps=outcome.privacy["selections"],
        wall_seconds=outcome.seconds,
        n_rows=len(real.frame),
        train_seconds=outcome.seconds,
        privacy=[outcome.privacy],
    )


def privacy_metrics(
    spec: RunSpec, result: VFLGANResult, *, preprocessing: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """``metrics.json``'s ``privacy``: the mechanism, what its epsilon covers
    (``guarantee``, ``covers``, ``not_covered``: :mod:`flwr_vflgan.privacy.guarantee`) and
    what each data holder spent (VT-GAN adds ``joint_epsilon``, the guarantee of all its
    parts' releases together). ``preprocessing``: what the data's preparation read from
    the private rows outside the mechanism, listed as not covered."""
    dp = spec.algorithm.dp
    statement = describe_guarantee(spec.algorithm.variant.value, dp, preprocessing=preprocessing)
    if statement is None:
        return None
    joint = result.privacy[0].get("joint_epsilon")
    return {
        **({"joint_epsilon": joint} if joint is not None else {}),
        "mechanism": dp.mechanism.value,
        **statement.to_dict(),
        "target_epsilon": dp.target_epsilon,
        "delta": result.privacy[0].get("delta", dp.delta),
        "conversion": result.privacy[0].get("conversion", dp.conversion.value),
        "epsilon": max(p["epsilon"] for p in result.privacy),
        "parties": result.privacy,
        "budget_stop": result.budget_stop,
        "published_generator": result.published,
    }


def privacy_rows(privacy: dict[str, Any] | None) -> dict[str, Any]:
    """Rows of report.md's run table for a DP run (none without DP)."""
    if not privacy:
        return {}
    rows: dict[str, Any] = {
        "dp mechanism": privacy["mechanism"],
        "dp guarantee": f"{privacy['guarantee']}: {privacy['covers']}",
        "not covered by epsilon": "; ".join(privacy["not_covered"]),
        "dp target": f"epsilon {privacy['target_epsilon']:g}, delta {privacy['delta']:g}",
    }
    for party in privacy["parties"]:
        rows[f"epsilon spent ({party['party']})"] = (
            f"{party['epsilon']:.4f} after {spent_description(party)}"
        )
        insiders = against_parties_description(party)
        if insiders:
            rows[f"against the other parties ({party['party']})"] = insiders
    if privacy["budget_stop"]:
        rows["stopped early"] = privacy["budget_stop"]
    rows["published generator"] = privacy["published_generator"]
    return rows


def conform(synthetic: pd.DataFrame, real: pd.DataFrame) -> pd.DataFrame:
    """The synthetic table with the real table's column order and dtypes."""
    missing = [c for c in real.columns if c not in synthetic.columns]
    if missing:
        raise RunStopped(f"the published table lacks columns {missing}")
    out = synthetic[list(real.columns)].copy()
    for column in real.columns:
        if out[column].dtype != real[column].dtype:
            out[column] = out[column].astype(real[column].dtype)
    return out
