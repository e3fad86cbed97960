"""VT-GAN's messages (setup, build, steps, publication) as typed dataclasses, encoded to
and decoded from Flower records.

Both sides use these classes: the strategy builds instructions and reads replies, the
client reads instructions and builds replies; no record key or field name of a
message is written anywhere else. Decoding validates on arrival (field types, dtypes,
shapes, finite values, one-hot conditions) and raises
:class:`~flwr_vflgan.runtime.codec.ProtocolError`, which a client turns into a Flower
error reply and the strategy into ``RunStopped``.

A step message carries a block of steps (:mod:`flwr_vflgan.vtgan.blocks`): the
instruction the gradients of the block the client ran forward last time and the chunks
of the next block, the reply the features of that block. Each kind of tensor travels
as one array whatever the block's length (rows of the block's steps stacked in step
order), in the record named for it, so traffic is booked per record as before.

| record | instruction (server -> client) | reply (client -> server) |
|---|---|---|
| ``config`` | the applied block, the forward block and whether the client is chosen in each of its steps, the steps whose conditions it supplies, the selected-row counts of the applied critic steps | the forward block; a generator step's conditional loss |
| ``grads`` | ``packed``: per applied step the real-feature gradient (critic steps) then the fake-feature one; ``selected``: a non-chosen client's selected rows | |
| ``chunk`` | every forward step's chunk of ``G^t``'s output | a generator step's chunk gradient |
| ``features`` | | ``packed``: per forward step the real features (critic steps where the client is chosen, or under DP) then the fake ones, then the every-row features once |
| ``rows`` | | the chosen client's row indices of its critic steps |
| ``condition`` | | ``packed``: per requested step the fake rows' conditions, then (critic steps) the real rows' |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.blocks import NO_BLOCK, StepBlock
from flwr_vflgan.runtime.codec import (
    ProtocolError,
    get_config,
    get_field,
    get_indices,
    get_int,
    get_str,
    get_tensor,
    indices_to_record,
    tensors_to_record,
)
from flwr_vflgan.runtime.messages import SetupInstruction, setup_reply_content

PACKED = "packed"
SELECTED = "selected"

__all__ = [
    "VTBuild",
    "VTBuildReply",
    "VTGenerate",
    "VTSetupReply",
    "VTStepInstruction",
    "VTStepReply",
    "one_hot_rows",
    "read_vt_setup",
    "vt_setup",
]


def _list(record: ConfigRecord, key: str, kind: type) -> list:
    """A list field of ``kind`` items; absent means empty (Flower drops nothing, but an
    empty list has no item type to check)."""
    if key not in record:
        return []
    values = get_field(record, key, list)
    assert isinstance(values, list)  # checked by get_field
    if not all(isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) for v in values):
        raise ProtocolError(f"field {key!r} must be a list of {kind.__name__}, got {values!r}")
    return values


def _block(record: ConfigRecord, prefix: str) -> StepBlock:
    return StepBlock(get_int(record, f"{prefix}_start"), get_int(record, f"{prefix}_count"))


def _put_list(fields: dict, key: str, values: Sequence) -> None:
    if len(values):
        fields[key] = list(values)


def one_hot_rows(values: np.ndarray, name: str) -> None:
    """Raise ProtocolError unless every row of ``values`` is one-hot (nothing to check
    in conditions of width 0: a table without categorical columns)."""
    if values.shape[1] == 0:
        return
    if not (np.isin(values, (0.0, 1.0)).all() and (values.sum(axis=1) == 1).all()):
        raise ProtocolError(f"{name} rows are not one-hot")


@dataclass(frozen=True)
class VTStepInstruction:
    """Server -> client: apply a block's gradients, run the next block forward, sample
    conditions."""

    applied: StepBlock = NO_BLOCK
    forward: StepBlock = NO_BLOCK
    chosen: tuple[bool, ...] = ()
    """Whether the client is the chosen one in each step of ``forward``."""
    condition_steps: tuple[int, ...] = ()
    """Steps whose conditional vectors this client supplies."""
    grads: np.ndarray | None = None
    """``float32 (rows, f)``: the applied block's gradients, packed."""
    selected: np.ndarray | None = None
    """``int64``: the applied critic steps' selected rows of a non-chosen client."""
    selected_counts: tuple[int, ...] = ()
    """Per applied step, how many of ``selected`` are its (0 where none)."""
    chunks: np.ndarray | None = None
    """``float32 (count * B, w)``: the forward block's chunks, step after step."""
    checkpoint: bool = False
    """After applying (a generator step, with no forward block), write a checkpoint to
    resume at the step after it."""

    def __post_init__(self) -> None:
        if self.checkpoint and (self.applied.empty or not self.forward.empty):
            raise ProtocolError(
                "a checkpoint is written after an applied block with no forward block"
            )
        if len(self.chosen) != self.forward.count:
            raise ProtocolError(
                f"forward {self.forward.describe()} needs {self.forward.count} chosen flags, "
                f"got {len(self.chosen)}"
            )
        if (self.chunks is None) != self.forward.empty:
            raise ProtocolError("chunks travel exactly with a forward block")
        if (self.grads is None) != self.applied.empty:
            raise ProtocolError("gradients travel exactly with an applied block")
        if self.selected_counts and len(self.selected_counts) != self.applied.count:
            raise ProtocolError(
                f"selected_counts needs one entry per applied step ({self.applied.count}), "
                f"got {len(self.selected_counts)}"
            )
        if sum(self.selected_counts) != (0 if self.selected is None else len(self.selected)):
            raise ProtocolError(
                f"selected_counts add up to {sum(self.selected_counts)}, but "
                f"{0 if self.selected is None else len(self.selected)} rows are selected"
            )

    def to_content(self) -> RecordDict:
        """The message's records."""
        fields: dict = {
            "apply_start": self.applied.start,
            "apply_count": self.applied.count,
            "forward_start": self.forward.start,
            "forward_count": self.forward.count,
            "checkpoint": self.checkpoint,
        }
        _put_list(fields, "chosen", self.chosen)
        _put_list(fields, "condition_steps", self.condition_steps)
        _put_list(fields, "selected_counts", self.selected_counts)
        content = RecordDict({P.CONFIG: ConfigRecord(fields)})
        if self.grads is not None:
            record = tensors_to_record({PACKED: self.grads})
            if self.selected is not None and len(self.selected):
                record[SELECTED] = indices_to_record({SELECTED: self.selected})[SELECTED]
            content[P.GRADS] = record
        if self.chunks is not None:
            content[P.CHUNK] = tensors_to_record({P.CHUNK: self.chunks})
        return content

    @classmethod
    def from_content(
        cls, content: RecordDict, batch: int, chunk_width: int, feature_dim: int, n_rows: int
    ) -> VTStepInstruction:
        """Decode and validate an instruction for a client of these shapes.

        The gradients' row count depends on the client's own record of the applied block
        (who was chosen), so it is checked where they are unpacked
        (:func:`unpack_grads`); here only their width, dtype and finiteness.
        """
        cfg = get_config(content, P.CONFIG)
        applied, forward = _block(cfg, "apply"), _block(cfg, "forward")
        counts = tuple(_list(cfg, "selected_counts", int))
        grads = selected = chunks = None
        if not applied.empty:
            grads = get_tensor(content, P.GRADS, PACKED, (None, feature_dim)).numpy()
            if sum(counts):
                selected = get_indices(content, P.GRADS, SELECTED, sum(counts), n_rows)
        if not forward.empty:
            shape = (forward.count * batch, chunk_width)
            chunks = get_tensor(content, P.CHUNK, P.CHUNK, shape).numpy()
        return cls(
            applied=applied,
            forward=forward,
            chosen=tuple(_list(cfg, "chosen", bool)),
            condition_steps=tuple(_list(cfg, "condition_steps", int)),
            grads=grads,
            selected=selected,
            selected_counts=counts,
            chunks=chunks,
            checkpoint=bool(get_field(cfg, "checkpoint", bool)),
        )


