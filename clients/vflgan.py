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
import os
import traceback
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data import AlignmentError
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.privacy import BudgetExceededError, PrivacyPlan, plan_privacy
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import load_party_checkpoint, save_party_checkpoint
from flwr_vflgan.runtime.codec import (
    ProtocolError,
    get_config,
    get_field,
    get_tensor,
    tensors_to_record,
)
from flwr_vflgan.runtime.party_data import DataSpec, PartyData, party_block, party_file
from flwr_vflgan.runtime.rng import Stream, derive_seed

log = logging.getLogger(__name__)

ERROR_PROTOCOL = 1
ERROR_DATA = 2
ERROR_INTERNAL = 3
ERROR_BUDGET = 4
_CACHE_SIZE = 8


class VFLGANClient:
    """Message handlers of a VFLGAN party (register them on a ``ClientApp``)."""

    def __init__(self) -> None:
        self._data: OrderedDict[str, PartyData] = OrderedDict()
        self._trainers: OrderedDict[tuple, PartyTrainer] = OrderedDict()

    # -- Flower entry points ---------------------------------------------------------
    def setup(self, msg: Message, context: Context) -> Message:
        """Load the party's data, build its models (or resume them) and report row count and ID digest."""
        return self._guard(msg, context, self._setup)

    def step(self, msg: Message, context: Context) -> Message:
        """Apply the previous step's gradients, optionally evaluate/checkpoint, run the next forward."""
        return self._guard(msg, context, self._step)

    def generate(self, msg: Message, context: Context) -> Message:
        """Generate and decode synthetic rows for publication."""
        return self._guard(msg, context, self._generate)

    def _guard(
        self, msg: Message, context: Context, handler: Callable[[Message, Context], RecordDict]
    ) -> Message:
        return guarded(msg, context, handler)

    # -- setup -------------------------------------------------------------------------
    def _setup(self, msg: Message, context: Context) -> RecordDict:
        cfg = get_config(msg.content, P.CONFIG)
        version = get_field(cfg, "protocol_version", int)
        if version != P.PROTOCOL_VERSION:
            raise ProtocolError(
                f"server speaks protocol {version}, this party {P.PROTOCOL_VERSION}"
            )
        config_json = str(get_field(cfg, "algorithm", str))
        config = VFLGANConfig.from_dict(json.loads(config_json))
        resume_step = int(get_field(cfg, "resume_step", int))  # type: ignore[call-overload]
        partition_id = _partition_id(context)
        data_key, data = self._party_data(context, cfg, partition_id)
        shared_seed = _shared_seed(context, int(get_field(cfg, "run_seed", int)))  # type: ignore[call-overload]
        checkpoint_dir = _checkpoint_dir(context, cfg, partition_id)
        privacy = _privacy_meta(context, config, data.n_rows, resume_step)
        # A setup always starts from freshly initialised models (or the checkpoint below).
        self._trainers.pop(_trainer_key(context, config_json, data_key, shared_seed), None)
        trainer = self._trainer(
            context, config_json, config, data_key, data, shared_seed, partition_id, privacy
        )
        meta = {
            "config": config_json,
            "data_key": data_key,
            "shared_seed": shared_seed,
            "partition_id": partition_id,
            "pending_step": P.NO_STEP,
            "next_step": 0,
            "checkpoint_dir": checkpoint_dir or "",
            "privacy": privacy,
        }
        snapshots: dict[str, np.ndarray] = {}
        if resume_step != P.NO_STEP:
            if not checkpoint_dir:
                raise ValueError(
                    f"party {partition_id} cannot resume step {resume_step}: it has no checkpoint "
                    f"directory (node_config '{P.NODE_CHECKPOINT_DIR}')"
                )
            snapshots, opt_steps = load_party_checkpoint(
                Path(checkpoint_dir), resume_step, config_json
            )
            trainer.state.load(snapshots.pop("flat"), opt_steps)
            meta["next_step"] = resume_step
        _save_state(context, trainer, meta, snapshots)
        return RecordDict(
            {
                P.CONFIG: ConfigRecord(
                    {
                        "partition_id": partition_id,
                        "n_rows": data.n_rows,
                        "id_digest": data.id_digest,
                        # Discriminator steps this party's budget allows (-1: no DP).
                        "dp_allowed_steps": privacy["plan"]["allowed_steps"] if privacy else -1,
                    }
                )
            }
        )

    def _party_data(
        self, context: Context, cfg: ConfigRecord, partition_id: int
    ) -> tuple[str, PartyData]:
        key = data_key(context, cfg, partition_id)
        return key, self._load_data(key)

    def _load_data(self, key: str) -> PartyData:
        return load_cached(self._data, key, party_block)

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
    ) -> PartyTrainer:
        key = _trainer_key(context, config_json, data_key, shared_seed)
        if key in self._trainers:
            self._trainers.move_to_end(key)
            return self._trainers[key]
        if config is None:
            config = VFLGANConfig.from_dict(json.loads(config_json))
        trainer = PartyTrainer(
            config,
            data.encoder.spans,
            data.encoded,
            shared_seed,
            partition_id,
            PrivacyPlan.restore(config.dp, privacy["plan"]) if privacy else None,
            privacy["noise_seed"] if privacy else None,
        )
        self._trainers[key] = trainer
        while len(self._trainers) > _CACHE_SIZE:
            self._trainers.popitem(last=False)
        return trainer

    def _restore(self, context: Context) -> tuple[PartyTrainer, dict, PartyData]:
        if P.STATE_META not in context.state or P.STATE_FLAT not in context.state:
            raise ProtocolError("received a step before setup: this party has no state for the run")
        meta = json.loads(str(context.state[P.STATE_META]["json"]))
        data = self._load_data(meta["data_key"])
        trainer = self._trainer(
            context,
            meta["config"],
            None,
            meta["data_key"],
            data,
            meta["shared_seed"],
            meta["partition_id"],
            meta["privacy"],
        )
        flat = context.state[P.STATE_FLAT]
        buffer = flat.get("float32") if isinstance(flat, ConfigRecord) else None
        if not isinstance(buffer, bytes):
            raise ProtocolError("party state lacks its flat float32 buffer")
        trainer.state.load(np.frombuffer(buffer, dtype=np.float32), meta["opt_steps"])
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
        cfg = get_config(msg.content, P.CONFIG)
        apply_step = int(get_field(cfg, "apply_step", int))  # type: ignore[call-overload]
        forward_step = int(get_field(cfg, "forward_step", int))  # type: ignore[call-overload]
        eval_draw = int(get_field(cfg, "eval_draw", int))  # type: ignore[call-overload]
        schedule = _schedule(trainer.config, data.n_rows)
        width = trainer.config.model.feature_dim
        reply: dict[str, np.ndarray] = {}

        if get_field(cfg, "promote_best", bool):
            _promote(snapshots, meta["partition_id"])
            snapshots_changed = True
        if apply_step != P.NO_STEP:
            if apply_step != meta["pending_step"]:
                raise ProtocolError(
                    f"out-of-order message: asked to apply step {apply_step}, but the last forward "
                    f"pass this party ran is step {meta['pending_step']}"
                )
            kind = schedule.kind(apply_step)
            rows = trainer.batch_rows(apply_step, kind)
            grad_real = (
                get_tensor(msg.content, P.GRADS, P.REAL, (rows, width))
                if kind is StepKind.DISCRIMINATOR
                else None
            )
            grad_fake = get_tensor(msg.content, P.GRADS, P.FAKE, (rows, width))
            if kind is StepKind.DISCRIMINATOR and meta["privacy"]:
                _spend(trainer, meta["privacy"], meta["partition_id"])
            trainer.apply(apply_step, kind, grad_real, grad_fake)
            meta["pending_step"] = P.NO_STEP
            meta["next_step"] = apply_step + 1
        if eval_draw != P.NO_STEP:
            rows = int(get_field(cfg, "eval_rows", int))  # type: ignore[call-overload]
            if rows < 2:
                raise ProtocolError(f"eval_rows must be >= 2, got {rows}")
            reply[P.ROWS] = trainer.generate(rows, eval_draw).numpy()
            snapshots["last_eval"] = trainer.generator_snapshot()
            snapshots_changed = True
        if get_field(cfg, "checkpoint", bool) and meta["checkpoint_dir"]:
            if meta["pending_step"] != P.NO_STEP:
                raise ProtocolError(
                    "checkpoint requested while a forward pass awaits its gradients"
                )
            save_party_checkpoint(
                Path(meta["checkpoint_dir"]),
                meta["next_step"],
                trainer.state.to_numpy(),
                trainer.state.optimizer_steps(),
                snapshots,
                meta["config"],
            )
        if forward_step != P.NO_STEP:
            if meta["pending_step"] != P.NO_STEP or forward_step != meta["next_step"]:
                raise ProtocolError(
                    f"out-of-order message: asked for the forward pass of step {forward_step}, "
                    f"expected step {meta['next_step']}"
                    + (
                        ""
                        if meta["pending_step"] == P.NO_STEP
                        else f" after applying step {meta['pending_step']}"
                    )
                )
            if forward_step >= schedule.total_steps:
                raise ProtocolError(
                    f"step {forward_step} is past the end of training ({schedule.total_steps} steps)"
                )
            out = trainer.forward(forward_step, schedule.kind(forward_step))
            if out.real is not None:
                reply[P.REAL] = out.real.numpy()
            reply[P.FAKE] = out.fake.numpy()
            meta["pending_step"] = forward_step
        _save_state(context, trainer, meta, snapshots if snapshots_changed else None)
        content = RecordDict({P.CONFIG: ConfigRecord({"forward_step": forward_step})})
        if reply:
            content[P.FEATURES] = tensors_to_record(reply)
        return content

    # -- publication ---------------------------------------------------------------------
    def _generate(self, msg: Message, context: Context) -> RecordDict:
        trainer, meta, data = self._restore(context)
        snapshots = self._snapshots(context)
        cfg = get_config(msg.content, P.CONFIG)
        rows = int(get_field(cfg, "n_rows", int))  # type: ignore[call-overload]
        draw = int(get_field(cfg, "draw", int))  # type: ignore[call-overload]
        if rows < 1:
            raise ProtocolError(f"n_rows must be >= 1, got {rows}")
        promote = bool(get_field(cfg, "promote_best", bool))
        if promote:
            _promote(snapshots, meta["partition_id"])
        current = trainer.generator_snapshot()
        if get_field(cfg, "use_best", bool) and "best" in snapshots:
            trainer.load_generator_snapshot(snapshots["best"])
        encoded = trainer.generate(rows, draw).numpy()
        trainer.load_generator_snapshot(current)
        frame = data.encoder.inverse_transform(encoded)
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        _save_state(context, trainer, meta, snapshots if promote else None)
        privacy = meta["privacy"]
        spent = (
            trainer.privacy.summary(f"party {meta['partition_id']}", privacy["d_steps"])
            if privacy and trainer.privacy
            else None
        )
        return RecordDict(
            {
                P.SYNTHETIC: ConfigRecord(
                    {
                        "parquet": buffer.getvalue(),
                        "n_rows": rows,
                        "privacy": json.dumps(spent) if spent else "",
                    }
                )
            }
        )


