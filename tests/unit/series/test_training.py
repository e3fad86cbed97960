"""VFLGAN-TS's split step computes the reference code's joint objective.

The reference (``code_sine_6/vfl.py``) trains every discriminator on one joint loss in
one autograd graph and every generator on another. The protocol splits each step into
a party forward, the server's update and a party apply that recomputes the pass. The
tests below write the joint objective out by hand in one graph and check that the
protocol's parameters after a step equal the one-graph step's.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from flwr_vflgan.config import ModelConfig, TrainConfig, Variant, VFLGANConfig
from flwr_vflgan.data.series import sine_table
from flwr_vflgan.gan.exchanges import LocalVFLGAN
from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.nn.models import module_snapshot
from flwr_vflgan.runtime.blocks import StepBlock
from flwr_vflgan.runtime.rng import Stream, latent_noise, torch_generator, uniform_alpha
from flwr_vflgan.series.config import SeriesModelConfig, SeriesSettings, SeriesTrainConfig
from flwr_vflgan.series.local import build, synthesize, train_local
from flwr_vflgan.series.models import PartyDiscriminator
from flwr_vflgan.series.plain import plain_step
from flwr_vflgan.series.training import FAKE_PASS, REAL_PASS, SeriesParty, SeriesServer

BCE = torch.nn.functional.binary_cross_entropy_with_logits


def _settings(shared: bool = True, loss: str = "bce", first_part_gp: bool = True) -> VFLGANConfig:
    model = SeriesModelConfig(
        noise_dim=4,
        generator_hidden=8,
        attribute_hidden=(6, 4),
        extractor_hidden=(4,),
        shared_hidden=(6, 3),
    )
    return VFLGANConfig(
        variant=Variant.VFLGAN_TS,
        model=ModelConfig(feature_dim=5),
        train=TrainConfig(
            epochs=1,
            batch_size=8,
            n_critic=1,
            betas=(0.5, 0.9),
            gp_weight=7.0,
            first_part_gp=first_part_gp,
        ),
        series=SeriesSettings(model, SeriesTrainConfig(shared_discriminator=shared, loss=loss)),
    )


def _table():
    return sine_table(4, per_class=16, length=20, seed=2)


def _label(x: torch.Tensor, value: float, wasserstein: bool = False) -> torch.Tensor:
    """BCE against ``value``; a Wasserstein critic's -E[x] for real (1), E[x] for fake (0)."""
    if wasserstein:
        return -x.mean() if value == 1.0 else x.mean()
    return BCE(x, torch.full_like(x, value))


def _penalty(critic, real: torch.Tensor, fake: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """WGAN-GP's penalty, written out: the input gradient's norm pushed to 1."""
    x = alpha * real + (1.0 - alpha) * fake
    if not x.requires_grad:
        x = x.detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(x).sum(), x, create_graph=True)
    return ((grad.norm(dim=1) - 1.0) ** 2).mean()


def _party_penalties(party: SeriesParty, real, fake, step: int) -> torch.Tensor:
    """Every penalty of a party's critics, masks drawn channels first, then the extractor."""
    disc, train = party.discriminator, party.config.train
    alpha = uniform_alpha(party.shared_seed, Stream.LOCAL_ALPHA, step, real.shape[0])
    gen = torch_generator(party.private_seed, Stream.DROPOUT, step, 2)
    total = torch.zeros(())
    width = disc.length
    for c, critic in enumerate(disc.attributes):
        cols = slice(c * width, (c + 1) * width)
        total = total + _penalty(lambda x, d=critic: d(x, gen), real[:, cols], fake[:, cols], alpha)
    if not party.series.train.shared_discriminator:
        total = total + _penalty(lambda x: disc.extractor(x, gen), real, fake, alpha)
    elif train.first_part_gp:
        first = disc.extractor.first_layer
        total = total + _penalty(lambda x: _first_part_sum(disc, x, gen, first), real, fake, alpha)
    return train.gp_weight * total


def _first_part_sum(disc, x, gen, first) -> torch.Tensor:
    """sum_k E^1(x)_k: the extractor's first layer, LeakyReLU and dropout, by hand."""
    h = torch.nn.functional.leaky_relu(first(x), disc.extractor.slope)
    keep = torch.rand(h.shape, generator=gen) >= disc.extractor.dropout
    return (h * keep / (1.0 - disc.extractor.dropout)).sum(dim=1, keepdim=True)


