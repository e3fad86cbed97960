"""VFLGAN's per-party and server computations (paper 000, Section 3.3, eqs. 8-19).

The protocol splits every step into a *forward* (the party sends its intermediate
features) and an *apply* (the party receives the server's gradients with respect to those
features and updates its models). The two halves of one step happen in different
messages, possibly in different processes, so :meth:`PartyTrainer.apply` recomputes the
forward pass with the same random draws (:mod:`flwr_vflgan.runtime.rng`) instead of
keeping an autograd graph alive. The forward half runs without autograd.

Objective (two or more parties, ``lambda_1``/``lambda_2`` the shared weights):

* discriminators minimise ``sum_i L(D_i, x~_i, x_i) + lambda_1 L(D_s, f~, f)`` (eq. 8);
  party ``i``'s gradient is ``grad L_{D_i} + lambda_1 grad L_{D_s}`` (eq. 14/15), the
  second term arriving as ``lambda_1 dL_{D_s}/df_i`` from the server;
* generators minimise ``-sum_i E[D_i(G_i(z))] - lambda_2 E[D_s([f~_1..f~_M])]`` (eq. 17).

VFLGAN-base drops ``D_i^2`` and ``L_{D_i}`` (Appendix A.5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from flwr_vflgan.gan.losses import critic_loss, generator_loss, gradient_penalty
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.nn.models import (
    LocalDiscriminator,
    ParameterAverage,
    PartyGenerator,
    SharedDiscriminator,
    SpanLike,
    eval_mode,
    frozen_batchnorm_stats,
    load_module_snapshot,
    module_snapshot,
    seeded_init,
)
from flwr_vflgan.privacy.config import Mechanism, PrivacyPlan
from flwr_vflgan.privacy.masking import against_parties, mask_positions, max_appearances
from flwr_vflgan.privacy.mechanisms import row_penalty, wgan_gp_row_loss
from flwr_vflgan.privacy.updates import discriminator_update
from flwr_vflgan.runtime.blocks import StepTensors
from flwr_vflgan.runtime.flat import FlatState
from flwr_vflgan.runtime.rng import (
    Stream,
    derive_seed,
    discriminator_batch,
    latent_noise,
    torch_generator,
    uniform_alpha,
)

from .config import GANSettings, ModelConfig, TrainConfig


def first_part_penalty(
    discriminator: LocalDiscriminator, real: torch.Tensor, fake: torch.Tensor, alpha: torch.Tensor
) -> torch.Tensor:
    """Gradient penalty of ``x -> sum_k D_i^1(x)_k`` (the reference implementation's extra term)."""
    return gradient_penalty(
        lambda x: discriminator.features(x).sum(dim=1, keepdim=True), real, fake, alpha
    )


def adam(module: torch.nn.Module, train: TrainConfig, *, generator: bool) -> torch.optim.Adam:
    """Adam over ``module``'s parameters with the run's betas, at the generators'
    learning rate (``train.g_lr``) when ``generator`` is true, else at ``train.lr``."""
    lr = train.g_lr if generator else train.lr
    return torch.optim.Adam(module.parameters(), lr=lr, betas=train.betas, foreach=True)


def generator_average(
    generator: torch.nn.Module, train: TrainConfig, n_rows: int
) -> ParameterAverage | None:
    """The average of ``generator`` that ``train.generator_average`` asks for (its
    half-life in epochs of the schedule's generator steps), or ``None``."""
    if train.generator_average is None:
        return None
    # Not Schedule.of: a party that only scores (an audit's critic on a few canary rows)
    # may hold fewer rows than a batch, which a schedule refuses.
    g_steps_per_epoch = (n_rows // train.batch_size) // train.n_critic * train.generator_steps
    decay = ParameterAverage.decay_for(train.generator_average, g_steps_per_epoch)
    return ParameterAverage(generator, decay)


def make_generator(model: ModelConfig, spans: Sequence[SpanLike], scale: int = 1) -> PartyGenerator:
    """A generator over ``spans`` with ``model``'s settings, its hidden widths times
    ``scale`` (the number of parties, for one generator of the whole table)."""
    return PartyGenerator(
        model.latent_dim,
        [w * scale for w in model.generator_hidden],
        spans,
        batchnorm_eps=model.batchnorm_eps,
        leaky_slope=model.leaky_slope,
        gumbel_tau=model.gumbel_tau,
        gumbel_hard=model.gumbel_hard,
    )


def make_local_discriminator(
    model: ModelConfig, width: int, local_head: bool
) -> LocalDiscriminator:
    """A local discriminator on ``width`` encoded columns with ``model``'s settings."""
    return LocalDiscriminator(
        width,
        model.disc_hidden,
        model.feature_dim,
        local_head=local_head,
        leaky_slope=model.leaky_slope,
        head_hidden=model.local_head_hidden,
    )


def local_seed(shared_seed: int, party: int) -> int:
    """A party's private seed (Gumbel noise), derived from its shared seed and index."""
    return derive_seed(shared_seed, Stream.GUMBEL, 0, party + 1)


class PartyTrainer:
    """One party's generator ``G_i``, local discriminator ``D_i`` and their optimizers.

    Parameters
    ----------
    config
        Model and training configuration (identical at every party and the server).
    spans
        Output spans of this party's encoded columns.
    data
        This party's encoded training rows, ``float32`` of shape ``(n_rows, width)``.
    shared_seed
        Seed every party knows and the server does not: batch rows, ``z`` and the
        local gradient-penalty interpolation weights come from it.
    party
        This party's index (its Gumbel noise is private to it).
    privacy
        How this party's discriminator steps are noised (``None``: not at all); see
        :func:`~flwr_vflgan.privacy.config.plan_privacy`.
    noise_seed
        Seed of the DP noise, known to this party alone; by default derived from the
        party's seed (reproducible, but then the other parties could recompute it).
    """

    def __init__(
        self,
        config: GANSettings,
        spans: Sequence[SpanLike],
        data: torch.Tensor,
        shared_seed: int,
        party: int,
        privacy: PrivacyPlan | None = None,
        noise_seed: int | None = None,
    ) -> None:
        if data.dtype != torch.float32 or data.ndim != 2:
            raise ValueError(
                f"party data must be a 2-D float32 tensor, got {data.dtype} {tuple(data.shape)}"
            )
        if not torch.isfinite(data).all():
            raise ValueError("party data contains non-finite values")
        width = sum(span.width for span in spans)
        if data.shape[1] != width:
            raise ValueError(f"party data has {data.shape[1]} columns, its spans cover {width}")
        self.config = config
        self.data = data
        self.shared_seed = shared_seed
        self.private_seed = local_seed(shared_seed, party)
        model, train = config.model, config.train
        with seeded_init(derive_seed(self.private_seed, Stream.INIT)):
            self.generator = make_generator(model, spans)
            self.discriminator = make_local_discriminator(model, width, config.has_local_head)
        self.g_opt = adam(self.generator, train, generator=True)
        self.d_opt = adam(self.discriminator, train, generator=False)
        modules: list[torch.nn.Module] = [self.generator, self.discriminator]
        self.average = generator_average(self.generator, train, data.shape[0])
        if self.average is not None:
            modules.append(self.average.module)
        self.state = FlatState(modules, [self.g_opt, self.d_opt])
        self.first_part_gp = train.first_part_gp
        """Whether ``D_i``'s loss has the penalty of its first part (the features)."""
        self.privacy = privacy
        if noise_seed is None:
            noise_seed = derive_seed(self.private_seed, Stream.DP_NOISE)
        self.noise_seed = noise_seed
        """The party's secret: its DP noise and its batch masks come from it."""
        self.d_update = discriminator_update(privacy, noise_seed)
        self.drawn = config.dp.drawn_rows(train.batch_size)
        """Rows a discriminator step draws: ``B_hat`` under batch masking, else ``B``."""
        if self.drawn > data.shape[0]:
            raise ValueError(
                f"dp.masked_batch_size={self.drawn} exceeds the {data.shape[0]} training "
                "rows: lower it"
            )

    # -- random draws of a step ------------------------------------------------------
    def _batch(self, step: int) -> torch.Tensor:
        idx = discriminator_batch(
            self.shared_seed, step, self.data.shape[0], self.drawn, self.config.dp.poisson
        )
        return self.data[idx]

    def batch_rows(self, step: int, kind: StepKind) -> int:
        """Rows of step ``step``'s features (a Poisson batch's size varies per step; a
        masked one holds ``B_hat``)."""
        if kind is StepKind.DISCRIMINATOR and self.config.dp.poisson:
            return int(self._batch(step).shape[0])
        return self.drawn if kind is StepKind.DISCRIMINATOR else self.config.train.batch_size

    def kept_positions(self, step: int) -> torch.Tensor | None:
        """Positions of the drawn rows this party's update of step ``step`` keeps
        (``None``: all of them, no masking)."""
        if not self.config.dp.masked:
            return None
        return mask_positions(self.noise_seed, step, self.drawn, self.config.train.batch_size)

    def _fake(self, step: int, rows: int | None = None) -> torch.Tensor:
        """``batch_size`` fake rows, or the first ``rows`` of at least ``batch_size``
        (the generator's BatchNorm sees the same batch size whatever a Poisson batch holds)."""
        size = (
            self.config.train.batch_size
            if rows is None
            else max(rows, self.config.train.batch_size)
        )
        z = latent_noise(self.shared_seed, step, size, self.config.model.latent_dim)
        fake = self.generator(z, torch_generator(self.private_seed, Stream.GUMBEL, step))
        return fake if rows is None else fake[:rows]

    # -- protocol halves ---------------------------------------------------------------
    def forward(self, step: int, kind: StepKind) -> StepTensors:
        """Features for step ``step``; updates BatchNorm statistics exactly once."""
        with torch.no_grad():
            if kind is StepKind.GENERATOR:
                return StepTensors(real=None, fake=self.discriminator.features(self._fake(step)))
            batch = self._batch(step)
            fake = self.discriminator.features(self._fake(step, batch.shape[0]))
            real = self.discriminator.features(batch)
        return StepTensors(real=real, fake=fake)

    def apply(
        self,
        step: int,
        kind: StepKind,
        grad_real: torch.Tensor | None,
        grad_fake: torch.Tensor,
    ) -> float:
        """Update ``D_i`` (D step) or ``G_i`` (G step) from the server's feature gradients.

        Returns the party's local loss (``L_{D_i}``, or ``-E[D_i(x~_i)]``; 0 for
        VFLGAN-base; NaN for a DP-SGD step through ``vmap``, which never forms the batch
        loss; a taped DP-SGD step forms it). A D step
        goes through the party's :class:`~flwr_vflgan.privacy.updates.DiscriminatorUpdate`.
        """
        if kind is StepKind.DISCRIMINATOR:
            if grad_real is None:
                raise ValueError("a discriminator step needs gradients for the real features")
            return self._apply_discriminator(step, grad_real, grad_fake)
        return self._apply_generator(step, grad_fake)

    def _kept_rows(self, step: int, *rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Batch masking: ``(real, fake, alpha, grad_real, grad_fake)`` at the kept
        positions only (all of them without masking). The server's gradients carry
        ``1 / B_hat``; rescaled, the kept rows' mean carries ``1 / B``."""
        kept = self.kept_positions(step)
        if kept is None:
            return rows
        real, fake, alpha, grad_real, grad_fake = rows
        scale = real.shape[0] / kept.shape[0]
        return real[kept], fake[kept], alpha[kept], grad_real[kept] * scale, grad_fake[kept] * scale

    def _apply_discriminator(
        self, step: int, grad_real: torch.Tensor, grad_fake: torch.Tensor
    ) -> float:
        real = self._batch(step)
        with torch.no_grad(), frozen_batchnorm_stats(self.generator):
            fake = self._fake(step, real.shape[0])
        alpha = uniform_alpha(self.shared_seed, Stream.LOCAL_ALPHA, step, real.shape[0])
        real, fake, alpha, grad_real, grad_fake = self._kept_rows(
            step, real, fake, alpha, grad_real, grad_fake
        )
        train, disc = self.config.train, self.discriminator
        # NaN unless the update forms the batch loss (vmap's per-sample route does not).
        local = torch.tensor(float("nan"))

        def batch_loss() -> torch.Tensor:
            nonlocal local
            f_real, f_fake = disc.features(real), disc.features(fake)
            local = torch.zeros(())
            if self.config.has_local_head:
                penalty = gradient_penalty(disc, real, fake, alpha)
                local = -disc.score(f_real).mean() + disc.score(f_fake).mean()
                local = local + train.gp_weight * penalty
            if self.first_part_gp:
                local = local + train.gp_weight * first_part_penalty(disc, real, fake, alpha)
            # The surrogate carries the server's gradients of lambda_1 L_{D_s} to D_i.
            return local + (f_real * grad_real).sum() + (f_fake * grad_fake).sum()

        def row_loss(
            call: Callable[[str, torch.Tensor], torch.Tensor],
            real_row: torch.Tensor,
            fake_row: torch.Tensor,
            alpha_row: torch.Tensor,
            g_real_row: torch.Tensor,
            g_fake_row: torch.Tensor,
        ) -> torch.Tensor:
            # One row's share of batch_loss times the batch size: the batch loss is the
            # mean of these (the server's per-row gradients already carry the 1/B).
            def features(x: torch.Tensor) -> torch.Tensor:
                return call("features", x.unsqueeze(0)).squeeze(0)

            loss = real.shape[0] * (
                (features(real_row) * g_real_row).sum() + (features(fake_row) * g_fake_row).sum()
            )
            if self.config.has_local_head:

                def score(x: torch.Tensor) -> torch.Tensor:
                    return call("forward", x.unsqueeze(0)).reshape(())

                loss = loss + score(fake_row) - score(real_row)
                loss = loss + train.gp_weight * row_penalty(score, real_row, fake_row, alpha_row)
            if self.first_part_gp:
                loss = loss + train.gp_weight * row_penalty(
                    lambda x: features(x).sum(), real_row, fake_row, alpha_row
                )
            return loss

        self.d_update(
            disc, self.d_opt, batch_loss, row_loss, (real, fake, alpha, grad_real, grad_fake), step
        )
        return float(local.detach())

    def against_parties(self, schedule: Schedule, d_steps: int) -> dict[str, Any] | None:
        """The guarantee of this party's first ``d_steps`` discriminator releases against
        the other parties, who know each step's rows (:mod:`flwr_vflgan.privacy.masking`);
        ``None`` without DP, under ``dp.sampling=poisson`` or ``dp=end_to_end`` (not
        accounted against the parties) and for VertiGAN."""
        plan = self.privacy
        if (
            plan is None
            or self.config.dp.poisson
            or self.config.shares_backbone
            or plan.config.mechanism not in (Mechanism.VFLGAN_GAUSSIAN, Mechanism.DPSGD)
        ):
            return None
        appearances = max_appearances(
            self.shared_seed, schedule.discriminator_steps(d_steps), self.data.shape[0], self.drawn
        )
        return against_parties(plan, self.drawn, appearances)

    def _apply_generator(self, step: int, grad_fake: torch.Tensor) -> float:
        with frozen_batchnorm_stats(self.generator):
            fake = self._fake(step)
        f_fake = self.discriminator.features(fake)
        surrogate = (f_fake * grad_fake).sum()
        local = torch.zeros(())
        if self.config.has_local_head:
            local = generator_loss(self.discriminator.score(f_fake))
        self.g_opt.zero_grad(set_to_none=True)
        (local + surrogate).backward()
        self.g_opt.step()
        self.generator_updated()
        self.discriminator.zero_grad(set_to_none=True)
        return float(local.detach())

    def generator_updated(self) -> None:
        """After each generator step: move the generator's average, if one is kept."""
        if self.average is not None:
            self.average.update(self.generator)

    @property
    def published(self) -> PartyGenerator:
        """The generator that is evaluated, kept as the best and published: the average
        when ``train.generator_average`` is set, else the trained one."""
        if self.average is not None:
            return self.average.module  # type: ignore[return-value]
        return self.generator

    # -- sampling ------------------------------------------------------------------------
    def generate(self, n_rows: int, draw: int) -> torch.Tensor:
        """``n_rows`` encoded synthetic rows from evaluation noise number ``draw``.

        Every party calls this with the same ``draw`` and gets the same ``z``, so the
        server can concatenate the parties' rows into complete records (paper 000, Fig. 3).
        """
        z = latent_noise(
            self.shared_seed, draw, n_rows, self.config.model.latent_dim, Stream.EVAL_NOISE
        )
        published = self.published
        with eval_mode(published):
            return published.sample(z, torch_generator(self.private_seed, Stream.EVAL_NOISE, draw))

    def generator_snapshot(self) -> np.ndarray:
        """The published generator's parameters and buffers as one float32 vector (for
        best-model keeping)."""
        return module_snapshot(self.published)

    def load_generator_snapshot(self, values: np.ndarray) -> None:
        """Inverse of :meth:`generator_snapshot`."""
        load_module_snapshot(self.published, values)


class ServerTrainer:
    """The shared discriminator ``D_s`` and its optimizer.

    Parameters
    ----------
    config
        Model and training configuration.
    n_parties
        ``M``; ``D_s`` reads ``M * feature_dim`` concatenated features.
    seed
        The server's own seed (interpolation weights of its gradient penalty).
    privacy
        ``dp=end_to_end`` only: the server's plan (the parties' noise and joint account);
        ``D_s`` then takes per-row clipped, noised DP-SGD updates. ``None``: plain updates.
    noise_seed
        Seed of the server's DP noise; by default derived from ``seed``.
    """

    def __init__(
        self,
        config: GANSettings,
        n_parties: int,
        seed: int,
        privacy: PrivacyPlan | None = None,
        noise_seed: int | None = None,
    ) -> None:
        if n_parties < 1:
            raise ValueError(f"n_parties must be >= 1, got {n_parties}")
        if privacy is not None and privacy.config.mechanism is not Mechanism.END_TO_END:
            raise ValueError(
                f"the server noises D_s under dp=end_to_end only, got a "
                f"dp={privacy.config.mechanism.value} plan"
            )
        self.config = config
        self.n_parties = n_parties
        self.seed = seed
        self.privacy = privacy
        self.d_update = discriminator_update(
            privacy,
            noise_seed if noise_seed is not None else derive_seed(seed, Stream.DP_NOISE, 0, 1),
        )
        with seeded_init(derive_seed(seed, Stream.INIT)):
            self.discriminator = SharedDiscriminator(
                n_parties * config.model.feature_dim,
                config.model.shared_hidden,
                leaky_slope=config.model.leaky_slope,
            )
        self.opt = adam(self.discriminator, config.train, generator=False)
        self.state = FlatState([self.discriminator], [self.opt])

    def discriminator_step(
        self, step: int, real: Sequence[torch.Tensor], fake: Sequence[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """Update ``D_s`` on ``lambda_1 L_{D_s}``; return each party's feature gradients.

        Returns ``(grads_real, grads_fake, L_{D_s})``; the gradients already carry
        ``lambda_1`` and include the gradient penalty's dependence on the features.
        """
        f_real = torch.cat(list(real), dim=1).detach().requires_grad_(True)
        f_fake = torch.cat(list(fake), dim=1).detach().requires_grad_(True)
        if f_real.shape[0] == 0:
            # An empty Poisson batch: nothing to learn from; the parties (and under
            # end_to_end the server) still take their noise-only DP-SGD step.
            if self.privacy is not None:
                self._private_step(step, f_real, f_fake, torch.zeros(0, 1))
            empty = self._split(torch.zeros_like(f_real))
            return empty, self._split(torch.zeros_like(f_fake)), float("nan")
        alpha = uniform_alpha(self.seed, Stream.SERVER_ALPHA, step, f_real.shape[0])
        if self.privacy is not None:
            return self._private_step(step, f_real, f_fake, alpha)
        loss, _ = critic_loss(
            self.discriminator, f_real, f_fake, alpha, self.config.train.gp_weight
        )
        self.opt.zero_grad(set_to_none=True)
        (self.config.train.shared_d_weight * loss).backward()
        self.opt.step()
        assert f_real.grad is not None and f_fake.grad is not None  # set by backward above
        return self._split(f_real.grad), self._split(f_fake.grad), float(loss.detach())

    def _private_step(
        self, step: int, f_real: torch.Tensor, f_fake: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """``dp=end_to_end``: the parties' feature gradients as without DP, and a DP-SGD
        update of ``D_s``.

        Row ``j``'s loss is ``lambda_1 (D_s(f~_j) - D_s(f_j) + lambda GP_j)``, a function of
        row ``j``'s features alone (``D_s`` is row-wise; its penalty takes the row's own
        interpolate), so its clipped gradient bounds the row's influence on the update;
        the batch mean of the row losses is ``lambda_1 L_{D_s}``. The feature gradients sent
        back are each a function of one row too; they enter each party's own per-row
        clipped loss, so the party's mechanism covers them.
        """
        train = self.config.train
        weight, gp_weight = train.shared_d_weight, train.gp_weight
        disc = self.discriminator
        loss = torch.tensor(float("nan"))
        if f_real.shape[0]:
            loss, _ = critic_loss(disc, f_real, f_fake, alpha, gp_weight)
            g_real, g_fake = torch.autograd.grad(weight * loss, (f_real, f_fake))
        else:
            g_real, g_fake = torch.zeros_like(f_real), torch.zeros_like(f_fake)
        critic_row = wgan_gp_row_loss(gp_weight)

        def row_loss(call: Callable[[str, torch.Tensor], torch.Tensor], *row: torch.Tensor):
            return weight * critic_row(call, *row)

        def batch_loss() -> torch.Tensor:  # the mean of the row losses
            return weight * critic_loss(disc, f_real.detach(), f_fake.detach(), alpha, gp_weight)[0]

        self.d_update(
            disc, self.opt, batch_loss, row_loss, (f_real.detach(), f_fake.detach(), alpha), step
        )
        return self._split(g_real), self._split(g_fake), float(loss.detach())

    def generator_step(
        self, fake: Sequence[torch.Tensor], step: int = 0
    ) -> tuple[list[torch.Tensor], float]:
        """Gradients of ``-lambda_2 E[D_s(f~)]`` with respect to each party's fake features."""
        f_fake = torch.cat(list(fake), dim=1).detach().requires_grad_(True)
        loss = generator_loss(self.discriminator(f_fake))
        (self.config.train.shared_g_weight * loss).backward()
        self.discriminator.zero_grad(set_to_none=True)
        assert f_fake.grad is not None  # set by backward above
        return self._split(f_fake.grad), float(loss.detach())

    def _split(self, grad: torch.Tensor) -> list[torch.Tensor]:
        return list(torch.split(grad, self.config.model.feature_dim, dim=1))
