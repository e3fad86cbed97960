"""The client side of VDGAN on Flower (paper 004, Algorithm 3, steps 2 and 3).

Each handler restores the client's critic from ``context.state``, runs one iteration of
:class:`~flwr_vflgan.gan.vdgan.VDGANClient` (or decodes rows at publication), saves the
state back and replies; a malformed or out-of-order message gets a Flower error reply.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from flwr.app import ConfigRecord, Context, Message, RecordDict

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.vd_messages import VDDecode, VDSetupReply, VDStep, VDStepReply
from flwr_vflgan.gan.vdgan import PateClient, VDGANClient, VDSchedule
from flwr_vflgan.privacy import BudgetExceededError, Mechanism, PrivacyPlan, plan_privacy
from flwr_vflgan.privacy.pate import PatePlan
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import save_party_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import GenerateReply, SetupInstruction
from flwr_vflgan.runtime.party_data import PartyData, party_block
from flwr_vflgan.runtime.rng import seed_commitment

from .common import (
    CACHE_SIZE,
    PartyTables,
    entry_point,
    node_integer,
    node_partition_id,
    node_shared_seed,
    party_checkpoint_dir,
)
from .state import BlockState, load_flat, restore_checkpoint, save_flat


@dataclass
class VDPartyMeta(BlockState):
    """A VDGAN client's bookkeeping between messages (JSON in ``context.state``)."""

    WHO = "client"

    config: str
    data_key: str
    shared_seed: int
    partition_id: int
    next_iteration: int = 0
    opt_steps: list[int] = field(default_factory=list)
    privacy: dict | None = None
    """VDGAN-DPSGD: the client's plan, its noise seed and the critic steps taken."""
    checkpoint_dir: str = ""
    """Where the client writes its checkpoints ("": none)."""

    @property
    def algorithm(self) -> VFLGANConfig:
        """The run's configuration."""
        return VFLGANConfig.from_dict(json.loads(self.config))


class VDGANPartyClient:
    """Message handlers of a VDGAN client (registered on the project's ClientApp)."""

    def __init__(self) -> None:
        self._tables = PartyTables(party_block)
        self._critics: OrderedDict[tuple, VDGANClient | PateClient] = OrderedDict()

    # -- Flower entry points -----------------------------------------------------------
    setup = entry_point(
        "_setup", "Load the client's columns, build its critic, report its encoded shape."
    )

    step = entry_point(
        "_step", "One iteration: ``n_critic`` critic updates, then the batch's gradient."
    )

    decode = entry_point(
        "_decode", "Publication: the client's columns of the synthetic table, decoded."
    )

    # -- handlers ----------------------------------------------------------------------
    def _setup(self, msg: Message, context: Context) -> RecordDict:
        setup = SetupInstruction.from_content(msg.content)
        partition_id = node_partition_id(context)
        checkpoint_dir = party_checkpoint_dir(context, setup.checkpoint_root, partition_id) or ""
        if setup.resume_step != P.NO_STEP and not checkpoint_dir:
            raise ValueError(
                f"client {partition_id} cannot resume iteration {setup.resume_step}: it has no "
                f"checkpoint directory (node_config '{P.NODE_CHECKPOINT_DIR}')"
            )
        data_key, data = self._tables.for_setup(context, setup.data_spec, partition_id)
        shared_seed = node_shared_seed(context, setup.run_seed)
        meta = VDPartyMeta(setup.algorithm, data_key, shared_seed, partition_id)
        meta.checkpoint_dir = checkpoint_dir
        meta.privacy = _privacy_meta(context, meta.algorithm, data.n_rows, setup.n_parties)
        self._critics.pop(self._key(context, meta), None)
        critic = self._critic(context, meta, data)
        if setup.resume_step != P.NO_STEP:
            _resume(critic, meta, setup.resume_step)
        elif isinstance(critic, VDGANClient):
            critic.warm_up()  # train.warmup_epochs; the checkpoint holds it when resuming
        _save(context, critic, meta)
        spans = data.encoder.spans
        return VDSetupReply(
            partition_id=partition_id,
            n_rows=data.n_rows,
            id_digest=data.id_digest,
            seed_commitment=seed_commitment(shared_seed, setup.run_seed),
            columns=data.schema.names,
            span_widths=[s.width for s in spans],
            span_activations=[s.activation for s in spans],
            dp_allowed_steps=meta.privacy["allowed_steps"] if meta.privacy else -1,
        ).to_content()

    def _step(self, msg: Message, context: Context) -> RecordDict:
        meta, data = self._meta(context)
        critic = self._restored(context, meta, data)
        step = VDStep.from_content(
            msg.content, critic.config.train.batch_size, data.encoder.output_dim
        )
        if step.iteration != meta.next_iteration:
            raise ProtocolError(
                f"out-of-order message: iteration {step.iteration}, expected {meta.next_iteration}"
            )
        _spend(meta, critic.config.train.n_critic)
        grad = critic.step(step.iteration, torch.from_numpy(step.fake))
        meta.next_iteration += 1
        if step.checkpoint and meta.checkpoint_dir:
            spent = meta.privacy["d_steps"] if meta.privacy else 0
            save_party_checkpoint(
                Path(meta.checkpoint_dir),
                meta.next_iteration,
                critic.state.to_numpy(),
                critic.state.optimizer_steps(),
                {"counters": np.array([spent])},
                meta.config,
            )
        _save(context, critic, meta)
        return VDStepReply(step.iteration, grad.numpy()).to_content()

    def _decode(self, msg: Message, context: Context) -> RecordDict:
        meta, data = self._meta(context)
        request = VDDecode.from_content(msg.content, data.encoder.output_dim)
        frame = data.encoder.inverse_transform(request.rows)
        spent = json.dumps(_summary(meta)) if meta.privacy else ""
        return GenerateReply.of_frame(frame, spent).to_content()

    # -- state ---------------------------------------------------------------------------
    def _meta(self, context: Context) -> tuple[VDPartyMeta, PartyData]:
        if P.VD_STATE_META not in context.state or P.VD_STATE_FLAT not in context.state:
            raise ProtocolError("received a message before setup: no state for the run")
        meta = VDPartyMeta.from_json(str(context.state[P.VD_STATE_META]["json"]))
        return meta, self._tables.load(meta.data_key)

    def _key(self, context: Context, meta: VDPartyMeta) -> tuple:
        return (context.run_id, context.node_id, meta.config, meta.data_key, meta.shared_seed)

    def _critic(
        self, context: Context, meta: VDPartyMeta, data: PartyData
    ) -> VDGANClient | PateClient:
        key = self._key(context, meta)
        if key not in self._critics:
            self._critics[key] = _build(meta, data)
            while len(self._critics) > CACHE_SIZE:
                self._critics.popitem(last=False)
        self._critics.move_to_end(key)
        return self._critics[key]

    def _restored(
        self, context: Context, meta: VDPartyMeta, data: PartyData
    ) -> VDGANClient | PateClient:
        critic = self._critic(context, meta, data)
        load_flat(context, P.VD_STATE_FLAT, critic.state, meta.opt_steps, "client")
        return critic


