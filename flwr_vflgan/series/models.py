"""VFLGAN-TS's networks (paper 003; shapes of the reference code, ``code_sine_6/vfl.py``).

* :class:`ChannelGenerator`: one per channel, an LSTM cell run one step over the noise
  (the reference's LSTM over a length-1 sequence), then a linear map to the series.
  Every channel generator of every party reads the same noise vector.
* :class:`PartyDiscriminator`: what a party holds to judge its channels: an attribute
  discriminator per channel and a feature extractor on all its channels. The
  extractor's first hidden layer is the intermediate feature sent to the server.
* :class:`SharedSeriesDiscriminator`: the server's discriminator on the concatenated
  features of all parties.

Discriminators end in a logit (the loss is binary cross-entropy with logits: the
reference's sigmoid followed by ``BCELoss``, computed stably). Their dropout masks come
from a ``torch.Generator`` the caller passes, so that a pass recomputed in another
message (the protocol's apply half) drops the same units.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from .config import SeriesModelConfig


def cosine_basis(size: int, length: int) -> torch.Tensor:
    """The ``size`` slowest functions of the orthonormal DCT-II basis on ``length``
    steps, ``(size, length)``: row ``k`` is ``c_k cos(pi k (t + 1/2) / length)``,
    ``c_0 = sqrt(1 / length)``, ``c_k = sqrt(2 / length)``.

    Raises
    ------
    ValueError
        ``size`` is not in ``1 .. length``.
    """
    if not 1 <= size <= length:
        raise ValueError(
            f"series.model.generator_basis={size} must be between 1 and the series length {length}"
        )
    t = torch.arange(length, dtype=torch.float64)
    k = torch.arange(size, dtype=torch.float64)[:, None]
    basis = torch.cos(math.pi * k * (t + 0.5) / length) * math.sqrt(2.0 / length)
    basis[0] /= math.sqrt(2.0)
    return basis.float()


def gaussian_kernel(sigma: float, length: int) -> torch.Tensor:
    """The normalised Gaussian filter of standard deviation ``sigma`` steps, truncated at
    ``ceil(4 sigma)`` steps each side, as a ``conv1d`` weight ``(1, 1, 2 r + 1)``.

    Raises
    ------
    ValueError
        The truncated filter is not shorter than the series (``r >= length``): reflecting
        the series at its ends needs ``r < length``.
    """
    radius = math.ceil(4 * sigma)
    if radius >= length:
        raise ValueError(
            f"series.model.generator_smoothing={sigma} reaches {radius} steps each side, "
            f"more than the series length {length} allows; use a smaller value"
        )
    steps = torch.arange(-radius, radius + 1, dtype=torch.float64)
    kernel = torch.exp(-0.5 * (steps / sigma) ** 2)
    return (kernel / kernel.sum()).float().view(1, 1, -1)


class ChannelGenerator(nn.Module):
    """Noise ``(B, noise_dim)`` to one channel ``(B, length)``: an LSTM cell's one step,
    then a linear map to every step (``basis=None``, the reference) or to the
    coefficients of the ``basis`` slowest cosines (:func:`cosine_basis`), scaled so that
    a step's output starts with the same variance as the per-step map's; with
    ``smoothing`` the result goes through :func:`gaussian_kernel` (ends reflected)."""

    def __init__(
        self,
        noise_dim: int,
        hidden: int,
        length: int,
        basis: int | None = None,
        smoothing: float | None = None,
    ) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(noise_dim, hidden)
        self.out = nn.Linear(hidden, length if basis is None else basis)
        # constants, registered as buffers that are not state (no checkpoint entry)
        self.basis: torch.Tensor | None
        self.kernel: torch.Tensor | None
        if basis is None:
            self.basis = None
        else:
            scaled = cosine_basis(basis, length) * math.sqrt(length / basis)
            self.register_buffer("basis", scaled, persistent=False)
        if smoothing is None:
            self.kernel = None
        else:
            self.register_buffer("kernel", gaussian_kernel(smoothing, length), persistent=False)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.cell(z)
        out = self.out(hidden)
        if self.basis is not None:
            out = out @ self.basis
        if self.kernel is None:
            return out
        radius = self.kernel.shape[-1] // 2
        padded = nn.functional.pad(out[:, None, :], (radius, radius), mode="reflect")
        return nn.functional.conv1d(padded, self.kernel)[:, 0, :]


class PartyGenerators(nn.Module):
    """A party's channel generators; output ``(B, C_i * length)``, channel after channel."""

    def __init__(self, config: SeriesModelConfig, n_channels: int, length: int) -> None:
        super().__init__()
        self.channels = nn.ModuleList(
            ChannelGenerator(
                config.noise_dim,
                config.generator_hidden,
                length,
                config.generator_basis,
                config.generator_smoothing,
            )
            for _ in range(n_channels)
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.cat([g(z) for g in self.channels], dim=1)


class DropoutMLP(nn.Module):
    """``(Linear, LeakyReLU, Dropout)`` per hidden width, then ``Linear -> 1`` (a logit).

    ``features(x, gen)`` is the first hidden layer's output (after its dropout);
    ``head(h, gen)`` the rest. Dropout masks are drawn from ``gen`` in layer order.
    """

    def __init__(self, width_in: int, hidden: Sequence[int], config: SeriesModelConfig) -> None:
        super().__init__()
        widths = [width_in, *hidden]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.out = nn.Linear(widths[-1], 1)
        self.slope = config.leaky_slope
        self.dropout = config.dropout

    def _layer(self, index: int, x: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
        h = nn.functional.leaky_relu(self.hidden[index](x), self.slope)
        if self.training and self.dropout > 0:
            keep = torch.rand(h.shape, generator=gen) >= self.dropout
            h = h * keep / (1.0 - self.dropout)
        return h

    def features(self, x: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
        """The first hidden layer's output."""
        return self._layer(0, x, gen)

    def head(self, h: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
        """The logit from the first hidden layer's output."""
        for index in range(1, len(self.hidden)):
            h = self._layer(index, h, gen)
        return self.out(h)

    def forward(self, x: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
        return self.head(self.features(x, gen), gen)

    @property
    def first_layer(self) -> nn.Linear:
        """The layer that reads the data (the one the DP mechanism clips and noises)."""
        first = self.hidden[0]
        assert isinstance(first, nn.Linear)
        return first


class PartyDiscriminator(nn.Module):
    """A party's attribute discriminators (one per channel) and its feature extractor."""

    def __init__(
        self, config: SeriesModelConfig, n_channels: int, length: int, feature_dim: int
    ) -> None:
        super().__init__()
        self.n_channels = n_channels
        self.length = length
        self.attributes = nn.ModuleList(
            DropoutMLP(length, config.attribute_hidden, config) for _ in range(n_channels)
        )
        self.extractor = DropoutMLP(
            n_channels * length, (feature_dim, *config.extractor_hidden), config
        )
        normal_init(self, config.init_std)

    def attribute_logits(
        self, block: torch.Tensor, gen: torch.Generator | None = None
    ) -> list[torch.Tensor]:
        """One ``(B, 1)`` logit per channel of ``block`` (``(B, C_i * length)``)."""
        pieces = torch.split(block, self.length, dim=1)
        return [d(piece, gen) for d, piece in zip(self.attributes, pieces, strict=True)]

    def features(self, block: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
        """The intermediate feature ``(B, feature_dim)`` that goes to the server."""
        return self.extractor.features(block, gen)

    def first_layers(self) -> Iterator[nn.Linear]:
        """Every layer that reads the party's data: each attribute discriminator's first
        layer and the extractor's (paper 003, Theorem 1)."""
        for module in (*self.attributes, self.extractor):
            assert isinstance(module, DropoutMLP)
            yield module.first_layer


class SharedSeriesDiscriminator(DropoutMLP):
    """The server's discriminator on ``M * feature_dim`` concatenated features."""

    def __init__(self, config: SeriesModelConfig, n_parties: int, feature_dim: int) -> None:
        super().__init__(n_parties * feature_dim, config.shared_hidden, config)
        normal_init(self, config.init_std)


def normal_init(module: nn.Module, std: float) -> None:
    """The reference's initialisation: linear weights ``N(0, std)``, biases zero."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, 0.0, std)
            nn.init.zeros_(sub.bias)
