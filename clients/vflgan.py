"""The party side of VFLGAN on Flower.

Each handler decodes a message, restores the party's state from ``context.state``, calls
the pure step functions of :mod:`flwr_vflgan.gan.vflgan`, saves the state back and
encodes the reply. Malformed or out-of-order messages get a Flower error reply whose
reason names the problem. In a deployment every message runs in a fresh process, so
nothing but ``context.state`` (and the party's own files) carries over; the caches on
:class:`VFLGANClient` only save reloading the data and rebuilding modules within one
process, and every message overwrites the cached models with the saved state.
"""

from __future__ import annotations

import io
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

from flwr_vflgan.config import VFLGANConfig, settings_as_read_now
from flwr_vflgan.data.files import domain_sidecar
from flwr_vflgan.data.series import SeriesEncoder
from flwr_vflgan.gan.config import GANSettings
from flwr_vflgan.gan.exchanges import (
    party_apply_block,
    party_forward_block,
    party_trainer,
    wire_width,
)
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.privacy import BudgetExceededError, Mechanism, PrivacyPlan, plan_privacy
from flwr_vflgan.privacy.guarantee import SERIES_SCALING
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import load_party_checkpoint, save_party_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError, tensors_to_record
from flwr_vflgan.runtime.messages import (
    NO_BLOCK,
    GenerateInstruction,
    GenerateReply,
    SetupInstruction,
    SetupReply,
    StepBlock,
    StepInstruction,
    StepLayout,
    StepReply,
)
from flwr_vflgan.runtime.party_data import PartyData, party_block
from flwr_vflgan.runtime.rng import seed_commitment
from flwr_vflgan.series.training import SeriesParty

from .common import (
    CACHE_SIZE,
    PartyTables,
    entry_point,
    node_integer,
    node_partition_id,
    node_shared_seed,
    party_checkpoint_dir,
)
from .state import BlockState, load_flat, save_flat

log = logging.getLogger(__name__)

Trainer = PartyTrainer | SeriesParty
"""A party's half of the step protocol: VFLGAN's (and VertiGAN's) or VFLGAN-TS's."""


@dataclass
class PartyMeta(BlockState):
    """A VFLGAN party's bookkeeping, kept in ``context.state`` between messages (JSON)."""

    config: str
    """The run's algorithm configuration (JSON), as the setup message carried it."""
    data_key: str
    """Where the party's data comes from (:func:`data_key`)."""
    shared_seed: int
    partition_id: int
    checkpoint_dir: str
    privacy: dict | None
    """The party's DP plan, noise seed and discriminator steps taken (``None``: no DP)."""
    pending: StepBlock = NO_BLOCK
    """The block whose forward passes await their gradients."""
    next_step: int = 0
    opt_steps: list[int] = field(default_factory=list)