def _resume(critic: VDGANClient | PateClient, meta: VDPartyMeta, iteration: int) -> None:
    """Roll the freshly built critic (or teachers) back to the checkpoint of
    ``iteration``, with the critic steps spent under DP.

    Raises
    ------
    FileNotFoundError, ValueError
        No checkpoint for that iteration, or one written under another configuration.
    """
    arrays = restore_checkpoint(
        meta.checkpoint_dir, iteration, meta.config, critic.state, ("counters",)
    )
    meta.next_iteration = iteration
    if meta.privacy is not None:
        meta.privacy["d_steps"] = int(arrays["counters"][0])


def _save(context: Context, critic: VDGANClient | PateClient, meta: VDPartyMeta) -> None:
    meta.opt_steps = save_flat(context, P.VD_STATE_FLAT, critic.state)
    context.state[P.VD_STATE_META] = ConfigRecord({"json": meta.to_json()})


def _privacy_meta(
    context: Context, config: VFLGANConfig, n_rows: int, n_parties: int
) -> dict | None:
    """The client's privacy plan, its noise seed and the critic steps taken (``None``
    without DP): VDGAN-DPSGD's per-row plan, calibrated here for the schedule's critic
    steps, or VDGAN-PATE's votes, calibrated for its iterations. Either way the clients'
    releases of a step are one joint account: they read the same rows."""
    if not config.dp.enabled:
        return None
    if n_parties < 1:
        raise ProtocolError("a DP VDGAN run needs n_parties in the setup message")
    train = config.train
    iterations = VDSchedule.of(n_rows, train).total
    out: dict = {"noise_seed": node_integer(context, P.NODE_NOISE_SEED), "d_steps": 0}
    if config.dp.mechanism is Mechanism.PATE:
        pate = PatePlan.calibrate(
            config.dp, iterations=iterations, batch_size=train.batch_size, parties=n_parties
        )
        out.update(pate=pate.state(), allowed_steps=pate.allowed_iterations * train.n_critic)
        return out
    plan = plan_privacy(
        config.dp,
        dataset_size=n_rows,
        batch_size=train.batch_size,
        planned_steps=iterations * train.n_critic,
        parts=n_parties,
    )
    out.update(plan=plan.state(), allowed_steps=plan.allowed_steps)
    return out


def _spend(meta: VDPartyMeta, n_critic: int) -> None:
    """Count an iteration's critic steps against the budget, or refuse them all."""
    privacy = meta.privacy
    if privacy is None:
        return
    if privacy["d_steps"] + n_critic > privacy["allowed_steps"]:
        after = _summary(meta, privacy["d_steps"] + n_critic)
        raise BudgetExceededError(after["party"], after["epsilon"], after["target_epsilon"])
    privacy["d_steps"] += n_critic


def _summary(meta: VDPartyMeta, d_steps: int | None = None) -> dict:
    """What the client spent after ``d_steps`` critic steps (default: those taken), as it
    reports it."""
    privacy, config = meta.privacy, meta.algorithm
    assert privacy is not None
    steps = privacy["d_steps"] if d_steps is None else d_steps
    who = f"client {meta.partition_id}"
    if "pate" in privacy:
        return PatePlan.restore(privacy["pate"]).summary(who, steps // config.train.n_critic)
    return PrivacyPlan.restore(config.dp, privacy["plan"]).summary(who, steps)


def _build(meta: VDPartyMeta, data: PartyData) -> VDGANClient | PateClient:
    """The client's critic (VDGAN, VDGAN-DPSGD) or teachers (VDGAN-PATE)."""
    config, privacy = meta.algorithm, meta.privacy
    spans, rows = data.encoder.spans, data.encoded
    if privacy is not None and "pate" in privacy:
        sigma = PatePlan.restore(privacy["pate"]).sigma
        return PateClient(
            config, spans, rows, meta.shared_seed, meta.partition_id, sigma, privacy["noise_seed"]
        )
    return VDGANClient(
        config,
        spans,
        rows,
        meta.shared_seed,
        meta.partition_id,
        PrivacyPlan.restore(config.dp, privacy["plan"]) if privacy else None,
        privacy["noise_seed"] if privacy else None,
    )
