"""The split protocol computes exactly the gradients of the unsplit model.

Each test runs one VT-GAN step through the server and client objects (the values the
Flower messages carry) with the optimizer steps disabled, then builds the same model as
one autograd graph (the centralized computation with the same random draws) and checks
that every parameter of every part received the same gradient. Partition G^1_1 D^1_1
puts blocks on both sides, with BatchNorm in the generators and dropout in the
discriminators, so every kind of layer crosses the split.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from flwr_vflgan.config import TrainConfig
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.schema import infer_schema
from flwr_vflgan.gan.losses import critic_loss, generator_loss
from flwr_vflgan.nn.models import frozen_batchnorm_stats
from flwr_vflgan.runtime.rng import Stream, torch_generator, uniform_alpha
from flwr_vflgan.vtgan.blocks import sparse_rows
from flwr_vflgan.vtgan.conditions import conditional_loss
from flwr_vflgan.vtgan.config import VTGANSettings
from flwr_vflgan.vtgan.party import VTGANParty
from flwr_vflgan.vtgan.server import ClientShape, VTGANServer

BATCH = 16


def _parties(
    settings: VTGANSettings,
) -> tuple[VTGANServer, list[VTGANParty]]:
    rng = np.random.default_rng(0)
    n = 120
    a = rng.choice(["x", "y", "z"], size=n)
    frames = [
        pd.DataFrame({"a": a, "u": rng.normal(size=n) + (a == "x") * 3}),
        pd.DataFrame({"b": rng.choice(["p", "q"], size=n), "v": rng.normal(size=n)}),
    ]
    train = TrainConfig(batch_size=BATCH, n_critic=2)
    encoders = [ModeSpecificEncoder(max_modes=3, seed=0).fit(f, infer_schema(f)) for f in frames]
    encoded = [
        e.transform(f, np.random.default_rng(1)) for e, f in zip(encoders, frames, strict=True)
    ]
    shapes = [
        ClientShape(2, x.shape[1], sum(s.width for s in e.discrete_spans))
        for e, x in zip(encoders, encoded, strict=True)
    ]
    server = VTGANServer(settings, train, shapes, seed=5)
    parties = [
        VTGANParty(settings, train, x, e.spans, e.discrete_spans, server.layouts[i], 77, i)
        for i, (e, x) in enumerate(zip(encoders, encoded, strict=True))
    ]
    for module_owner in [server, *parties]:
        module_owner.g_opt.step = lambda *a, **k: None  # type: ignore[method-assign]
        module_owner.d_opt.step = lambda *a, **k: None  # type: ignore[method-assign]
    return server, parties


def _grads(module: torch.nn.Module) -> list[torch.Tensor]:
    return [
        p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in module.parameters()
    ]


def _zero(*modules: torch.nn.Module) -> None:
    for module in modules:
        module.zero_grad(set_to_none=True)


SETTINGS = VTGANSettings(
    g_server_blocks=1,
    g_client_blocks=1,
    d_server_blocks=1,
    d_client_blocks=1,
    latent_dim=8,
    generator_width=12,
    discriminator_width=10,
)


@pytest.mark.parametrize("settings", [SETTINGS, VTGANSettings(latent_dim=8, generator_width=12)])
def test_discriminator_step_matches_the_unsplit_graph(settings: VTGANSettings) -> None:
    server, parties = _parties(settings)
    step = 3
    client = server.choose_client(step)
    condition = parties[client].condition(step, BATCH)
    cond_fake = server.full_condition(client, condition.cond)
    cond_real = server.full_condition(client, condition.cond_real)
    chunks = server.chunks(step, cond_fake, keep_graph=False)
    fake = [p.forward_fake(step, c) for p, c in zip(parties, chunks, strict=True)]
    real = [p.forward_real(step, i == client) for i, p in enumerate(parties)]
    rows = real[client].rows
    assert rows is not None
    grads_real, grads_fake, _ = server.discriminator_step(
        step, client, [r.features for r in real], rows, fake, cond_real, cond_fake
    )
    # The non-chosen client's real gradient is zero outside the selected rows.
    other = 1 - client
    nonzero = torch.nonzero(grads_real[other].abs().sum(dim=1) > 0).flatten().numpy()
    assert set(nonzero) <= set(rows.tolist())
    for i, party in enumerate(parties):
        if i == client:
            party.apply_discriminator(step, chunks[i], True, grads_real[i], grads_fake[i])
        else:  # what travels: the selected rows' gradients and their positions
            selected, values = sparse_rows(grads_real[i])
            assert selected.tolist() == sorted(set(rows.tolist()))
            party.apply_discriminator(step, chunks[i], False, values, grads_fake[i], selected)
    split = [_grads(server.discriminator)] + [_grads(p.discriminator) for p in parties]

    _zero(server.discriminator, *(p.discriminator for p in parties))
    f_real, f_fake = [], []
    for i, party in enumerate(parties):
        with torch.no_grad(), frozen_batchnorm_stats(party.generator):
            x_fake = party._fake(step, chunks[i])[1]
        f_fake.append(party._disc(x_fake, step, 1))
        if i == client:
            f_real.append(party._disc(party._rows(rows), step, 0))
        else:
            everything = party.encoded[torch.from_numpy(party.order)]
            f_real.append(party._disc(everything, step, 0)[torch.from_numpy(rows)])
    disc = server.discriminator
    real_in = disc.inputs(torch.cat(f_real, dim=1), cond_real)
    fake_in = disc.inputs(torch.cat(f_fake, dim=1), cond_fake)
    dropout = torch_generator(server.seed, Stream.DROPOUT, step)
    alpha = uniform_alpha(server.seed, Stream.SERVER_ALPHA, step, BATCH)
    loss, _ = critic_loss(
        lambda x: disc.critic(x, dropout), real_in, fake_in, alpha, server.train.gp_weight
    )
    loss.backward()
    joint = [_grads(server.discriminator)] + [_grads(p.discriminator) for p in parties]
    for part_split, part_joint in zip(split, joint, strict=True):
        for a, b in zip(part_split, part_joint, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert any(g.abs().sum() > 0 for g in joint[1] + joint[2])


@pytest.mark.parametrize("settings", [SETTINGS, VTGANSettings(latent_dim=8, generator_width=12)])
def test_generator_step_matches_the_unsplit_graph(settings: VTGANSettings) -> None:
    server, parties = _parties(settings)
    step = 2
    client = server.choose_client(step)
    condition = parties[client].condition(step, BATCH)
    cond = server.full_condition(client, condition.cond)
    chunks = server.chunks(step, cond, keep_graph=True)
    fake = [p.forward_fake(step, c) for p, c in zip(parties, chunks, strict=True)]
    grads, _ = server.generator_loss(step, fake, cond)
    chunk_grads = [
        p.apply_generator(step, chunks[i], i == client, grads[i])[0] for i, p in enumerate(parties)
    ]
    server.generator_update(chunk_grads)
    split = [_grads(server.generator)] + [_grads(p.generator) for p in parties]

    _zero(server.generator, *(p.generator for p in parties))
    z = torch.randn(
        BATCH, settings.latent_dim, generator=torch_generator(server.seed, Stream.NOISE, step)
    )
    with frozen_batchnorm_stats(server.generator):
        out = server.generator(z, cond)
    pieces = torch.split(out, server.chunk_widths, dim=1)
    features, cond_term = [], torch.zeros(())
    for i, party in enumerate(parties):
        with frozen_batchnorm_stats(party.generator):
            logits, x_fake = party._fake(step, pieces[i])
        features.append(party._disc(x_fake, step, 1))
        if i == client:
            cond_term = conditional_loss(
                logits,
                party.discrete_spans,
                torch.from_numpy(condition.cond),
                torch.from_numpy(condition.mask),
            )
    disc = server.discriminator
    scores = disc.critic(
        disc.inputs(torch.cat(features, dim=1), cond),
        torch_generator(server.seed, Stream.DROPOUT, step),
    )
    (generator_loss(scores) + cond_term).backward()
    joint = [_grads(server.generator)] + [_grads(p.generator) for p in parties]
    for part_split, part_joint in zip(split, joint, strict=True):
        for a, b in zip(part_split, part_joint, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert all(any(g.abs().sum() > 0 for g in part) for part in joint)