@dataclass(frozen=True)
class VTStepReply:
    """Client -> server: the forward block's features, the requested conditions, and a
    generator step's chunk gradient."""

    forward: StepBlock = NO_BLOCK
    features: np.ndarray | None = None
    """``float32 (rows, f)``: the forward block's features, packed."""
    rows: np.ndarray | None = None
    """``int64``: the chosen client's row indices, ``B`` per critic step it was chosen in."""
    conditions: np.ndarray | None = None
    """``float32 (rows, c)``: the requested conditions, packed."""
    chunk_grad: np.ndarray | None = None
    """``float32 (B, w)``: the applied generator step's chunk gradient."""
    cond_loss: float = 0.0

    def to_content(self) -> RecordDict:
        """The message's records."""
        fields: dict = {
            "forward_start": self.forward.start,
            "forward_count": self.forward.count,
            "cond_loss": float(self.cond_loss),
        }
        content = RecordDict({P.CONFIG: ConfigRecord(fields)})
        if self.features is not None:
            content[P.FEATURES] = tensors_to_record({PACKED: self.features})
        if self.rows is not None:
            content[P.ROW_INDICES] = indices_to_record({P.ROW_INDICES: self.rows})
        if self.conditions is not None:
            content[P.CONDITION] = tensors_to_record({PACKED: self.conditions})
        if self.chunk_grad is not None:
            content[P.CHUNK] = tensors_to_record({P.CHUNK: self.chunk_grad})
        return content

    @classmethod
    def from_content(
        cls,
        content: RecordDict,
        *,
        feature_rows: int,
        feature_dim: int,
        index_rows: int,
        n_rows: int,
        condition_rows: int,
        cond_dim: int,
        chunk_shape: tuple[int, int] | None,
    ) -> VTStepReply:
        """Decode and validate a reply whose shapes the server knows in advance."""
        cfg = get_config(content, P.CONFIG)
        forward = _block(cfg, "forward")
        features = rows = conditions = chunk_grad = None
        if feature_rows:
            features = get_tensor(content, P.FEATURES, PACKED, (feature_rows, feature_dim))
        if index_rows:
            rows = get_indices(content, P.ROW_INDICES, P.ROW_INDICES, index_rows, n_rows)
        elif P.ROW_INDICES in content:
            raise ProtocolError("row indices sent where none were asked for")
        if condition_rows:
            conditions = get_tensor(content, P.CONDITION, PACKED, (condition_rows, cond_dim))
            one_hot_rows(conditions.numpy(), "condition")
        if chunk_shape is not None:
            chunk_grad = get_tensor(content, P.CHUNK, P.CHUNK, chunk_shape)
        cond_loss = float(get_field(cfg, "cond_loss", float))  # type: ignore[arg-type]
        return cls(
            forward=forward,
            features=None if features is None else features.numpy(),
            rows=rows,
            conditions=None if conditions is None else conditions.numpy(),
            chunk_grad=None if chunk_grad is None else chunk_grad.numpy(),
            cond_loss=cond_loss,
        )


