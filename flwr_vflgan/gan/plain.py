"""Single-process trainers: the plain VFLGAN loop and the centralized WGAN-GP reference.

:class:`PlainVFLGAN` does exactly the math of the federated protocol (same models, same
random draws, same losses) in one autograd graph per step, without messages and without
recomputation. It is the benchmark's lower bound and the reference the protocol is
tested against: after the same steps both hold the same parameters.

:class:`CentralizedWGANGP` is paper 000's WGAN_GP baseline on the concatenated table. Its
capacity matches VFLGAN's: the generator's hidden widths and the discriminator's are the
per-party widths times the number of parties, and the critic is a feature network
followed by the shared-discriminator head, so VFLGAN-base's block-diagonal discriminator
is a special case of it. The gradient penalty is the standard one, on the input rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flwr_vflgan.gan.losses import critic_loss, generator_loss
from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.gan.vflgan import (
    PartyTrainer,
    ServerTrainer,
    adam,
    first_part_penalty,
    generator_average,
    make_generator,
)
from flwr_vflgan.nn.models import (
    LocalDiscriminator,
    PartyGenerator,
    SharedDiscriminator,
    SpanLike,
    eval_mode,
    seeded_init,
)
from flwr_vflgan.privacy.config import Mechanism, PrivacyPlan
from flwr_vflgan.privacy.mechanisms import wgan_gp_row_loss
from flwr_vflgan.privacy.updates import PlainUpdate, discriminator_update
from flwr_vflgan.runtime.rng import (
    Stream,
    derive_seed,
    discriminator_batch,
    latent_noise,
    torch_generator,
    uniform_alpha,
)

from .config import GANSettings, ModelConfig


class PlainVFLGAN:
    """All parties and the server in one process, one graph per step.

    With a ``vflgan_gaussian`` privacy plan every party's first-layer gradient is
    clipped and noised exactly as :class:`~flwr_vflgan.gan.vflgan.PartyTrainer` does it
    (same noise draws). Per-sample DP-SGD needs each party's own update and is only
    available through the protocol.
    """

    def __init__(
        self,
        config: GANSettings,
        party_spans: Sequence[Sequence[SpanLike]],
        party_data: Sequence[torch.Tensor],
        shared_seed: int,
        server_seed: int,
        privacy: PrivacyPlan | None = None,
    ) -> None:
        if privacy is not None and privacy.config.mechanism is not Mechanism.VFLGAN_GAUSSIAN:
            raise ValueError(
                f"PlainVFLGAN implements dp.mechanism=vflgan_gaussian only, got "
                f"{privacy.config.mechanism.value}: train DP-SGD through the protocol"
            )
        if config.dp.masked:
            raise ValueError(
                "PlainVFLGAN trains every party in one graph, with no update of its own to "
                "mask: train dp.masked_batch_size through the protocol"
            )
        if config.shares_backbone:
            raise ValueError(
                "PlainVFLGAN is VFLGAN's one-graph loop; train VertiGAN with "
                "gan.exchanges.LocalVFLGAN over party_trainer(...) and step_server(...)"
            )
        if len(party_spans) != len(party_data):
            raise ValueError(f"{len(party_spans)} span lists but {len(party_data)} data blocks")
        rows = {int(d.shape[0]) for d in party_data}
        if len(rows) != 1:
            raise ValueError(f"parties hold different row counts: {sorted(rows)}")
        self.config = config
        self.parties = [
            PartyTrainer(config, spans, data, shared_seed, index, privacy)
            for index, (spans, data) in enumerate(zip(party_spans, party_data, strict=True))
        ]
        self.server = ServerTrainer(config, len(self.parties), server_seed)

    def step(self, step: int, kind: StepKind) -> float:
        """Run one step; returns ``L_{D_s}`` (D step) or ``-E[D_s(f~)]`` (G step)."""
        if kind is StepKind.DISCRIMINATOR:
            return self._discriminator_step(step)
        return self._generator_step(step)

    def _discriminator_step(self, step: int) -> float:
        train = self.config.train
        reals, fakes, f_real, f_fake = [], [], [], []
        for party in self.parties:
            real = party._batch(step)
            with torch.no_grad():
                fake = party._fake(step, real.shape[0])
            reals.append(real)
            fakes.append(fake)
            f_real.append(party.discriminator.features(real))
            f_fake.append(party.discriminator.features(fake))
        real_all, fake_all = torch.cat(f_real, dim=1), torch.cat(f_fake, dim=1)
        alpha = uniform_alpha(self.server.seed, Stream.SERVER_ALPHA, step, real_all.shape[0])
        shared_loss, _ = critic_loss(
            self.server.discriminator, real_all, fake_all, alpha, train.gp_weight
        )
        total = train.shared_d_weight * shared_loss
        for party, real, fake in zip(self.parties, reals, fakes, strict=True):
            if train.first_part_gp:
                alpha_i = uniform_alpha(party.shared_seed, Stream.LOCAL_ALPHA, step, real.shape[0])
                total = total + train.gp_weight * first_part_penalty(
                    party.discriminator, real, fake, alpha_i
                )
        if self.config.has_local_head:
            for party, real, fake, fr, ff in zip(
                self.parties, reals, fakes, f_real, f_fake, strict=True
            ):
                alpha_i = uniform_alpha(party.shared_seed, Stream.LOCAL_ALPHA, step, real.shape[0])
                local, _ = _local_critic_loss(
                    party.discriminator, real, fake, fr, ff, alpha_i, train.gp_weight
                )
                total = total + local
        self.server.opt.zero_grad(set_to_none=True)
        for party in self.parties:
            party.d_opt.zero_grad(set_to_none=True)
        total.backward()
        for party in self.parties:
            # The party's own update privatizes its gradients (a no-op without DP), with
            # the party's noise stream: the same draws as in the protocol.
            if isinstance(party.d_update, PlainUpdate):
                party.d_update.privatize(party.discriminator, step)
        self.server.opt.step()
        for party in self.parties:
            party.d_opt.step()
        return float(shared_loss.detach())

    def _generator_step(self, step: int) -> float:
        train = self.config.train
        f_fake = []
        total = torch.zeros(())
        for party in self.parties:
            features = party.discriminator.features(party._fake(step))
            f_fake.append(features)
            if self.config.has_local_head:
                total = total + generator_loss(party.discriminator.score(features))
        shared_loss = generator_loss(self.server.discriminator(torch.cat(f_fake, dim=1)))
        total = total + train.shared_g_weight * shared_loss
        for party in self.parties:
            party.g_opt.zero_grad(set_to_none=True)
        total.backward()
        for party in self.parties:
            party.g_opt.step()
            party.generator_updated()
            party.discriminator.zero_grad(set_to_none=True)
        self.server.discriminator.zero_grad(set_to_none=True)
        return float(shared_loss.detach())

    def generate(self, n_rows: int, draw: int) -> list[torch.Tensor]:
        """Each party's encoded synthetic rows for evaluation draw ``draw``."""
        return [party.generate(n_rows, draw) for party in self.parties]


