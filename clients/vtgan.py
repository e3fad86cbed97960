"""The client side of VT-GAN on Flower (paper 001, Algorithm 1).

Each handler restores the client's state from ``context.state``, calls the pure step
functions of :class:`~flwr_vflgan.vtgan.party.VTGANParty`, saves the state back and
encodes the reply; a malformed or out-of-order message gets a Flower error reply. In a
deployment every message runs in a new process: the fitted encoder, the models and
optimizers, the row order and the pending step's chunk all live in ``context.state``.
The caches on :class:`VTGANClient` only avoid reloading data within one process.
"""

from __future__ import annotations

import io
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from flwr.app import ConfigRecord, Context, Message, RecordDict

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.privacy import BudgetExceededError
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.blocks import NO_BLOCK, StepBlock
from flwr_vflgan.runtime.checkpoint import save_party_checkpoint
from flwr_vflgan.runtime.codec import (
    ProtocolError,
    get_tensor,
    tensors_to_record,
)
from flwr_vflgan.runtime.messages import GenerateReply
from flwr_vflgan.runtime.party_data import PartyData, party_block
from flwr_vflgan.runtime.rng import Stream, derive_seed, numpy_generator, seed_commitment
from flwr_vflgan.vtgan.blocks import (
    check_block,
    pack_forward,
    party_apply_critic_block,
    party_forward_block,
    unpack_grads,
)
from flwr_vflgan.vtgan.messages import (
    CONDITIONS,
    VTBuild,
    VTBuildReply,
    VTGenerate,
    VTSetupReply,
    VTStepInstruction,
    VTStepReply,
    read_vt_setup,
)
from flwr_vflgan.vtgan.party import PartyLayout, VTGANParty
from flwr_vflgan.vtgan.privacy import VTGANPrivacy, plan_vtgan_privacy

from .common import (
    CACHE_SIZE,
    PartyTables,
    entry_point,
    node_integer,
    node_partition_id,
    node_shared_seed,
    party_checkpoint_dir,
)
from .state import BlockState, restore_checkpoint

log = logging.getLogger(__name__)


@dataclass
class VTPartyMeta(BlockState):
    """A VT-GAN client's bookkeeping, kept in ``context.state`` between messages (JSON)."""

    WHO = "client"

    config: str
    """The run's algorithm configuration (JSON), as the setup message carried it."""
    data_key: str
    shared_seed: int
    partition_id: int
    layout: list[int] | None = None
    """The widths the server assigned at build (``None`` before build)."""
    privacy: dict | None = None
    """The client's DP plan and noise seed (``None``: no DP)."""
    d_steps: int = 0
    """Critic steps applied under DP (counted against the plan)."""
    pending: StepBlock = NO_BLOCK
    """The block whose forward passes await their gradients."""
    pending_chosen: list[bool] = field(default_factory=list)
    """Whether the client was the chosen one in each step of ``pending``."""
    next_step: int = 0
    round: int = 0
    """Rounds of training-with-shuffling applied to the row order."""
    opt_steps: list[int] = field(default_factory=list)
    checkpoint_dir: str = ""
    """Where the client writes its checkpoints ("": none)."""
    resume_step: int = P.NO_STEP
    """The checkpoint build rolls the client back to (``NO_STEP``: a fresh run)."""

    @property
    def algorithm(self) -> VFLGANConfig:
        """The run's configuration."""
        return VFLGANConfig.from_dict(json.loads(self.config))


