"""VT-GAN's networks, split into server top models and client bottom models (paper 001,
Fig. 3 and Fig. 6; the centralized blocks are CTGAN's).

Generator: ``G^t`` on the server reads the noise and the conditional vector and ends in
``g_server_blocks`` residual blocks (or one Linear layer when there are none); its output
is split between the clients in proportion to their share of the columns. Each client's
``G^b_i`` continues with ``g_client_blocks`` residual blocks of its share of the block
width, then a Linear layer to its encoded width and the output activations (tanh for a
mode-normalised scalar, Gumbel-softmax for a one-hot block).

Discriminator: each client's ``D^b_i`` is ``d_client_blocks`` FN blocks of its share of
the width (or one Linear filter as wide as its encoded columns); the server's
``D^cv`` filters the conditional vector with one Linear layer, and ``D^t`` reads the
concatenated client outputs and ``D^cv``'s, through ``d_server_blocks`` FN blocks and a
final Linear layer to the critic score.

Dropout draws its masks from an explicit ``torch.Generator`` so that a forward pass can
be recomputed exactly in a later message (no global RNG).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flwr_vflgan.gan.config import TrainConfig
from flwr_vflgan.nn.models import SpanLike, apply_output_activations

from .config import VTGANSettings


def adam(module: nn.Module, train: TrainConfig, settings: VTGANSettings) -> torch.optim.Adam:
    """CTGAN's optimiser for one part: Adam with the run's rate and betas, weight decay."""
    return torch.optim.Adam(
        module.parameters(),
        lr=train.lr,
        betas=train.betas,
        weight_decay=settings.weight_decay,
        foreach=True,
    )


class ResidualBlock(nn.Module):
    """CTGAN's residual block: ``concat(ReLU(BN(Linear(x))), x)``."""

    def __init__(self, width_in: int, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width_in, width)
        self.bn = nn.BatchNorm1d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(self.bn(self.fc(x))), x], dim=1)


def _residual_stack(width_in: int, width: int, blocks: int) -> tuple[nn.Sequential, int]:
    layers = []
    for _ in range(blocks):
        layers.append(ResidualBlock(width_in, width))
        width_in += width
    return nn.Sequential(*layers), width_in