def _local_critic_loss(
    disc: LocalDiscriminator,
    real: torch.Tensor,
    fake: torch.Tensor,
    f_real: torch.Tensor,
    f_fake: torch.Tensor,
    alpha: torch.Tensor,
    gp_weight: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    from flwr_vflgan.gan.losses import gradient_penalty

    penalty = gradient_penalty(disc, real, fake, alpha)
    loss = -disc.score(f_real).mean() + disc.score(f_fake).mean() + gp_weight * penalty
    return loss, penalty


class _Critic(nn.Module):
    row_wise_mlp = True  # its two parts, one after the other, row by row

    def __init__(self, features: LocalDiscriminator, head: SharedDiscriminator) -> None:
        super().__init__()
        self.features = features
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features.features(x))


def sample_rows(
    generator: PartyGenerator, config: GANSettings, seed: int, step: int, rows: int | None = None
) -> torch.Tensor:
    """Step ``step``'s synthetic batch of ``generator`` (``train.batch_size`` rows, or the
    first ``rows`` of at least that many), its noise drawn from ``seed``."""
    batch = config.train.batch_size
    size = batch if rows is None else max(rows, batch)
    z = latent_noise(seed, step, size, config.model.latent_dim)
    fake = generator(z, torch_generator(seed, Stream.GUMBEL, step))
    return fake if rows is None else fake[:rows]


