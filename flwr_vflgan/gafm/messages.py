"""GAFM's wire messages as typed dataclasses, encoded to and decoded from Flower records.

Both sides use these classes: the label party's strategy builds instructions and reads
replies, a non-label party reads instructions and builds replies; no record key or
field name of a GAFM message is written anywhere else. Decoding validates on arrival
(field types, dtypes, shapes, finite values, index ranges) and raises
:class:`~flwr_vflgan.runtime.codec.ProtocolError`, which a party turns into a Flower
error reply and the strategy into ``RunStopped``.

| message | label party -> party | party -> label party |
|---|---|---|
| setup | protocol version, settings, data spec (simulation), label name, seed | partition id, row count, ID digest, encoded width, column names (read by the shared setup check) |
| step | the step, the pending block's cut gradients (``float32 (rows, cut_dim)``), the next block's batch sizes and row indices | the next block's cut values |
| predict | row indices | their cut values (evaluation mode) |

No message to a party carries a label, and a gradient's rows are those of the block the
party ran forward last (it checks their number against its own record).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import ConfigRecord, RecordDict

from flwr_vflgan.runtime import protocol as P
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
from flwr_vflgan.runtime.messages import setup_reply_content

__all__ = ["CutValues", "GAFMSetup", "GAFMStep", "PredictRows"]


@dataclass(frozen=True)
class GAFMSetup:
    """Label party -> party: start a repetition with fresh models."""

    protocol_version: int
    settings: str
    """The :class:`~flwr_vflgan.gafm.config.GAFMSettings` as JSON."""
    data_spec: str
    """The simulated party's data spec as JSON; empty in a deployment."""
    label: str
    """The label column's name (a party whose table holds it refuses to run)."""
    seed: int

    def to_content(self) -> RecordDict:
        """The message's records."""
        fields: dict[str, int | str] = {
            "protocol_version": self.protocol_version,
            "settings": self.settings,
            "data_spec": self.data_spec,
            "label": self.label,
            "seed": self.seed,
        }
        return RecordDict({P.CONFIG: ConfigRecord(dict(fields))})

    @classmethod
    def from_content(cls, content: RecordDict) -> GAFMSetup:
        """Decode and validate (the protocol version is the caller's to compare)."""
        cfg = get_config(content, P.CONFIG)
        seed = get_int(cfg, "seed")
        if seed < 0:
            raise ProtocolError(f"seed must be >= 0, got {seed}")
        return cls(
            protocol_version=get_int(cfg, "protocol_version"),
            settings=get_str(cfg, "settings"),
            data_spec=get_str(cfg, "data_spec"),
            label=get_str(cfg, "label"),
            seed=seed,
        )


@dataclass(frozen=True)
class GAFMSetupReply:
    """Party -> label party: the fields every setup reply carries (checked by
    ``strategies.exchange.setup_replies``) and the width of the party's features."""

    partition_id: int
    n_rows: int
    id_digest: str
    n_features: int
    columns: Sequence[str]

    def to_content(self) -> RecordDict:
        """The message's records."""
        return setup_reply_content(self, "n_features")