class VTGANClient:
    """Message handlers of a VT-GAN client (registered on the project's ClientApp).

    It shares data loading, error replies and node settings with the other families'
    clients through :mod:`~flwr_vflgan.clients.common`.
    """

    def __init__(self) -> None:
        self._tables = PartyTables(party_block)
        self._parties: OrderedDict[tuple, VTGANParty] = OrderedDict()
        self._encoders: OrderedDict[tuple, tuple[ModeSpecificEncoder, np.ndarray]] = OrderedDict()

    # -- Flower entry points -----------------------------------------------------------
    setup = entry_point("_vt_setup", "Load and encode the client's columns; report its shape.")

    build = entry_point(
        "_vt_build", "Build the client's models with the widths the server assigned."
    )

    step = entry_point(
        "_vt_step", "Apply a step's gradients, run the next forward pass, sample conditions."
    )

    generate = entry_point(
        "_vt_generate", "Publication: conditions, then decoded and shuffled synthetic rows."
    )

    # -- setup -----------------------------------------------------------------------------
    def _vt_setup(self, msg: Message, context: Context) -> RecordDict:
        setup = read_vt_setup(msg.content)
        config = VFLGANConfig.from_dict(json.loads(setup.algorithm))
        partition_id = node_partition_id(context)
        checkpoint_dir = party_checkpoint_dir(context, setup.checkpoint_root, partition_id) or ""
        if setup.resume_step != P.NO_STEP and not checkpoint_dir:
            raise ValueError(
                f"client {partition_id} cannot resume step {setup.resume_step}: it has no "
                f"checkpoint directory (node_config '{P.NODE_CHECKPOINT_DIR}')"
            )
        data_key, data = self._tables.for_setup(context, setup.data_spec, partition_id)
        shared_seed = node_shared_seed(context, setup.run_seed)
        encoder, encoded = self._encoding(config, data_key, data, shared_seed, partition_id)
        meta = VTPartyMeta(setup.algorithm, data_key, shared_seed, partition_id)
        meta.checkpoint_dir, meta.resume_step = checkpoint_dir, setup.resume_step
        context.state[P.VT_STATE_META] = ConfigRecord({"json": meta.to_json()})
        context.state[P.VT_STATE_ENCODER] = ConfigRecord({"json": json.dumps(encoder.state_dict())})
        for key in (P.VT_STATE_FLAT, P.VT_STATE_CHUNK, P.VT_STATE_ORDER):
            if key in context.state:
                del context.state[key]
        return VTSetupReply(
            partition_id=partition_id,
            n_rows=data.n_rows,
            id_digest=data.id_digest,
            seed_commitment=seed_commitment(shared_seed, setup.run_seed),
            columns=data.schema.names,
            n_columns=len(data.schema.names),
            encoded_width=int(encoded.shape[1]),
            cond_dim=sum(s.width for s in encoder.discrete_spans),
            cond_columns=len(encoder.discrete_spans),
        ).to_content()

    def _encoding(
        self,
        config: VFLGANConfig,
        data_key: str,
        data: PartyData,
        shared_seed: int,
        partition_id: int,
        state: dict | None = None,
    ) -> tuple[ModeSpecificEncoder, np.ndarray]:
        """The client's fitted mode-specific encoder and its encoded rows.

        Fitted at setup; a new process rebuilds it from the saved state (no refit). The
        mode of each value is sampled once, from the client's private seed.
        """
        key = (
            data_key,
            shared_seed,
            partition_id,
            config.vtgan.max_modes,
            config.vtgan.mode_weight_threshold,
            config.vtgan.point_mass_share,
        )
        if key in self._encoders:
            self._encoders.move_to_end(key)
            return self._encoders[key]
        private = derive_seed(shared_seed, Stream.INIT, 1, partition_id + 1)
        if state is None:
            encoder = ModeSpecificEncoder(
                max_modes=config.vtgan.max_modes,
                weight_threshold=config.vtgan.mode_weight_threshold,
                seed=private % (2**31),
                point_mass_share=config.vtgan.point_mass_share,
            ).fit(data.frame, data.schema)
        else:
            encoder = ModeSpecificEncoder.from_state_dict(state)
        encoded = encoder.transform(data.frame, numpy_generator(private, Stream.INIT, 2))
        self._encoders[key] = (encoder, encoded)
        while len(self._encoders) > CACHE_SIZE:
            self._encoders.popitem(last=False)
        return encoder, encoded

    def _vt_build(self, msg: Message, context: Context) -> RecordDict:
        meta = _meta(context)
        build = VTBuild.from_content(msg.content)
        meta.layout = [build.chunk_width, build.g_block_width, build.d_block_width]
        meta.privacy = self._privacy(context, build.count_columns, meta)
        self._parties.pop(_party_key(context, meta), None)
        party = self._party(context, meta)
        party.set_order(np.arange(party.n_rows), 0)
        if meta.resume_step != P.NO_STEP:
            _resume(party, meta)
        _save(context, party, meta, order_changed=True)
        return VTBuildReply(party.feature_dim).to_content()

    def _privacy(
        self, context: Context, columns: tuple[int, ...], meta: VTPartyMeta
    ) -> dict | None:
        """This client's DP plan, calibrated by the client itself (the same computation
        the server does): the noise of every part for the joint target, from the
        configuration, the row count and every client's number of categorical columns."""
        config = meta.algorithm
        if not config.dp.enabled:
            return None
        data = self._tables.load(meta.data_key)
        train = config.train
        schedule = Schedule.of(data.n_rows, train)
        plan = plan_vtgan_privacy(
            config.dp,
            count_noise=config.vtgan.dp_count_noise,
            count_columns=columns,
            dataset_size=data.n_rows,
            batch_size=train.batch_size,
            planned_steps=schedule.d_steps_before(schedule.total_steps),
        )
        return {"plan": plan.state(), "noise_seed": _noise_seed(context)}

    def _saved_encoding(
        self, context: Context, meta: VTPartyMeta
    ) -> tuple[ModeSpecificEncoder, np.ndarray]:
        """The encoder fitted at setup (from ``context.state``) and the encoded rows."""
        if P.VT_STATE_ENCODER not in context.state:
            raise ProtocolError("this client has no fitted encoder: setup did not run")
        state = json.loads(str(context.state[P.VT_STATE_ENCODER]["json"]))
        config = meta.algorithm
        data = self._tables.load(meta.data_key)
        return self._encoding(
            config, meta.data_key, data, meta.shared_seed, meta.partition_id, state
        )

    def _party(self, context: Context, meta: VTPartyMeta) -> VTGANParty:
        key = _party_key(context, meta)
        if key in self._parties:
            self._parties.move_to_end(key)
            return self._parties[key]
        config = meta.algorithm
        encoder, encoded = self._saved_encoding(context, meta)
        party = VTGANParty(
            config.vtgan,
            config.train,
            encoded,
            encoder.spans,
            encoder.discrete_spans,
            PartyLayout(*(meta.layout or ())),
            meta.shared_seed,
            meta.partition_id,
            VTGANPrivacy.restore(config.dp, meta.privacy["plan"]) if meta.privacy else None,
            meta.privacy["noise_seed"] if meta.privacy else None,
        )
        self._parties[key] = party
        while len(self._parties) > CACHE_SIZE:
            self._parties.popitem(last=False)
        return party

    def _vt_restore(self, context: Context) -> tuple[VTGANParty, VTPartyMeta]:
        meta = _meta(context)
        if meta.layout is None or P.VT_STATE_FLAT not in context.state:
            raise ProtocolError("received a step before setup and build: this client has no models")
        party = self._party(context, meta)
        flat = context.state[P.VT_STATE_FLAT]
        buffer = flat.get("float32") if isinstance(flat, ConfigRecord) else None
        if not isinstance(buffer, bytes):
            raise ProtocolError("client state lacks its flat float32 buffer")
        party.state.load(np.frombuffer(buffer, dtype=np.float32), meta.opt_steps)
        if party.round != meta.round:
            order = context.state[P.VT_STATE_ORDER]
            raw = order.get("int64") if isinstance(order, ConfigRecord) else None
            if not isinstance(raw, bytes):
                raise ProtocolError("client state lacks its row order")
            party.set_order(np.frombuffer(raw, dtype=np.int64).copy(), meta.round)
        return party, meta

    # -- training step ---------------------------------------------------------------------
    def _vt_step(self, msg: Message, context: Context) -> RecordDict:
        party, meta = self._vt_restore(context)
        config = meta.algorithm
        train = config.train
        schedule = Schedule.of(party.n_rows, train)
        instruction = VTStepInstruction.from_content(
            msg.content, train.batch_size, party.layout.chunk_width, party.feature_dim, party.n_rows
        )
        reply = VTStepReply(forward=instruction.forward)
        order_changed = False
        if not instruction.applied.empty:
            reply, order_changed = _apply(instruction, context, party, meta, schedule, reply)
        if instruction.checkpoint and meta.checkpoint_dir:
            _checkpoint(party, meta)
        if not instruction.forward.empty:
            reply = _forward(instruction, context, party, meta, schedule, reply)
        if instruction.condition_steps:
            reply = replace(reply, conditions=_conditions(instruction, party, schedule))
        _save(context, party, meta, order_changed)
        return reply.to_content()

    # -- publication ---------------------------------------------------------------------
    def _vt_generate(self, msg: Message, context: Context) -> RecordDict:
        party, meta = self._vt_restore(context)
        request = VTGenerate.from_content(msg.content, party.layout.chunk_width)
        rows, draw = request.n_rows, request.draw
        if request.phase == CONDITIONS:
            cond = (
                party.generation_conditions(rows, draw)
                if rows
                else np.zeros((0, party.sampler.cond_dim), np.float32)
            )
            return VTGenerate.conditions_reply(cond)
        assert request.chunk is not None  # checked by VTGenerate
        chunk = torch.from_numpy(request.chunk)
        encoder, _ = self._saved_encoding(context, meta)
        frame = encoder.inverse_transform(party.generate(chunk, draw).numpy())
        # Shuffled with the clients' shared seed before it leaves (paper 001, Section
        # 3.1.7): rows stay aligned across clients, the server cannot pair them with z.
        permutation = numpy_generator(meta.shared_seed, Stream.PUBLISH, draw).permutation(rows)
        frame = frame.iloc[permutation].reset_index(drop=True)
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        spent = party.privacy_summary(meta.d_steps)
        return GenerateReply(
            buffer.getvalue(), rows, json.dumps(spent) if spent else ""
        ).to_content()