class FNStack(nn.Module):
    """``blocks`` x (Linear, LeakyReLU, Dropout) with dropout masks from a given generator."""

    def __init__(
        self, width_in: int, width: int, blocks: int, leaky_slope: float, dropout: float
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(blocks):
            self.layers.append(nn.Linear(width_in, width))
            width_in = width
        self.out_dim = width_in
        self.leaky_slope = leaky_slope
        self.dropout = dropout

    @property
    def widths(self) -> list[int]:
        """Output width of each block."""
        return [layer.out_features for layer in self.layers if isinstance(layer, nn.Linear)]

    def draw_masks(self, n: int, generator: torch.Generator | None) -> list[torch.Tensor] | None:
        """The dropout multipliers of an ``n``-row pass (``keep / (1 - p)``), one per block,
        drawn in the order a forward pass draws them; ``None`` without dropout."""
        if not self.training or self.dropout == 0:
            return None
        return [
            (torch.rand((n, width), generator=generator) >= self.dropout).float()
            / (1.0 - self.dropout)
            for width in self.widths
        ]

    def unpack_masks(self, packed: torch.Tensor) -> list[torch.Tensor] | None:
        """Per-block dropout multipliers from the concatenation :meth:`draw_masks` rows
        are packed into (``None`` when there are none)."""
        return list(torch.split(packed, self.widths, dim=1)) if packed.shape[1] else None

    def forward(
        self,
        x: torch.Tensor,
        generator: torch.Generator | None = None,
        rows: torch.Tensor | None = None,
        n_total: int | None = None,
        masks: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Forward pass. Dropout masks come from ``masks`` when given, else they are drawn
        from ``generator``; with ``rows`` and ``n_total``, ``x`` holds rows ``rows`` of an
        ``n_total``-row batch and gets exactly the masks the whole batch's pass drew for
        them (a client recomputes only the rows that received gradients)."""
        if masks is None:
            if rows is None:
                masks = self.draw_masks(x.shape[0], generator)
            else:
                assert n_total is not None
                full = self.draw_masks(n_total, generator)
                masks = None if full is None else [m[rows] for m in full]
        for index, layer in enumerate(self.layers):
            x = nn.functional.leaky_relu(layer(x), self.leaky_slope)
            if masks is not None:
                x = x * masks[index]
        return x


class ServerGenerator(nn.Module):
    """``G^t``: noise and conditional vector to the concatenated client inputs."""

    def __init__(self, latent_dim: int, cond_dim: int, settings: VTGANSettings) -> None:
        super().__init__()
        width_in = latent_dim + cond_dim
        if settings.g_server_blocks > 0:
            self.body, self.out_dim = _residual_stack(
                width_in, settings.generator_width, settings.g_server_blocks
            )
        else:
            self.body, self.out_dim = nn.Sequential(nn.Linear(width_in, width_in)), width_in

    def forward(self, z: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.body(torch.cat([z, cond], dim=1))


class ClientGenerator(nn.Module):
    """``G^b_i``: the client's chunk of ``G^t``'s output to its encoded columns."""

    def __init__(
        self,
        width_in: int,
        block_width: int,
        blocks: int,
        spans: Sequence[SpanLike],
        gumbel_tau: float,
    ) -> None:
        super().__init__()
        self.body, width = _residual_stack(width_in, block_width, blocks)
        self.out_dim = sum(span.width for span in spans)
        self.head = nn.Linear(width, self.out_dim)
        self.spans = list(spans)
        self.tau = gumbel_tau

    def logits(self, chunk: torch.Tensor) -> torch.Tensor:
        """Pre-activation outputs (the conditional loss reads the one-hot blocks' logits)."""
        return self.head(self.body(chunk))

    def activate(self, logits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Output activations: tanh scalars, soft Gumbel-softmax one-hot blocks."""
        return apply_output_activations(logits, self.spans, self.tau, False, generator)

    def forward(
        self, chunk: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        return self.activate(self.logits(chunk), generator)


class ClientDiscriminator(nn.Module):
    """``D^b_i``: FN blocks of the client's width share, or one Linear filter."""

    def __init__(self, width_in: int, block_width: int, settings: VTGANSettings) -> None:
        super().__init__()
        if settings.d_client_blocks > 0:
            self.body: nn.Module = FNStack(
                width_in,
                block_width,
                settings.d_client_blocks,
                settings.leaky_slope,
                settings.dropout,
            )
            self.out_dim = block_width
        else:
            self.body = nn.Linear(width_in, width_in)
            self.out_dim = width_in

        self.in_dim = width_in

    def forward(
        self,
        x: torch.Tensor,
        generator: torch.Generator | None = None,
        rows: torch.Tensor | None = None,
        n_total: int | None = None,
        masks: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        if isinstance(self.body, FNStack):
            return self.body(x, generator, rows, n_total, masks)
        return self.body(x)

    def draw_masks(self, n: int, generator: torch.Generator | None) -> list[torch.Tensor] | None:
        """Dropout multipliers of an ``n``-row pass (``None`` without dropout)."""
        return self.body.draw_masks(n, generator) if isinstance(self.body, FNStack) else None

    def packed(self, x: torch.Tensor) -> torch.Tensor:
        """Forward pass of rows that carry their dropout multipliers after the data
        (``[data, masks of block 1, ...]``): per-sample gradients need every random draw
        as an input."""
        data, rest = x[:, : self.in_dim], x[:, self.in_dim :]
        if not isinstance(self.body, FNStack):
            return self.body(data)
        return self.body(data, masks=self.body.unpack_masks(rest))


class ServerDiscriminator(nn.Module):
    """``D^t`` with the conditional-vector filter ``D^cv``."""

    def __init__(self, features_dim: int, cond_dim: int, settings: VTGANSettings) -> None:
        super().__init__()
        self.cond_filter = nn.Linear(cond_dim, cond_dim) if cond_dim > 0 else None
        self.body = FNStack(
            features_dim + cond_dim,
            settings.discriminator_width,
            settings.d_server_blocks,
            settings.leaky_slope,
            settings.dropout,
        )
        self.score = nn.Linear(self.body.out_dim, 1)
        self.features_dim = features_dim
        self.cond_dim = cond_dim

    def inputs(self, features: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """``concat(client features, D^cv(cond))``: what the critic reads."""
        if self.cond_filter is None:
            return features
        return torch.cat([features, self.cond_filter(cond)], dim=1)

    def critic(
        self,
        inputs: torch.Tensor,
        generator: torch.Generator | None,
        masks: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Critic score of :meth:`inputs` rows."""
        return self.score(self.body(inputs, generator, masks=masks))

    def packed_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`inputs` of rows packed as ``[features, cond]``."""
        return self.inputs(x[:, : self.features_dim], x[:, self.features_dim :])

    def packed_critic(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`critic` of rows packed as ``[inputs, dropout multipliers]``."""
        width = self.features_dim + self.cond_dim
        return self.score(self.body(x[:, :width], masks=self.body.unpack_masks(x[:, width:])))