# -- setup, build and publication ---------------------------------------------------------------


def _config(fields: dict) -> RecordDict:
    return RecordDict({P.CONFIG: ConfigRecord(fields)})


def vt_setup(
    algorithm: str,
    data_spec: str,
    run_seed: int,
    resume_step: int = P.NO_STEP,
    checkpoint_root: str = "",
) -> SetupInstruction:
    """Server -> client: VT-GAN's setup is the VFLGAN family's setup instruction with
    VT-GAN's protocol version: ``resume_step`` is the checkpoint to resume from
    (``NO_STEP``: start afresh). Decode it with :func:`read_vt_setup`."""
    return SetupInstruction(
        algorithm,
        data_spec,
        resume_step,
        run_seed,
        checkpoint_root,
        protocol_version=P.VT_PROTOCOL_VERSION,
    )


def read_vt_setup(content: RecordDict) -> SetupInstruction:
    """Decode a VT-GAN setup (ProtocolError if malformed or of another protocol version)."""
    return SetupInstruction.from_content(
        content, P.VT_PROTOCOL_VERSION, "VT-GAN protocol {theirs}, this client {ours}"
    )


@dataclass(frozen=True)
class VTSetupReply:
    """Client -> server: the fields every setup reply carries
    (:class:`~flwr_vflgan.runtime.messages.SetupReply`), and the client's shape: its
    columns, the width of its encoded rows, the width and count of its conditional
    vector's categorical columns."""

    partition_id: int
    n_rows: int
    id_digest: str
    seed_commitment: str
    columns: Sequence[str]
    n_columns: int
    encoded_width: int
    cond_dim: int
    cond_columns: int

    def to_content(self) -> RecordDict:
        """The message content."""
        return setup_reply_content(
            self, "n_columns", "encoded_width", "cond_dim", "cond_columns", "seed_commitment"
        )

    @staticmethod
    def shape_of(cfg: ConfigRecord) -> tuple[int, int, int, int]:
        """``(n_columns, encoded_width, cond_dim, cond_columns)`` of a setup reply's config
        record (the common fields are checked by ``strategies.exchange.setup_replies``)."""
        return (
            get_int(cfg, "n_columns"),
            get_int(cfg, "encoded_width"),
            get_int(cfg, "cond_dim"),
            get_int(cfg, "cond_columns"),
        )