def _apply(
    instruction: VTStepInstruction,
    context: Context,
    party: VTGANParty,
    meta: VTPartyMeta,
    schedule: Schedule,
    reply: VTStepReply,
) -> tuple[VTStepReply, bool]:
    """Apply the pending block's gradients; return the reply and whether the row order
    changed."""
    applied = instruction.applied
    if applied != meta.pending:
        raise ProtocolError(
            f"out-of-order message: asked to apply {applied.describe()}, but the pending "
            f"forward pass is {meta.pending.describe()}"
        )
    assert instruction.grads is not None  # decoded with the applied block
    batch, chosen = party.train.batch_size, meta.pending_chosen
    chunks = _chunks(context, applied.count * batch, party.layout.chunk_width)
    chunk_list = list(torch.split(chunks, batch, dim=0))
    discriminator = schedule.kind(applied.start) is StepKind.DISCRIMINATOR
    try:
        grads = unpack_grads(
            torch.from_numpy(instruction.grads),
            instruction.selected,
            instruction.selected_counts,
            discriminator,
            chosen,
            party.privacy is not None,
            batch,
        )
    except ValueError as exc:
        raise ProtocolError(f"{applied.describe()}: {exc}") from exc
    reordered = False
    if discriminator:
        spend = (lambda _step: _spend(party, meta)) if party.privacy is not None else None
        party_apply_critic_block(party, applied.steps, chunk_list, chosen, grads, spend)
    else:
        step = applied.start
        chunk_grad, cond_loss = party.apply_generator(step, chunk_list[0], chosen[0], grads[0].fake)
        reply = replace(reply, chunk_grad=chunk_grad.numpy(), cond_loss=cond_loss)
        if party.settings.shuffle:
            # End of a round: training-with-shuffling (paper 001, Section 3.1.5).
            party.shuffle()
            meta.round = party.round
            reordered = True
    meta.pending, meta.pending_chosen = NO_BLOCK, []
    meta.next_step = applied.stop
    return reply, reordered


