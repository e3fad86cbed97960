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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import (
    ProtocolError,
    get_config,
    get_field,
    get_indices,
    get_tensor,
    tensors_to_record,
)
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.vtgan.privacy import VTGANPrivacy, plan_vtgan_privacy
from flwr_vflgan.vtgan.server import ClientShape, VTGANServer

from .base import VerticalStrategy
from .exchange import (
    DEFAULT_POLL_INTERVAL,
    RunStopped,
    setup_replies,
)
from .traffic import Traffic
from .vflgan import PUBLISH_DRAW, VFLGANResult, collect_published

log = logging.getLogger(__name__)


def _int(cfg: ConfigRecord, key: str) -> int:
    return int(get_field(cfg, key, int))  # type: ignore[call-overload]


@dataclass
class _Pending:
    step: int
    client: int
    grads_real: list[torch.Tensor]
    grads_fake: list[torch.Tensor]


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
    exchanges: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    sums: dict[str, list[float]] = field(default_factory=dict)

    def record(self, key: str, value: float) -> None:
        """Add one step's loss to the running epoch means."""
        self.sums.setdefault(key, []).append(value)


class VTGANStrategy(VerticalStrategy):
    """Server of a VT-GAN run.

    Parameters
    ----------
    config
        Algorithm configuration (``variant`` ``vtgan``; sent to every client at setup).
    n_parties
        Number of clients; the run waits for that many nodes.
    seed
        The server's own seed (noise, client choice, dropout, penalty weights).
    data_spec
        Table and column split for simulated clients; ``None`` in a deployment.
    publish_rows
        Rows of the published table (default: as many as the training table).
    poll_interval, timeout, node_wait_timeout
        As for :class:`~flwr_vflgan.strategies.VFLGANStrategy`.
    progress
        Called with a dict after every epoch (epoch, step, losses, elapsed seconds).
    noise_seed
        Seed of the server's own DP-SGD noise (default: derived from ``seed``).
    """

    def __init__(
        self,
        config: VFLGANConfig,
        *,
        n_parties: int,
        seed: int = 0,
        data_spec: DataSpec | None = None,
        publish_rows: int | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float = 600.0,
        node_wait_timeout: float = 120.0,
        progress: Callable[[dict[str, float]], None] | None = None,
        noise_seed: int | None = None,
    ) -> None:
        if not config.is_vtgan:
            raise ValueError(f"VTGANStrategy trains vtgan, got variant {config.variant.value!r}")
        super().__init__(
            n_parties=n_parties,
            seed=seed,
            data_spec=data_spec,
            publish_rows=publish_rows,
            poll_interval=poll_interval,
            timeout=timeout,
            node_wait_timeout=node_wait_timeout,
            progress=progress,
            min_parties=1,
        )
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
        self.traffic = Traffic()
        self.count_columns: tuple[int, ...] = ()

    def summary(self) -> str:
        """One paragraph describing the configured run."""
        t, v = self.config.train, self.config.vtgan
        return (
            f"VTGANStrategy({self.n_parties} clients, {v.partition_name}, epochs={t.epochs}, "
            f"max_steps={t.max_steps}, batch={t.batch_size}, n_critic={t.n_critic}, lr={t.lr}, "
            f"shuffle={v.shuffle}, dp={self.config.dp.mechanism.value})"
        )

    def configure_setup(self, node_ids: Sequence[int]) -> list[Message]:
        """Setup messages: configuration and data spec; never a shared seed."""
        values: dict[str, int | str] = {
            "protocol_version": P.VT_PROTOCOL_VERSION,
            "algorithm": json.dumps(self.config.to_dict(), sort_keys=True),
            "data_spec": self.data_spec.to_json() if self.data_spec else "",
            "resume_step": P.NO_STEP,
            "run_seed": self.seed,
        }
        return [
            Message(RecordDict({P.CONFIG: ConfigRecord(dict(values))}), node, P.VT_SETUP)
            for node in node_ids
        ]

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
                shape = ClientShape(
                    *(_int(cfg, k) for k in ("n_columns", "encoded_width", "cond_dim"))
                )
                cond_columns.append(_int(cfg, "cond_columns"))
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
            record = ConfigRecord(
                {
                    "chunk_width": layout.chunk_width,
                    "g_block_width": layout.g_block_width,
                    "d_block_width": layout.d_block_width,
                    # Every client calibrates its own noise for the joint target.
                    "count_columns": list(self.count_columns),
                }
            )
            messages.append(Message(RecordDict({P.CONFIG: record}), node, P.VT_BUILD))
        replies = self.exchange(grid, messages, "build")
        for i, node in enumerate(order):
            width = get_field(get_config(replies[node].content, P.CONFIG), "feature_dim", int)
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
        forward: tuple[int, int, list[torch.Tensor]] | None,
        condition: tuple[int, int] | None,
    ) -> list[Message]:
        messages = []
        for i, node in enumerate(order):
            cfg = ConfigRecord(
                {
                    "apply_step": pending.step if pending else P.NO_STEP,
                    "apply_chosen": bool(pending and pending.client == i),
                    "forward_step": forward[0] if forward else P.NO_STEP,
                    "forward_chosen": bool(forward and forward[1] == i),
                    "condition_step": condition[0]
                    if condition and condition[1] == i
                    else P.NO_STEP,
                }
            )
            content = RecordDict({P.CONFIG: cfg})
            if pending is not None:
                grads = {P.FAKE: pending.grads_fake[i]}
                if pending.grads_real:
                    grads[P.REAL] = pending.grads_real[i]
                content[P.GRADS] = tensors_to_record(grads)
            if forward is not None:
                content[P.CHUNK] = tensors_to_record({P.CHUNK: forward[2][i]})
            group = str(forward[0] if forward else pending.step if pending else 0)
            messages.append(Message(content, node, P.VT_STEP, group_id=group))
        return messages

    def _conditions(
        self, reply: Message, node: int, shape: ClientShape, discriminator: bool
    ) -> tuple[np.ndarray, np.ndarray | None]:
        batch = self.config.train.batch_size
        try:
            cond = get_tensor(reply.content, P.CONDITION, P.COND, (batch, shape.cond_dim)).numpy()
            real = (
                get_tensor(reply.content, P.CONDITION, P.COND_REAL, (batch, shape.cond_dim)).numpy()
                if discriminator
                else None
            )
        except ProtocolError as exc:
            raise RunStopped(f"{self.party(node)} sent malformed conditions: {exc}") from exc
        for name, values in (("cond", cond), ("cond_real", real)):
            if values is not None and not (
                np.isin(values, (0.0, 1.0)).all() and (values.sum(axis=1) == 1).all()
            ):
                raise RunStopped(f"{self.party(node)} sent {name} rows that are not one-hot")
        return cond, real

    def _features(
        self,
        replies: Mapping[int, Message],
        order: Sequence[int],
        server: VTGANServer,
        client: int,
        n_rows: int,
        discriminator: bool,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], np.ndarray | None]:
        batch = self.config.train.batch_size
        private = server.privacy is not None
        fake, real, rows = [], [], None
        for i, node in enumerate(order):
            content, width = replies[node].content, server.feature_dims[i]
            try:
                fake.append(get_tensor(content, P.FEATURES, P.FAKE, (batch, width)))
                if discriminator:
                    length = batch if i == client or private else n_rows
                    real.append(get_tensor(content, P.FEATURES, P.REAL, (length, width)))
                    if private and P.ROW_INDICES in content:
                        raise ProtocolError("row indices must not be sent under DP")
                    if i == client and not private:
                        rows = get_indices(content, P.ROW_INDICES, P.ROW_INDICES, batch, n_rows)
            except ProtocolError as exc:
                raise RunStopped(f"{self.party(node)} sent a malformed step reply: {exc}") from exc
        return real, fake, rows

    def start(self, grid: Grid) -> VFLGANResult:
        """Run setup, build, training and publication; return the result.

        Raises
        ------
        RunStopped
            A client failed or misbehaved, or nodes did not answer in time.
        """
        started = time.monotonic()
        log.info("%s", self.summary())
        nodes = self.wait_for_nodes(grid)
        order, n_rows, shapes = self.aggregate_setup(
            self.exchange(grid, self.configure_setup(nodes), "setup")
        )
        train = self.config.train
        schedule = Schedule(n_rows, train.batch_size, train.n_critic, train.epochs, train.max_steps)
        privacy = self._plan_privacy(n_rows, schedule)
        server = VTGANServer(self.config.vtgan, train, shapes, self.seed, privacy, self.noise_seed)
        self._build(grid, order, server)
        self.traffic = Traffic()
        run = _Run(grid, order, shapes, server, schedule, n_rows, started, exchanges=2)
        loop_started = time.monotonic()
        self._train(run)
        train_seconds = time.monotonic() - loop_started
        synthetic, spent = self._publish(grid, order, server, n_rows)
        if privacy is not None:
            d_steps = schedule.d_steps_before(schedule.total_steps)
            spent = [server.privacy_summary(d_steps) or {}, *spent]
        return VFLGANResult(
            synthetic=synthetic,
            history=run.history,
            steps=schedule.total_steps,
            exchanges=run.exchanges + 2,
            wall_seconds=time.monotonic() - started,
            n_rows=n_rows,
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
        forward: tuple[int, int, list[torch.Tensor]] | None,
        condition: tuple[int, int] | None,
        describe: str,
    ) -> dict[int, Message]:
        messages = self._step_messages(run.order, pending, forward, condition)
        replies = self.exchange(run.grid, messages, describe)
        applied = run.schedule.kind(pending.step).value if pending else "d"
        ahead = run.schedule.kind(forward[0]).value if forward else applied
        self.traffic.count((applied, ahead), messages, replies, run.order)
        run.exchanges += 1
        return replies

    def _next_conditions(
        self, run: _Run, replies: Mapping[int, Message], step: int, client: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        node = run.order[client]
        discriminator = run.schedule.kind(step) is StepKind.DISCRIMINATOR
        return self._conditions(replies[node], node, run.shapes[client], discriminator)

    def _train(self, run: _Run) -> None:
        """Every step of the schedule (Algorithm 1), one or two exchanges each."""
        server, schedule = run.server, run.schedule
        total = schedule.total_steps
        first = server.choose_client(0)
        replies = self._step_exchange(run, None, None, (0, first), "conditions of step 0")
        conditions = self._next_conditions(run, replies, 0, first)
        pending: _Pending | None = None
        for step in range(total):
            kind = schedule.kind(step)
            self.traffic.steps[kind.value] = self.traffic.steps.get(kind.value, 0) + 1
            client = server.choose_client(step)
            cond_fake = server.full_condition(client, conditions[0])
            chunks = server.chunks(step, cond_fake, keep_graph=kind is StepKind.GENERATOR)
            following = server.choose_client(step + 1) if step + 1 < total else None
            replies = self._step_exchange(
                run,
                pending,
                (step, client, chunks),
                (step + 1, following) if following is not None else None,
                f"step {step}",
            )
            discriminator = kind is StepKind.DISCRIMINATOR
            real, fake, rows = self._features(
                replies, run.order, server, client, run.n_rows, discriminator
            )
            if following is not None:
                upcoming = self._next_conditions(run, replies, step + 1, following)
            if discriminator:
                assert conditions[1] is not None
                cond_real = server.full_condition(client, conditions[1])
                grads_real, grads_fake, loss = server.discriminator_step(
                    step, client, real, rows, fake, cond_real, cond_fake
                )
                pending = _Pending(step, client, grads_real, grads_fake)
                run.record("d_loss", loss)
            else:
                self._generator_update(run, step, client, fake, cond_fake)
                pending = None
            if following is not None:
                conditions = upcoming
            if schedule.ends_epoch(step) or step + 1 == total:
                self._end_epoch(run, step)
        if pending is not None:
            self._step_exchange(run, pending, None, None, "last update")

    def _generator_update(
        self,
        run: _Run,
        step: int,
        client: int,
        fake: list[torch.Tensor],
        cond: torch.Tensor,
    ) -> None:
        """The generator step's second exchange: fake-feature gradients out, chunk
        gradients back, then ``G^t``'s update."""
        server = run.server
        grads_fake, loss = server.generator_loss(step, fake, cond)
        replies = self._step_exchange(
            run, _Pending(step, client, [], grads_fake), None, None, f"generator update {step}"
        )
        chunk_grads, cond_loss = [], 0.0
        for i, node in enumerate(run.order):
            try:
                cfg = get_config(replies[node].content, P.CONFIG)
                if i == client:
                    cond_loss = float(get_field(cfg, "cond_loss", float))  # type: ignore[arg-type]
                shape = (self.config.train.batch_size, server.chunk_widths[i])
                chunk_grads.append(get_tensor(replies[node].content, P.CHUNK, P.CHUNK, shape))
            except ProtocolError as exc:
                raise RunStopped(
                    f"{self.party(node)} sent a malformed chunk gradient: {exc}"
                ) from exc
        server.generator_update(chunk_grads)
        run.record("g_loss", loss)
        run.record("cond_loss", cond_loss)

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
                RecordDict(
                    {
                        P.CONFIG: ConfigRecord(
                            {"phase": "conditions", "n_rows": counts[i], "draw": PUBLISH_DRAW}
                        )
                    }
                ),
                node,
                P.VT_GENERATE,
            )
            for i, node in enumerate(order)
        ]
        replies = self.exchange(grid, messages, "publication conditions")
        parts = {}
        for i, node in enumerate(order):
            if counts[i] == 0:
                continue
            try:
                parts[i] = get_tensor(
                    replies[node].content, P.CONDITION, P.COND, (counts[i], server.cond_dims[i])
                ).numpy()
            except ProtocolError as exc:
                raise RunStopped(
                    f"{self.party(node)} sent malformed publication conditions: {exc}"
                ) from exc
        chunks = server.generation_chunks(server.assemble_condition(owners, parts), PUBLISH_DRAW)
        messages = []
        for i, node in enumerate(order):
            content = RecordDict(
                {
                    P.CONFIG: ConfigRecord({"phase": "rows", "n_rows": rows, "draw": PUBLISH_DRAW}),
                    P.CHUNK: tensors_to_record({P.CHUNK: chunks[i]}),
                }
            )
            messages.append(Message(content, node, P.VT_GENERATE))
        replies = self.exchange(grid, messages, "publication")
        table, spent = collect_published(replies, order, rows, self.config.dp.enabled)
        return table, spent