# -- helpers ---------------------------------------------------------------------------------


def guarded(
    msg: Message, context: Context, handler: Callable[[Message, Context], RecordDict]
) -> Message:
    """Run a handler and turn its failure into a Flower error reply with a clear reason."""
    try:
        return Message(handler(msg, context), reply_to=msg)
    except ProtocolError as exc:
        return Message(Error(code=ERROR_PROTOCOL, reason=f"protocol error: {exc}"), reply_to=msg)
    except BudgetExceededError as exc:
        return Message(
            Error(code=ERROR_BUDGET, reason=f"privacy budget: {exc}; the step was refused"),
            reply_to=msg,
        )
    except (AlignmentError, FileNotFoundError, ValueError, KeyError) as exc:
        return Message(Error(code=ERROR_DATA, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)
    except Exception as exc:
        log.error("party handler failed:\n%s", traceback.format_exc())
        return Message(
            Error(code=ERROR_INTERNAL, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg
        )


def data_key(context: Context, cfg: ConfigRecord, partition_id: int) -> str:
    """Where a party's data comes from: its own file (``node_config`` data-path, a
    deployment) or its block of the server's data spec (simulation)."""
    path = context.node_config.get(P.NODE_DATA_PATH)
    if path:
        return json.dumps({"file": str(path)})
    spec_json = str(get_field(cfg, "data_spec", str))
    if not spec_json:
        raise ValueError(
            f"party {partition_id} has no data: set node_config '{P.NODE_DATA_PATH}' "
            "to its party file"
        )
    return json.dumps({"spec": spec_json, "partition_id": partition_id})


def load_cached(
    cache: OrderedDict[str, PartyData],
    key: str,
    block: Callable[[DataSpec, int], PartyData],
    size: int = _CACHE_SIZE,
) -> PartyData:
    """The party data of a :func:`data_key`, from ``cache`` (least recently used out):
    the party file, or ``block(spec, partition_id)`` of the spec."""
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    source = json.loads(key)
    if "file" in source:
        data = party_file(source["file"])
    else:
        data = block(DataSpec.from_json(source["spec"]), int(source["partition_id"]))
    cache[key] = data
    while len(cache) > size:
        cache.popitem(last=False)
    return data


def _partition_id(context: Context) -> int:
    value = context.node_config.get(P.NODE_PARTITION_ID)
    if value is None:
        raise ValueError(
            f"node_config lacks '{P.NODE_PARTITION_ID}': start the SuperNode with "
            "--node-config 'partition-id=<i> ...'"
        )
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"node_config '{P.NODE_PARTITION_ID}' must be an integer, got {value!r}"
        ) from None


def _shared_seed(context: Context, run_seed: int) -> int:
    """The seed all parties share and the server does not know.

    Order: ``node_config['shared-seed']``, then ``$FLWR_VFLGAN_SHARED_SEED``; only when
    neither is set is it derived from the run seed, which the server also knows, and a
    warning says so.
    """
    value = context.node_config.get(P.NODE_SHARED_SEED, os.environ.get(P.ENV_SHARED_SEED))
    if value is None or value == "":
        log.warning(
            "no shared seed in node_config '%s' or $%s: deriving it from the run seed, which the "
            "server knows. Set it on every party in a real deployment.",
            P.NODE_SHARED_SEED,
            P.ENV_SHARED_SEED,
        )
        return derive_seed(run_seed, Stream.NOISE, 0, 1)
    try:
        seed = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"shared seed must be a non-negative integer, got {value!r}") from None
    if seed < 0:
        raise ValueError(f"shared seed must be a non-negative integer, got {seed}")
    return seed