def _forward(
    instruction: VTStepInstruction,
    context: Context,
    party: VTGANParty,
    meta: VTPartyMeta,
    schedule: Schedule,
    reply: VTStepReply,
) -> VTStepReply:
    """Run the forward block and keep its chunks for the apply half."""
    forward = instruction.forward
    if not meta.pending.empty or forward.start != meta.next_step:
        raise ProtocolError(
            f"out-of-order message: asked for the forward pass of {forward.describe()}, "
            f"expected step {meta.next_step}"
        )
    try:
        check_block(schedule, forward.start, forward.count, party.train.steps_per_exchange)
    except ValueError as exc:
        raise ProtocolError(str(exc)) from exc
    assert instruction.chunks is not None  # decoded with the forward block
    chunks = torch.from_numpy(instruction.chunks)
    discriminator = schedule.kind(forward.start) is StepKind.DISCRIMINATOR
    chosen = list(instruction.chosen)
    block = party_forward_block(
        party,
        forward.steps,
        list(torch.split(chunks, party.train.batch_size, dim=0)),
        chosen,
        discriminator,
    )
    features, rows = pack_forward(block)
    context.state[P.VT_STATE_CHUNK] = tensors_to_record({P.CHUNK: chunks})
    meta.pending, meta.pending_chosen = forward, chosen
    return replace(reply, features=features, rows=rows)


