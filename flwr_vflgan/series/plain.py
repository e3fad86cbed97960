"""VFLGAN-TS in one autograd graph per step: the reference code's loop.

The reference (``code_sine_6/vfl.py``) sums every discriminator's loss into one
objective and calls ``backward()`` once, then does the same for the generators.
:func:`plain_step` does exactly that over the parties' and the server's models (same
batches, noise and dropout masks as the protocol draws), without the protocol's split
into forward and apply and without recomputation. Under ``series.train.loss=wgan_gp`` the
same objective's terms are the critics' and their penalties (the party's and the
server's own loss helpers). The protocol must leave the same
parameters after every step (``tests/unit/series/test_training.py``), and the benchmark
measures the protocol's cost against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.runtime.rng import Stream, torch_generator

from .training import FAKE_PASS, REAL_PASS, SeriesParty, SeriesServer, score_loss


def plain_step(
    parties: Sequence[SeriesParty], server: SeriesServer, step: int, kind: StepKind
) -> float:
    """One step of the reference loop; returns its joint loss."""
    if kind is StepKind.DISCRIMINATOR:
        return _discriminator_step(parties, server, step)
    return _generator_step(parties, server, step)


def _judged(
    party: SeriesParty,
    block: torch.Tensor,
    step: int,
    which: int,
    real: bool,
    head_weight: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A party's features of one pass and its local loss against label ``real``, the
    extractor head (without ``D_s``) weighted by ``head_weight``; dropout masks drawn in
    the protocol's order: features, extractor head, channels."""
    gen = torch_generator(party.private_seed, Stream.DROPOUT, step, which)
    disc = party.discriminator
    features = disc.features(block, gen)
    local = torch.zeros(())
    w = party.series.train.wasserstein
    if not party.series.train.shared_discriminator:
        local = local + head_weight * score_loss(disc.extractor.head(features, gen), real, w)
    for logit in disc.attribute_logits(block, gen):
        local = local + score_loss(logit, real, w)
    return features, local


def _discriminator_step(parties: Sequence[SeriesParty], server: SeriesServer, step: int) -> float:
    total = torch.zeros(())
    f_real, f_fake = [], []
    for party in parties:
        real = party._batch(step)
        with torch.no_grad():
            fake = party._fake(step)
        features, local = _judged(party, real, step, REAL_PASS, True)
        f_real.append(features)
        total = total + local
        features, local = _judged(party, fake, step, FAKE_PASS, False)
        f_fake.append(features)
        total = total + local
        if party.series.train.wasserstein:
            total = total + party.penalties(real, fake, step)
    optimizers = [p.d_opt for p in parties]
    if server.series.train.shared_discriminator:
        total = total + server.critic_loss(step, torch.cat(f_real, 1), torch.cat(f_fake, 1))
        optimizers.append(server.opt)
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    total.backward()
    for opt in optimizers:
        opt.step()
    return float(total.detach())


def _generator_step(parties: Sequence[SeriesParty], server: SeriesServer, step: int) -> float:
    total = torch.zeros(())
    features = []
    for party in parties:
        weight = party.series.train.local_weight
        own, local = _judged(party, party._fake(step), step, FAKE_PASS, True, weight)
        features.append(own)
        total = total + local
    train = server.series.train
    if train.shared_discriminator:
        total = total + train.shared_weight * server.generator_loss(step, torch.cat(features, 1))
    for party in parties:
        party.g_opt.zero_grad(set_to_none=True)
    total.backward()
    for party in parties:
        party.g_opt.step()
        party.generator_updated()
        party.discriminator.zero_grad(set_to_none=True)
    server.discriminator.zero_grad(set_to_none=True)
    return float(total.detach())
