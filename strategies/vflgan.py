"""The server side of VFLGAN and VFLGAN-base as a Flower strategy.

``VFLGANStrategy.start(grid)`` drives Algorithm 1 of paper 000 over any Flower ``Grid``
(the in-process grid, the simulation engine's, or a deployment's). Every training step
costs one exchange: the message that returns the gradients of step ``t`` also asks for
the forward pass of step ``t + 1``; at an epoch's end the same message asks for the
evaluation rows and a checkpoint. Only one message per node is ever in flight.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from flwr.app import Message
from flwr.serverapp import Grid

from flwr_vflgan.config import Variant, VFLGANConfig
from flwr_vflgan.gan.exchanges import StepServer, fixed_rows, server_block, step_server, wire_width
from flwr_vflgan.gan.schedule import (
    Evaluations,
    Schedule,
    StepKind,
    announce_length,
    budget_schedule,
    describe_length,
)
from flwr_vflgan.privacy import Mechanism, PrivacyPlan, plan_privacy
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import save_server_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import (
    NO_BLOCK,
    GenerateInstruction,
    GenerateReply,
    SetupInstruction,
    SetupReply,
    StepBlock,
    StepInstruction,
    StepReply,
    StepTensors,
)
from flwr_vflgan.runtime.rng import Stream, numpy_generator
from flwr_vflgan.series.training import SeriesServer

from .base import PROGRESS_RECORD, StrategyArgs, VerticalStrategy
from .exchange import (
    RunStopped,
    setup_replies,
)
from .resume import load_server_state, resume_refusal

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

EvaluateFn = Callable[[Sequence[np.ndarray]], Mapping[str, float]]
"""Called with each party's encoded synthetic rows (party order); returns metrics incl. ``fd``."""

PUBLISH_DRAW = 0
"""Evaluation-noise draw of the published table (epochs use draws 1, 2, ...)."""


@dataclass
class VFLGANResult:
    """What a VFLGAN run produced."""

    synthetic: pd.DataFrame
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int | None = None
    best_fd: float | None = None
    steps: int = 0
    exchanges: int = 0
    wall_seconds: float = 0.0
    n_rows: int = 0
    resumed_from_step: int | None = None
    train_seconds: float = 0.0
    """Wall time of the training loop alone (no setup, no publication)."""
    privacy: list[dict] = field(default_factory=list)
    """Each party's spent epsilon and how it was accounted (empty without DP)."""
    budget_stop: str | None = None
    """Why training stopped before its schedule's end to stay within a budget, if it did."""
    published: str = "last"
    """Which generators were published: ``best_fd`` (lowest Frechet distance) or ``last``."""
    phases: dict[str, float] = field(default_factory=dict)
    """Wall seconds of a one-round run's phases (latent diffusion; empty elsewhere)."""


def collect_published(
    replies: Mapping[int, Message], order: Sequence[int], rows: int, private: bool
) -> tuple[pd.DataFrame, list[dict]]:
    """The parties' published blocks side by side (party order) and, under DP, what each
    reported spending.

    Raises
    ------
    RunStopped
        A block is unreadable or has the wrong number of rows, a DP party reported no
        spend, or two parties published the same column.
    """
    blocks, privacy = [], []
    for i, node in enumerate(order):
        who = f"party {i} (node {node})"
        try:
            reply = GenerateReply.from_content(replies[node].content)
            block = pd.read_parquet(io.BytesIO(reply.parquet))
            spent = reply.privacy
        except (ProtocolError, OSError, ValueError) as exc:
            raise RunStopped(f"{who} sent an unreadable synthetic block: {exc}") from exc
        if private:
            if not spent:
                raise RunStopped(f"{who} published without reporting its privacy spend")
            privacy.append(json.loads(spent))
        if len(block) != rows:
            raise RunStopped(f"{who} sent {len(block)} synthetic rows, expected {rows}")
        blocks.append(block)
    table = pd.concat(blocks, axis=1)
    if table.columns.duplicated().any():
        raise RunStopped(
            f"parties published overlapping columns: {sorted(table.columns[table.columns.duplicated()])}"
        )
    return table, privacy