@dataclass(frozen=True)
class GAFMStep:
    """Label party -> party: apply the pending block's gradients, run the next block."""

    step: int
    """The first step of the next block (or of the applied one when none follows)."""
    grads: np.ndarray | None = None
    """``float32 (rows, cut_dim)``: gradients of the pending block's cut values."""
    batch_rows: tuple[int, ...] = ()
    """Sizes of the next block's batches (empty: no forward pass)."""
    rows: np.ndarray | None = None
    """``int64``: the next block's rows, batch after batch."""

    @property
    def apply(self) -> bool:
        """Whether the message carries gradients to apply."""
        return self.grads is not None

    @property
    def forward(self) -> bool:
        """Whether the message asks for a block's cut values."""
        return self.rows is not None

    def batches(self) -> list[np.ndarray]:
        """The next block's rows, one array per batch."""
        if self.rows is None:
            return []
        return list(np.split(self.rows, np.cumsum(self.batch_rows)[:-1]))

    def to_content(self) -> RecordDict:
        """The message's records."""
        fields: dict = {"step": self.step, "apply": self.apply, "forward": self.forward}
        if self.forward:
            fields["batch_rows"] = list(self.batch_rows)
        content = RecordDict({P.CONFIG: ConfigRecord(fields)})
        if self.grads is not None:
            content[P.GRADS] = tensors_to_record({P.CUT: self.grads})
        if self.rows is not None:
            content[P.ROW_INDICES] = indices_to_record({P.ROW_INDICES: self.rows})
        return content

    @classmethod
    def from_content(
        cls, content: RecordDict, *, pending_rows: int, cut_dim: int, n_rows: int, limit: int
    ) -> GAFMStep:
        """Decode and validate for a party with ``pending_rows`` rows awaiting gradients
        (0: none), cut width ``cut_dim``, ``n_rows`` rows and at most ``limit`` batches a
        block (``gafm.steps_per_exchange``)."""
        cfg = get_config(content, P.CONFIG)
        step = get_int(cfg, "step")
        apply = bool(get_field(cfg, "apply", bool))
        forward = bool(get_field(cfg, "forward", bool))
        grads = rows = None
        if apply:
            if not pending_rows:
                raise ProtocolError(
                    "a gradient arrived, but this party has no pending forward pass"
                )
            grads = get_tensor(content, P.GRADS, P.CUT, (pending_rows, cut_dim)).numpy()
        elif pending_rows and forward:
            raise ProtocolError(
                f"step {step} asks for a forward pass before the gradient of the pending block"
            )
        sizes: tuple[int, ...] = ()
        if forward:
            if step < 0:
                raise ProtocolError(f"step must be >= 0, got {step}")
            sizes = _batch_sizes(cfg, limit)
            rows = get_indices(content, P.ROW_INDICES, P.ROW_INDICES, sum(sizes), n_rows)
        return cls(step=step, grads=grads, batch_rows=sizes, rows=rows)


def _batch_sizes(cfg: ConfigRecord, limit: int) -> tuple[int, ...]:
    """The sizes of a block's batches: 1 to ``limit`` batches, each of at least one row."""
    sizes = get_field(cfg, "batch_rows", list)
    assert isinstance(sizes, list)  # checked by get_field
    if not 1 <= len(sizes) <= limit:
        raise ProtocolError(
            f"a block holds 1 to gafm.steps_per_exchange={limit} batches, got {len(sizes)}"
        )
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
        raise ProtocolError(f"every batch needs at least one row, got sizes {sizes}")
    return tuple(int(n) for n in sizes)


@dataclass(frozen=True)
class PredictRows:
    """Label party -> party: the rows whose cut values to compute in evaluation mode."""

    rows: np.ndarray

    def to_content(self) -> RecordDict:
        """The message's records."""
        return RecordDict({P.ROW_INDICES: indices_to_record({P.ROW_INDICES: self.rows})})

    @classmethod
    def from_content(cls, content: RecordDict, n_rows: int) -> PredictRows:
        """Decode and validate: indices of rows the party has."""
        return cls(get_indices(content, P.ROW_INDICES, P.ROW_INDICES, None, n_rows))


@dataclass(frozen=True)
class CutValues:
    """Party -> label party: cut values, one row per requested row."""

    cuts: torch.Tensor

    def to_content(self) -> RecordDict:
        """The message's records."""
        return RecordDict({P.FEATURES: tensors_to_record({P.CUT: self.cuts})})

    @classmethod
    def from_content(cls, content: RecordDict, rows: int, cut_dim: int) -> CutValues:
        """Decode and validate: ``(rows, cut_dim)`` finite float32 values."""
        return cls(get_tensor(content, P.FEATURES, P.CUT, (rows, cut_dim)))

    def split(self, sizes: Sequence[int]) -> list[torch.Tensor]:
        """The cut values batch by batch."""
        return list(torch.split(self.cuts, list(sizes)))
