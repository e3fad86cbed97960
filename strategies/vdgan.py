"""The server side of VDGAN (paper 004, Algorithm 3) as a Flower strategy.

``VDGANStrategy.start(grid)`` runs setup (each client reports the shape of its encoded
columns), the iterations and publication over any Flower ``Grid``. An iteration costs one
exchange: the server sends every client its columns of the synthetic batch, each client
runs ``n_critic`` critic updates and returns the batch's gradient, and the server updates
its generator. At every epoch's end the server scores a fresh synthetic table with the
evaluator and keeps the generator of the best epoch; the published table is decoded by
the clients, column block by column block, and shuffled.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from flwr.app import Message
from flwr.serverapp import Grid

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.schedule import Evaluations, describe_length
from flwr_vflgan.gan.vd_messages import VDDecode, VDSetupReply, VDStep, VDStepReply, WireSpan
from flwr_vflgan.gan.vdgan import VDGANServer, VDSchedule
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import save_server_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import SetupInstruction, SetupReply
from flwr_vflgan.runtime.rng import Stream, numpy_generator

from .base import PROGRESS_RECORD, StrategyArgs, VerticalStrategy
from .exchange import RunStopped, setup_replies
from .resume import load_server_state, resume_refusal
from .vflgan import PUBLISH_DRAW, EvaluateFn, VFLGANResult, collect_published

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)


@dataclass
class _Run:
    """One VDGAN run's state from setup to publication."""

    grid: Grid
    order: list[int]
    n_rows: int
    schedule: VDSchedule
    server: VDGANServer
    started: float
    exchanges: int = 1
    evaluations: Evaluations = field(default_factory=Evaluations)
    best: np.ndarray | None = None
    budget_stop: str | None = None
    next_iteration: int = 0
    resumed_from_step: int | None = None