@dataclass(frozen=True)
class VTBuild:
    """Server -> client: the widths of the client's blocks, and every client's number of
    categorical columns (each client calibrates its own noise for the joint target)."""

    chunk_width: int
    g_block_width: int
    d_block_width: int
    count_columns: tuple[int, ...] = field(default_factory=tuple)

    def to_content(self) -> RecordDict:
        """The message content."""
        return _config(
            {
                "chunk_width": self.chunk_width,
                "g_block_width": self.g_block_width,
                "d_block_width": self.d_block_width,
                "count_columns": list(self.count_columns),
            }
        )

    @classmethod
    def from_content(cls, content: RecordDict) -> VTBuild:
        """Decode.

        Raises
        ------
        ProtocolError
            A field is missing or mistyped, or a width is below 1.
        """
        cfg = get_config(content, P.CONFIG)
        widths = [get_int(cfg, k) for k in ("chunk_width", "g_block_width", "d_block_width")]
        if min(widths) < 1:
            raise ProtocolError(f"layout widths must be >= 1, got {widths}")
        columns = get_field(cfg, "count_columns", list)
        if not isinstance(columns, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) for c in columns
        ):
            raise ProtocolError(f"count_columns must be a list of integers, got {columns!r}")
        return cls(widths[0], widths[1], widths[2], tuple(int(c) for c in columns))


@dataclass(frozen=True)
class VTBuildReply:
    """Client -> server: the width of the bottom discriminator's output it built."""

    feature_dim: int

    def to_content(self) -> RecordDict:
        """The message content."""
        return _config({"feature_dim": self.feature_dim})

    @classmethod
    def from_content(cls, content: RecordDict) -> VTBuildReply:
        """Decode (ProtocolError if the field is missing or mistyped)."""
        return cls(get_int(get_config(content, P.CONFIG), "feature_dim"))


CONDITIONS = "conditions"
ROWS = "rows"


@dataclass(frozen=True)
class VTGenerate:
    """Server -> client, publication in two phases: ``conditions`` asks the client for
    ``n_rows`` conditional vectors; ``rows`` sends every row's chunk of ``G^t``'s output
    and asks for the decoded, shuffled rows."""

    phase: str
    n_rows: int
    draw: int
    chunk: np.ndarray | None = None
    """``float32 (n_rows, chunk width)``: the ``rows`` phase's chunks."""

    def __post_init__(self) -> None:
        if self.phase not in (CONDITIONS, ROWS):
            raise ProtocolError(
                f"unknown generation phase {self.phase!r}; valid: {[CONDITIONS, ROWS]}"
            )
        if self.n_rows < (1 if self.phase == ROWS else 0):
            raise ProtocolError(
                f"n_rows must be >= {1 if self.phase == ROWS else 0}, got {self.n_rows}"
            )
        if (self.chunk is not None) != (self.phase == ROWS):
            raise ProtocolError("chunks travel exactly with the rows phase")

    def to_content(self) -> RecordDict:
        """The message content."""
        content = _config({"phase": self.phase, "n_rows": self.n_rows, "draw": self.draw})
        if self.chunk is not None:
            content[P.CHUNK] = tensors_to_record({P.CHUNK: self.chunk})
        return content

    @classmethod
    def from_content(cls, content: RecordDict, chunk_width: int) -> VTGenerate:
        """Decode; the chunks must be ``(n_rows, chunk_width)``.

        Raises
        ------
        ProtocolError
            A field is missing or mistyped, the phase is unknown, or the chunks are
            malformed.
        """
        cfg = get_config(content, P.CONFIG)
        rows, draw = get_int(cfg, "n_rows"), get_int(cfg, "draw")
        phase = get_str(cfg, "phase")
        chunk = None
        if phase == ROWS and rows >= 1:
            chunk = get_tensor(content, P.CHUNK, P.CHUNK, (rows, chunk_width)).numpy()
        return cls(phase, rows, draw, chunk)

    @staticmethod
    def conditions_reply(cond: np.ndarray) -> RecordDict:
        """Client -> server, ``conditions`` phase: the conditional vectors."""
        return RecordDict({P.CONDITION: tensors_to_record({P.COND: cond})})

    @staticmethod
    def read_conditions(content: RecordDict, rows: int, cond_dim: int) -> np.ndarray:
        """The conditional vectors of a ``conditions`` reply (ProtocolError if malformed)."""
        return get_tensor(content, P.CONDITION, P.COND, (rows, cond_dim)).numpy()