def _joint_discriminator_step(parties: list[SeriesParty], server: SeriesServer, step: int) -> None:
    """The reference's discriminator step, written out in one graph."""
    total = torch.zeros(())
    f_real, f_fake = [], []
    w = server.series.train.loss == "wgan_gp"
    for party in parties:
        disc = party.discriminator
        real = party._batch(step)
        with torch.no_grad():
            fake = party._fake(step)
        for block, which, label, out in (
            (real, REAL_PASS, 1.0, f_real),
            (fake, FAKE_PASS, 0.0, f_fake),
        ):
            gen = torch_generator(party.private_seed, Stream.DROPOUT, step, which)
            out.append(disc.features(block, gen))
            if not party.series.train.shared_discriminator:
                total = total + _label(disc.extractor.head(out[-1], gen), label, w)
            for logit in disc.attribute_logits(block, gen):
                total = total + _label(logit, label, w)
        if w:
            total = total + _party_penalties(party, real, fake, step)
    if server.series.train.shared_discriminator:
        gen = torch_generator(server.seed, Stream.DROPOUT, step)
        real_f, fake_f = torch.cat(f_real, 1), torch.cat(f_fake, 1)
        total = total + _label(server.discriminator(real_f, gen), 1.0, w)
        total = total + _label(server.discriminator(fake_f, gen), 0.0, w)
        if w:
            alpha = uniform_alpha(server.seed, Stream.SERVER_ALPHA, step, real_f.shape[0])
            masks = torch_generator(server.seed, Stream.DROPOUT, step, 2)
            penalty = _penalty(lambda x: server.discriminator(x, masks), real_f, fake_f, alpha)
            total = total + server.config.train.gp_weight * penalty
    optimizers = [p.d_opt for p in parties] + [server.opt]
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    total.backward()
    for opt in optimizers:
        if any(p.grad is not None for g in opt.param_groups for p in g["params"]):
            opt.step()


def _joint_generator_step(parties: list[SeriesParty], server: SeriesServer, step: int) -> None:
    """The reference's generator step, written out in one graph."""
    train = server.series.train
    w = train.loss == "wgan_gp"
    total = torch.zeros(())
    features = []
    for party in parties:
        fake = party._fake(step)
        gen = torch_generator(party.private_seed, Stream.DROPOUT, step, FAKE_PASS)
        disc = party.discriminator
        features.append(disc.features(fake, gen))
        if not train.shared_discriminator:
            head = disc.extractor.head(features[-1], gen)
            total = total + train.local_weight * _label(head, 1.0, w)
        for logit in disc.attribute_logits(fake, gen):
            total = total + _label(logit, 1.0, w)
    if train.shared_discriminator:
        gen = torch_generator(server.seed, Stream.DROPOUT, step, 1)
        total = total + train.shared_weight * _label(
            server.discriminator(torch.cat(features, 1), gen), 1.0, w
        )
    for party in parties:
        party.g_opt.zero_grad(set_to_none=True)
    total.backward()
    for party in parties:
        party.g_opt.step()


def _assert_same_parameters(a: list[SeriesParty], b: list[SeriesParty]) -> None:
    for pa, pb in zip(a, b, strict=True):
        for module in ("generator", "discriminator"):
            for (name, x), (_, y) in zip(
                getattr(pa, module).named_parameters(),
                getattr(pb, module).named_parameters(),
                strict=True,
            ):
                torch.testing.assert_close(x, y, atol=1e-6, rtol=1e-5, msg=f"{module}.{name}")


LOSSES = [(True, "bce", True), (False, "bce", True), (True, "wgan_gp", True)]
LOSSES += [(False, "wgan_gp", True), (True, "wgan_gp", False)]


