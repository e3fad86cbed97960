"""The server side of VT-GAN (paper 001, Algorithm 1) as a Flower strategy.

``VTGANStrategy.start(grid)`` runs setup (each client reports its shape), build (the
server assigns each client its widths), training and publication over any Flower
``Grid``. A discriminator step costs one exchange: the message that carries step
``t - 1``'s gradients also carries step ``t``'s chunks of ``G^t``'s output and asks the
client chosen for step ``t + 1`` for its conditional vectors. A generator step costs
two: the clients' chunk gradients must come back before ``G^t`` moves on. Only one
message per node is ever in flight.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from flwr.app import Message
from flwr.serverapp import Grid

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.schedule import Schedule, StepKind, announce_length, describe_length
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.blocks import NO_BLOCK, StepBlock
from flwr_vflgan.runtime.checkpoint import save_server_checkpoint
from flwr_vflgan.runtime.codec import (
    ProtocolError,
)
from flwr_vflgan.vtgan.blocks import (
    BlockForward,
    StepGrads,
    blocks,
    feature_sizes,
    pack_grads,
    server_critic_block,
    unpack_forward,
)
from flwr_vflgan.vtgan.messages import (
    CONDITIONS,
    ROWS,
    VTBuild,
    VTBuildReply,
    VTGenerate,
    VTSetupReply,
    VTStepInstruction,
    VTStepReply,
    vt_setup,
)
from flwr_vflgan.vtgan.privacy import VTGANPrivacy, plan_vtgan_privacy
from flwr_vflgan.vtgan.server import ClientShape, VTGANServer

from .base import PROGRESS_RECORD, StrategyArgs, VerticalStrategy
from .exchange import (
    RunStopped,
    setup_replies,
)
from .resume import load_server_state, resume_refusal
from .traffic import Traffic
from .vflgan import PUBLISH_DRAW, VFLGANResult, collect_published

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    """A critic block the clients ran forward and whose gradients they await."""

    steps: range
    clients: list[int]
    grads: list[list[StepGrads]]


@dataclass
class _Forward:
    """A block the server asks the clients to run forward."""

    steps: range
    clients: list[int]
    chunks: list[list[torch.Tensor]]
    """``chunks[j][i]``: client ``i``'s chunk of the block's ``j``-th step."""
    discriminator: bool


@dataclass
class _Run:
    """The state of one run's training loop."""

    grid: Grid
    order: list[int]
    shapes: list[ClientShape]
    server: VTGANServer
    schedule: Schedule
    n_rows: int
    started: float
    server_config: str
    exchanges: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    sums: dict[str, list[float]] = field(default_factory=dict)
    next_step: int = 0
    """The first step ``train`` runs (0, or the step a checkpoint resumes at)."""
    resumed_from_step: int | None = None

    def record(self, key: str, value: float) -> None:
        """Add one step's loss to the running epoch means."""
        self.sums.setdefault(key, []).append(value)


