"""GS-WGAN (Chen, Orekondy and Fritz, NeurIPS 2020): paper 000's second DP baseline.

Paper 000 (Section 5.1.2 and 5.3.1, Figure 8) runs GS-WGAN on the centralized WGAN_GP's
networks, unconditional. This is that: :class:`CentralizedGSWGAN` keeps the generator,
the critic architecture and the schedule of :class:`~flwr_vflgan.gan.plain.CentralizedWGANGP`
and changes what the authors' code changes (``source/main.py``):

* the training rows are split once into ``K`` disjoint shards (``gs_wgan.discriminators``),
  each with its own critic and Adam state, created when first used;
* each generator step draws one critic uniformly; the ``n_critic`` discriminator steps
  before it train that critic on batches of its own shard (the whole shard when it holds
  fewer rows than ``train.batch_size``), un-noised, with the gradient penalty and the
  authors' drift penalty ``drift_weight * E[D(x)^2]`` on the real rows;
* before the run's generator starts, each critic may be warmed up as the authors do
  (``source/pretrain.py``; ``gs_wgan.warmup_iterations``): trained against a generator of
  its own, which is then discarded;
* the generator step feeds a batch of synthetic rows to the chosen critic, takes each
  row's gradient of its own loss ``-D(x~_i)``, clips it to ``C`` and adds
  ``N(0, (2 C sigma)^2)`` to every entry
  (:func:`~flwr_vflgan.privacy.mechanisms.sanitize_sample_gradients`), and back-propagates
  the sanitized gradients, averaged over the batch, through the generator.

Only the sanitized gradients reach the generator, so the generator and the table are
their post-processing; the critics read their shards un-noised and are never published.
The accounting (:func:`gs_wgan_plan`) is decided in docs/privacy.md, "GS-WGAN": one
generator step is a Gaussian mechanism on the batch's ``B`` sanitized gradients together
(sensitivity ``2 C sqrt(B)`` when one row is replaced, since the chosen critic can change
every one of them), subsampled by the choice of one shard in ``K``.
Without DP the critics' gradients reach the generator whole (no clipping, no noise).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import nn

from flwr_vflgan.gan.losses import gradient_penalty
from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.nn.models import PartyGenerator, SpanLike, seeded_init
from flwr_vflgan.privacy.config import Mechanism, PrivacyPlan, check_delta, plan_privacy
from flwr_vflgan.privacy.mechanisms import sanitize_sample_gradients
from flwr_vflgan.runtime.rng import (
    Stream,
    derive_seed,
    numpy_generator,
    torch_generator,
    uniform_alpha,
)

from .config import GANSettings, GSWGANSettings
from .plain import CentralizedWGANGP, make_critic, sample_rows
from .vflgan import adam, make_generator

log = logging.getLogger(__name__)

__all__ = ["CentralizedGSWGAN", "gs_wgan_plan", "shards"]


def shards(n_rows: int, discriminators: int, seed: int) -> list[torch.Tensor]:
    """The rows of each discriminator: a seeded permutation of ``range(n_rows)`` cut into
    ``discriminators`` disjoint parts whose sizes differ by at most one.

    Raises
    ------
    ValueError
        If there are fewer rows than discriminators.
    """
    if discriminators > n_rows:
        raise ValueError(
            f"gs_wgan.discriminators={discriminators} exceeds the {n_rows} training rows: "
            "every discriminator needs a shard of at least one row; lower it"
        )
    order = numpy_generator(seed, Stream.SHARD).permutation(n_rows)
    bounds = [n_rows * k // discriminators for k in range(discriminators + 1)]
    return [torch.from_numpy(order[a:b].copy()) for a, b in pairwise(bounds)]


def gs_wgan_plan(
    config: GANSettings, settings: GSWGANSettings, n_rows: int, generator_steps: int
) -> PrivacyPlan:
    """The privacy plan of a GS-WGAN run with ``generator_steps`` planned generator steps.

    One generator step releases ``B`` (``train.batch_size``) sanitized gradients, each of
    sensitivity ``2 C`` and noise ``2 C sigma``: together one Gaussian mechanism with
    multiplier ``sigma / sqrt(B)`` (``parts=B``), read from one of ``K`` shards drawn
    uniformly (a subsampled mechanism with rate ``1 / K``, replace-one neighbours).
    ``delta`` must be below ``1 / n_rows``.
    """
    if config.dp.mechanism is not Mechanism.GS_WGAN:
        raise ValueError(f"gs_wgan_plan needs dp=gs_wgan, got dp={config.dp.mechanism.value}")
    check_delta(config.dp.delta, n_rows)
    return plan_privacy(
        config.dp,
        dataset_size=settings.discriminators,
        batch_size=1,
        planned_steps=generator_steps,
        parts=config.train.batch_size,
    )


class CentralizedGSWGAN(CentralizedWGANGP):
    """GS-WGAN on the concatenated table (see the module docstring).

    Parameters
    ----------
    config, spans, data, n_parties, seed
        As for :class:`~flwr_vflgan.gan.plain.CentralizedWGANGP`.
    settings
        The number of discriminators and the drift penalty.
    privacy
        A ``gs_wgan`` plan (:func:`gs_wgan_plan`), or ``None`` for no sanitization.
    """

    def __init__(
        self,
        config: GANSettings,
        spans: Sequence[SpanLike],
        data: torch.Tensor,
        n_parties: int,
        seed: int,
        settings: GSWGANSettings,
        privacy: PrivacyPlan | None = None,
    ) -> None:
        if privacy is not None and privacy.config.mechanism is not Mechanism.GS_WGAN:
            raise ValueError(
                f"CentralizedGSWGAN sanitizes with dp=gs_wgan, got "
                f"dp={privacy.config.mechanism.value}"
            )
        super().__init__(config, spans, data, n_parties, seed)
        self.privacy = privacy
        self.settings = settings
        self.shards = shards(data.shape[0], settings.discriminators, seed)
        self._n_parties = n_parties
        # Critic 0 is the one the base class built; the others are made when first drawn.
        self.critics: dict[int, tuple[nn.Module, torch.optim.Optimizer]] = {
            0: (self.critic, self.d_opt)
        }
        self._spans = list(spans)
        self.generator_steps = 0
        if settings.warmup_iterations:
            log.info(
                "gs_wgan: warming up %d discriminators, %d iterations each",
                len(self.shards),
                settings.warmup_iterations,
            )
            self.warm_up()

    @property
    def chosen(self) -> int:
        """The discriminator the next generator step reads (and its critic steps train)."""
        return self._draw(self.generator_steps)

    def _draw(self, generator_step: int) -> int:
        """The discriminator that generator step ``generator_step`` (0-based) reads."""
        draw = torch_generator(self.seed, Stream.SHARD, generator_step + 1)
        return int(torch.randint(len(self.shards), (1,), generator=draw))

    def _critic(self, k: int) -> tuple[nn.Module, torch.optim.Optimizer]:
        if k not in self.critics:
            with seeded_init(derive_seed(self.seed, Stream.INIT, k)):
                critic = make_critic(self.config.model, self.data.shape[1], self._n_parties)
            self.critics[k] = (critic, adam(critic, self.config.train, generator=False))
        return self.critics[k]

    def warm_up(self) -> None:
        """The authors' warm start (``source/pretrain.py``): each discriminator trains
        ``warmup_iterations`` iterations (``n_critic`` steps on its shard and one step of a
        generator of its own, discarded afterwards) before the run's generator starts.
        Nothing of it reaches the published generator but through the sanitized gradients,
        so it costs no privacy."""
        iterations = self.settings.warmup_iterations
        cycle = self.config.train.n_critic + 1
        for k in range(len(self.shards) if iterations else 0):
            seed = derive_seed(self.seed, Stream.WARMUP, 0, k)
            with seeded_init(seed):
                generator = make_generator(self.config.model, self._spans, self._n_parties)
            optimizer = adam(generator, self.config.train, generator=True)
            for iteration in range(iterations):
                for d in range(cycle - 1):
                    self._critic_step(k, generator, seed, iteration * cycle + d)
                critic, _ = self._critic(k)
                fake = sample_rows(generator, self.config, seed, (iteration + 1) * cycle - 1)
                loss = -critic(fake).mean()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                critic.zero_grad(set_to_none=True)

    def step(self, step: int, kind: StepKind) -> float:
        """One update of the chosen discriminator or of the generator; returns the
        discriminator's loss or the generator's ``-E[D(x~)]`` (before sanitization)."""
        if kind is StepKind.DISCRIMINATOR:
            return self._critic_step(self.chosen, self.generator, self.seed, step)
        loss = self._generator_step(step)
        self.generator_steps += 1
        return loss

    def _critic_step(self, k: int, generator: PartyGenerator, seed: int, step: int) -> float:
        """One update of discriminator ``k`` on a batch of its shard against ``generator``'s
        rows, every draw from ``(seed, step)``."""
        critic, optimizer = self._critic(k)
        shard = self.shards[k]
        rows = min(self.config.train.batch_size, len(shard))
        pick = torch.randperm(len(shard), generator=torch_generator(seed, Stream.BATCH, step))
        real = self.data[shard[pick[:rows]]]
        with torch.no_grad():
            fake = sample_rows(generator, self.config, seed, step, rows)
        alpha = uniform_alpha(seed, Stream.LOCAL_ALPHA, step, rows)
        real_score = critic(real)
        penalty = gradient_penalty(critic, real, fake, alpha)
        loss = (
            critic(fake).mean()
            - real_score.mean()
            + self.config.train.gp_weight * penalty
            + self.settings.drift_weight * real_score.pow(2).mean()
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    def _generator_step(self, step: int) -> float:
        critic, _ = self._critic(self.chosen)
        fake = self._fake(step)
        sample = fake.detach().requires_grad_(True)
        scores = critic(sample)
        # Each row's gradient of its own loss -D(x~_i): the batch mean's gradient times B.
        (grads,) = torch.autograd.grad(-scores.sum(), sample)
        if self.privacy is not None:
            clip = self.privacy.clip
            grads = sanitize_sample_gradients(
                grads,
                clip,
                2.0 * clip * self.privacy.noise_multiplier,
                torch_generator(self.seed, Stream.DP_NOISE, step),
            )
        self.g_opt.zero_grad(set_to_none=True)
        fake.backward(grads / fake.shape[0])
        self.g_opt.step()
        if self.average is not None:
            self.average.update(self.generator)
        return float(-scores.detach().mean())
