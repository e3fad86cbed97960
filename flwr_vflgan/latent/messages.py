"""The one-round latent diffusion family's wire messages, typed, used by both sides.

Setup reuses VFLGAN's :class:`~flwr_vflgan.runtime.messages.SetupInstruction`; the
party's reply adds the width of its latents. Then one message each way: the server asks
for the latents (:class:`EncodeRequest`), the party answers with the latents of all its
rows in the agreed order (:class:`LatentsReply`); the server sends each party its slice
of the sampled latents (:class:`DecodeRequest`) and the party answers with its decoded
columns (:class:`~flwr_vflgan.runtime.messages.GenerateReply`). Every array is checked
on arrival (float32, shape, finite), every field typed.
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
    get_positive_int,
    get_tensor,
    tensors_to_record,
)
from flwr_vflgan.runtime.messages import setup_reply_content


@dataclass(frozen=True)
class LatentSetupReply:
    """Party -> server: the common setup facts and the width of its latents."""

    partition_id: int
    n_rows: int
    id_digest: str
    columns: Sequence[str]
    latent_width: int

    def to_content(self) -> RecordDict:
        """The message content."""
        return setup_reply_content(self, "latent_width")

    @staticmethod
    def width_of(cfg: ConfigRecord) -> int:
        """The latent width a setup reply's config record names.

        Raises
        ------
        ProtocolError
            It is missing or not a positive integer.
        """
        return get_positive_int(cfg, "latent_width")


@dataclass(frozen=True)
class EncodeRequest:
    """Server -> party: train the autoencoder (or take the one trained) and send the
    latents of every row; ``checkpoint``: also write the autoencoder to the party's
    checkpoint directory, so a resumed run can decode with it."""

    checkpoint: bool = False

    def to_content(self) -> RecordDict:
        """The message content."""
        return RecordDict({P.CONFIG: ConfigRecord({"checkpoint": self.checkpoint})})

    @classmethod
    def from_content(cls, content: RecordDict) -> EncodeRequest:
        """Decode."""
        cfg = get_config(content, P.CONFIG)
        return cls(bool(get_field(cfg, "checkpoint", bool)))


def _latents(content: RecordDict, rows: int | None, width: int) -> np.ndarray:
    return get_tensor(content, P.FEATURES, P.LATENTS, (rows, width)).numpy()


@dataclass(frozen=True)
class LatentsReply:
    """Party -> server: the latents of its rows, one row each, in the agreed order."""

    latents: np.ndarray

    def to_content(self) -> RecordDict:
        """The message content: one float32 array."""
        return RecordDict({P.FEATURES: tensors_to_record({P.LATENTS: self.latents})})

    @classmethod
    def from_content(cls, content: RecordDict, rows: int, width: int) -> LatentsReply:
        """Decode, checking the shape ``(rows, width)`` agreed at setup.

        Raises
        ------
        ProtocolError
            The array is missing, not float32, of another shape or not finite.
        """
        return cls(_latents(content, rows, width))


@dataclass(frozen=True)
class DecodeRequest:
    """Server -> party: its slice of the sampled synthetic latents, to decode and publish."""

    latents: np.ndarray

    def to_content(self) -> RecordDict:
        """The message content: the row count and one float32 array."""
        return RecordDict(
            {
                P.FEATURES: tensors_to_record({P.LATENTS: self.latents}),
                P.CONFIG: ConfigRecord({"n_rows": len(self.latents)}),
            }
        )

    @classmethod
    def from_content(cls, content: RecordDict, width: int) -> DecodeRequest:
        """Decode, checking the width and the announced row count.

        Raises
        ------
        ProtocolError
            A field is missing or the array is malformed.
        """
        rows = get_int(get_config(content, P.CONFIG), "n_rows")
        if rows < 1:
            raise ProtocolError(f"n_rows must be a positive integer, got {rows}")
        return cls(_latents(content, rows, width))
