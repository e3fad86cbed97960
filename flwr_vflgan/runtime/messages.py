"""VFLGAN's wire messages as typed dataclasses, encoded to and decoded from Flower records.

Both sides use these classes: the strategy builds instructions and reads replies, the
party reads instructions and builds replies, and no record key or field name is written
anywhere else. Decoding validates on arrival (types of fields, dtypes, shapes and finite
values of arrays) and raises :class:`~flwr_vflgan.runtime.codec.ProtocolError`, which a
party turns into a Flower error reply and the strategy into ``RunStopped``.

A step message carries a *block* of ``K`` consecutive steps (``train.steps_per_exchange``):
the instruction the gradients of the block the party sent features for last time, the
reply the features of the next block. All of a block's tensors travel as **one** block
of little-endian float32 values, laid out step after step, each step's real-row features
(discriminator steps) followed by its fake-row features; the row count of each step rides
along so the receiver can split and check it.

Up to :data:`INLINE_LIMIT` bytes the block is a ``bytes`` field of the message's one
config record: on Flower's transports every record, array and array chunk is an object of
its own, one HTTP request to push and one to pull, and a step message with an ArrayRecord
is six objects where this is three. At a party node a message's objects cost more than
its compute (docs/deployment.md). A larger block (hundreds of steps per exchange) travels
as an ArrayRecord, which Flower splits into chunks. Either way the receiver checks the
block against the layout it expects, and its values for being finite.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd
import torch
from flwr.app import ConfigRecord, RecordDict

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.blocks import (
    NO_BLOCK,
    StepBlock,
    StepLayout,
    StepTensors,
    pack_steps,
    unpack_steps,
)
from flwr_vflgan.runtime.codec import (
    ProtocolError,
    get_config,
    get_field,
    get_int,
    get_str,
    get_tensor,
    tensors_to_record,
)

__all__ = [
    "NO_BLOCK",
    "PACKED",
    "GenerateInstruction",
    "GenerateReply",
    "KeyOffer",
    "KeyOpen",
    "KeySeal",
    "SetupInstruction",
    "SetupReply",
    "StepBlock",
    "StepInstruction",
    "StepLayout",
    "StepReply",
    "StepTensors",
    "put_packed",
    "read_packed",
]

PACKED = "packed"
"""Config-record key of a block's packed features or gradients (float32 bytes)."""

INLINE_LIMIT = 4 << 20
"""Largest packed block, in bytes, carried inside the config record (Flower chunks arrays
at 5 MiB; a config record is one object whatever its size)."""

_FLOAT32 = np.dtype("<f4")


def put_packed(steps: Sequence[StepTensors], fields: dict, arrays: dict) -> None:
    """Add a block's tensors to a message: as the ``packed`` bytes of ``fields`` (its
    config record's) up to :data:`INLINE_LIMIT`, else as the ``packed`` entry of
    ``arrays`` (its array record's)."""
    packed = pack_steps(steps)
    if packed.nbytes <= INLINE_LIMIT:
        fields[PACKED] = packed.astype(_FLOAT32, copy=False).tobytes()
    else:
        arrays[PACKED] = packed


def _bool(record: ConfigRecord, key: str) -> bool:
    return bool(get_field(record, key, bool))


def _bytes(record: ConfigRecord, key: str) -> bytes:
    value = get_field(record, key, bytes)
    assert isinstance(value, bytes)  # checked by get_field
    return value


def read_packed(
    content: RecordDict, record: str, layout: Sequence[StepLayout], width: int
) -> list[StepTensors]:
    """The validated, unpacked block of a message: the config record's ``packed`` bytes,
    or array record ``record`` (see :func:`put_packed`).

    Raises
    ------
    ProtocolError
        The block is missing, its size is not the layout's rows times ``width`` float32
        values, or a value is not finite.
    """
    total = sum(step.packed_rows for step in layout)
    cfg = get_config(content, P.CONFIG)
    if PACKED not in cfg:
        return unpack_steps(get_tensor(content, record, PACKED, (total, width)), layout)
    raw = _bytes(cfg, PACKED)
    if len(raw) != total * width * _FLOAT32.itemsize:
        raise ProtocolError(
            f"{PACKED} must hold ({total}, {width}) float32 values ({total * width * 4} "
            f"bytes) for {len(layout)} steps, got {len(raw)} bytes"
        )
    values = np.frombuffer(raw, dtype=_FLOAT32).reshape(total, width)
    if not np.isfinite(values).all():
        raise ProtocolError(f"{PACKED} contains non-finite values")
    tensor = torch.from_numpy(values.astype(np.float32))  # a writable, native-order copy
    return unpack_steps(tensor, layout)


