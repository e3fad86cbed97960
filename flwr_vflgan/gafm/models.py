"""The networks of split classification (paper 002, Table 1 and Appendix E.2).

* ``f_p``, a non-label party's model over its columns (``gafm.local_model``, built by
  :func:`local_model`): :class:`LocalModel`, an MLP with output width ``d`` and a
  sigmoid (Spambase: ``input -> 16 -> 1``; IMDB: ``input -> 256 -> 128 -> 1`` with
  dropout 0.5), a ReLU or no activation; :class:`WideDeepModel`, Wide & Deep over the
  party's one-hot fields (Criteo); :class:`ImageModel`, the reference's 6-layer CNN over
  the party's pixels (ISIC).
* :func:`head` ``G`` / ``h``: the label party's generator of GAFM, or the head of vanilla
  split learning, ``f(X) -> 1`` with a sigmoid output.
* :func:`discriminator` ``D``: ``1 -> ... -> 1`` with LeakyReLU after every layer.
* :func:`combine`: the cut-layer function ``F``.

Dropout in the local model takes its masks from an explicit generator, so a party that
recomputes a forward pass (each Flower message may run in a new process) gets the same
masks.
"""

from __future__ import annotations

import itertools
import math
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
        self.output = settings.local_output

    def forward(self, x: torch.Tensor, masks: torch.Generator | None = None) -> torch.Tensor:
        """The cut value; dropout is applied only when ``masks`` is given (training)."""
        for layer in self.hidden:
            x = _dropout(nn.functional.leaky_relu(layer(x), self.slope), self.dropout, masks)
        return _activate(self.out(x), self.output)


def _activate(x: torch.Tensor, output: str) -> torch.Tensor:
    """``gafm.local_output``: ``sigmoid``, ``relu`` or ``linear`` (none)."""
    if output == "sigmoid":
        return torch.sigmoid(x)
    return nn.functional.relu(x) if output == "relu" else x


def _dropout(x: torch.Tensor, rate: float, masks: torch.Generator | None) -> torch.Tensor:
    """Inverted dropout with masks from ``masks`` (none without a generator: evaluation)."""
    if masks is None or rate <= 0:
        return x
    keep = torch.rand(x.shape, generator=masks) >= rate
    return x * keep / (1.0 - rate)


class ReluLayers(nn.Module):
    """ReLU layers of ``gafm.local_hidden`` widths (dropout ``gafm.local_dropout`` after
    each), then a linear map to ``cut_dim`` outputs: the dense part of the reference's
    Wide & Deep and CNN models."""

    def __init__(self, in_dim: int, settings: GAFMSettings) -> None:
        super().__init__()
        self.hidden = nn.ModuleList()
        for width in settings.local_hidden:
            self.hidden.append(nn.Linear(in_dim, width))
            in_dim = width
        self.out = nn.Linear(in_dim, settings.cut_dim)
        self.dropout = settings.local_dropout

    def forward(self, x: torch.Tensor, masks: torch.Generator | None = None) -> torch.Tensor:
        """The outputs before activation; dropout only when ``masks`` is given."""
        for layer in self.hidden:
            x = _dropout(nn.functional.relu(layer(x)), self.dropout, masks)
        return self.out(x)


class WideDeepModel(nn.Module):
    """``f_p`` as Wide & Deep (Cheng et al. 2016), the reference code's Criteo model.

    The wide part is a linear map of the party's encoded row (one-hot categories: a
    weight per category, the reference's ``FeaturesLinear``). The deep part embeds each
    field (each column's block of the encoded row) in ``gafm.embed_dim`` dimensions with
    its own rows of one embedding table (xavier-uniform, the reference's
    ``FeaturesEmbedding``), concatenates the fields' embeddings and passes them through
    ReLU layers of ``gafm.local_hidden`` widths (dropout ``gafm.local_dropout`` after
    each) to ``cut_dim`` outputs. ``f_p(x) = act(wide(x) + deep(x))``.

    The reference's deep layers also hold a BatchNorm; it is left out here because a
    party recomputes each forward pass when its gradient arrives (each Flower message may
    run in a new process), and batch statistics would then be updated twice per step.

    Parameters
    ----------
    fields
        Width of each column's block, in column order; they must add up to the row width.
    settings
        The run's settings (``embed_dim``, ``local_hidden``, ``local_dropout``,
        ``cut_dim``, ``local_output``).
    """

    def __init__(self, fields: Sequence[int], settings: GAFMSettings) -> None:
        super().__init__()
        widths = [int(w) for w in fields]
        if not widths or any(w < 1 for w in widths):
            raise ValueError(f"wide_deep needs at least one field of width >= 1, got {widths}")
        bounds = [0, *itertools.accumulate(widths)]
        self.bounds = list(itertools.pairwise(bounds))
        in_dim = bounds[-1]
        self.wide = nn.Linear(in_dim, settings.cut_dim)
        self.embedding = nn.Parameter(torch.empty(in_dim, settings.embed_dim))
        nn.init.xavier_uniform_(self.embedding)
        self.deep = ReluLayers(len(widths) * settings.embed_dim, settings)
        self.output = settings.local_output

    def forward(self, x: torch.Tensor, masks: torch.Generator | None = None) -> torch.Tensor:
        """The cut value; dropout is applied only when ``masks`` is given (training)."""
        embedded = torch.cat([x[:, a:b] @ self.embedding[a:b] for a, b in self.bounds], dim=1)
        return _activate(self.wide(x) + self.deep(embedded, masks), self.output)