@pytest.mark.parametrize(("shared", "loss", "first_part_gp"), LOSSES)
def test_the_split_steps_equal_the_joint_objective(shared, loss, first_part_gp):
    settings = _settings(shared, loss, first_part_gp)
    parties, server, schedule = build(settings, _table(), 11, 11 + 100)
    assert schedule.kind(0) is StepKind.DISCRIMINATOR and schedule.kind(1) is StepKind.GENERATOR
    ref_parties, ref_server = copy.deepcopy(parties), copy.deepcopy(server)
    local = LocalVFLGAN(parties, server, schedule, 1)
    for step in range(4):  # D, G, D, G: the later steps start from trained parameters
        local.run_block(StepBlock(step, 1))
        if schedule.kind(step) is StepKind.DISCRIMINATOR:
            _joint_discriminator_step(ref_parties, ref_server, step)
        else:
            _joint_generator_step(ref_parties, ref_server, step)
        _assert_same_parameters(parties, ref_parties)
    if shared:
        for x, y in zip(
            server.discriminator.parameters(), ref_server.discriminator.parameters(), strict=True
        ):
            torch.testing.assert_close(x, y, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("shared", "loss", "first_part_gp"), LOSSES)
def test_the_plain_loop_is_the_joint_objective(shared, loss, first_part_gp):
    settings = _settings(shared, loss, first_part_gp)
    parties, server, schedule = build(settings, _table(), 12, 12 + 100)
    ref_parties, ref_server = copy.deepcopy(parties), copy.deepcopy(server)
    for step in range(4):
        kind = schedule.kind(step)
        plain_step(parties, server, step, kind)
        if kind is StepKind.DISCRIMINATOR:
            _joint_discriminator_step(ref_parties, ref_server, step)
        else:
            _joint_generator_step(ref_parties, ref_server, step)
        _assert_same_parameters(parties, ref_parties)
    for x, y in zip(
        server.discriminator.parameters(), ref_server.discriminator.parameters(), strict=True
    ):
        torch.testing.assert_close(x, y, atol=1e-6, rtol=1e-5)


def test_a_step_changes_what_it_should_and_nothing_else():
    parties, server, schedule = build(_settings(), _table(), 1, 1 + 100)
    local = LocalVFLGAN(parties, server, schedule, 1)
    g_before = [p.generator_snapshot() for p in parties]
    d_before = copy.deepcopy(parties[0].discriminator.state_dict())
    local.run_block(StepBlock(0, 1))  # a discriminator step
    assert all((p.generator_snapshot() == g).all() for p, g in zip(parties, g_before, strict=True))
    after = parties[0].discriminator.state_dict()
    assert any(not torch.equal(d_before[k], after[k]) for k in after)
    local.run_block(StepBlock(1, 1))  # a generator step
    assert all((p.generator_snapshot() != g).any() for p, g in zip(parties, g_before, strict=True))


@pytest.mark.parametrize("runner", ["protocol", "plain"])
def test_the_published_generators_are_the_average_of_every_generator_step(runner):
    """train.generator_average=H: after each generator step the party's average moves
    to ``decay * average + (1 - decay) * generator``, with the decay whose weight halves
    every H epochs of generator steps; generation, snapshots and publication read the
    average, training reads the generators."""
    base = _settings()
    settings = dataclasses.replace(
        base, train=dataclasses.replace(base.train, generator_average=0.5)
    )
    table = _table()
    parties, server, schedule = build(settings, table, 7, 7 + 100)
    g_steps_per_epoch = table.n_series // 8  # batch 8, n_critic 1
    decay = 0.5 ** (1.0 / (0.5 * g_steps_per_epoch))
    expected = [p.generator_snapshot().astype(np.float64) for p in parties]
    local = LocalVFLGAN(parties, server, schedule, 1)
    for step in range(6):
        if runner == "protocol":
            local.run_block(StepBlock(step, 1))
        else:
            plain_step(parties, server, step, schedule.kind(step))
        if schedule.kind(step) is StepKind.GENERATOR:
            for i, party in enumerate(parties):
                trained = module_snapshot(party.generator).astype(np.float64)
                expected[i] = decay * expected[i] + (1 - decay) * trained
    for party, average in zip(parties, expected, strict=True):
        assert party.published is not party.generator
        np.testing.assert_allclose(party.generator_snapshot(), average, rtol=1e-5, atol=1e-6)
        assert not np.allclose(module_snapshot(party.generator), average, atol=1e-6)
        z = latent_noise(party.shared_seed, 3, 4, party.series.model.noise_dim, Stream.EVAL_NOISE)
        with torch.no_grad():
            torch.testing.assert_close(party.generate(4, draw=3), party.published(z))
    # The average is part of the party's flat state, which checkpoints and messages carry.
    plain_party = build(base, table, 7, 7 + 100)[0][0]
    averaged = sum(p.numel() for p in parties[0].average.module.parameters())
    assert parties[0].state.size == plain_party.state.size + averaged