class VFLGANClient:
    """Message handlers of a VFLGAN party (register them on a ``ClientApp``)."""

    def __init__(self) -> None:
        self._tables = PartyTables(party_block)
        self._trainers: OrderedDict[tuple, Trainer] = OrderedDict()

    # -- Flower entry points ---------------------------------------------------------
    setup = entry_point(
        "_setup",
        "Load the party's data, build its models (or resume them) and report row count and ID digest.",
    )

    step = entry_point(
        "_step",
        "Apply the previous step's gradients, optionally evaluate/checkpoint, run the next forward.",
    )

    generate = entry_point("_generate", "Generate and decode synthetic rows for publication.")

    # -- setup -------------------------------------------------------------------------
    def _setup(self, msg: Message, context: Context) -> RecordDict:
        setup = SetupInstruction.from_content(msg.content)
        config_json = setup.algorithm
        config = VFLGANConfig.from_dict(json.loads(config_json))
        partition_id = node_partition_id(context)
        data_key, data = self._tables.for_setup(
            context, setup.data_spec, partition_id, series=config.is_series
        )
        shared_seed = node_shared_seed(context, setup.run_seed)
        checkpoint_dir = party_checkpoint_dir(context, setup.checkpoint_root, partition_id)
        privacy = _privacy_meta(context, config, data, setup)
        # A setup always starts from freshly initialised models (or the checkpoint below).
        self._trainers.pop(_trainer_key(context, config_json, data_key, shared_seed), None)
        trainer = self._trainer(
            context, config_json, config, data_key, data, shared_seed, partition_id, privacy
        )
        meta = PartyMeta(
            config=config_json,
            data_key=data_key,
            shared_seed=shared_seed,
            partition_id=partition_id,
            checkpoint_dir=checkpoint_dir or "",
            privacy=privacy,
        )
        snapshots: dict[str, np.ndarray] = {}
        if setup.resume_step != P.NO_STEP:
            if not checkpoint_dir:
                raise ValueError(
                    f"party {partition_id} cannot resume step {setup.resume_step}: it has no "
                    f"checkpoint directory (node_config '{P.NODE_CHECKPOINT_DIR}')"
                )
            snapshots, opt_steps = load_party_checkpoint(
                Path(checkpoint_dir), setup.resume_step, config_json, settings_as_read_now
            )
            trainer.state.load(snapshots.pop("flat"), opt_steps)
            meta.next_step = setup.resume_step
        _save_state(context, trainer, meta, snapshots)
        return SetupReply(
            partition_id=partition_id,
            n_rows=data.n_rows,
            id_digest=data.id_digest,
            # Discriminator steps this party's budget allows (-1: no DP).
            dp_allowed_steps=privacy["plan"]["allowed_steps"] if privacy else -1,
            seed_commitment=seed_commitment(shared_seed, setup.run_seed),
            columns=data.schema.names,
        ).to_content()

    def _trainer(
        self,
        context: Context,
        config_json: str,
        config: VFLGANConfig | None,
        data_key: str,
        data: PartyData,
        shared_seed: int,
        partition_id: int,
        privacy: dict | None,
    ) -> Trainer:
        key = _trainer_key(context, config_json, data_key, shared_seed)
        if key in self._trainers:
            self._trainers.move_to_end(key)
            return self._trainers[key]
        if config is None:
            config = VFLGANConfig.from_dict(json.loads(config_json))
        plan = PrivacyPlan.restore(config.dp, privacy["plan"]) if privacy else None
        trainer: Trainer
        if config.is_series:
            # VFLGAN-TS: one span per channel, each the series' length.
            spans = data.encoder.spans
            trainer = SeriesParty(
                config,
                len(spans),
                spans[0].width,
                data.encoded,
                shared_seed,
                partition_id,
                plan,
                privacy["noise_seed"] if privacy else None,
            )
        else:
            trainer = party_trainer(
                config,
                data.encoder.spans,
                data.encoded,
                shared_seed,
                partition_id,
                plan,
                privacy["noise_seed"] if privacy else None,
            )
        self._trainers[key] = trainer
        while len(self._trainers) > CACHE_SIZE:
            self._trainers.popitem(last=False)
        return trainer

    def _restore(self, context: Context) -> tuple[Trainer, PartyMeta, PartyData]:
        if P.STATE_META not in context.state or P.STATE_FLAT not in context.state:
            raise ProtocolError("received a step before setup: this party has no state for the run")
        meta = PartyMeta.from_json(str(context.state[P.STATE_META]["json"]))
        data = self._tables.load(meta.data_key)
        trainer = self._trainer(
            context,
            meta.config,
            None,
            meta.data_key,
            data,
            meta.shared_seed,
            meta.partition_id,
            meta.privacy,
        )
        load_flat(context, P.STATE_FLAT, trainer.state, meta.opt_steps, "party")
        return trainer, meta, data

    @staticmethod
    def _snapshots(context: Context) -> dict[str, np.ndarray]:
        if P.STATE_SNAPSHOTS not in context.state:
            return {}
        return _state_arrays(context, P.STATE_SNAPSHOTS)

    # -- training step -------------------------------------------------------------------
    def _step(self, msg: Message, context: Context) -> RecordDict:
        trainer, meta, data = self._restore(context)
        snapshots = self._snapshots(context)
        snapshots_changed = False
        schedule = _schedule(trainer.config, data.n_rows)
        pending = meta.pending

        def layout(block: StepBlock) -> list[StepLayout]:
            if block != pending:
                raise ProtocolError(
                    f"out-of-order message: asked to apply {block.describe()}, but the last "
                    f"forward pass this party ran is {pending.describe()}"
                )
            return _layout(trainer, schedule, block)

        instruction = StepInstruction.from_content(msg.content, layout, wire_width(trainer.config))
        if instruction.promote_best:
            _promote(snapshots, meta.partition_id)
            snapshots_changed = True
        if not instruction.apply.empty:
            self._apply_block(trainer, meta, schedule, instruction)
        eval_rows = None
        if instruction.eval_draw != P.NO_STEP:
            if instruction.eval_rows < 2:
                raise ProtocolError(f"eval_rows must be >= 2, got {instruction.eval_rows}")
            eval_rows = trainer.generate(instruction.eval_rows, instruction.eval_draw).numpy()
            snapshots["last_eval"] = trainer.generator_snapshot()
            snapshots_changed = True
        if instruction.checkpoint and meta.checkpoint_dir:
            if not meta.pending.empty:
                raise ProtocolError(
                    "checkpoint requested while a forward pass awaits its gradients"
                )
            save_party_checkpoint(
                Path(meta.checkpoint_dir),
                meta.next_step,
                trainer.state.to_numpy(),
                trainer.state.optimizer_steps(),
                snapshots,
                meta.config,
            )
        reply = StepReply(instruction.forward, eval_rows=eval_rows)
        if not instruction.forward.empty:
            reply = self._forward_block(trainer, meta, schedule, instruction.forward, eval_rows)
        _save_state(context, trainer, meta, snapshots if snapshots_changed else None)
        return reply.to_content()

    @staticmethod
    def _apply_block(
        trainer: Trainer, meta: PartyMeta, schedule: Schedule, instruction: StepInstruction
    ) -> None:
        """Apply the block's gradients in order, each on a forward recomputed with the
        parameters the previous ones left (the first is exact, later ones stale)."""

        def spend(step: int) -> None:
            if meta.privacy:
                _spend(trainer, meta.privacy, meta.partition_id)

        party_apply_block(trainer, schedule, instruction.apply, instruction.grads, spend)
        meta.next_step = instruction.apply.stop
        meta.pending = NO_BLOCK

    @staticmethod
    def _forward_block(
        trainer: Trainer,
        meta: PartyMeta,
        schedule: Schedule,
        block: StepBlock,
        eval_rows: np.ndarray | None,
    ) -> StepReply:
        """Features of every step of ``block``, all with the current parameters."""
        if not meta.pending.empty or block.start != meta.next_step:
            raise ProtocolError(
                f"out-of-order message: asked for the forward pass of {block.describe()}, "
                f"expected step {meta.next_step}"
                + ("" if meta.pending.empty else f" after applying {meta.pending.describe()}")
            )
        if block.stop > schedule.total_steps:
            raise ProtocolError(
                f"{block.describe()} is past the end of training ({schedule.total_steps} steps)"
            )
        k = trainer.config.train.steps_per_exchange
        # A block may end early (a budget cut ends training mid-block), never late.
        if block.stop > schedule.block_end(block.start, k):
            raise ProtocolError(
                f"{block.describe()} is longer than an exchange of train.steps_per_exchange={k}: "
                f"the block from step {block.start} ends before step "
                f"{schedule.block_end(block.start, k)}"
            )
        features = party_forward_block(trainer, schedule, block)
        rows = [int(out.fake.shape[0]) for out in features]
        meta.pending = block
        return StepReply(block, rows, features, eval_rows)

    # -- publication ---------------------------------------------------------------------
    def _generate(self, msg: Message, context: Context) -> RecordDict:
        trainer, meta, data = self._restore(context)
        snapshots = self._snapshots(context)
        request = GenerateInstruction.from_content(msg.content)
        if request.promote_best:
            _promote(snapshots, meta.partition_id)
        current = trainer.generator_snapshot()
        if request.use_best and "best" in snapshots:
            trainer.load_generator_snapshot(snapshots["best"])
        encoded = trainer.generate(request.n_rows, request.draw).numpy()
        trainer.load_generator_snapshot(current)
        frame = data.encoder.inverse_transform(encoded)
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        _save_state(context, trainer, meta, snapshots if request.promote_best else None)
        privacy = meta.privacy
        spent = (
            trainer.privacy.summary(f"party {meta.partition_id}", privacy["d_steps"])
            if privacy and trainer.privacy
            else None
        )
        if spent and privacy and isinstance(trainer, PartyTrainer):
            schedule = _schedule(trainer.config, data.n_rows)
            insiders = trainer.against_parties(schedule, privacy["d_steps"])
            if insiders is not None:
                spent["against_parties"] = insiders
        if spent and isinstance(data.encoder, SeriesEncoder) and data.encoder.reads_private:
            spent["preprocessing"] = [SERIES_SCALING]  # outside the epsilon: say so
        return GenerateReply(
            buffer.getvalue(), request.n_rows, json.dumps(spent) if spent else ""
        ).to_content()