class VDGANStrategy(VerticalStrategy["_Run", VFLGANResult]):
    """Server of a VDGAN run: the global generator and the iterations.

    Parameters
    ----------
    config
        Algorithm configuration (``variant`` ``vdgan``; sent to every client at setup).
    evaluate_fn
        Frechet-distance evaluator over the clients' encoded blocks (the experimenter's
        oracle); ``None`` disables evaluation and best-epoch selection.
    checkpoint_dir
        Where the server writes its checkpoints (after every epoch's last iteration but
        the run's last) and resumes from; ``None`` disables them.
    party_checkpoint_root
        Directory under which clients without their own ``checkpoint-dir`` write theirs
        (``<root>/party-<id>``; simulated clients).
    **common
        The settings every strategy takes (:class:`~.base.VerticalStrategy`).
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
        if not config.is_vdgan:
            raise ValueError(f"VDGANStrategy trains vdgan, got variant {config.variant.value!r}")
        super().__init__(**common, min_parties=2)
        self.config = config
        self.evaluate_fn = evaluate_fn
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.party_checkpoint_root = str(party_checkpoint_root) if party_checkpoint_root else ""

    def summary(self) -> str:
        """One line describing the configured run."""
        t = self.config.train
        return (
            f"VDGANStrategy({self.n_parties} clients, {describe_length(t)}, max_steps={t.max_steps}, "
            f"batch={t.batch_size}, n_critic={t.n_critic}, {t.describe_lr()}, gp={t.gp_weight}, "
            f"checkpoints={'on' if self.checkpoint_dir else 'off'})"
        )

    # -- the run (VerticalStrategy.start's steps) -------------------------------------------
    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> _Run:
        """Setup (or resumption from the server's checkpoint): the clients' order, rows and
        column shapes; the server's generator."""
        server_config = json.dumps(self.config.to_dict(), sort_keys=True)
        resume = load_server_state(self.checkpoint_dir, server_config, self.key_agreement)
        agreed = self.before_setup(grid, nodes)
        content = SetupInstruction(
            algorithm=server_config,
            data_spec=self.data_spec.to_json() if self.data_spec else "",
            resume_step=int(resume[1]["next_step"]) if resume else P.NO_STEP,
            run_seed=self.seed,
            checkpoint_root=self.party_checkpoint_root,
            n_parties=self.n_parties,
        ).to_content()
        replies = self.exchange(grid, [Message(content, n, P.VD_SETUP) for n in nodes], "setup")
        order, n_rows, configs = setup_replies(
            replies, self.n_parties, parties="clients", shared_seed=True
        )
        self.name_parties(order, "client")
        spans: list[list[WireSpan]] = []
        allowed: list[int] = []
        for pid, cfg in enumerate(configs):
            try:
                spans.append(VDSetupReply.spans_of(cfg))
                allowed.append(SetupReply.allowed_steps(cfg))
            except ProtocolError as exc:
                raise RunStopped(f"client {pid} sent a malformed setup reply: {exc}") from exc
        try:
            schedule = VDSchedule.of(n_rows, self.config.train)
        except ValueError as exc:
            raise RunStopped(str(exc)) from exc
        schedule, budget_stop = self._budget(schedule, allowed)
        server = VDGANServer(self.config, spans, self.seed)
        run = _Run(grid, order, n_rows, schedule, server, started, exchanges=1 + agreed)
        run.budget_stop = budget_stop
        if resume:
            _restore(run, *resume)
            log.info("resuming at iteration %d of %d", run.next_iteration, schedule.total)
        return run

    def cannot_resume(self) -> str | None:
        """A lost client can rejoin with checkpoints and a shared seed the clients keep."""
        return resume_refusal(self.checkpoint_dir, self.key_agreement)

    def _checkpoint(self, run: _Run, next_iteration: int) -> None:
        """The generator, its Adam, the evaluations and the best epoch's generator."""
        assert self.checkpoint_dir is not None
        arrays = {"flat": run.server.state.to_numpy()}
        if run.best is not None:
            arrays["best"] = run.best
        save_server_checkpoint(
            self.checkpoint_dir,
            next_iteration,
            arrays,
            {
                "optimizer_steps": run.server.state.optimizer_steps(),
                "history": run.evaluations.history,
                "best_fd": run.evaluations.best_fd,
                "best_epoch": run.evaluations.best_epoch,
                "exchanges": run.exchanges,
                "config": json.dumps(self.config.to_dict(), sort_keys=True),
            },
        )

    def _budget(
        self, schedule: VDSchedule, allowed: Sequence[int]
    ) -> tuple[VDSchedule, str | None]:
        """The schedule cut to the iterations every client's budget allows, and why."""
        if not self.config.dp.enabled:
            return schedule, None
        if any(a < 0 for a in allowed):
            raise RunStopped("a client reports no privacy budget for a DP run")
        iterations = min(allowed) // self.config.train.n_critic
        if iterations < 1:
            raise RunStopped(
                f"the clients' budgets allow {min(allowed)} critic steps, fewer than one "
                f"iteration's {self.config.train.n_critic}: raise dp.target_epsilon"
            )
        if iterations >= schedule.total:
            return schedule, None
        reason = (
            f"the privacy budget allows {iterations} of the {schedule.total} planned "
            f"iterations ({min(allowed)} critic steps)"
        )
        log.warning("%s: training stops there", reason)
        return VDSchedule(schedule.per_epoch, iterations), reason

    def train(self, run: _Run) -> None:
        """Every iteration: one exchange, then the generator's update; an evaluation at
        every epoch's end."""
        batch, server, schedule = self.config.train.batch_size, run.server, run.schedule
        for iteration in range(run.next_iteration, schedule.total):
            fakes = server.synthesize(iteration)
            checkpoint = (
                self.checkpoint_dir is not None
                and schedule.ends_epoch(iteration)
                and iteration + 1 < schedule.total
            )
            messages = [
                Message(VDStep(iteration, f.numpy(), checkpoint).to_content(), node, P.VD_STEP)
                for f, node in zip(fakes, run.order, strict=True)
            ]
            replies = self.exchange(run.grid, messages, f"iteration {iteration}")
            run.exchanges += 1
            grads = []
            for width, node in zip(server.widths, run.order, strict=True):
                try:
                    reply = VDStepReply.from_content(replies[node].content, iteration, batch, width)
                except ProtocolError as exc:
                    raise RunStopped(
                        f"{self.party(node)} sent a malformed step reply: {exc}"
                    ) from exc
                grads.append(torch.from_numpy(reply.grad))
            server.update(iteration, grads)
            self.tick(iteration + 1, schedule.total, run.started)
            due = schedule.evaluation_due(iteration, self.config.train.eval_every)
            if self.evaluate_fn is not None and due:
                self._evaluate(run, iteration)
            if checkpoint:
                self._checkpoint(run, iteration + 1)

    def _evaluate(self, run: _Run, iteration: int) -> None:
        assert self.evaluate_fn is not None
        epoch = run.schedule.epoch_of(iteration)
        rows = self.config.train.eval_rows or run.n_rows
        blocks = [b.numpy() for b in run.server.generate(rows, epoch)]
        fd = float(self.evaluate_fn(blocks)["fd"])
        record, improved = run.evaluations.add(
            epoch, iteration + 1, fd, time.monotonic() - run.started
        )
        if improved:
            run.best = run.server.snapshot()
        log.info(
            "epoch %d iteration %d FD %.4f (best %.4f at epoch %s)",
            epoch,
            iteration + 1,
            fd,
            run.evaluations.best_fd,
            run.evaluations.best_epoch,
            extra=PROGRESS_RECORD,
        )
        if self.progress is not None:
            self.progress(
                {**record, "best_fd": run.evaluations.best_fd, "total_steps": run.schedule.total}
            )

    def conclude(self, run: _Run, train_seconds: float) -> VFLGANResult:
        """Publish the best epoch's generator (the last one without evaluations)."""
        use_best = run.best is not None and run.evaluations.publishes_best(
            self.config.dp.enabled, self.config.dp.select_by_fd
        )
        if use_best:
            assert run.best is not None
            run.server.load_snapshot(run.best)
        rows = self.publish_rows or run.n_rows
        blocks = run.server.generate(rows, PUBLISH_DRAW)
        messages = [
            Message(VDDecode(b.numpy()).to_content(), node, P.VD_DECODE)
            for b, node in zip(blocks, run.order, strict=True)
        ]
        replies = self.exchange(run.grid, messages, "publication")
        table, privacy = collect_published(replies, run.order, rows, self.config.dp.enabled)
        permutation = numpy_generator(self.seed, Stream.PUBLISH).permutation(rows)
        return VFLGANResult(
            synthetic=table.iloc[permutation].reset_index(drop=True),
            history=run.evaluations.history,
            best_epoch=run.evaluations.best_epoch,
            best_fd=run.evaluations.best_fd,
            steps=run.schedule.total,
            exchanges=run.exchanges + 1,
            wall_seconds=time.monotonic() - run.started,
            n_rows=run.n_rows,
            resumed_from_step=run.resumed_from_step,
            train_seconds=train_seconds,
            privacy=privacy,
            budget_stop=run.budget_stop,
            published="best_fd" if use_best else "last",
        )


def _restore(run: _Run, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Roll the server back to its checkpoint (:meth:`VDGANStrategy._checkpoint`)."""
    run.server.state.load(arrays["flat"], meta["optimizer_steps"])
    run.best = arrays.get("best")
    run.evaluations = Evaluations(meta["history"], meta["best_fd"], meta["best_epoch"])
    run.next_iteration = run.resumed_from_step = int(meta["next_step"])
    run.exchanges += int(meta["exchanges"])
