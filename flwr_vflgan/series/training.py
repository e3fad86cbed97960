"""A VFLGAN-TS party's and the server's halves of a step (paper 003; the reference's loss).

The step protocol is VFLGAN's (:mod:`flwr_vflgan.gan.exchanges`): in a *forward* each
party sends the intermediate features of its real batch and its fake batch (a
discriminator step) or of its fake batch (a generator step); the server answers with the
gradients of its loss with respect to them; in the *apply* the party recomputes the same
pass (same batch rows, same shared noise, same dropout masks), or continues the
forward's own graph when its parameters have not changed since (the same values), and
updates its models.
:class:`SeriesParty` and :class:`SeriesServer` have the method shapes of
:class:`~flwr_vflgan.gan.vflgan.PartyTrainer` and the ``StepServer`` protocol, so
:class:`~flwr_vflgan.gan.exchanges.LocalVFLGAN` runs them unchanged.

Losses (binary cross-entropy ``BCE``, real labelled 1, as the reference code):

* discriminators: ``sum_c [BCE(A_c(x_c), 1) + BCE(A_c(x~_c), 0)] + BCE(D_s(f), 1) +
  BCE(D_s(f~), 0)`` over every party's attribute discriminators ``A_c``, feature
  extractors and the shared discriminator ``D_s`` (one joint objective);
* generators: ``sum_c BCE(A_c(x~_c), 1) + gamma_s BCE(D_s(f~), 1)``.

Without the shared discriminator (``train.shared_discriminator=false``) each party's
extractor head ``E_i`` takes ``D_s``'s place on its own channels:
``BCE(E_i(x_i), 1) + BCE(E_i(x~_i), 0)`` for the discriminators and ``gamma_c BCE(E_i(x~_i), 1)``
for the generators; the server then returns zero gradients and trains nothing.

With ``series.train.loss=wgan_gp`` every ``BCE(s, 1) + BCE(s~, 0)`` above becomes
``E[s~] - E[s] + lambda GP`` (each critic's penalty on its own interpolates: the attribute
discriminators on their channel, ``D_s`` on the features, with ``train.first_part_gp``
the extractor's first part; without ``D_s`` the extractor with its head), and every
generator term ``BCE(s~, 1)`` becomes ``-E[s~]``. The penalties' dropout masks come from
a third pass's generator (:data:`PENALTY_PASS`), their interpolation weights from the
streams VFLGAN's penalties use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch.nn.functional import binary_cross_entropy_with_logits

from flwr_vflgan.gan.config import GANSettings
from flwr_vflgan.gan.losses import gradient_penalty
from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.gan.vflgan import generator_average, local_seed
from flwr_vflgan.nn.models import load_module_snapshot, module_snapshot, seeded_init
from flwr_vflgan.privacy.config import PrivacyPlan
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

from .config import SeriesSettings
from .models import PartyDiscriminator, PartyGenerators, SharedSeriesDiscriminator


class SeriesRunSettings(GANSettings, Protocol):
    """What VFLGAN-TS reads of a run's settings (the umbrella
    :class:`~flwr_vflgan.config.VFLGANConfig` is one): VFLGAN's (the schedule, batch size
    and Adam's betas from ``train``, the feature width the server sees from
    ``model.feature_dim``, ``dp``) and the series models and learning rates."""

    @property
    def series(self) -> SeriesSettings: ...


REAL_PASS, FAKE_PASS, PENALTY_PASS = 0, 1, 2
"""Which pass of a step a dropout mask belongs to (the real batch's, the fake one's, or
the gradient penalties' interpolates)."""


class _Pass(NamedTuple):
    """One pass of a forward kept for its apply: the input block, its features (with
    their graph) and the mask generator where the features left it."""

    block: torch.Tensor
    features: torch.Tensor
    gen: torch.Generator


@dataclass(frozen=True)
class _KeptPasses:
    """The passes of step ``step``'s forward, exact while the parameters still have the
    in-place ``versions`` they had then."""

    step: int
    versions: tuple[int, ...]
    passes: dict[int, _Pass]


def bce(logits: torch.Tensor, real: bool) -> torch.Tensor:
    """Mean binary cross-entropy of ``logits`` against label 1 (``real``) or 0."""
    target = torch.ones_like(logits) if real else torch.zeros_like(logits)
    return binary_cross_entropy_with_logits(logits, target)


def score_loss(scores: torch.Tensor, real: bool, wasserstein: bool) -> torch.Tensor:
    """A discriminator's scores judged against label ``real``: ``BCE(s, 1)`` or ``BCE(s, 0)``,
    or as a Wasserstein critic's ``-E[s]`` or ``E[s]`` (a generator's loss is its rows'
    scores judged as real)."""
    if not wasserstein:
        return bce(scores, real)
    return -scores.mean() if real else scores.mean()


def _adam(params: list[dict], config: SeriesRunSettings) -> torch.optim.Adam:
    return torch.optim.Adam(params, betas=config.train.betas, foreach=True)


class SeriesParty:
    """One party's channel generators, attribute discriminators and feature extractor.

    Parameters
    ----------
    config
        The run's settings (identical at every party and the server).
    n_channels, length
        Channels this party holds and steps per series.
    data
        The party's block, float32 ``(n_series, n_channels * length)``.
    shared_seed
        Seed the parties share and the server does not know: batch rows and the noise.
    party
        This party's index; its dropout masks and DP noise come from a seed derived
        from it.
    privacy
        How the first layers of the attribute discriminators and the feature extractor
        are noised (``None``: not at all; paper 003, Theorem 1).
    noise_seed
        Seed of the DP noise, known to this party alone; by default derived from the
        party's seed.
    """

    def __init__(
        self,
        config: SeriesRunSettings,
        n_channels: int,
        length: int,
        data: torch.Tensor,
        shared_seed: int,
        party: int,
        privacy: PrivacyPlan | None = None,
        noise_seed: int | None = None,
    ) -> None:
        if data.dtype != torch.float32 or data.ndim != 2 or data.shape[1] != n_channels * length:
            raise ValueError(
                f"party data must be float32 (series, {n_channels} * {length}), got "
                f"{data.dtype} {tuple(data.shape)}"
            )
        self.config = config
        self.series = config.series
        self.data = data
        self.shared_seed = shared_seed
        self.private_seed = local_seed(shared_seed, party)
        model, rates = config.series.model, config.series.train
        with seeded_init(derive_seed(self.private_seed, Stream.INIT)):
            self.generator = PartyGenerators(model, n_channels, length)
            self.discriminator = PartyDiscriminator(
                model, n_channels, length, config.model.feature_dim
            )
        self.g_opt = _adam(
            [{"params": self.generator.parameters(), "lr": rates.generator_lr}], config
        )
        disc = self.discriminator
        self.d_opt = _adam(
            [
                {"params": disc.attributes.parameters(), "lr": rates.attribute_lr},
                {"params": disc.extractor.parameters(), "lr": rates.extractor_lr},
            ],
            config,
        )
        self.average = generator_average(self.generator, config.train, data.shape[0])
        modules: list[torch.nn.Module] = [self.generator, self.discriminator]
        if self.average is not None:
            modules.append(self.average.module)
        self.state = FlatState(modules, [self.g_opt, self.d_opt])
        self.privacy = privacy
        if noise_seed is None:
            noise_seed = derive_seed(self.private_seed, Stream.DP_NOISE)
        self.d_update = discriminator_update(privacy, noise_seed)
        self._kept: _KeptPasses | None = None

    # -- random draws of a step ------------------------------------------------------
    def _batch(self, step: int) -> torch.Tensor:
        train = self.config.train
        rows = discriminator_batch(self.shared_seed, step, self.data.shape[0], train.batch_size)
        return self.data[rows]

    def _fake(self, step: int) -> torch.Tensor:
        z = latent_noise(
            self.shared_seed, step, self.config.train.batch_size, self.series.model.noise_dim
        )
        return self.generator(z)

    def _masks(self, step: int, which: int) -> torch.Generator:
        return torch_generator(self.private_seed, Stream.DROPOUT, step, which)

    def batch_rows(self, step: int, kind: StepKind) -> int:
        """Rows of each of step ``step``'s feature tensors (always the batch size)."""
        return self.config.train.batch_size

    # -- protocol halves ---------------------------------------------------------------
    def forward(self, step: int, kind: StepKind) -> StepTensors:
        """The intermediate features of step ``step`` (sent detached).

        The first step forwarded since the last apply keeps its passes' graphs
        (:class:`_KeptPasses`): when its apply comes with the parameters unchanged (the
        first step of a block, the party still in memory), the apply continues them
        instead of recomputing them, with the same values and masks."""
        keep = self._kept is None
        kept: dict[int, _Pass] = {}
        with torch.set_grad_enabled(keep and kind is StepKind.GENERATOR):
            fake = self._fake(step)
        f_fake = self._features(fake, step, FAKE_PASS, kept if keep else None)
        f_real = None
        if kind is StepKind.DISCRIMINATOR:
            real = self._batch(step)
            f_real = self._features(real, step, REAL_PASS, kept if keep else None).detach()
        if keep:
            self._kept = _KeptPasses(step, self._versions(), kept)
        return StepTensors(real=f_real, fake=f_fake.detach())

    def _features(
        self, block: torch.Tensor, step: int, which: int, kept: dict[int, _Pass] | None
    ) -> torch.Tensor:
        """One pass's features; with ``kept``, its graph and mask generator kept there."""
        gen = self._masks(step, which)
        with torch.set_grad_enabled(kept is not None):
            features = self.discriminator.features(block, gen)
        if kept is not None:
            kept[which] = _Pass(block, features, gen)
        return features

    def _versions(self) -> tuple[int, ...]:
        """The state's loads and every parameter's in-place version: an optimizer step, a
        snapshot loaded into a module or a load of the whole state changes them."""
        modules = (self.generator, self.discriminator)
        return (self.state.loads, *(p._version for m in modules for p in m.parameters()))

    def _take_kept(self, step: int) -> dict[int, _Pass]:
        """The kept passes of ``step`` if still exact (empty otherwise); kept no longer."""
        kept, self._kept = self._kept, None
        if kept is None or kept.step != step or kept.versions != self._versions():
            return {}
        return kept.passes

    def apply(
        self, step: int, kind: StepKind, grad_real: torch.Tensor | None, grad_fake: torch.Tensor
    ) -> float:
        """Update the discriminators (D step) or the generators (G step) from the
        server's feature gradients; returns the party's local loss."""
        if kind is StepKind.DISCRIMINATOR:
            if grad_real is None:
                raise ValueError("a discriminator step needs gradients for the real features")
            return self._apply_discriminator(step, grad_real, grad_fake)
        return self._apply_generator(step, grad_fake)

    def _judge(
        self, block: torch.Tensor, step: int, which: int, kept: _Pass | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
        """Features, attribute logits and (without ``D_s``) the extractor's logit of one
        pass, its dropout masks drawn in a fixed order: features, extractor head, channels
        (``kept``: the forward's pass of this block, continued where it stopped)."""
        disc = self.discriminator
        if kept is None:
            gen = self._masks(step, which)
            features = disc.features(block, gen)
        else:
            block, features, gen = kept
        shared = self.series.train.shared_discriminator
        head = None if shared else disc.extractor.head(features, gen)
        return features, disc.attribute_logits(block, gen), head

    def _apply_discriminator(
        self, step: int, grad_real: torch.Tensor, grad_fake: torch.Tensor
    ) -> float:
        kept = self._take_kept(step)
        real = kept[REAL_PASS].block if kept else self._batch(step)
        if kept:
            fake = kept[FAKE_PASS].block
        else:
            with torch.no_grad():
                fake = self._fake(step)
        local = torch.zeros(())

        def batch_loss() -> torch.Tensor:
            nonlocal local
            f_real, a_real, h_real = self._judge(real, step, REAL_PASS, kept.get(REAL_PASS))
            f_fake, a_fake, h_fake = self._judge(fake, step, FAKE_PASS, kept.get(FAKE_PASS))
            w = self.series.train.wasserstein
            local = sum(
                (
                    score_loss(r, True, w) + score_loss(f, False, w)
                    for r, f in zip(a_real, a_fake, strict=True)
                ),
                torch.zeros(()),
            )
            if h_real is not None and h_fake is not None:
                local = local + score_loss(h_real, True, w) + score_loss(h_fake, False, w)
            if w:
                local = local + self.penalties(real, fake, step)
            return local + (f_real * grad_real).sum() + (f_fake * grad_fake).sum()

        def row_loss(*_: object) -> torch.Tensor:
            # VFLGANConfig refuses per-sample mechanisms for vflgan_ts: never called.
            raise RuntimeError("VFLGAN-TS has no per-sample DP update (dp=vflgan_gaussian only)")

        self.d_update(self.discriminator, self.d_opt, batch_loss, row_loss, (), step)
        return float(local.detach())

    def penalties(self, real: torch.Tensor, fake: torch.Tensor, step: int) -> torch.Tensor:
        """WGAN-GP: ``lambda`` times the sum of the party's critics' gradient penalties,
        masks drawn in order: channels, then the extractor (its first part with ``D_s``
        and ``train.first_part_gp``, the whole of it without ``D_s``)."""
        train, disc = self.config.train, self.discriminator
        alpha = uniform_alpha(self.shared_seed, Stream.LOCAL_ALPHA, step, real.shape[0])
        gen = self._masks(step, PENALTY_PASS)
        pieces = zip(
            disc.attributes,
            torch.split(real, disc.length, dim=1),
            torch.split(fake, disc.length, dim=1),
            strict=True,
        )
        total = sum(
            (gradient_penalty(partial(a, gen=gen), r, f, alpha) for a, r, f in pieces),
            torch.zeros(()),
        )
        if not self.series.train.shared_discriminator:
            total = total + gradient_penalty(partial(disc.extractor, gen=gen), real, fake, alpha)
        elif train.first_part_gp:

            def first_part(x: torch.Tensor) -> torch.Tensor:
                return disc.features(x, gen).sum(dim=1, keepdim=True)

            total = total + gradient_penalty(first_part, real, fake, alpha)
        return train.gp_weight * total

    def _apply_generator(self, step: int, grad_fake: torch.Tensor) -> float:
        kept = self._take_kept(step).get(FAKE_PASS)
        fake = kept.block if kept is not None else self._fake(step)
        features, logits, head = self._judge(fake, step, FAKE_PASS, kept)
        w = self.series.train.wasserstein
        local = sum((score_loss(logit, True, w) for logit in logits), torch.zeros(()))
        if head is not None:
            local = local + self.series.train.local_weight * score_loss(head, True, w)
        self.g_opt.zero_grad(set_to_none=True)
        (local + (features * grad_fake).sum()).backward()
        self.g_opt.step()
        self.generator_updated()
        self.discriminator.zero_grad(set_to_none=True)
        return float(local.detach())

    def generator_updated(self) -> None:
        """After each generator step: move the generators' average, if one is kept."""
        if self.average is not None:
            self.average.update(self.generator)

    # -- sampling ------------------------------------------------------------------------
    @property
    def published(self) -> PartyGenerators:
        """The generators that are evaluated, kept as the best and published: their
        average when ``train.generator_average`` is set, else the trained ones."""
        if self.average is not None:
            return self.average.module  # type: ignore[return-value]
        return self.generator

    def generate(self, n_series: int, draw: int) -> torch.Tensor:
        """``n_series`` synthetic blocks from evaluation noise number ``draw`` (every
        party gets the same noise, so row ``k`` of every party is one series)."""
        z = latent_noise(
            self.shared_seed, draw, n_series, self.series.model.noise_dim, Stream.EVAL_NOISE
        )
        with torch.no_grad():
            return self.published(z)

    def generator_snapshot(self) -> np.ndarray:
        """The published generators' parameters as one float32 vector."""
        return module_snapshot(self.published)

    def load_generator_snapshot(self, values: np.ndarray) -> None:
        """Inverse of :meth:`generator_snapshot`."""
        load_module_snapshot(self.published, values)


class SeriesServer:
    """The shared discriminator ``D_s`` on the parties' features, and its optimizer.

    Without the shared discriminator (the ablation) it trains nothing and returns zero
    gradients.
    """

    def __init__(self, config: SeriesRunSettings, n_parties: int, seed: int) -> None:
        if n_parties < 1:
            raise ValueError(f"n_parties must be >= 1, got {n_parties}")
        self.config = config
        self.series = config.series
        self.n_parties = n_parties
        self.seed = seed
        with seeded_init(derive_seed(seed, Stream.INIT)):
            self.discriminator = SharedSeriesDiscriminator(
                config.series.model, n_parties, config.model.feature_dim
            )
        self.opt = _adam(
            [{"params": self.discriminator.parameters(), "lr": config.series.train.shared_lr}],
            config,
        )
        self.state = FlatState([self.discriminator], [self.opt])

    def _split(self, grad: torch.Tensor) -> list[torch.Tensor]:
        return list(torch.split(grad, self.config.model.feature_dim, dim=1))

    def critic_loss(self, step: int, f_real: torch.Tensor, f_fake: torch.Tensor) -> torch.Tensor:
        """``D_s``'s loss on the concatenated features of step ``step``'s real and fake
        batches (WGAN-GP: with its penalty, which reads the features too)."""
        gen = torch_generator(self.seed, Stream.DROPOUT, step)
        wasserstein = self.series.train.wasserstein
        disc = self.discriminator
        loss = score_loss(disc(f_real, gen), True, wasserstein)
        loss = loss + score_loss(disc(f_fake, gen), False, wasserstein)
        if wasserstein:
            alpha = uniform_alpha(self.seed, Stream.SERVER_ALPHA, step, f_real.shape[0])
            masks = torch_generator(self.seed, Stream.DROPOUT, step, PENALTY_PASS)
            penalty = gradient_penalty(partial(disc, gen=masks), f_real, f_fake, alpha)
            loss = loss + self.config.train.gp_weight * penalty
        return loss

    def generator_loss(self, step: int, f_fake: torch.Tensor) -> torch.Tensor:
        """The generators' loss on ``D_s``'s view of step ``step``'s fake features
        (before ``gamma_s``)."""
        gen = torch_generator(self.seed, Stream.DROPOUT, step, 1)
        return score_loss(self.discriminator(f_fake, gen), True, self.series.train.wasserstein)

    def discriminator_step(
        self, step: int, real: Sequence[torch.Tensor], fake: Sequence[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """Update ``D_s``; return the gradients of its loss for each party's features."""
        f_real = torch.cat(list(real), dim=1).detach().requires_grad_(True)
        f_fake = torch.cat(list(fake), dim=1).detach().requires_grad_(True)
        if not self.series.train.shared_discriminator:
            return self._split(torch.zeros_like(f_real)), self._split(torch.zeros_like(f_fake)), 0.0
        loss = self.critic_loss(step, f_real, f_fake)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        assert f_real.grad is not None and f_fake.grad is not None  # set by backward above
        return self._split(f_real.grad), self._split(f_fake.grad), float(loss.detach())

    def generator_step(
        self, fake: Sequence[torch.Tensor], step: int = 0
    ) -> tuple[list[torch.Tensor], float]:
        """Gradients of ``gamma_s BCE(D_s(f~), 1)`` (WGAN-GP: ``-gamma_s E[D_s(f~)]``) for
        each party's fake features."""
        f_fake = torch.cat(list(fake), dim=1).detach().requires_grad_(True)
        if not self.series.train.shared_discriminator:
            return self._split(torch.zeros_like(f_fake)), 0.0
        loss = self.generator_loss(step, f_fake)
        (self.series.train.shared_weight * loss).backward()
        self.discriminator.zero_grad(set_to_none=True)
        assert f_fake.grad is not None  # set by backward above
        return self._split(f_fake.grad), float(loss.detach())