# -- helpers ---------------------------------------------------------------------------------


def _domain_file(context: Context) -> str:
    """The public-domain sidecar a deployed party reads (:func:`domain_sidecar`)."""
    path = context.node_config.get(P.NODE_DATA_PATH)
    return domain_sidecar(str(path)).name if path else "<party file>.domain.json"


def _layout(trainer: Trainer, schedule: Schedule, block: StepBlock) -> list[StepLayout]:
    """This party's own layout of a block: its kinds of step and batch sizes."""
    layout = []
    for step in block.steps:
        kind = schedule.kind(step)
        layout.append(StepLayout(kind is StepKind.DISCRIMINATOR, trainer.batch_rows(step, kind)))
    return layout


def _schedule(config: GANSettings, n_rows: int) -> Schedule:
    train = config.train
    return Schedule.of(n_rows, train)


def _privacy_meta(
    context: Context, config: VFLGANConfig, data: PartyData, setup: SetupInstruction
) -> dict | None:
    """This party's privacy plan, its noise seed and the discriminator steps already taken.

    The noise multiplier is calibrated here, by the party, for the discriminator steps of
    the schedule (or taken from the configuration); the party then refuses any step its
    budget does not allow, whatever the server asks. Under ``dp=end_to_end`` the party
    accounts the step's ``M + 1`` releases jointly and refuses to train with an encoder
    fitted on its rows; VertiGAN under ``dp=dpsgd`` accounts its ``M`` jointly.
    """
    if not config.dp.enabled:
        return None
    parts = 1
    if config.dp.mechanism is Mechanism.END_TO_END:
        if not data.encoder.public:
            raise ValueError(
                "dp=end_to_end needs this party's encoder built from public metadata, but it "
                "was fitted on the party's rows: give the run dataset.domain (simulation) or "
                f"put {_domain_file(context)} beside the party's file (deployment)"
            )
        if setup.n_parties < 1:
            raise ProtocolError("dp=end_to_end needs n_parties in the setup message")
        parts = setup.n_parties + 1
    elif config.is_series:
        # DPVFLGAN-TS: each attribute discriminator's and the extractor's first layer is
        # a Gaussian release about the same batch (paper 003, Theorem 1): one joint
        # account of the party's C_i + 1 releases.
        parts = len(data.encoder.spans) + 1
    elif config.shares_backbone and config.dp.mechanism is Mechanism.DPSGD:
        # VertiGAN's only models that read real rows are the parties' discriminators,
        # each a release about the same rows: one joint account of the M.
        if setup.n_parties < 1:
            raise ProtocolError("vertigan under dp=dpsgd needs n_parties in the setup message")
        parts = setup.n_parties
    schedule = _schedule(config, data.n_rows)
    plan = plan_privacy(
        config.dp,
        dataset_size=schedule.n_rows,
        batch_size=schedule.batch_size,
        planned_steps=schedule.d_steps_before(schedule.total_steps),
        parts=parts,
    )
    noise_seed = node_integer(context, P.NODE_NOISE_SEED)
    resume_step = setup.resume_step
    done = 0 if resume_step == P.NO_STEP else schedule.d_steps_before(resume_step)
    return {"plan": plan.state(), "noise_seed": noise_seed, "d_steps": done}