# -- setup -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetupInstruction:
    """Server -> party: the configuration and where to start. Never the shared seed."""

    algorithm: str
    """The algorithm configuration as JSON (``VFLGANConfig.to_dict``)."""
    data_spec: str
    """The data spec as JSON in simulation; empty where parties read their own files."""
    resume_step: int
    run_seed: int
    checkpoint_root: str
    n_parties: int = 0
    """``M``; a party needs it to account ``dp=end_to_end`` jointly (0: not sent)."""
    protocol_version: int = P.PROTOCOL_VERSION

    def to_content(self) -> RecordDict:
        """The message content."""
        return RecordDict(
            {
                P.CONFIG: ConfigRecord(
                    {
                        "protocol_version": self.protocol_version,
                        "algorithm": self.algorithm,
                        "data_spec": self.data_spec,
                        "resume_step": self.resume_step,
                        "run_seed": self.run_seed,
                        "checkpoint_root": self.checkpoint_root,
                        "n_parties": self.n_parties,
                    }
                )
            }
        )

    @classmethod
    def from_content(
        cls,
        content: RecordDict,
        version: int = P.PROTOCOL_VERSION,
        speaks: str = "protocol {theirs}, this party {ours}",
    ) -> SetupInstruction:
        """Decode and check the protocol ``version`` (VT-GAN's setup is this message with
        its own version; ``speaks`` words the mismatch).

        Raises
        ------
        ProtocolError
            A field is missing or mistyped, or the server speaks another protocol version.
        """
        cfg = get_config(content, P.CONFIG)
        theirs = get_int(cfg, "protocol_version")
        if theirs != version:
            raise ProtocolError("server speaks " + speaks.format(theirs=theirs, ours=version))
        root = cfg.get("checkpoint_root", "") if "checkpoint_root" in cfg else ""
        return cls(
            algorithm=get_str(cfg, "algorithm"),
            data_spec=get_str(cfg, "data_spec"),
            resume_step=get_int(cfg, "resume_step"),
            run_seed=get_int(cfg, "run_seed"),
            checkpoint_root=str(root),
            n_parties=get_int(cfg, "n_parties") if "n_parties" in cfg else 0,
            protocol_version=theirs,
        )


class PartyFacts(Protocol):
    """The fields every family's setup reply carries."""

    @property
    def partition_id(self) -> int: ...

    @property
    def n_rows(self) -> int: ...

    @property
    def id_digest(self) -> str: ...

    @property
    def columns(self) -> Sequence[str]: ...


_COMMON = ("partition_id", "n_rows", "id_digest")


def setup_reply_content(reply: PartyFacts, *own: str) -> RecordDict:
    """A setup reply's records: the fields every family's reply carries (read back by
    :meth:`SetupReply.common` and :meth:`SetupReply.columns_of`), then the reply's own
    fields named in ``own``."""
    fields = {name: getattr(reply, name) for name in (*_COMMON, *own)}
    return RecordDict({P.CONFIG: ConfigRecord({**fields, "columns": list(reply.columns)})})