def test_generator_average_is_refused_where_nothing_reads_it():
    with pytest.raises(ValueError, match="and vflgan_ts; vtgan does not use it"):
        VFLGANConfig(variant=Variant.VTGAN, train=TrainConfig(generator_average=1.0))


def test_without_the_shared_discriminator_the_server_sends_zeros_and_trains_nothing():
    settings = _settings(shared=False)
    server = SeriesServer(settings, 2, seed=3)
    before = [p.detach().clone() for p in server.discriminator.parameters()]
    feats = [torch.randn(8, 5), torch.randn(8, 5)]
    g_real, g_fake, _ = server.discriminator_step(0, feats, feats)
    assert all(float(g.abs().sum()) == 0.0 for g in (*g_real, *g_fake))
    grads, _ = server.generator_step(feats, 1)
    assert all(float(g.abs().sum()) == 0.0 for g in grads)
    assert all(
        torch.equal(a, b) for a, b in zip(before, server.discriminator.parameters(), strict=True)
    )


def test_the_server_returns_each_partys_slice_of_the_gradient():
    server = SeriesServer(_settings(), 3, seed=4)
    feats = [torch.randn(8, 5, requires_grad=False) for _ in range(3)]
    grads, _ = server.generator_step(feats, 1)
    assert [tuple(g.shape) for g in grads] == [(8, 5)] * 3
    # The shared loss reads every party's features, so every slice is non-zero.
    assert all(float(g.abs().sum()) > 0 for g in grads)


def test_every_party_reads_the_same_noise_so_rows_are_whole_series():
    parties, _, _ = build(_settings(), _table(), 5, 5 + 100)
    z_a = parties[0].generate(4, draw=9)
    again = parties[0].generate(4, draw=9)
    torch.testing.assert_close(z_a, again)
    other = parties[0].generate(4, draw=10)
    assert not torch.equal(z_a, other)
    # Two parties with identical generators would write identical rows from one draw.
    parties[1].load_generator_snapshot(parties[0].generator_snapshot())
    torch.testing.assert_close(parties[1].generate(4, draw=9), z_a)


def test_the_first_layers_are_every_channels_and_the_extractors():
    disc = PartyDiscriminator(_settings().series.model, 3, 20, 5)
    layers = list(disc.first_layers())
    assert len(layers) == 4
    assert [layer.in_features for layer in layers] == [20, 20, 20, 60]


def test_a_party_refuses_a_block_of_the_wrong_width():
    with pytest.raises(ValueError, match=r"float32 \(series, 2 \* 20\)"):
        SeriesParty(_settings(), 2, 20, torch.zeros(8, 30), 0, 0)


def test_a_short_run_publishes_series_in_table_order_with_history():
    table = _table()
    calls = []

    def evaluate(synthetic):
        calls.append(synthetic.shape)
        return {"mean": float(synthetic.mean())}

    result = train_local(_settings(), table, 0, 100, evaluate=evaluate, eval_every=1)
    assert result.synthetic.shape == table.values.shape
    assert result.steps == 8  # 32 series // 8 = 4 D steps + 4 G steps
    assert [h["epoch"] for h in result.history] == [1] and calls == [(32, 4, 20)]
    parties, _, _ = build(_settings(), table, 0, 0 + 100)
    fresh = synthesize(parties, table, 5, draw=0)
    # Channel 2 belongs to party 1 (channels 2, 3): its first channel.
    torch.testing.assert_close(torch.from_numpy(fresh[:, 2, :]), parties[1].generate(5, 0)[:, :20])