class VTGANStrategy(VerticalStrategy["_Run", VFLGANResult]):
    """Server of a VT-GAN run.

    Parameters
    ----------
    config
        Algorithm configuration (``variant`` ``vtgan``; sent to every client at setup).
    noise_seed
        Seed of the server's own DP-SGD noise (default: derived from ``seed``).
    checkpoint_dir
        Where the server writes its checkpoints (after the last generator step of every
        epoch) and resumes from; ``None`` disables them.
    party_checkpoint_root
        Directory under which clients without their own ``checkpoint-dir`` write theirs
        (``<root>/party-<id>``; simulated clients).
    **common
        The settings every strategy takes (:class:`~.base.VerticalStrategy`):
        ``n_parties`` (clients), ``seed`` (the server's own: noise, client choice,
        dropout, penalty weights), ``data_spec``, ``publish_rows``, the exchange
        settings, and ``progress`` (called after every epoch with epoch, step, losses
        and elapsed seconds).
    """

    def __init__(
        self,
        config: VFLGANConfig,
        *,
        noise_seed: int | None = None,
        checkpoint_dir: str | Path | None = None,
        party_checkpoint_root: str | Path | None = None,
        **common: Unpack[StrategyArgs],
    ) -> None:
        if not config.is_vtgan:
            raise ValueError(f"VTGANStrategy trains vtgan, got variant {config.variant.value!r}")
        super().__init__(**common, min_parties=1)
        if config.dp.enabled and config.dp.mechanism.value != "dpsgd":
            raise ValueError(
                f"VT-GAN trains its discriminators with dp=dpsgd (paper 001, Section 4.3.4); "
                f"dp.mechanism={config.dp.mechanism.value} is VFLGAN's"
            )
        if config.dp.poisson:
            raise ValueError(
                "VT-GAN's DP-SGD draws fixed-size batches (dp.sampling=without_replacement); "
                "dp.sampling=poisson is not supported for algorithm=vtgan"
            )
        self.config = config
        self.noise_seed = noise_seed
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.party_checkpoint_root = str(party_checkpoint_root) if party_checkpoint_root else ""
        self.traffic = Traffic()
        self.count_columns: tuple[int, ...] = ()

    def summary(self) -> str:
        """One paragraph describing the configured run."""
        t, v = self.config.train, self.config.vtgan
        return (
            f"VTGANStrategy({self.n_parties} clients, {v.partition_name}, {describe_length(t)}, "
            f"max_steps={t.max_steps}, batch={t.batch_size}, n_critic={t.n_critic}, lr={t.lr}, "
            f"shuffle={v.shuffle}, dp={self.config.dp.mechanism.value}, "
            f"checkpoints={'on' if self.checkpoint_dir else 'off'})"
        )

    def configure_setup(
        self, node_ids: Sequence[int], resume_step: int = P.NO_STEP
    ) -> list[Message]:
        """Setup messages: configuration, data spec and the step to resume at; never a
        shared seed."""
        setup = vt_setup(
            json.dumps(self.config.to_dict(), sort_keys=True),
            self.data_spec.to_json() if self.data_spec else "",
            self.seed,
            resume_step,
            self.party_checkpoint_root,
        )
        return [Message(setup.to_content(), node, P.VT_SETUP) for node in node_ids]

    def aggregate_setup(
        self, replies: Mapping[int, Message]
    ) -> tuple[list[int], int, list[ClientShape]]:
        """Node ids by partition id, the common row count and every client's shape."""
        order, n_rows, configs = setup_replies(
            replies, self.n_parties, parties="clients", shared_seed=True
        )
        self.name_parties(order, "client")
        shapes: list[ClientShape] = []
        cond_columns: list[int] = []
        for pid, cfg in enumerate(configs):
            try:
                n_columns, encoded_width, cond_dim, count = VTSetupReply.shape_of(cfg)
                shape = ClientShape(n_columns, encoded_width, cond_dim)
                cond_columns.append(count)
            except ProtocolError as exc:
                raise RunStopped(f"party {pid} sent a malformed setup reply: {exc}") from exc
            if shape.n_columns < 1 or shape.encoded_width < 1 or shape.cond_dim < 0:
                raise RunStopped(f"node {order[pid]} reported an impossible shape {shape}")
            shapes.append(shape)
        self.count_columns = tuple(cond_columns)
        return order, n_rows, shapes

    def _build(self, grid: Grid, order: Sequence[int], server: VTGANServer) -> None:
        messages = []
        for node, layout in zip(order, server.layouts, strict=True):
            # Every client calibrates its own noise for the joint target.
            build = VTBuild(
                layout.chunk_width, layout.g_block_width, layout.d_block_width, self.count_columns
            )
            messages.append(Message(build.to_content(), node, P.VT_BUILD))
        replies = self.exchange(grid, messages, "build")
        for i, node in enumerate(order):
            try:
                width = VTBuildReply.from_content(replies[node].content).feature_dim
            except ProtocolError as exc:
                raise RunStopped(f"{self.party(node)} sent a malformed build reply: {exc}") from exc
            if width != server.feature_dims[i]:
                raise RunStopped(
                    f"{self.party(node)} built a bottom discriminator of width {width}, the server "
                    f"expects {server.feature_dims[i]}"
                )

    # -- training ------------------------------------------------------------------------
    def _step_messages(
        self,
        order: Sequence[int],
        pending: _Pending | None,
        forward: _Forward | None,
        conditions: Mapping[int, list[int]],
        checkpoint: bool = False,
    ) -> list[Message]:
        messages = []
        for i, node in enumerate(order):
            grads = selected = None
            counts: list[int] = []
            if pending is not None:
                grads, selected, counts = pack_grads(pending.grads[i])
            instruction = VTStepInstruction(
                applied=_block_of(pending.steps if pending else None),
                forward=_block_of(forward.steps if forward else None),
                chosen=tuple(c == i for c in forward.clients) if forward else (),
                condition_steps=tuple(conditions.get(i, ())),
                grads=grads,
                selected=selected,
                selected_counts=tuple(counts),
                chunks=torch.cat([c[i] for c in forward.chunks]).numpy() if forward else None,
                checkpoint=checkpoint,
            )
            steps = forward.steps if forward else pending.steps if pending else range(1)
            messages.append(
                Message(instruction.to_content(), node, P.VT_STEP, group_id=str(steps[0]))
            )
        return messages

    def _reply(
        self,
        run: _Run,
        replies: Mapping[int, Message],
        i: int,
        forward: _Forward | None,
        condition_steps: Sequence[int],
        chunk_grad: bool = False,
    ) -> VTStepReply:
        """Client ``i``'s decoded step reply, with every shape checked against the block."""
        node, server = run.order[i], run.server
        batch, private = self.config.train.batch_size, server.privacy is not None
        feature_rows = index_rows = 0
        if forward is not None:
            chosen = [c == i for c in forward.clients]
            sizes = feature_sizes(forward.discriminator, chosen, private, batch, run.n_rows)
            feature_rows = sum(sizes)
            if forward.discriminator and not private:
                index_rows = batch * sum(chosen)
        condition_rows = sum(
            batch * (2 if run.schedule.kind(step) is StepKind.DISCRIMINATOR else 1)
            for step in condition_steps
        )
        try:
            return VTStepReply.from_content(
                replies[node].content,
                feature_rows=feature_rows,
                feature_dim=server.feature_dims[i],
                index_rows=index_rows,
                n_rows=run.n_rows,
                condition_rows=condition_rows,
                cond_dim=run.shapes[i].cond_dim,
                chunk_shape=(batch, server.chunk_widths[i]) if chunk_grad else None,
            )
        except ProtocolError as exc:
            raise RunStopped(f"{self.party(node)} sent a malformed step reply: {exc}") from exc

    # -- the run (VerticalStrategy.start's steps) -------------------------------------------
    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> _Run:
        """Setup and build (or resumption from the server's checkpoint): the clients'
        order, rows and shapes, the privacy plan, the server's models."""
        server_config = json.dumps(self.config.to_dict(), sort_keys=True)
        resume = load_server_state(self.checkpoint_dir, server_config, self.key_agreement)
        resume_step = int(resume[1]["next_step"]) if resume else P.NO_STEP
        agreed = self.before_setup(grid, nodes)
        order, n_rows, shapes = self.aggregate_setup(
            self.exchange(grid, self.configure_setup(nodes, resume_step), "setup")
        )
        train = self.config.train
        schedule = Schedule.of(n_rows, train)
        announce_length(schedule, train)
        privacy = self._plan_privacy(n_rows, schedule)
        server = VTGANServer(self.config.vtgan, train, shapes, self.seed, privacy, self.noise_seed)
        self._build(grid, order, server)
        self.traffic = Traffic()
        run = _Run(grid, order, shapes, server, schedule, n_rows, started, server_config)
        run.exchanges = 2 + agreed
        if resume:
            arrays, meta = resume
            server.state.load(arrays["flat"], meta["optimizer_steps"])
            run.next_step = run.resumed_from_step = resume_step
            run.history, run.sums = meta["history"], meta["sums"]
            run.exchanges += meta["exchanges"]
            self.traffic = Traffic(**meta["traffic"])
            log.info("resuming at step %d of %d", resume_step, schedule.total_steps)
        return run

    def cannot_resume(self) -> str | None:
        """A lost client can rejoin with checkpoints and a shared seed the clients keep."""
        return resume_refusal(self.checkpoint_dir, self.key_agreement)

    def _checkpoint(self, run: _Run, next_step: int) -> None:
        """The server's models and bookkeeping, to resume at ``next_step``."""
        assert self.checkpoint_dir is not None
        save_server_checkpoint(
            self.checkpoint_dir,
            next_step,
            {"flat": run.server.state.to_numpy()},
            {
                "optimizer_steps": run.server.state.optimizer_steps(),
                "history": run.history,
                "sums": run.sums,
                "exchanges": run.exchanges,
                "traffic": asdict(self.traffic),
                "config": run.server_config,
            },
        )

    def conclude(self, run: _Run, train_seconds: float) -> VFLGANResult:
        """Publication (the last generators: VT-GAN evaluates no distance while training)."""
        synthetic, spent = self._publish(run.grid, run.order, run.server, run.n_rows)
        if run.server.privacy is not None:
            d_steps = run.schedule.d_steps_before(run.schedule.total_steps)
            spent = [run.server.privacy_summary(d_steps) or {}, *spent]
        return VFLGANResult(
            synthetic=synthetic,
            history=run.history,
            steps=run.schedule.total_steps,
            exchanges=run.exchanges + 2,
            wall_seconds=time.monotonic() - run.started,
            n_rows=run.n_rows,
            resumed_from_step=run.resumed_from_step,
            train_seconds=train_seconds,
            privacy=spent,
            published="last",
        )

    def _plan_privacy(self, n_rows: int, schedule: Schedule) -> VTGANPrivacy | None:
        """The server's DP plan: the same calibration every client runs for itself."""
        if not self.config.dp.enabled:
            return None
        privacy = plan_vtgan_privacy(
            self.config.dp,
            count_noise=self.config.vtgan.dp_count_noise,
            count_columns=self.count_columns,
            dataset_size=n_rows,
            batch_size=self.config.train.batch_size,
            planned_steps=schedule.d_steps_before(schedule.total_steps),
        )
        log.info(
            "DP-SGD on every critic part: sigma %.4f, clip %g, joint epsilon %.4f at delta %g",
            privacy.noise_multiplier,
            privacy.clip,
            privacy.joint_epsilon(privacy.planned_steps),
            self.config.dp.delta,
        )
        return privacy

    def _step_exchange(
        self,
        run: _Run,
        pending: _Pending | None,
        forward: _Forward | None,
        conditions: Mapping[int, list[int]],
        describe: str,
        chunk_grads: bool = False,
        checkpoint: bool = False,
    ) -> list[VTStepReply]:
        messages = self._step_messages(run.order, pending, forward, conditions, checkpoint)
        replies = self.exchange(run.grid, messages, describe)
        applied = run.schedule.kind(pending.steps[0]).value if pending else "d"
        ahead = run.schedule.kind(forward.steps[0]).value if forward else applied
        self.traffic.count((applied, ahead), messages, replies, run.order)
        run.exchanges += 1
        return [
            self._reply(run, replies, i, forward, conditions.get(i, ()), chunk_grads)
            for i in range(len(run.order))
        ]

    def _collect_conditions(
        self,
        run: _Run,
        replies: Sequence[VTStepReply],
        requested: Mapping[int, list[int]],
    ) -> dict[int, tuple[np.ndarray, np.ndarray | None]]:
        """Each requested step's conditions (fake rows', and real rows' for a critic step)."""
        batch, out = self.config.train.batch_size, {}
        for i, steps in requested.items():
            packed = replies[i].conditions
            assert packed is not None  # checked against the request by _reply
            offset = 0
            for step in steps:
                cond = packed[offset : offset + batch]
                offset += batch
                real = None
                if run.schedule.kind(step) is StepKind.DISCRIMINATOR:
                    real = packed[offset : offset + batch]
                    offset += batch
                out[step] = (cond, real)
        return out

    def _forward_block(
        self, run: _Run, steps: range, conditions: Mapping[int, tuple]
    ) -> tuple[_Forward, list[torch.Tensor]]:
        """The server's draws for a block: chosen clients, conditions and chunks."""
        server = run.server
        discriminator = run.schedule.kind(steps[0]) is StepKind.DISCRIMINATOR
        clients = [server.choose_client(step) for step in steps]
        cond_fake = [
            server.full_condition(c, conditions[step][0])
            for step, c in zip(steps, clients, strict=True)
        ]
        chunks = [
            server.chunks(step, cond, keep_graph=not discriminator)
            for step, cond in zip(steps, cond_fake, strict=True)
        ]
        return _Forward(steps, clients, chunks, discriminator), cond_fake

    def train(self, run: _Run) -> None:
        """Every block of the schedule from ``run.next_step`` (Algorithm 1, ``K`` critic
        steps per exchange); a critic block costs one exchange, a generator step two.
        A first exchange asks for the first block's conditions."""
        server, schedule = run.server, run.schedule
        plan = blocks(schedule, self.config.train.steps_per_exchange)
        first = _block_index(plan, run.next_step)
        requested = _requests(server, plan[first])
        describe = f"conditions of step {run.next_step}"
        replies = self._step_exchange(run, None, None, requested, describe)
        conditions = self._collect_conditions(run, replies, requested)
        pending: _Pending | None = None
        for b in range(first, len(plan)):
            steps = plan[b]
            kind = schedule.kind(steps[0])
            self.traffic.steps[kind.value] = self.traffic.steps.get(kind.value, 0) + len(steps)
            forward, cond_fake = self._forward_block(run, steps, conditions)
            requested = _requests(server, plan[b + 1]) if b + 1 < len(plan) else {}
            describe = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
            replies = self._step_exchange(run, pending, forward, requested, describe)
            upcoming = self._collect_conditions(run, replies, requested)
            forwards = self._forwards(run, replies, forward)
            if forward.discriminator:
                cond_real = [
                    server.full_condition(c, _real_conditions(conditions, step))
                    for step, c in zip(steps, forward.clients, strict=True)
                ]
                grads, losses = server_critic_block(
                    server, steps, forward.clients, cond_real, cond_fake, forwards
                )
                pending = _Pending(steps, forward.clients, grads)
                for loss in losses:
                    run.record("d_loss", loss)
            else:
                self._generator_update(run, forward, forwards, cond_fake[0])
                pending = None
            conditions = upcoming
            last = steps[-1]
            self.tick(last + 1, schedule.total_steps, run.started)
            if schedule.ends_epoch(last) or last + 1 == schedule.total_steps:
                self._end_epoch(run, last)
        if pending is not None:
            self._step_exchange(run, pending, None, {}, "last update")

    def _forwards(
        self, run: _Run, replies: Sequence[VTStepReply], forward: _Forward
    ) -> list[BlockForward]:
        batch, private = self.config.train.batch_size, run.server.privacy is not None
        out = []
        for i, reply in enumerate(replies):
            assert reply.features is not None  # checked against the block by _reply
            out.append(
                unpack_forward(
                    torch.from_numpy(reply.features),
                    reply.rows,
                    forward.discriminator,
                    [c == i for c in forward.clients],
                    private,
                    batch,
                    run.n_rows,
                )
            )
        return out

    def _generator_update(
        self,
        run: _Run,
        forward: _Forward,
        forwards: Sequence[BlockForward],
        cond: torch.Tensor,
    ) -> None:
        """The generator step's second exchange: fake-feature gradients out, chunk
        gradients back, then ``G^t``'s update."""
        server, step = run.server, forward.steps[0]
        grads_fake, loss = server.generator_loss(step, [f.fake[0] for f in forwards], cond)
        pending = _Pending(
            forward.steps, forward.clients, [[StepGrads(g, None)] for g in grads_fake]
        )
        checkpoint = self.checkpoint_dir is not None and checkpoint_due(run.schedule, step)
        replies = self._step_exchange(
            run, pending, None, {}, f"generator update {step}", True, checkpoint
        )
        chunk_grads = [torch.from_numpy(r.chunk_grad) for r in replies if r.chunk_grad is not None]
        server.generator_update(chunk_grads)
        run.record("g_loss", loss)
        run.record("cond_loss", replies[forward.clients[0]].cond_loss)
        if checkpoint:
            self._checkpoint(run, step + 1)

    def _end_epoch(self, run: _Run, step: int) -> None:
        record = {
            "epoch": float(run.schedule.epoch_of(step)),
            "step": float(step + 1),
            "elapsed": time.monotonic() - run.started,
            **{k: float(np.mean(v)) for k, v in run.sums.items()},
        }
        run.history.append(record)
        run.sums = {}
        log.info(
            "epoch %d step %d d_loss %.4f g_loss %.4f",
            run.schedule.epoch_of(step),
            step + 1,
            record.get("d_loss", float("nan")),
            record.get("g_loss", float("nan")),
            extra=PROGRESS_RECORD,
        )
        if self.progress is not None:
            self.progress({**record, "total_steps": run.schedule.total_steps})

    # -- publication ------------------------------------------------------------------------
    def _publish(
        self, grid: Grid, order: Sequence[int], server: VTGANServer, n_rows: int
    ) -> tuple[pd.DataFrame, list[dict]]:
        rows = self.publish_rows or n_rows
        owners = server.generation_owners(rows, PUBLISH_DRAW)
        counts = [int((owners == i).sum()) for i in range(len(order))]
        messages = [
            Message(
                VTGenerate(CONDITIONS, counts[i], PUBLISH_DRAW).to_content(), node, P.VT_GENERATE
            )
            for i, node in enumerate(order)
        ]
        replies = self.exchange(grid, messages, "publication conditions")
        parts = {}
        for i, node in enumerate(order):
            if counts[i] == 0:
                continue
            try:
                parts[i] = VTGenerate.read_conditions(
                    replies[node].content, counts[i], server.cond_dims[i]
                )
            except ProtocolError as exc:
                raise RunStopped(
                    f"{self.party(node)} sent malformed publication conditions: {exc}"
                ) from exc
        chunks = server.generation_chunks(server.assemble_condition(owners, parts), PUBLISH_DRAW)
        messages = [
            Message(
                VTGenerate(ROWS, rows, PUBLISH_DRAW, chunks[i].detach().numpy()).to_content(),
                node,
                P.VT_GENERATE,
            )
            for i, node in enumerate(order)
        ]
        replies = self.exchange(grid, messages, "publication")
        table, spent = collect_published(replies, order, rows, self.config.dp.enabled)
        return table, spent