def make_critic(model: ModelConfig, width: int, n_parties: int) -> nn.Module:
    """The centralized critic on ``width`` encoded columns: a feature network followed by
    the shared-discriminator head, each ``n_parties`` times VFLGAN's per-party widths."""
    m = n_parties
    features = LocalDiscriminator(
        width,
        [w * m for w in model.disc_hidden],
        model.feature_dim * m,
        local_head=False,
        leaky_slope=model.leaky_slope,
    )
    head = SharedDiscriminator(
        model.feature_dim * m, model.shared_hidden, leaky_slope=model.leaky_slope
    )
    return _Critic(features, head)


class CentralizedWGANGP:
    """WGAN-GP on the concatenated table with VFLGAN's total capacity.

    Parameters
    ----------
    config
        Model and training configuration (the per-party widths).
    spans
        Output spans of the whole encoded table.
    data
        Encoded training rows of the whole table.
    n_parties
        Width multiplier: the number of parties of the VFLGAN run it is compared with.
    seed
        Seed of every random draw.
    privacy
        How the critic's steps are noised (``None``: not at all). ``vflgan_gaussian``
        noises the first layer of the critic, the paper's DP-WGAN_GP.
    """

    def __init__(
        self,
        config: GANSettings,
        spans: Sequence[SpanLike],
        data: torch.Tensor,
        n_parties: int,
        seed: int,
        privacy: PrivacyPlan | None = None,
    ) -> None:
        if n_parties < 1:
            raise ValueError(f"n_parties must be >= 1, got {n_parties}")
        model, train = config.model, config.train
        self.config = config
        self.data = data
        self.seed = seed
        m = n_parties
        with seeded_init(derive_seed(seed, Stream.INIT)):
            self.generator = make_generator(model, spans, m)
            self.critic = make_critic(model, data.shape[1], m)
        self.g_opt = adam(self.generator, train, generator=True)
        self.d_opt = adam(self.critic, train, generator=False)
        self.privacy = privacy
        self.d_update = discriminator_update(privacy, derive_seed(seed, Stream.DP_NOISE))
        self._row_loss = wgan_gp_row_loss(train.gp_weight)
        self.average = generator_average(self.generator, train, data.shape[0])

    @property
    def published(self) -> PartyGenerator:
        """The generator that is evaluated and published (the average, if one is kept)."""
        if self.average is not None:
            return self.average.module  # type: ignore[return-value]
        return self.generator

    def _fake(self, step: int, rows: int | None = None) -> torch.Tensor:
        return sample_rows(self.generator, self.config, self.seed, step, rows)

    def step(self, step: int, kind: StepKind) -> float:
        """One critic or generator update; returns the critic loss or the generator loss."""
        train = self.config.train
        if kind is StepKind.DISCRIMINATOR:
            rows = discriminator_batch(
                self.seed, step, self.data.shape[0], train.batch_size, self.config.dp.poisson
            )
            real = self.data[rows]
            with torch.no_grad():
                fake = self._fake(step, real.shape[0])
            alpha = uniform_alpha(self.seed, Stream.LOCAL_ALPHA, step, real.shape[0])
            return self.d_update(
                self.critic,
                self.d_opt,
                lambda: critic_loss(self.critic, real, fake, alpha, train.gp_weight)[0],
                self._row_loss,
                (real, fake, alpha),
                step,
            )
        loss = generator_loss(self.critic(self._fake(step)))
        self.g_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.g_opt.step()
        if self.average is not None:
            self.average.update(self.generator)
        self.critic.zero_grad(set_to_none=True)
        return float(loss.detach())

    def generate(self, n_rows: int, draw: int) -> torch.Tensor:
        """Encoded synthetic rows of the whole table for evaluation draw ``draw``."""
        z = latent_noise(self.seed, draw, n_rows, self.config.model.latent_dim, Stream.EVAL_NOISE)
        with eval_mode(self.published):
            return self.published(z, torch_generator(self.seed, Stream.EVAL_NOISE, draw))