def _spend(trainer: Trainer, privacy: dict, partition_id: int) -> None:
    """Count one discriminator step against the budget, or refuse it."""
    plan = trainer.privacy
    assert plan is not None  # a party with privacy metadata was built with its plan
    if privacy["d_steps"] >= plan.allowed_steps:
        ledger = plan.ledger(f"party {partition_id}", privacy["d_steps"])
        raise BudgetExceededError(
            ledger.party, ledger.spent_after(plan.event(1)), ledger.target_epsilon
        )
    privacy["d_steps"] += 1


def _promote(arrays: dict[str, np.ndarray], partition_id: int) -> None:
    if "last_eval" not in arrays:
        raise ProtocolError(
            f"party {partition_id} was asked to keep a best generator it never evaluated"
        )
    arrays["best"] = arrays["last_eval"].copy()


def _state_arrays(context: Context, name: str) -> dict[str, np.ndarray]:
    record = context.state[name]
    if not isinstance(record, ArrayRecord):
        raise ProtocolError(f"party state record {name!r} is not an ArrayRecord")
    return {key: array.numpy() for key, array in record.items()}


def _trainer_key(context: Context, config_json: str, data_key: str, shared_seed: int) -> tuple:
    return (context.run_id, context.node_id, config_json, data_key, shared_seed)


def _save_state(
    context: Context,
    trainer: Trainer,
    meta: PartyMeta,
    snapshots: dict[str, np.ndarray] | None = None,
) -> None:
    """Write the training state; generator snapshots only when they changed."""
    # Raw float32 bytes: skipping the .npy header parsing of an Array halves the cost.
    meta.opt_steps = save_flat(context, P.STATE_FLAT, trainer.state)
    context.state[P.STATE_META] = ConfigRecord({"json": meta.to_json()})
    if snapshots is not None:
        context.state[P.STATE_SNAPSHOTS] = tensors_to_record(snapshots)
