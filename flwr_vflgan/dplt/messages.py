"""DPLT's wire messages, typed, used by both sides.

Setup reuses VFLGAN's :class:`~flwr_vflgan.runtime.messages.SetupInstruction`; the
party's reply adds its number of bits (public, from the domain). Then one message each
way: the server sends the budget plan (:class:`LatentsRequest`) and the party answers
with the latent state of each of its groups for every row (:class:`LatentsReply`); the
server sends each party its columns of the sampled states (:class:`DecodeRequest`) and
the party answers with its decoded columns
(:class:`~flwr_vflgan.runtime.messages.GenerateReply`). Every array is checked on
arrival (int64, length, range), every field typed.
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
    get_indices,
    get_int,
    get_positive_int,
    indices_to_record,
)
from flwr_vflgan.runtime.messages import setup_reply_content

STATES = "states"
"""Record of the latent states, one int64 vector per group (``g0``, ``g1``, ...)."""


@dataclass(frozen=True)
class DPLTSetupReply:
    """Party -> server: the common setup facts and how many bits its columns make."""

    partition_id: int
    n_rows: int
    id_digest: str
    columns: Sequence[str]
    bits: int

    def to_content(self) -> RecordDict:
        """The message content."""
        return setup_reply_content(self, "bits")

    @staticmethod
    def bits_of(cfg: ConfigRecord) -> int:
        """The bit count a setup reply's config record names.

        Raises
        ------
        ProtocolError
            It is missing or not a positive integer.
        """
        return get_positive_int(cfg, "bits")


@dataclass(frozen=True)
class LatentsRequest:
    """Server -> party: the budget plan's totals (the party rebuilds the plan with its
    ``dplt.budget_split``): the budget, the grouping choices and the latent attributes of
    all parties."""

    epsilon: float
    selections: int
    latents: int

    def to_content(self) -> RecordDict:
        """The message content."""
        record = ConfigRecord(
            {"epsilon": self.epsilon, "selections": self.selections, "latents": self.latents}
        )
        return RecordDict({P.CONFIG: record})

    @classmethod
    def from_content(cls, content: RecordDict) -> LatentsRequest:
        """Decode.

        Raises
        ------
        ProtocolError
            A field is missing, mistyped or out of range.
        """
        cfg = get_config(content, P.CONFIG)
        epsilon = float(get_field(cfg, "epsilon", float))  # type: ignore[arg-type]
        selections, latents = get_int(cfg, "selections"), get_int(cfg, "latents")
        if not epsilon > 0 or selections < 0 or latents < 1:
            raise ProtocolError(
                f"a budget plan needs epsilon > 0, selections >= 0 and latents >= 1, got "
                f"{epsilon}, {selections}, {latents}"
            )
        return cls(epsilon, selections, latents)


def _states_record(states: np.ndarray) -> RecordDict:
    columns = {f"g{j}": np.ascontiguousarray(states[:, j]) for j in range(states.shape[1])}
    return RecordDict({STATES: indices_to_record(columns)})


def _states(content: RecordDict, rows: int, counts: Sequence[int]) -> np.ndarray:
    columns = [get_indices(content, STATES, f"g{j}", rows, c) for j, c in enumerate(counts)]
    return np.stack(columns, axis=1)


@dataclass(frozen=True)
class LatentsReply:
    """Party -> server: how many states each of its latent attributes has and the state
    of each for every row, in the agreed order."""

    counts: Sequence[int]
    states: np.ndarray

    def to_content(self) -> RecordDict:
        """The message content."""
        content = _states_record(self.states)
        content[P.CONFIG] = ConfigRecord({"counts": [int(c) for c in self.counts]})
        return content

    @classmethod
    def from_content(cls, content: RecordDict, rows: int) -> LatentsReply:
        """Decode, checking ``rows`` states per group, each within its count.

        Raises
        ------
        ProtocolError
            A field is missing or malformed.
        """
        counts = get_field(get_config(content, P.CONFIG), "counts", list)
        assert isinstance(counts, list)
        if not counts or not all(isinstance(c, int) and c >= 1 for c in counts):
            raise ProtocolError(f"counts must be a non-empty list of positive ints, got {counts}")
        return cls(list(counts), _states(content, rows, counts))


@dataclass(frozen=True)
class DecodeRequest:
    """Server -> party: its columns of the sampled latent states, to decode and publish."""

    states: np.ndarray

    def to_content(self) -> RecordDict:
        """The message content."""
        content = _states_record(self.states)
        content[P.CONFIG] = ConfigRecord({"n_rows": len(self.states)})
        return content

    @classmethod
    def from_content(cls, content: RecordDict, counts: Sequence[int]) -> DecodeRequest:
        """Decode, checking each group's states against the party's own counts.

        Raises
        ------
        ProtocolError
            A field is missing or malformed.
        """
        rows = get_int(get_config(content, P.CONFIG), "n_rows")
        if rows < 1:
            raise ProtocolError(f"n_rows must be a positive integer, got {rows}")
        return cls(_states(content, rows, counts))