@dataclass(frozen=True)
class SetupReply:
    """Party -> server: partition id, row count, ID digest, DP allowance (-1: no DP) and
    a commitment to the shared seed (:func:`~flwr_vflgan.runtime.rng.seed_commitment`),
    and the names of its columns (published with the table anyway; the server checks that
    no two parties hold the same column)."""

    partition_id: int
    n_rows: int
    id_digest: str
    dp_allowed_steps: int
    seed_commitment: str
    columns: Sequence[str]

    def to_content(self) -> RecordDict:
        """The message content."""
        return setup_reply_content(self, "dp_allowed_steps", "seed_commitment")

    @staticmethod
    def common(cfg: ConfigRecord) -> tuple[int, int, str]:
        """``(partition_id, n_rows, id_digest)``: what every family's setup reply carries
        (VT-GAN's and GAFM's too); ProtocolError if malformed."""
        return get_int(cfg, "partition_id"), get_int(cfg, "n_rows"), get_str(cfg, "id_digest")

    @staticmethod
    def columns_of(cfg: ConfigRecord) -> list[str]:
        """The column names a setup reply lists (ProtocolError if absent or no list)."""
        columns = get_field(cfg, "columns", list)
        assert isinstance(columns, list)  # checked by get_field
        return [str(c) for c in columns]

    @staticmethod
    def commitment_of(cfg: ConfigRecord) -> str:
        """A setup reply's commitment to the shared seed (ProtocolError if absent)."""
        return get_str(cfg, "seed_commitment")

    @classmethod
    def allowed_steps(cls, cfg: ConfigRecord) -> int:
        """The ``dp_allowed_steps`` field of a setup reply's config record (the common
        fields are checked by ``strategies.exchange.setup_replies``)."""
        return get_int(cfg, "dp_allowed_steps")


# -- training steps ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StepInstruction:
    """Server -> party: apply the gradients of ``apply``, optionally evaluate, keep the
    best generator, checkpoint, then compute the features of ``forward``."""

    apply: StepBlock = NO_BLOCK
    forward: StepBlock = NO_BLOCK
    eval_draw: int = P.NO_STEP
    eval_rows: int = 0
    checkpoint: bool = False
    promote_best: bool = False
    grads: Sequence[StepTensors] = field(default_factory=tuple)
    """Gradients of ``apply``'s steps, in step order (empty when ``apply`` is)."""

    def __post_init__(self) -> None:
        if len(self.grads) != self.apply.count:
            raise ValueError(
                f"{self.apply.describe()} needs {self.apply.count} gradients, got {len(self.grads)}"
            )

    def to_content(self) -> RecordDict:
        """The message content: one config record (the gradients packed in it)."""
        fields: dict[str, int | bool | bytes] = {
            "apply_start": self.apply.start,
            "apply_count": self.apply.count,
            "forward_start": self.forward.start,
            "forward_count": self.forward.count,
            "eval_draw": self.eval_draw,
            "eval_rows": self.eval_rows,
            "checkpoint": self.checkpoint,
            "promote_best": self.promote_best,
        }
        arrays: dict[str, np.ndarray] = {}
        if self.grads:
            put_packed(self.grads, fields, arrays)
        content = RecordDict({P.CONFIG: ConfigRecord(fields)})  # type: ignore[arg-type]
        if arrays:
            content[P.GRADS] = tensors_to_record(arrays)
        return content

    @classmethod
    def from_content(
        cls, content: RecordDict, layout_of: Callable[[StepBlock], list[StepLayout]], width: int
    ) -> StepInstruction:
        """Decode; ``layout_of`` gives the party's own layout of the apply block (it knows
        its batch sizes), against which the gradients are checked.

        Raises
        ------
        ProtocolError
            A field is missing or mistyped, a block is malformed, or the gradients do not
            match the block's layout.
        """
        cfg = get_config(content, P.CONFIG)
        apply = StepBlock(get_int(cfg, "apply_start"), get_int(cfg, "apply_count"))
        forward = StepBlock(get_int(cfg, "forward_start"), get_int(cfg, "forward_count"))
        eval_draw = get_int(cfg, "eval_draw")
        eval_rows = get_int(cfg, "eval_rows")
        checkpoint, promote = _bool(cfg, "checkpoint"), _bool(cfg, "promote_best")
        grads: list[StepTensors] = []
        if not apply.empty:
            grads = read_packed(content, P.GRADS, layout_of(apply), width)
        return cls(apply, forward, eval_draw, eval_rows, checkpoint, promote, tuple(grads))