def test_the_dp_mechanism_noises_every_first_layer_with_noise_of_its_shape():
    """Paper 003, Theorem 1: each attribute discriminator's and the extractor's first
    layer is clipped to C and gets N(0, (2 C sigma)^2) on every coordinate (the
    reference's DP scripts add one scalar draw instead); later layers are untouched."""
    from flwr_vflgan.privacy.mechanisms import FirstLayerGaussian, privatize_first_layers

    disc = PartyDiscriminator(_settings().series.model, 3, 20, 5)
    for p in disc.parameters():
        p.grad = torch.zeros_like(p)
    later = disc.attributes[0].out.weight
    clip, sigma = 0.5, 3.0
    privatize_first_layers(
        [disc], FirstLayerGaussian(clip, sigma), torch.Generator().manual_seed(0)
    )
    noise = [
        torch.cat([layer.weight.grad.flatten(), layer.bias.grad.flatten()])
        for layer in disc.first_layers()
    ]
    assert len(noise) == 4
    for values in noise:
        assert values.unique().numel() == values.numel()  # full shape, not one draw
        assert float(values.std()) == pytest.approx(2 * clip * sigma, rel=0.25)
    everything = torch.cat(noise)
    assert float(everything.std()) == pytest.approx(2 * clip * sigma, rel=0.05)
    assert float(later.grad.abs().sum()) == 0.0


def test_a_large_first_layer_gradient_is_clipped_to_c_on_its_own():
    from flwr_vflgan.privacy.mechanisms import FirstLayerGaussian, privatize_first_layers

    disc = PartyDiscriminator(_settings().series.model, 2, 20, 5)
    for p in disc.parameters():
        p.grad = torch.full_like(p, 10.0)
    privatize_first_layers([disc], FirstLayerGaussian(0.5, 0.0), torch.Generator().manual_seed(0))
    for layer in disc.first_layers():
        norm = torch.cat([layer.weight.grad.flatten(), layer.bias.grad.flatten()]).norm()
        assert float(norm) == pytest.approx(0.5, rel=1e-5)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("shared", [True, False])
def test_an_apply_continues_its_forwards_graph_only_when_exact_and_changes_nothing(k, shared):
    """A party in memory keeps the graph of the first step forwarded since its last
    apply and continues it in that step's apply instead of recomputing the pass: the
    same parameters bit for bit as a party that recomputes every pass (its kept passes
    dropped), with one generator pass fewer per kept step; a load of the parameters
    between forward and apply (a restored party) makes it recompute."""
    settings = _settings(shared)
    kept_run, _, schedule = build(settings, _table(), 4, 104)
    recomputed, recomputing_server, _ = build(settings, _table(), 4, 104)
    kept_server = build(settings, _table(), 4, 104)[1]
    calls = {"kept": 0, "recomputed": 0}

    def counting(party: SeriesParty, name: str) -> None:
        original = party._fake

        def fake(step: int) -> torch.Tensor:
            calls[name] += 1
            return original(step)

        party._fake = fake  # type: ignore[method-assign]

    for party in kept_run:
        counting(party, "kept")
    for party in recomputed:
        counting(party, "recomputed")
        original_forward = party.forward

        def forward(step, kind, party=party, original_forward=original_forward):
            out = original_forward(step, kind)
            party._kept = None  # as a party restored into a new process would be
            return out

        party.forward = forward  # type: ignore[method-assign]
    a = LocalVFLGAN(kept_run, kept_server, schedule, k)
    b = LocalVFLGAN(recomputed, recomputing_server, schedule, k)
    for block in list(a.blocks())[:3]:
        a.run_block(block)
        b.run_block(block)
        for pa, pb in zip(kept_run, recomputed, strict=True):
            for module in ("generator", "discriminator"):
                for x, y in zip(
                    getattr(pa, module).parameters(), getattr(pb, module).parameters(), strict=True
                ):
                    assert torch.equal(x, y)
    steps = sum(block.count for block in list(a.blocks())[:3])
    blocks = 3
    # Every step's forward draws the fake batch; an apply draws it again unless kept.
    assert calls["recomputed"] == 2 * 2 * steps
    assert calls["kept"] == 2 * (2 * steps - blocks)
    # A load between forward and apply invalidates the kept passes.
    party = kept_run[0]
    party.forward(6, schedule.kind(6))
    party.state.load(party.state.to_numpy(), party.state.optimizer_steps())
    assert party._take_kept(6) == {}
    party.forward(6, schedule.kind(6))  # ... and so does a generator snapshot loaded
    party.load_generator_snapshot(party.generator_snapshot())
    assert party._take_kept(6) == {}
    party.forward(6, schedule.kind(6))  # ... but not reading the state
    party.state.to_numpy()
    assert set(party._take_kept(6)) == {FAKE_PASS, REAL_PASS}
