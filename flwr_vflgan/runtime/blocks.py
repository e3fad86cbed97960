"""Blocks of consecutive training steps and the packing of their tensors (no Flower here).

One exchange carries a block of ``K`` steps (``train.steps_per_exchange``). A block's
tensors (per step: the real-row features or gradients of a discriminator step, then the
fake-row ones) travel as one float32 array; :func:`pack_steps` and :func:`unpack_steps`
convert between the two forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flwr_vflgan.runtime.errors import ProtocolError
from flwr_vflgan.runtime.protocol import NO_STEP

# -- blocks of steps -------------------------------------------------------------------------


@dataclass(frozen=True)
class StepBlock:
    """Steps ``start .. start + count - 1`` of one exchange; ``count == 0`` is no block."""

    start: int = NO_STEP
    count: int = 0

    def __post_init__(self) -> None:
        if self.count < 0 or (self.count > 0 and self.start < 0):
            raise ProtocolError(f"invalid step block: start {self.start}, count {self.count}")

    @property
    def empty(self) -> bool:
        """Whether the block holds no step."""
        return self.count == 0

    @property
    def stop(self) -> int:
        """One past the block's last step."""
        return self.start + self.count

    @property
    def steps(self) -> range:
        """The block's step numbers, in order."""
        return range(self.start, self.stop) if self.count else range(0)

    def describe(self) -> str:
        """``step 7`` or ``steps 7-10``, for messages."""
        if self.empty:
            return "no step"
        return f"step {self.start}" if self.count == 1 else f"steps {self.start}-{self.stop - 1}"


NO_BLOCK = StepBlock()


@dataclass(frozen=True)
class StepTensors:
    """One step's tensors w.r.t. a party's features: real rows (discriminator steps only)
    and fake rows, each ``(rows, feature_dim)``."""

    real: torch.Tensor | None
    fake: torch.Tensor


@dataclass(frozen=True)
class StepLayout:
    """How one step's tensors lie in a packed block: whether it has real rows, and how
    many rows each part has."""

    discriminator: bool
    rows: int

    @property
    def packed_rows(self) -> int:
        """Rows the step occupies in the packed array."""
        return 2 * self.rows if self.discriminator else self.rows


def pack_steps(steps: Sequence[StepTensors]) -> np.ndarray:
    """One float32 array holding every step's real then fake rows, in step order."""
    parts: list[np.ndarray] = []
    for step in steps:
        if step.real is not None:
            parts.append(step.real.detach().numpy())
        parts.append(step.fake.detach().numpy())
    return np.ascontiguousarray(np.concatenate(parts, axis=0), dtype=np.float32)


def unpack_steps(packed: torch.Tensor, layout: Sequence[StepLayout]) -> list[StepTensors]:
    """Inverse of :func:`pack_steps` for a known layout.

    Raises
    ------
    ProtocolError
        The array's row count is not the layout's.
    """
    total = sum(step.packed_rows for step in layout)
    if packed.shape[0] != total:
        raise ProtocolError(
            f"packed block has {packed.shape[0]} rows, its {len(layout)} steps need {total}"
        )
    out, offset = [], 0
    for step in layout:
        real = None
        if step.discriminator:
            real = packed[offset : offset + step.rows]
            offset += step.rows
        out.append(StepTensors(real, packed[offset : offset + step.rows]))
        offset += step.rows
    return out