@dataclass(frozen=True)
class StepReply:
    """Party -> server: the features of the ``forward`` block and, when asked, the
    encoded synthetic rows of an evaluation."""

    forward: StepBlock = NO_BLOCK
    rows: Sequence[int] = ()
    """Batch rows of each step of ``forward`` (a Poisson batch's size varies)."""
    features: Sequence[StepTensors] = ()
    eval_rows: np.ndarray | None = None

    def to_content(self) -> RecordDict:
        """The message content: one config record (the features packed in it) and, at an
        evaluation, one array record of encoded synthetic rows."""
        fields: dict[str, int | list[int] | bytes] = {
            "forward_start": self.forward.start,
            "forward_count": self.forward.count,
        }
        if self.rows:  # an empty list has no type on Flower's wire
            fields["batch_rows"] = [int(r) for r in self.rows]
        arrays: dict[str, np.ndarray] = {}
        if self.features:
            put_packed(self.features, fields, arrays)
        if self.eval_rows is not None:
            arrays[P.ROWS] = self.eval_rows
        content = RecordDict({P.CONFIG: ConfigRecord(fields)})  # type: ignore[arg-type]
        if arrays:
            content[P.FEATURES] = tensors_to_record(arrays)
        return content

    @classmethod
    def read_features(
        cls,
        content: RecordDict,
        expected: StepBlock,
        kinds: Sequence[bool],
        fixed_rows: int | None,
        width: int,
    ) -> tuple[list[int], list[StepTensors]]:
        """The batch rows and features of block ``expected``.

        ``kinds`` says which of its steps are discriminator steps; ``fixed_rows`` is the
        batch size every step must have (``None``: a discriminator step's size is the
        party's to say, as with Poisson sampling; generator steps still have
        ``fixed_rows`` or, if ``None``, any size).

        Raises
        ------
        ProtocolError
            The reply is for another block, or its rows or features are malformed.
        """
        cfg = get_config(content, P.CONFIG)
        got = StepBlock(get_int(cfg, "forward_start"), get_int(cfg, "forward_count"))
        if got != expected:
            raise ProtocolError(f"reply carries {got.describe()}, expected {expected.describe()}")
        rows_field = get_field(cfg, "batch_rows", list)
        assert isinstance(rows_field, list)  # checked by get_field
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in rows_field):
            raise ProtocolError(f"batch_rows must list integers, got {rows_field}")
        rows = [int(r) for r in rows_field]
        if len(rows) != expected.count or any(r < 0 for r in rows):
            raise ProtocolError(
                f"batch_rows must list {expected.count} non-negative counts, got {rows}"
            )
        if fixed_rows is not None and any(r != fixed_rows for r in rows):
            raise ProtocolError(f"every batch must have {fixed_rows} rows, got {rows}")
        layout = [StepLayout(d, r) for d, r in zip(kinds, rows, strict=True)]
        return rows, read_packed(content, P.FEATURES, layout, width)

    @classmethod
    def read_eval_rows(cls, content: RecordDict, rows: int) -> np.ndarray:
        """The encoded synthetic rows of an evaluation, ``(rows, any width)``."""
        return get_tensor(content, P.FEATURES, P.ROWS, (rows, None)).numpy()


# -- publication -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerateInstruction:
    """Server -> party: decode ``n_rows`` synthetic rows of noise draw ``draw``, from the
    best generator (``use_best``) or the last."""

    n_rows: int
    draw: int
    use_best: bool
    promote_best: bool

    def to_content(self) -> RecordDict:
        """The message content."""
        return RecordDict(
            {
                P.CONFIG: ConfigRecord(
                    {
                        "n_rows": self.n_rows,
                        "draw": self.draw,
                        "use_best": self.use_best,
                        "promote_best": self.promote_best,
                    }
                )
            }
        )

    @classmethod
    def from_content(cls, content: RecordDict) -> GenerateInstruction:
        """Decode.

        Raises
        ------
        ProtocolError
            A field is missing or mistyped, or ``n_rows < 1``.
        """
        cfg = get_config(content, P.CONFIG)
        rows = get_int(cfg, "n_rows")
        if rows < 1:
            raise ProtocolError(f"n_rows must be >= 1, got {rows}")
        return cls(rows, get_int(cfg, "draw"), _bool(cfg, "use_best"), _bool(cfg, "promote_best"))


