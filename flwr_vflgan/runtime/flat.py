"""Keep a model's parameters, buffers and Adam moments in one flat float32 tensor.

A party's whole training state must be written to Flower's ``context.state`` after every
message and read back before the next (in a deployment each message runs in a new
process). Dozens of small tensors cost far more to (de)serialise than one buffer of
the same size, so every tensor lives as a view into a single flat tensor: saving is one
copy, loading is one copy plus re-pointing the views.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

FLAT_SCHEMA_VERSION = 1


class FlatState:
    """Flat storage for modules and their Adam optimizers.

    Parameters
    ----------
    modules
        Modules whose parameters and floating-point buffers are stored, in order.
    optimizers
        ``torch.optim.Adam`` instances over (subsets of) those parameters; their first
        and second moments are stored too, created eagerly as zeros (equivalent to
        Adam's lazy initialisation).

    Notes
    -----
    Integer buffers (BatchNorm's ``num_batches_tracked``) are not stored: with a fixed
    momentum they do not affect the computation.
    """

    def __init__(
        self, modules: Sequence[nn.Module], optimizers: Sequence[torch.optim.Adam]
    ) -> None:
        self._tensors: list[torch.Tensor] = []
        for module in modules:
            self._tensors += list(module.parameters())
            self._tensors += [b for b in module.buffers() if b.is_floating_point()]
        self._optimizers = list(optimizers)
        for optimizer in self._optimizers:
            for group in optimizer.param_groups:
                for param in group["params"]:
                    state = optimizer.state[param]
                    if not state:
                        state["step"] = torch.tensor(0.0)
                        state["exp_avg"] = torch.zeros_like(
                            param, memory_format=torch.preserve_format
                        )
                        state["exp_avg_sq"] = torch.zeros_like(
                            param, memory_format=torch.preserve_format
                        )
                    self._tensors += [state["exp_avg"], state["exp_avg_sq"]]
        self.size = sum(t.numel() for t in self._tensors)
        self.flat = torch.empty(self.size, dtype=torch.float32)
        self._rebind(copy=True)
        self.loads = 0
        """How many times :meth:`load` overwrote the buffer (the parameters' own in-place
        versions do not see a write through the buffer)."""

    def _rebind(self, copy: bool) -> None:
        offset = 0
        for tensor in self._tensors:
            n = tensor.numel()
            view = self.flat[offset : offset + n].view_as(tensor)
            if copy:
                view.copy_(tensor.detach())
            tensor.data = view
            offset += n

    def fingerprint(self) -> tuple[int, ...]:
        """Changes whenever the buffer may have: a :meth:`load`, or an in-place update of
        any parameter, buffer or Adam moment (their autograd versions)."""
        return (self.loads, *(t._version for t in self._tensors))

    def optimizer_steps(self) -> list[int]:
        """Adam's step counter of each optimizer (all its parameters share it)."""
        steps = []
        for optimizer in self._optimizers:
            first = optimizer.param_groups[0]["params"][0]
            steps.append(int(optimizer.state[first]["step"].item()))
        return steps

    def to_numpy(self) -> np.ndarray:
        """A copy of the flat buffer."""
        return self.flat.detach().numpy().copy()

    def load(self, values: np.ndarray, optimizer_steps: Sequence[int]) -> None:
        """Restore from :meth:`to_numpy` output and :meth:`optimizer_steps`."""
        if values.dtype != np.float32 or values.shape != (self.size,):
            raise ValueError(
                f"flat state must be float32 of shape ({self.size},), got {values.dtype} "
                f"{values.shape}: the model configuration differs from the one that saved it"
            )
        if len(optimizer_steps) != len(self._optimizers):
            raise ValueError(
                f"expected {len(self._optimizers)} optimizer step counters, got {len(optimizer_steps)}"
            )
        self.flat.copy_(torch.from_numpy(values.copy() if not values.flags.writeable else values))
        self.loads += 1
        for optimizer, step in zip(self._optimizers, optimizer_steps, strict=True):
            for group in optimizer.param_groups:
                for param in group["params"]:
                    optimizer.state[param]["step"] = torch.tensor(float(step))
