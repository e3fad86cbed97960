"""VT-GAN's server: top generator ``G^t``, top discriminator ``D^t`` with the
conditional-vector filter ``D^cv``, and the choice of the client whose conditional
vector drives each step (paper 001, Algorithm 1, server side).

The server never sees a client's rows: it receives the clients' bottom-discriminator
outputs, the chosen client's conditional vectors and row indices (which the paper
allows, Section 3.1.6), and the gradients of its chunks of ``G^t``'s output.

Gradient penalty: WGAN-GP's penalty (lambda 10) is taken with respect to ``D^t``'s input
(the concatenated client features and ``D^cv``'s output), interpolating real and fake
inputs row by row. A penalty with respect to the clients' raw columns would need
second-order gradients through every client's bottom model in every step; paper 001
does not say where its penalty sits, and this is where a split critic can compute it
(paper 000 does the same for its shared discriminator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flwr_vflgan.gan.config import TrainConfig
from flwr_vflgan.gan.losses import critic_loss, generator_loss
from flwr_vflgan.nn.models import eval_mode, seeded_init
from flwr_vflgan.privacy.mechanisms import row_penalty
from flwr_vflgan.privacy.updates import PerSampleUpdate
from flwr_vflgan.runtime.flat import FlatState
from flwr_vflgan.runtime.rng import (
    Stream,
    derive_seed,
    numpy_generator,
    torch_generator,
    uniform_alpha,
)

from .config import VTGANSettings, proportional_split
from .models import ServerDiscriminator, ServerGenerator, adam
from .party import PartyLayout
from .privacy import VTGANPrivacy


@dataclass(frozen=True)
class ClientShape:
    """What a client reports at setup: enough to size the split networks."""

    n_columns: int
    encoded_width: int
    cond_dim: int


def plan_layout(
    settings: VTGANSettings, shapes: Sequence[ClientShape]
) -> tuple[list[PartyLayout], list[int]]:
    """Each client's widths and its bottom discriminator's output width.

    Chunks of ``G^t``'s output and the client blocks' widths are proportional to the
    clients' column counts (the ratio vector of paper 001, Table 1); the client widths
    of a block sum to the block width of the centralized model.
    """
    columns = [s.n_columns for s in shapes]
    cond_dim = sum(s.cond_dim for s in shapes)
    g_in = settings.latent_dim + cond_dim
    g_out = g_in + settings.g_server_blocks * settings.generator_width
    chunks = proportional_split(g_out, columns)
    g_blocks = proportional_split(settings.generator_width, columns)
    d_blocks = proportional_split(settings.discriminator_width, columns)
    layouts = [
        PartyLayout(chunk, g, d) for chunk, g, d in zip(chunks, g_blocks, d_blocks, strict=True)
    ]
    features = [
        d if settings.d_client_blocks > 0 else s.encoded_width
        for d, s in zip(d_blocks, shapes, strict=True)
    ]
    return layouts, features


class VTGANServer:
    """The server's models and its half of every step.

    Parameters
    ----------
    settings, train
        VT-GAN settings and the shared schedule/optimiser settings.
    shapes
        Every client's reported shape, in client order.
    seed
        The server's own seed (noise, client choice, dropout, penalty weights).
    privacy, noise_seed
        Under DP: the run's plan, and the seed of the server's own DP-SGD noise (default
        derived from ``seed``). ``D^t`` and ``D^cv`` then take per-row clipped, noised
        steps on a uniform batch that every client sends in the same order.
    """

    def __init__(
        self,
        settings: VTGANSettings,
        train: TrainConfig,
        shapes: Sequence[ClientShape],
        seed: int,
        privacy: VTGANPrivacy | None = None,
        noise_seed: int | None = None,
    ) -> None:
        if not shapes:
            raise ValueError("VT-GAN needs at least one client")
        self.settings = settings
        self.train = train
        self.shapes = list(shapes)
        self.seed = seed
        self.layouts, self.feature_dims = plan_layout(settings, shapes)
        self.cond_dims = [s.cond_dim for s in shapes]
        self.cond_offsets = np.concatenate([[0], np.cumsum(self.cond_dims)]).astype(int)
        self.cond_dim = int(self.cond_offsets[-1])
        conditioned = [i for i, s in enumerate(shapes) if s.cond_dim > 0]
        if not conditioned:
            # No categorical column anywhere: CTGAN's unconditional training. The chosen
            # client (by column count) draws the real batch uniformly; conditions are empty.
            conditioned = list(range(len(shapes)))
        weights = np.array(
            [shapes[i].n_columns if i in conditioned else 0 for i in range(len(shapes))],
            dtype=float,
        )
        self.choice_probs = weights / weights.sum()
        with seeded_init(derive_seed(seed, Stream.INIT)):
            self.generator = ServerGenerator(settings.latent_dim, self.cond_dim, settings)
            self.discriminator = ServerDiscriminator(
                sum(self.feature_dims), self.cond_dim, settings
            )
        self.chunk_widths = [layout.chunk_width for layout in self.layouts]
        self.g_opt = adam(self.generator, train, settings)
        self.d_opt = adam(self.discriminator, train, settings)
        self.state = FlatState([self.generator, self.discriminator], [self.g_opt, self.d_opt])
        self._graph: torch.Tensor | None = None
        self.privacy = privacy
        self._private: PerSampleUpdate | None = None
        if privacy is not None:
            self._private = PerSampleUpdate(
                privacy.noise_multiplier,
                privacy.clip,
                train.batch_size,
                noise_seed if noise_seed is not None else derive_seed(seed, Stream.DP_NOISE),
            )

    # -- conditions ------------------------------------------------------------------
    def choose_client(self, step: int) -> int:
        """The client whose conditional vector drives step ``step`` (probability
        proportional to its column count, among clients with categorical columns; among
        all clients when none has one)."""
        rng = numpy_generator(self.seed, Stream.CHOICE, step)
        return int(rng.choice(len(self.shapes), p=self.choice_probs))

    def full_condition(self, client: int, cond: np.ndarray) -> torch.Tensor:
        """The chosen client's conditions in its block, zeros in every other block."""
        full = torch.zeros((cond.shape[0], self.cond_dim))
        start = int(self.cond_offsets[client])
        full[:, start : start + cond.shape[1]] = torch.from_numpy(
            np.asarray(cond, dtype=np.float32)
        )
        return full

    def generation_owners(self, n_rows: int, draw: int) -> np.ndarray:
        """Which client supplies the condition of each published row (same probabilities
        as in training)."""
        rng = numpy_generator(self.seed, Stream.CHOICE, draw, 1)
        return rng.choice(len(self.shapes), size=n_rows, p=self.choice_probs)

    def assemble_condition(self, owners: np.ndarray, parts: dict[int, np.ndarray]) -> torch.Tensor:
        """Publication conditions: each row's owner's condition in its block."""
        cond = np.zeros((len(owners), self.cond_dim), dtype=np.float32)
        for client, part in parts.items():
            rows = np.flatnonzero(owners == client)
            if part.shape != (len(rows), self.cond_dims[client]):
                raise ValueError(
                    f"client {client} sent conditions of shape {part.shape}, expected "
                    f"{(len(rows), self.cond_dims[client])}"
                )
            start = int(self.cond_offsets[client])
            cond[rows, start : start + part.shape[1]] = part
        return torch.from_numpy(cond)

    # -- generator -------------------------------------------------------------------
    def chunks(self, step: int, cond: torch.Tensor, keep_graph: bool) -> list[torch.Tensor]:
        """``G^t(z, cond)`` split into the clients' chunks; with ``keep_graph`` the graph
        is kept for :meth:`generator_update`."""
        z = torch.randn(
            cond.shape[0],
            self.settings.latent_dim,
            generator=torch_generator(self.seed, Stream.NOISE, step),
        )
        if keep_graph:
            out = self.generator(z, cond)
            self._graph = out
        else:
            with torch.no_grad():
                out = self.generator(z, cond)
        return [c.detach() for c in torch.split(out, self.chunk_widths, dim=1)]

    def generator_update(self, chunk_grads: Sequence[torch.Tensor]) -> None:
        """Backpropagate the clients' chunk gradients through ``G^t`` and step it."""
        if self._graph is None:
            raise RuntimeError("generator_update without a kept generator graph")
        self.g_opt.zero_grad(set_to_none=True)
        self._graph.backward(torch.cat(list(chunk_grads), dim=1))
        self.g_opt.step()
        self._graph = None

    def generation_chunks(self, cond: torch.Tensor, draw: int) -> list[torch.Tensor]:
        """Chunks for publication (eval mode, evaluation noise ``draw``)."""
        z = torch.randn(
            cond.shape[0],
            self.settings.latent_dim,
            generator=torch_generator(self.seed, Stream.EVAL_NOISE, draw),
        )
        with eval_mode(self.generator):
            out = self.generator(z, cond)
        return list(torch.split(out, self.chunk_widths, dim=1))

    # -- discriminator -------------------------------------------------------------------
    def discriminator_step(
        self,
        step: int,
        client: int,
        real: Sequence[torch.Tensor],
        rows: np.ndarray | None,
        fake: Sequence[torch.Tensor],
        cond_real: torch.Tensor,
        cond_fake: torch.Tensor,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """One critic update; returns the gradients for every client's real and fake
        features (the non-chosen clients' real gradients cover all their rows, zero
        outside ``rows``) and the critic loss.

        ``real[client]`` holds the chosen client's ``B`` rows; every other ``real[i]``
        holds all ``N`` rows in the current order, of which the server takes ``rows``.
        Under DP every client sends the same uniform batch and ``rows`` is ``None``.
        """
        if self.privacy is not None:
            return self._private_step(step, real, fake, cond_real, cond_fake)
        assert rows is not None
        leaves = [r.detach().requires_grad_(True) for r in real]
        selected = [
            leaf if i == client else leaf[torch.from_numpy(rows)] for i, leaf in enumerate(leaves)
        ]
        fakes = [f.detach().requires_grad_(True) for f in fake]
        disc = self.discriminator
        real_in = disc.inputs(torch.cat(selected, dim=1), cond_real)
        fake_in = disc.inputs(torch.cat(fakes, dim=1), cond_fake)
        dropout = torch_generator(self.seed, Stream.DROPOUT, step)
        alpha = uniform_alpha(self.seed, Stream.SERVER_ALPHA, step, real_in.shape[0])
        loss, _ = critic_loss(
            lambda x: disc.critic(x, dropout), real_in, fake_in, alpha, self.train.gp_weight
        )
        self.d_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.d_opt.step()
        grads_real = [
            leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves
        ]
        grads_fake = [f.grad if f.grad is not None else torch.zeros_like(f) for f in fakes]
        return grads_real, grads_fake, float(loss.detach())

    def _private_step(
        self,
        step: int,
        real: Sequence[torch.Tensor],
        fake: Sequence[torch.Tensor],
        cond_real: torch.Tensor,
        cond_fake: torch.Tensor,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """DP-SGD step of ``D^t`` and ``D^cv`` on a uniform batch.

        The clients get the exact per-row gradients of the batch loss (each clips its own
        parameters' per-row gradients); the server's own update is per-row clipped and
        noised. Row ``k``'s loss is ``D(fake_k) - D(real_k) + lambda GP_k`` with its own
        interpolate and dropout masks, so it depends on row ``k`` only.
        """
        assert self._private is not None
        disc = self.discriminator
        real_f = torch.cat([r.detach() for r in real], dim=1)
        fake_f = torch.cat([f.detach() for f in fake], dim=1)
        n = real_f.shape[0]
        masks = [
            disc.body.draw_masks(n, torch_generator(self.seed, Stream.DROPOUT, step, which))
            for which in range(3)
        ]
        flat = [torch.cat(m, dim=1) if m else torch.zeros((n, 0)) for m in masks]
        alpha = uniform_alpha(self.seed, Stream.SERVER_ALPHA, step, n)
        # Exact batch gradients for the clients' features.
        leaves_real = [r.detach().requires_grad_(True) for r in real]
        leaves_fake = [f.detach().requires_grad_(True) for f in fake]
        real_in = disc.inputs(torch.cat(leaves_real, dim=1), cond_real)
        fake_in = disc.inputs(torch.cat(leaves_fake, dim=1), cond_fake)
        loss = self._masked_loss(real_in, fake_in, flat, alpha)
        grads = torch.autograd.grad(loss, [*leaves_real, *leaves_fake])
        m = len(real)
        self._private(
            disc,
            self.d_opt,
            lambda: loss,
            self.dp_row_loss(),
            (real_f, cond_real, fake_f, cond_fake, alpha, *flat),
            step,
        )
        return list(grads[:m]), list(grads[m:]), float(loss.detach())

    def dp_row_loss(self) -> Callable[..., torch.Tensor]:
        """Row ``k``'s critic loss ``D(fake_k) - D(real_k) + lambda GP_k`` over packed
        inputs; the mean over a batch is :meth:`_masked_loss`. Its arguments after
        ``call`` are the row's real features, real condition, fake features, fake
        condition, interpolation weight and dropout multipliers (real, fake, interpolate).
        """
        gp = self.train.gp_weight

        def row_loss(
            call: Callable[[str, torch.Tensor], torch.Tensor],
            real_row: torch.Tensor,
            cond_real_row: torch.Tensor,
            fake_row: torch.Tensor,
            cond_fake_row: torch.Tensor,
            alpha_row: torch.Tensor,
            m_real: torch.Tensor,
            m_fake: torch.Tensor,
            m_interp: torch.Tensor,
        ) -> torch.Tensor:
            def inputs(f: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
                return call("packed_inputs", torch.cat([f, c]).unsqueeze(0)).squeeze(0)

            def score(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
                return call("packed_critic", torch.cat([x, mask]).unsqueeze(0)).reshape(())

            r_in, f_in = inputs(real_row, cond_real_row), inputs(fake_row, cond_fake_row)
            penalty = row_penalty(lambda x: score(x, m_interp), r_in, f_in, alpha_row)
            return score(f_in, m_fake) - score(r_in, m_real) + gp * penalty

        return row_loss

    def _masked_loss(
        self,
        real_in: torch.Tensor,
        fake_in: torch.Tensor,
        masks: Sequence[torch.Tensor],
        alpha: torch.Tensor,
    ) -> torch.Tensor:
        """WGAN-GP critic loss with explicit dropout multipliers (real, fake, interpolate)."""
        disc = self.discriminator

        def score(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return disc.packed_critic(torch.cat([x, mask], dim=1))

        interpolate = alpha * real_in + (1.0 - alpha) * fake_in
        (grad_x,) = torch.autograd.grad(
            score(interpolate, masks[2]).sum(), interpolate, create_graph=True
        )
        penalty = ((grad_x.norm(2, dim=1) - 1.0) ** 2).mean()
        return (
            -score(real_in, masks[0]).mean()
            + score(fake_in, masks[1]).mean()
            + self.train.gp_weight * penalty
        )

    def privacy_summary(self, d_steps: int) -> dict | None:
        """What the server's own updates spent (``None`` without DP)."""
        if self.privacy is None:
            return None
        return self.privacy.summary("server", d_steps, None)

    def generator_loss(
        self, step: int, fake: Sequence[torch.Tensor], cond: torch.Tensor
    ) -> tuple[list[torch.Tensor], float]:
        """Gradients of ``-E[D(G(z, cond))]`` with respect to every client's fake features."""
        fakes = [f.detach().requires_grad_(True) for f in fake]
        dropout = torch_generator(self.seed, Stream.DROPOUT, step)
        scores = self.discriminator.critic(
            self.discriminator.inputs(torch.cat(fakes, dim=1), cond), dropout
        )
        loss = generator_loss(scores)
        loss.backward()
        self.discriminator.zero_grad(set_to_none=True)
        grads = [f.grad if f.grad is not None else torch.zeros_like(f) for f in fakes]
        return grads, float(loss.detach())