@dataclass(frozen=True)
class GenerateReply:
    """Party -> server: its decoded synthetic columns (Parquet) and, under DP, its own
    account of what it spent (a JSON object; empty without DP)."""

    parquet: bytes
    n_rows: int
    privacy: str = ""

    @classmethod
    def of_frame(cls, frame: pd.DataFrame, privacy: str = "") -> GenerateReply:
        """The reply publishing ``frame`` (written as Parquet, without its index)."""
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return cls(buffer.getvalue(), len(frame), privacy)

    def to_content(self) -> RecordDict:
        """The message content."""
        return RecordDict(
            {
                P.SYNTHETIC: ConfigRecord(
                    {"parquet": self.parquet, "n_rows": self.n_rows, "privacy": self.privacy}
                )
            }
        )

    @classmethod
    def from_content(cls, content: RecordDict) -> GenerateReply:
        """Decode.

        Raises
        ------
        ProtocolError
            A field is missing or mistyped, or the privacy account is not JSON.
        """
        record = get_config(content, P.SYNTHETIC)
        reply = cls(
            parquet=_bytes(record, "parquet"),
            n_rows=get_int(record, "n_rows"),
            privacy=get_str(record, "privacy"),
        )
        if reply.privacy:
            try:
                json.loads(reply.privacy)
            except ValueError as exc:
                raise ProtocolError(f"privacy account is not JSON: {exc}") from exc
        return reply


# -- shared-seed agreement (runtime/keys.py) ------------------------------------------------


def _key_list(record: ConfigRecord, key: str) -> list[bytes]:
    values = get_field(record, key, list)
    assert isinstance(values, list)  # checked by get_field
    if not all(isinstance(v, bytes) for v in values):
        raise ProtocolError(f"field {key!r} must be a list of bytes")
    return list(values)


@dataclass(frozen=True)
class KeyOffer:
    """Party -> server: its partition id and X25519 public key."""

    partition_id: int
    public_key: bytes

    def to_content(self) -> RecordDict:
        """The message content."""
        fields = {"partition_id": self.partition_id, "public_key": self.public_key}
        return RecordDict({P.KEYS: ConfigRecord(fields)})  # type: ignore[arg-type]

    @classmethod
    def from_content(cls, content: RecordDict) -> KeyOffer:
        """Decode (ProtocolError if malformed: a key is 32 bytes)."""
        record = get_config(content, P.KEYS)
        offer = cls(get_int(record, "partition_id"), _bytes(record, "public_key"))
        if len(offer.public_key) != 32:
            raise ProtocolError(f"a public key has 32 bytes, got {len(offer.public_key)}")
        return offer


@dataclass(frozen=True)
class KeySeal:
    """Server -> every party: all public keys by partition id, and the run's seed (which
    binds the seals to this run). The leader (partition 0) answers with a sealed seed for
    each other party; the others answer with none."""

    public_keys: Sequence[bytes]
    run_seed: int

    def to_content(self) -> RecordDict:
        """The message content."""
        fields = {"public_keys": list(self.public_keys), "run_seed": self.run_seed}
        return RecordDict({P.KEYS: ConfigRecord(fields)})  # type: ignore[arg-type]

    @classmethod
    def from_content(cls, content: RecordDict) -> KeySeal:
        """Decode (ProtocolError if malformed)."""
        record = get_config(content, P.KEYS)
        keys = _key_list(record, "public_keys")
        if not keys or any(len(k) != 32 for k in keys):
            raise ProtocolError("public_keys must be one 32-byte key per party")
        return cls(tuple(keys), get_int(record, "run_seed"))

    @staticmethod
    def reply(sealed: Sequence[bytes]) -> RecordDict:
        """A party's answer: the leader's sealed seed per partition (its own empty)."""
        return RecordDict({P.KEYS: ConfigRecord({"sealed": list(sealed), "count": len(sealed)})})

    @staticmethod
    def read_reply(content: RecordDict, n_parties: int) -> list[bytes]:
        """The leader's sealed seeds, one per partition (ProtocolError if malformed)."""
        record = get_config(content, P.KEYS)
        sealed = _key_list(record, "sealed") if get_int(record, "count") else []
        if len(sealed) != n_parties:
            raise ProtocolError(f"the leader sealed {len(sealed)} seeds for {n_parties} parties")
        return sealed


@dataclass(frozen=True)
class KeyOpen:
    """Server -> a non-leader party: the seed the leader sealed for it."""

    sealed: bytes

    def to_content(self) -> RecordDict:
        """The message content."""
        return RecordDict({P.KEYS: ConfigRecord({"sealed": self.sealed})})

    @classmethod
    def from_content(cls, content: RecordDict) -> KeyOpen:
        """Decode (ProtocolError if malformed)."""
        return cls(_bytes(get_config(content, P.KEYS), "sealed"))
