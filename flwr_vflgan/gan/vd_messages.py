"""VDGAN's wire messages (paper 004, Algorithm 3) as typed dataclasses, used by both sides.

Setup reuses VFLGAN's :class:`~flwr_vflgan.runtime.messages.SetupInstruction`; the
client's reply adds the shape of its encoded columns (each span's width and output
activation: the thesis takes the attributes' encoding as public), which the server's
generator needs. A step carries one iteration: the server sends each client its columns
of the synthetic batch, the client returns the gradient of its share of the generator
loss with respect to them, the same shape. Publication sends each client its columns of
the synthetic table to decode; it answers with
:class:`~flwr_vflgan.runtime.messages.GenerateReply`. Every array is validated on
arrival (float32, shape, finite), every field typed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import (
    ProtocolError,
    get_config,
    get_field,
    get_int,
    get_str,
    get_tensor,
    tensors_to_record,
)
from flwr_vflgan.runtime.messages import setup_reply_content

_ACTIVATIONS = ("gumbel_softmax", "identity", "identity_missing", "tanh", "tanh_missing")


@dataclass(frozen=True)
class WireSpan:
    """One encoded column's place in a client's block, as the server's generator needs it."""

    start: int
    width: int
    activation: str


@dataclass(frozen=True)
class VDSetupReply:
    """Client -> server: the common setup facts, a commitment to the shared seed, and the
    widths and output activations of its encoded columns."""

    partition_id: int
    n_rows: int
    id_digest: str
    seed_commitment: str
    columns: Sequence[str]
    span_widths: Sequence[int]
    span_activations: Sequence[str]
    dp_allowed_steps: int = -1
    """Critic steps the client's privacy budget allows (-1: no DP)."""

    def to_content(self) -> RecordDict:
        """The message content."""
        content = setup_reply_content(self, "seed_commitment", "dp_allowed_steps")
        record = content[P.CONFIG]
        assert isinstance(record, ConfigRecord)
        record["span_widths"] = [int(w) for w in self.span_widths]
        record["span_activations"] = [str(a) for a in self.span_activations]
        return content

    @staticmethod
    def spans_of(cfg: ConfigRecord) -> list[WireSpan]:
        """The spans a setup reply's config record lists, laid end to end.

        Raises
        ------
        ProtocolError
            The lists are missing, of different lengths, or hold an impossible width or
            an unknown activation.
        """
        widths, activations = (
            get_field(cfg, "span_widths", list),
            get_field(cfg, "span_activations", list),
        )
        assert isinstance(widths, list) and isinstance(activations, list)  # get_field
        if not widths or len(widths) != len(activations):
            raise ProtocolError(
                f"span_widths and span_activations must be non-empty and of one length, got "
                f"{len(widths)} and {len(activations)}"
            )
        spans, start = [], 0
        for width, activation in zip(widths, activations, strict=True):
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise ProtocolError(f"a span width must be a positive integer, got {width!r}")
            if activation not in _ACTIVATIONS:
                raise ProtocolError(f"unknown span activation {activation!r}")
            spans.append(WireSpan(start, width, activation))
            start += width
        return spans


def _block(name: str, rows: np.ndarray) -> RecordDict:
    return RecordDict({P.FEATURES: tensors_to_record({name: rows})})


@dataclass(frozen=True)
class VDStep:
    """Server -> client: iteration ``iteration``'s synthetic batch, the client's columns,
    and whether to write a checkpoint after it (resuming at the next iteration)."""

    iteration: int
    fake: np.ndarray
    checkpoint: bool = False

    def to_content(self) -> RecordDict:
        """The message content: the iteration, the checkpoint request and one float32
        array."""
        content = _block(P.FAKE, self.fake)
        content[P.CONFIG] = ConfigRecord(
            {"iteration": self.iteration, "checkpoint": self.checkpoint}
        )
        return content

    @classmethod
    def from_content(cls, content: RecordDict, rows: int, width: int) -> VDStep:
        """Decode, checking the batch's shape ``(rows, width)``; a message without the
        checkpoint request (an older server) asks for none."""
        config = get_config(content, P.CONFIG)
        iteration = get_int(config, "iteration")
        checkpoint = "checkpoint" in config and bool(get_field(config, "checkpoint", bool))
        fake = get_tensor(content, P.FEATURES, P.FAKE, (rows, width)).numpy()
        return cls(iteration, fake, checkpoint)


@dataclass(frozen=True)
class VDStepReply:
    """Client -> server: the gradient of ``-mean D_k`` at the received batch."""

    iteration: int
    grad: np.ndarray

    def to_content(self) -> RecordDict:
        """The message content: the iteration and one float32 array."""
        content = _block(P.GRADS, self.grad)
        content[P.CONFIG] = ConfigRecord({"iteration": self.iteration})
        return content

    @classmethod
    def from_content(
        cls, content: RecordDict, iteration: int, rows: int, width: int
    ) -> VDStepReply:
        """Decode, checking the iteration and the gradient's shape ``(rows, width)``."""
        got = get_int(get_config(content, P.CONFIG), "iteration")
        if got != iteration:
            raise ProtocolError(f"reply is for iteration {got}, expected {iteration}")
        return cls(got, get_tensor(content, P.FEATURES, P.GRADS, (rows, width)).numpy())


@dataclass(frozen=True)
class VDDecode:
    """Server -> client: encoded synthetic rows of its columns, to decode for publication."""

    rows: np.ndarray
    purpose: str = "publication"

    def to_content(self) -> RecordDict:
        """The message content."""
        content = _block(P.ROWS, self.rows)
        content[P.CONFIG] = ConfigRecord({"purpose": self.purpose, "n_rows": len(self.rows)})
        return content

    @classmethod
    def from_content(cls, content: RecordDict, width: int) -> VDDecode:
        """Decode, checking the rows' width."""
        cfg = get_config(content, P.CONFIG)
        n_rows = get_int(cfg, "n_rows")
        rows = get_tensor(content, P.FEATURES, P.ROWS, (n_rows, width)).numpy()
        return cls(rows, get_str(cfg, "purpose"))