IMAGE_CHANNELS = (6, 16, 32)
"""The reference's ISIC ``FirstNet``: three 3x3 convolutions, each followed by a ReLU and
a 2x2 max-pooling."""


class ImageModel(nn.Module):
    """``f_p`` as the reference code's ISIC CNN (paper 002, Table 1's "6-layer CNN").

    The party's columns are one grayscale image per row, row-major, ``gafm.image_width``
    pixels wide (by default the image is square). Three convolutions (1 -> 6 -> 16 -> 32
    channels, 3x3, each followed by ReLU and 2x2 max-pooling), then fully connected ReLU
    layers of ``gafm.local_hidden`` widths (the reference's 120 and 84; dropout
    ``gafm.local_dropout`` after each) and ``cut_dim`` outputs (the reference's 40, with a
    ReLU: ``gafm.local_output=relu``). A 64 x 64 image leaves 32 maps of 6 x 6, as in the
    reference.
    """

    def __init__(self, in_dim: int, settings: GAFMSettings) -> None:
        super().__init__()
        self.height, self.width = image_shape(in_dim, settings.image_width)
        self.convs = nn.ModuleList()
        channels, (h, w) = 1, (self.height, self.width)
        for c in IMAGE_CHANNELS:
            self.convs.append(nn.Conv2d(channels, c, kernel_size=3))
            channels, h, w = c, (h - 2) // 2, (w - 2) // 2
        self.dense = ReluLayers(channels * h * w, settings)
        self.output = settings.local_output

    def forward(self, x: torch.Tensor, masks: torch.Generator | None = None) -> torch.Tensor:
        """The cut value; dropout is applied only when ``masks`` is given (training)."""
        x = x.reshape(x.shape[0], 1, self.height, self.width)
        for conv in self.convs:
            x = nn.functional.max_pool2d(nn.functional.relu(conv(x)), 2)
        return _activate(self.dense(torch.flatten(x, start_dim=1), masks), self.output)


def image_shape(in_dim: int, image_width: int | None) -> tuple[int, int]:
    """(height, width) of a party's ``in_dim`` pixel columns; errors name the fix."""
    if image_width is None:
        side = math.isqrt(in_dim)
        if side * side != in_dim:
            raise ValueError(
                f"gafm.local_model=cnn reads a party's {in_dim} columns as a square image, "
                f"but {in_dim} is not a square: set gafm.image_width to the image's width"
            )
        height, width = side, side
    else:
        if in_dim % image_width:
            raise ValueError(
                f"gafm.image_width={image_width} does not divide the party's {in_dim} "
                "pixel columns: set it to the width of the party's image part"
            )
        height, width = in_dim // image_width, image_width
    if min(height, width) < 22:
        raise ValueError(
            f"gafm.local_model=cnn needs images of at least 22 x 22 pixels (three 3x3 "
            f"convolutions with 2x2 pooling), got {height} x {width}"
        )
    return height, width


def local_model(
    in_dim: int, settings: GAFMSettings, fields: Sequence[int] | None = None
) -> nn.Module:
    """``f_p`` of ``gafm.local_model`` over ``in_dim`` encoded columns.

    ``fields`` (the width of each column's block) is needed by ``wide_deep`` only, and
    must add up to ``in_dim``.
    """
    if settings.local_model == "wide_deep":
        if fields is None:
            raise ValueError(
                "gafm.local_model=wide_deep needs the width of each of the party's column "
                "blocks (its encoder's spans); none were given"
            )
        if sum(fields) != in_dim:
            raise ValueError(
                f"the party's fields add up to {sum(fields)} columns, its rows have {in_dim}"
            )
        return WideDeepModel(fields, settings)
    if settings.local_model == "cnn":
        return ImageModel(in_dim, settings)
    return LocalModel(in_dim, settings)


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