def _checkpoint_dir(context: Context, cfg: ConfigRecord, partition_id: int) -> str | None:
    own = context.node_config.get(P.NODE_CHECKPOINT_DIR)
    if own:
        return str(own)
    root = cfg.get("checkpoint_root", "") if "checkpoint_root" in cfg else ""
    return str(Path(str(root)) / f"party-{partition_id}") if root else None


def _schedule(config: VFLGANConfig, n_rows: int) -> Schedule:
    train = config.train
    return Schedule(n_rows, train.batch_size, train.n_critic, train.epochs, train.max_steps)


def _privacy_meta(
    context: Context, config: VFLGANConfig, n_rows: int, resume_step: int
) -> dict | None:
    """This party's privacy plan, its noise seed and the discriminator steps already taken.

    The noise multiplier is calibrated here, by the party, for the discriminator steps of
    the schedule (or taken from the configuration); the party then refuses any step its
    budget does not allow, whatever the server asks.
    """
    if not config.dp.enabled:
        return None
    schedule = _schedule(config, n_rows)
    plan = plan_privacy(
        config.dp,
        dataset_size=schedule.n_rows,
        batch_size=schedule.batch_size,
        planned_steps=schedule.d_steps_before(schedule.total_steps),
    )
    seed = context.node_config.get(P.NODE_NOISE_SEED)
    if seed is not None and seed != "":
        try:
            noise_seed: int | None = int(seed)
        except (TypeError, ValueError):
            raise ValueError(
                f"node_config '{P.NODE_NOISE_SEED}' must be a non-negative integer, got {seed!r}"
            ) from None
        if noise_seed is not None and noise_seed < 0:
            raise ValueError(f"node_config '{P.NODE_NOISE_SEED}' must be >= 0, got {noise_seed}")
    else:
        noise_seed = None
    done = 0 if resume_step == P.NO_STEP else schedule.d_steps_before(resume_step)
    return {"plan": plan.state(), "noise_seed": noise_seed, "d_steps": done}


def _spend(trainer: PartyTrainer, privacy: dict, partition_id: int) -> None:
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
    trainer: PartyTrainer,
    meta: dict,
    snapshots: dict[str, np.ndarray] | None = None,
) -> None:
    """Write the training state; generator snapshots only when they changed."""
    meta["opt_steps"] = trainer.state.optimizer_steps()
    context.state[P.STATE_META] = ConfigRecord({"json": json.dumps(meta)})
    # Raw float32 bytes: the layout is fixed by the configuration (FlatState checks the
    # size on load), and skipping the .npy header parsing of an Array halves the cost.
    context.state[P.STATE_FLAT] = ConfigRecord({"float32": trainer.state.flat.numpy().tobytes()})
    if snapshots is not None:
        context.state[P.STATE_SNAPSHOTS] = tensors_to_record(snapshots)