def _conditions(
    instruction: VTStepInstruction, party: VTGANParty, schedule: Schedule
) -> np.ndarray:
    """The conditional vectors of every step the server asked this client for, packed:
    the fake rows' conditions, then (critic steps) the real rows'."""
    parts = []
    for step in instruction.condition_steps:
        if not 0 <= step < schedule.total_steps:
            raise ProtocolError(f"condition step {step} is outside the schedule")
        drawn = party.condition(step, party.train.batch_size)
        parts.append(drawn.cond)
        if schedule.kind(step) is StepKind.DISCRIMINATOR:
            parts.append(drawn.cond_real)
    return np.ascontiguousarray(np.concatenate(parts, axis=0), dtype=np.float32)


def _checkpoint(party: VTGANParty, meta: VTPartyMeta) -> None:
    """Write the client's state to resume at ``meta.next_step`` (nothing is pending):
    models and optimizers, the shuffled row order, the shuffle round and the DP steps
    spent. The encoder is refitted at setup from the same rows and seed."""
    save_party_checkpoint(
        Path(meta.checkpoint_dir),
        meta.next_step,
        party.state.to_numpy(),
        party.state.optimizer_steps(),
        {"order": party.order.astype(np.int64), "counters": np.array([meta.round, meta.d_steps])},
        meta.config,
    )


def _resume(party: VTGANParty, meta: VTPartyMeta) -> None:
    """Roll the freshly built client back to its checkpoint of ``meta.resume_step``.

    Raises
    ------
    FileNotFoundError, ValueError
        No checkpoint for that step, or one written under another configuration.
    """
    arrays = restore_checkpoint(
        meta.checkpoint_dir, meta.resume_step, meta.config, party.state, ("order", "counters")
    )
    round_index, d_steps = (int(v) for v in arrays["counters"])
    party.set_order(arrays["order"].astype(np.int64), round_index)
    meta.round, meta.d_steps, meta.next_step = round_index, d_steps, meta.resume_step


def _noise_seed(context: Context) -> int | None:
    """The client's own DP noise seed (node_config ``noise-seed``), if it set one."""
    return node_integer(context, P.NODE_NOISE_SEED)


def _spend(party: VTGANParty, meta: VTPartyMeta) -> None:
    """Count one discriminator step against the plan, or refuse it."""
    assert party.privacy is not None
    if meta.d_steps >= party.privacy.planned_steps:
        raise BudgetExceededError(
            f"client {meta.partition_id}",
            party.privacy.joint_epsilon(meta.d_steps + 1),
            float(party.privacy.config.target_epsilon or 0.0),
        )
    meta.d_steps += 1


def _meta(context: Context) -> VTPartyMeta:
    if P.VT_STATE_META not in context.state:
        raise ProtocolError("received a VT-GAN message before setup: this client has no state")
    return VTPartyMeta.from_json(str(context.state[P.VT_STATE_META]["json"]))


def _party_key(context: Context, meta: VTPartyMeta) -> tuple:
    return (
        context.run_id,
        context.node_id,
        meta.config,
        meta.data_key,
        meta.shared_seed,
        tuple(meta.layout or ()),
    )


def _chunks(context: Context, rows: int, width: int) -> torch.Tensor:
    if P.VT_STATE_CHUNK not in context.state:
        raise ProtocolError("no pending chunk: apply requested before a forward pass")
    return get_tensor(context.state, P.VT_STATE_CHUNK, P.CHUNK, (rows, width))


def _save(context: Context, party: VTGANParty, meta: VTPartyMeta, order_changed: bool) -> None:
    meta.opt_steps = party.state.optimizer_steps()
    context.state[P.VT_STATE_META] = ConfigRecord({"json": meta.to_json()})
    context.state[P.VT_STATE_FLAT] = ConfigRecord({"float32": party.state.flat.numpy().tobytes()})
    if order_changed:
        context.state[P.VT_STATE_ORDER] = ConfigRecord(
            {"int64": party.order.astype(np.int64).tobytes()}
        )
