"""The networks of split classification (paper 002, Table 1 and Appendix E.2).

* :class:`LocalModel` ``f_p``: a non-label party's MLP over its columns, output width
  ``d`` with a sigmoid (Spambase: ``input -> 16 -> 1``) or no activation.
* :func:`head` ``G`` / ``h``: the label party's generator of GAFM, or the head of vanilla
  split learning, ``f(X) -> 1`` with a sigmoid output.
* :func:`discriminator` ``D``: ``1 -> ... -> 1`` with LeakyReLU after every layer.
* :func:`combine`: the cut-layer function ``F``.

Dropout in the local model takes its masks from an explicit generator, so a party that
recomputes a forward pass (each Flower message may run in a new process) gets the same
masks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .config import GAFMSettings


def mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, slope: float, *, leaky_output: bool
) -> nn.Sequential:
    """Linear layers with LeakyReLU between them (and after the last with ``leaky_output``)."""
    layers: list[nn.Module] = []
    width = in_dim
    for h in hidden:
        layers += [nn.Linear(width, h), nn.LeakyReLU(slope)]
        width = h
    layers.append(nn.Linear(width, out_dim))
    if leaky_output:
        layers.append(nn.LeakyReLU(slope))
    return nn.Sequential(*layers)


class LocalModel(nn.Module):
    """``f_p``: hidden LeakyReLU layers (optional dropout), then ``cut_dim`` outputs."""

    def __init__(self, in_dim: int, settings: GAFMSettings) -> None:
        super().__init__()
        if in_dim < 1:
            raise ValueError(f"a non-label party needs at least one input column, got {in_dim}")
        self.hidden = nn.ModuleList()
        width = in_dim
        for h in settings.local_hidden:
            self.hidden.append(nn.Linear(width, h))
            width = h
        self.out = nn.Linear(width, settings.cut_dim)
        self.slope = settings.leaky_slope
        self.dropout = settings.local_dropout
        self.sigmoid = settings.local_output == "sigmoid"

    def forward(self, x: torch.Tensor, masks: torch.Generator | None = None) -> torch.Tensor:
        """The cut value; dropout is applied only when ``masks`` is given (training)."""
        for layer in self.hidden:
            x = nn.functional.leaky_relu(layer(x), self.slope)
            if masks is not None and self.dropout > 0:
                keep = torch.rand(x.shape, generator=masks) >= self.dropout
                x = x * keep / (1.0 - self.dropout)
        x = self.out(x)
        return torch.sigmoid(x) if self.sigmoid else x


def head(in_dim: int, settings: GAFMSettings) -> nn.Sequential:
    """GAFM's generator ``G`` (or vanilla split learning's ``h``): sigmoid output in (0, 1)."""
    net = mlp(in_dim, settings.head_hidden, 1, settings.leaky_slope, leaky_output=False)
    net.append(nn.Sigmoid())
    return net


def discriminator(settings: GAFMSettings) -> nn.Sequential:
    """GAFM's critic ``D`` on a scalar label or prediction."""
    return mlp(1, settings.disc_hidden, 1, settings.leaky_slope, leaky_output=True)


def combine(parts: Sequence[torch.Tensor], how: str) -> torch.Tensor:
    """``F``: the parties' cut values, combined (identity, average of eq. C.1, or concat)."""
    if how == "identity":
        if len(parts) != 1:
            raise ValueError(f"identity combines one party's output, got {len(parts)}")
        return parts[0]
    if how == "average":
        return torch.stack(list(parts)).mean(dim=0)
    if how == "concat":
        return torch.cat(list(parts), dim=1)
    raise ValueError(f"unknown cut combination {how!r}; valid: identity, average, concat")


def seeded(build: Callable[..., nn.Module], seed: int, *args: object) -> nn.Module:
    """Build a module with parameters drawn from ``seed`` (the global RNG is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(*args)