@dataclass
class _Pending:
    """Gradients of the block the parties sent features for, per party in party order."""

    block: StepBlock
    grads: list[list[StepTensors]]


@dataclass
class _Run:
    """One run's state from setup to publication; the part after ``server`` is
    checkpointed with the server's models."""

    grid: Grid
    order: list[int]
    n_rows: int
    schedule: Schedule
    server: StepServer
    server_plan: PrivacyPlan | None
    budget_stop: str | None
    started: float
    server_config: str
    next_step: int = 0
    resumed_from_step: int | None = None
    evaluations: Evaluations = field(default_factory=Evaluations)
    exchanges: int = 1
    promote: bool = False


def _server_spent(plan: PrivacyPlan | None, schedule: Schedule) -> list[dict]:
    """The server's privacy summary under ``dp=end_to_end`` (``D_s`` took one noised update
    per discriminator step of the budget-cut run); nothing otherwise."""
    if plan is None:
        return []
    return [plan.summary("server", schedule.d_steps_before(schedule.total_steps))]


class VFLGANStrategy(VerticalStrategy["_Run", VFLGANResult]):
    """Server of a VFLGAN / VFLGAN-base run.

    Parameters
    ----------
    config
        Algorithm configuration (sent to every party at setup).
    evaluate_fn
        Frechet-distance evaluator with access to the real statistics (the experimenter's
        oracle, as in the paper); ``None`` disables evaluation and best-model selection.
    checkpoint_dir
        Where the server writes its checkpoints (and resumes from); ``None`` disables it.
    party_checkpoint_root
        Directory under which parties without their own ``checkpoint-dir`` write theirs
        (only meaningful when all parties share a file system, i.e. in simulation).
    **common
        The settings every strategy takes (:class:`~.base.VerticalStrategy`): ``n_parties``,
        ``seed`` (the server's own: its gradient-penalty draws and the publication
        shuffle; parties derive nothing from it unless they lack a shared seed),
        ``data_spec``, ``publish_rows``, the exchange settings, and ``progress`` (called
        after every evaluation with epoch, step, fd and elapsed seconds).
    """

    def __init__(
        self,
        config: VFLGANConfig,
        *,
        evaluate_fn: EvaluateFn | None = None,
        checkpoint_dir: str | Path | None = None,
        party_checkpoint_root: str | Path | None = None,
        **common: Unpack[StrategyArgs],
    ) -> None:
        if config.variant in (Variant.WGAN_GP, Variant.GS_WGAN):
            raise ValueError(
                f"{config.variant.value} is centralized: train it with "
                "flwr_vflgan.gan.plain.CentralizedWGANGP or flwr_vflgan.gan.gs_wgan.CentralizedGSWGAN"
            )
        if config.is_vtgan:
            raise ValueError(f"{config.variant.value} runs with VTGANStrategy, not VFLGANStrategy")
        super().__init__(**common, min_parties=2)
        self.config = config
        self.evaluate_fn = evaluate_fn
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.party_checkpoint_root = str(party_checkpoint_root) if party_checkpoint_root else ""

    def summary(self) -> str:
        """One paragraph describing the configured run."""
        t = self.config.train
        if self.config.is_series:
            rates = self.config.series.train
            losses = (
                f"lr g/attr/extr/shared={rates.generator_lr}/{rates.attribute_lr}/"
                f"{rates.extractor_lr}/{rates.shared_lr}, "
                f"shared_discriminator={rates.shared_discriminator}, loss={rates.loss}"
            )
            if rates.wasserstein:
                losses += f", gp={t.gp_weight}"
        else:
            losses = f"{t.describe_lr()}, gp={t.gp_weight}"
        if t.generator_average is not None:
            losses += f", generator_average={t.generator_average:g} epochs"
        return (
            f"VFLGANStrategy({self.config.variant.value}, {self.n_parties} parties, {describe_length(t)}, "
            f"max_steps={t.max_steps}, batch={t.batch_size}, n_critic={t.n_critic}, {losses}, "
            f"eval_every={t.eval_every}, dp={self.config.dp.mechanism.value}, "
            f"checkpoints={'on' if self.checkpoint_dir else 'off'})"
        )

    # -- setup ----------------------------------------------------------------------------
    def configure_setup(self, node_ids: Sequence[int], resume_step: int) -> list[Message]:
        """Setup messages: configuration, resume step; never the shared seed."""
        content = SetupInstruction(
            algorithm=json.dumps(self.config.to_dict(), sort_keys=True),
            data_spec=self.data_spec.to_json() if self.data_spec else "",
            resume_step=resume_step,
            run_seed=self.seed,
            checkpoint_root=self.party_checkpoint_root,
            n_parties=self.n_parties,
        ).to_content()
        return [Message(content, node, P.SETUP) for node in node_ids]

    def aggregate_setup(
        self, replies: Mapping[int, Message]
    ) -> tuple[list[int], int, dict[int, int]]:
        """Node ids ordered by partition id, the common row count, and each DP party's
        allowance of discriminator steps (empty without DP).

        Raises
        ------
        RunStopped
            Partition ids are not ``0..M-1`` exactly once, or rows do not line up.
        """
        order, n_rows, configs = setup_replies(replies, self.n_parties, shared_seed=True)
        self.name_parties(order)
        allowed: dict[int, int] = {}
        for pid, cfg in enumerate(configs):
            try:
                steps = SetupReply.allowed_steps(cfg)
            except ProtocolError as exc:
                raise RunStopped(f"party {pid} sent a malformed setup reply: {exc}") from exc
            if self.config.dp.enabled:
                if steps < 0:
                    raise RunStopped(f"party {pid} reports no privacy budget for a DP run")
                allowed[pid] = steps
        return order, n_rows, allowed

    # -- training steps ------------------------------------------------------------------
    def configure_step(
        self,
        order: Sequence[int],
        pending: _Pending | None,
        forward: StepBlock,
        eval_draw: int,
        eval_rows: int,
        checkpoint: bool,
        promote_best: bool,
    ) -> list[Message]:
        """One fused message per party: apply ``pending``, evaluate, checkpoint, forward."""
        messages = []
        for index, node in enumerate(order):
            content = StepInstruction(
                apply=pending.block if pending else NO_BLOCK,
                forward=forward,
                eval_draw=eval_draw,
                eval_rows=eval_rows,
                checkpoint=checkpoint,
                promote_best=promote_best,
                grads=pending.grads[index] if pending else (),
            ).to_content()
            group = str(forward.start if not forward.empty else P.NO_STEP)
            messages.append(Message(content, node, P.STEP, group_id=group))
        return messages

    def aggregate_step(
        self,
        replies: Mapping[int, Message],
        order: Sequence[int],
        block: StepBlock,
        schedule: Schedule,
    ) -> list[list[StepTensors]]:
        """Validated features of every step of ``block``, per party in party order.

        With Poisson-sampled DP-SGD a discriminator batch has a size the server cannot
        know in advance; every party must send the same number of rows for each step.
        """
        width = wire_width(self.config)
        kinds = [schedule.kind(step) for step in block.steps]
        expected = [fixed_rows(self.config, kind) for kind in kinds]
        discriminator = [kind is StepKind.DISCRIMINATOR for kind in kinds]
        features, sizes = [], {}
        for node in order:
            try:
                rows, tensors = StepReply.read_features(
                    replies[node].content, block, discriminator, None, width
                )
            except ProtocolError as exc:
                raise RunStopped(f"{self.party(node)} sent a malformed step reply: {exc}") from exc
            wrong = [
                (step, r, e)
                for step, r, e in zip(block.steps, rows, expected, strict=True)
                if e not in (None, r)
            ]
            if wrong:
                step, got, want = wrong[0]
                raise RunStopped(
                    f"{self.party(node)} sent {got} rows for step {step}, which has {want}"
                )
            features.append(tensors)
            sizes[node] = rows
        if len({tuple(rows) for rows in sizes.values()}) > 1:
            raise RunStopped(f"the parties' batches differ in size: {sizes} rows per node")
        return features

    def _eval_blocks(
        self, replies: Mapping[int, Message], order: Sequence[int], rows: int
    ) -> list[np.ndarray]:
        blocks = []
        for node in order:
            try:
                blocks.append(StepReply.read_eval_rows(replies[node].content, rows))
            except ProtocolError as exc:
                raise RunStopped(
                    f"{self.party(node)} sent malformed evaluation rows: {exc}"
                ) from exc
        return blocks

    @property
    def aligns_series(self) -> bool:
        """VFLGAN-TS's parties align series files."""
        return self.config.is_series

    # -- the run (VerticalStrategy.start's steps) -------------------------------------------
    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> _Run:
        """Setup (or resumption from the server's checkpoint): the parties' order and rows,
        the schedule cut to the privacy budgets, the server's trainer."""
        server_config = json.dumps(self.config.to_dict(), sort_keys=True)
        resume = load_server_state(self.checkpoint_dir, server_config, self.key_agreement)
        start_step = int(resume[1]["next_step"]) if resume else 0
        agreed = self.before_setup(grid, nodes)
        replies = self.exchange(
            grid, self.configure_setup(nodes, start_step if resume else P.NO_STEP), "setup"
        )
        order, n_rows, allowed = self.aggregate_setup(replies)
        train = self.config.train
        schedule = Schedule.of(n_rows, train)
        announce_length(schedule, train)
        server_plan = self._server_privacy(schedule, allowed)
        schedule, budget_stop = budget_schedule(schedule, allowed)
        server: StepServer = (
            SeriesServer(self.config, self.n_parties, self.seed)
            if self.config.is_series
            else step_server(self.config, self.n_parties, self.seed, server_plan)
        )
        run = _Run(
            grid, order, n_rows, schedule, server, server_plan, budget_stop, started, server_config
        )
        run.exchanges += agreed
        if resume:
            arrays, meta = resume
            server.state.load(arrays["flat"], meta["optimizer_steps"])
            run.next_step = run.resumed_from_step = start_step
            run.evaluations = Evaluations(meta["history"], meta["best_fd"], meta["best_epoch"])
            run.exchanges, run.promote = meta["exchanges"] + 1, meta["promote"]
            log.info("resuming at step %d of %d", start_step, schedule.total_steps)
        return run

    def conclude(self, run: _Run, train_seconds: float) -> VFLGANResult:
        """Publish the best generators (or the last: :meth:`Evaluations.publishes_best`)."""
        dp = self.config.dp
        use_best = run.evaluations.publishes_best(dp.enabled, dp.select_by_fd)
        synthetic, privacy = self._publish(run, use_best=use_best)
        privacy += _server_spent(run.server_plan, run.schedule)
        run.exchanges += 1
        return VFLGANResult(
            synthetic=synthetic,
            history=run.evaluations.history,
            best_epoch=run.evaluations.best_epoch,
            best_fd=run.evaluations.best_fd,
            steps=run.schedule.total_steps,
            exchanges=run.exchanges,
            wall_seconds=time.monotonic() - run.started,
            n_rows=run.n_rows,
            resumed_from_step=run.resumed_from_step,
            train_seconds=train_seconds,
            privacy=privacy,
            budget_stop=run.budget_stop,
            published="best_fd" if use_best else "last",
        )

    def cannot_resume(self) -> str | None:
        """A lost party can rejoin with checkpoints and a shared seed the parties keep."""
        return resume_refusal(self.checkpoint_dir, self.key_agreement)

    def _server_privacy(self, schedule: Schedule, allowed: Mapping[int, int]) -> PrivacyPlan | None:
        """Under ``dp=end_to_end``, the server's plan for ``D_s``: calibrated as every party
        calibrates its own (the same schedule, rows and ``M + 1`` parts), which the
        parties' step allowances must confirm."""
        dp = self.config.dp
        if dp.mechanism is not Mechanism.END_TO_END:
            return None
        plan = plan_privacy(
            dp,
            dataset_size=schedule.n_rows,
            batch_size=schedule.batch_size,
            planned_steps=schedule.d_steps_before(schedule.total_steps),
            parts=self.n_parties + 1,
        )
        for pid, steps in allowed.items():
            if steps != plan.allowed_steps:
                raise RunStopped(
                    f"party {pid}'s budget allows {steps} discriminator steps, the server's "
                    f"joint account of {self.n_parties + 1} parts {plan.allowed_steps}: they "
                    "do not account dp=end_to_end alike"
                )
        return plan

    def train(self, run: _Run) -> None:
        """Exchanges from ``run.next_step`` to the end of the schedule, ``K`` steps each.

        Each exchange applies the previous block's gradients (with the evaluation and
        checkpoint due after it) and asks for the next block's features; the last one
        only applies.
        """
        train, schedule = self.config.train, run.schedule
        eval_rows = train.eval_rows or run.n_rows
        pending: _Pending | None = None
        while True:
            last = run.next_step >= schedule.total_steps
            applied = pending.block.stop - 1 if pending else None
            epoch = schedule.epoch_of(applied) if applied is not None else 0
            do_eval = (
                self.evaluate_fn is not None
                and applied is not None
                and schedule.evaluation_due(applied, train.eval_every)
            )
            do_checkpoint = (
                self.checkpoint_dir is not None
                and applied is not None
                and schedule.ends_epoch(applied)
                and not last
            )
            forward = NO_BLOCK if last else self._next_block(run)
            messages = self.configure_step(
                run.order,
                pending,
                forward,
                epoch if do_eval else P.NO_STEP,
                eval_rows,
                do_checkpoint,
                run.promote,
            )
            replies = self.exchange(
                run.grid, messages, forward.describe() if not last else "last apply"
            )
            run.exchanges += 1
            run.promote = False
            if do_eval:
                assert applied is not None
                self._evaluate(run, replies, eval_rows, epoch, applied + 1)
            if do_checkpoint:
                self._checkpoint(run)
            if last:
                return
            features = self.aggregate_step(replies, run.order, forward, schedule)
            pending = _Pending(forward, server_block(run.server, schedule, forward, features))
            run.next_step = forward.stop
            self.tick(run.next_step, schedule.total_steps, run.started)

    def _next_block(self, run: _Run) -> StepBlock:
        end = run.schedule.block_end(run.next_step, self.config.train.steps_per_exchange)
        return StepBlock(run.next_step, end - run.next_step)

    def _evaluate(
        self, run: _Run, replies: Mapping[int, Message], eval_rows: int, epoch: int, step: int
    ) -> None:
        """Score the parties' evaluation rows; mark the best generators for promotion."""
        assert self.evaluate_fn is not None
        metrics = dict(self.evaluate_fn(self._eval_blocks(replies, run.order, eval_rows)))
        evaluations = run.evaluations
        record, improved = evaluations.add(
            epoch, step, float(metrics["fd"]), time.monotonic() - run.started
        )
        run.promote = run.promote or improved
        log.info(
            "epoch %d step %d FD %.4f (best %.4f at epoch %s)",
            epoch,
            step,
            record["fd"],
            evaluations.best_fd,
            evaluations.best_epoch,
            extra=PROGRESS_RECORD,
        )
        if self.progress is not None:
            self.progress(
                {
                    **record,
                    "best_fd": evaluations.best_fd,
                    "total_steps": run.schedule.total_steps,
                }
            )

    def _checkpoint(self, run: _Run) -> None:
        assert self.checkpoint_dir is not None
        save_server_checkpoint(
            self.checkpoint_dir,
            run.next_step,
            {"flat": run.server.state.to_numpy()},
            {
                "optimizer_steps": run.server.state.optimizer_steps(),
                "history": run.evaluations.history,
                "best_fd": run.evaluations.best_fd,
                "best_epoch": run.evaluations.best_epoch,
                "exchanges": run.exchanges,
                "promote": run.promote,
                "config": run.server_config,
            },
        )

    def _publish(self, run: _Run, use_best: bool) -> tuple[pd.DataFrame, list[dict]]:
        rows = self.publish_rows or run.n_rows
        content = GenerateInstruction(rows, PUBLISH_DRAW, use_best, run.promote).to_content()
        messages = [Message(content, node, P.GENERATE) for node in run.order]
        replies = self.exchange(run.grid, messages, "publication")
        table, privacy = collect_published(replies, run.order, rows, self.config.dp.enabled)
        # Shuffle rows before publication so row order reveals nothing about the noise draws.
        permutation = numpy_generator(self.seed, Stream.PUBLISH).permutation(rows)
        return table.iloc[permutation].reset_index(drop=True), privacy