def checkpoint_due(schedule: Schedule, step: int) -> bool:
    """Whether the run is checkpointed after generator step ``step``: the last generator
    step of its epoch, with steps left to run. Nothing is pending after a generator
    step (its update took the second exchange), so the clients and the server can all
    resume from there."""
    epoch_end = schedule.epoch_of(step) * schedule.steps_per_epoch
    if step + 1 >= schedule.total_steps:
        return False
    later = range(step + 1, min(epoch_end, schedule.total_steps))
    return all(schedule.kind(s) is StepKind.DISCRIMINATOR for s in later)


def _block_index(plan: Sequence[range], step: int) -> int:
    """The index of the block of ``plan`` that starts at ``step``."""
    for b, steps in enumerate(plan):
        if steps[0] == step:
            return b
    raise RunStopped(f"no block of the schedule starts at step {step}: cannot resume there")


def _block_of(steps: range | None) -> StepBlock:
    return NO_BLOCK if steps is None else StepBlock(steps[0], len(steps))


def _requests(server: VTGANServer, steps: range) -> dict[int, list[int]]:
    """Which client supplies the conditions of each step of a block: ``{client: steps}``."""
    out: dict[int, list[int]] = {}
    for step in steps:
        out.setdefault(server.choose_client(step), []).append(step)
    return out


def _real_conditions(conditions: Mapping[int, tuple], step: int) -> np.ndarray:
    """The real rows' conditions of critic step ``step`` (requested with its fake ones)."""
    real = conditions[step][1]
    if real is None:
        raise RunStopped(f"no real-row conditions arrived for critic step {step}")
    return real
