"""VFLGAN's split party/server computations (paper 000, Section 3.3, eqs. 8-19).

The central check drives :class:`PartyTrainer` and :class:`ServerTrainer` exactly as the
Flower client and strategy do (forward -> server step -> apply) and compares the result
with :class:`PlainVFLGAN`, which computes the same objective in one autograd graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import torch
from flwr.app import RecordDict
from torch import nn

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.plain import PlainVFLGAN
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.gan.vflgan import PartyTrainer, ServerTrainer
from flwr_vflgan.nn.models import SharedDiscriminator
from flwr_vflgan.runtime.blocks import StepTensors
from flwr_vflgan.runtime.codec import get_tensor, tensors_to_record
from flwr_vflgan.runtime.rng import Stream, torch_generator

N_ROWS = 40
SHARED_SEED = 11
SERVER_SEED = 22


def _flat(trainer: PartyTrainer | ServerTrainer) -> np.ndarray:
    return trainer.state.to_numpy()


def _module_state(module: nn.Module) -> list[torch.Tensor]:
    return [t.detach().clone() for t in [*module.parameters(), *module.buffers()]]


def _same(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _server_step(server: ServerTrainer, step: int, kind: StepKind, outs, n_parties: int):
    if kind is StepKind.DISCRIMINATOR:
        grads_real, grads_fake, _ = server.discriminator_step(
            step, [o.real for o in outs], [o.fake for o in outs]
        )
        return grads_real, grads_fake
    grads_fake, _ = server.generator_step([o.fake for o in outs])
    return [None] * n_parties, grads_fake


def _drive_protocol(
    parties: Sequence[PartyTrainer], server: ServerTrainer, schedule: Schedule
) -> None:
    for step in range(schedule.total_steps):
        kind = schedule.kind(step)
        outs = [party.forward(step, kind) for party in parties]
        grads_real, grads_fake = _server_step(server, step, kind, outs, len(parties))
        for party, g_real, g_fake in zip(parties, grads_real, grads_fake, strict=True):
            party.apply(step, kind, g_real, g_fake)


def _assert_same_state(protocol: Sequence[np.ndarray], plain: Sequence[np.ndarray]) -> None:
    for got, want in zip(protocol, plain, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


# -- the shared discriminator's gradients ----------------------------------------------
def _smooth(discriminator: SharedDiscriminator) -> None:
    """Swap LeakyReLU for tanh, keeping the parameters.

    A piecewise-linear critic's input gradient is piecewise constant, so its gradient
    penalty does not depend on the features at all; a smooth critic makes the test below
    sensitive to whether the penalty's dependence on the features is propagated.
    """
    net = discriminator.net
    for index, layer in enumerate(net):
        if isinstance(layer, nn.LeakyReLU):
            net[index] = nn.Tanh()


@pytest.mark.parametrize("smooth", [False, True], ids=["leaky_relu", "tanh"])
def test_shared_discriminator_feature_gradients_match_autograd(make_config, smooth):
    config = make_config(shared_d_weight=2.5, gp_weight=7.0)
    n_parties, step, seed = 3, 5, 3
    server = ServerTrainer(config, n_parties, seed)
    reference = ServerTrainer(config, n_parties, seed)  # same init, never stepped
    if smooth:
        _smooth(server.discriminator)
        _smooth(reference.discriminator)
    gen = torch.Generator().manual_seed(1)
    real = [torch.randn(8, 4, generator=gen) for _ in range(n_parties)]
    fake = [torch.randn(8, 4, generator=gen) for _ in range(n_parties)]

    grads_real, grads_fake, loss = server.discriminator_step(step, real, fake)

    d = reference.discriminator
    f_real = torch.cat(real, dim=1).requires_grad_(True)
    f_fake = torch.cat(fake, dim=1).requires_grad_(True)
    alpha = torch.rand(8, 1, generator=torch_generator(seed, Stream.SERVER_ALPHA, step))
    x_hat = alpha * f_real + (1 - alpha) * f_fake
    (grad_x,) = torch.autograd.grad(d(x_hat).sum(), x_hat, create_graph=True)
    penalty = ((grad_x.norm(dim=1) - 1) ** 2).mean()
    wasserstein = -d(f_real).mean() + d(f_fake).mean()
    want_real, want_fake = torch.autograd.grad(
        2.5 * (wasserstein + 7.0 * penalty), [f_real, f_fake], retain_graph=True
    )

    assert loss == pytest.approx((wasserstein + 7.0 * penalty).item(), rel=1e-6)
    assert [g.shape for g in grads_real] == [(8, 4)] * n_parties
    torch.testing.assert_close(torch.cat(grads_real, dim=1), want_real, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(torch.cat(grads_fake, dim=1), want_fake, rtol=1e-5, atol=1e-7)
    if smooth:
        # The penalty's dependence on the features is a visible part of the gradient.
        no_gp_real, _ = torch.autograd.grad(2.5 * wasserstein, [f_real, f_fake])
        assert (no_gp_real - want_real).abs().max() > 1e-3
    # D_s itself was updated (one Adam step), the reference was not.
    assert not torch.equal(torch.from_numpy(_flat(server)), torch.from_numpy(_flat(reference)))
    assert server.state.optimizer_steps() == [1]


def test_shared_generator_gradients_match_autograd_and_leave_ds_unchanged(make_config):
    config = make_config(shared_g_weight=1.5)
    server = ServerTrainer(config, 2, seed=4)
    reference = ServerTrainer(config, 2, seed=4)
    before = _flat(server)
    gen = torch.Generator().manual_seed(2)
    fake = [torch.randn(8, 4, generator=gen) for _ in range(2)]

    grads, loss = server.generator_step(fake)

    f_fake = torch.cat(fake, dim=1).requires_grad_(True)
    scores = reference.discriminator(f_fake)
    (want,) = torch.autograd.grad(-1.5 * scores.mean(), f_fake)
    assert loss == pytest.approx(-scores.mean().item(), rel=1e-6)
    torch.testing.assert_close(torch.cat(grads, dim=1), want)
    np.testing.assert_array_equal(_flat(server), before)
    assert all(p.grad is None for p in server.discriminator.parameters())
    assert server.state.optimizer_steps() == [0]


# -- protocol equivalence --------------------------------------------------------------
@pytest.mark.parametrize("first_part_gp", [False, True], ids=["paper_gp", "first_part_gp"])
@pytest.mark.parametrize("n_parties", [2, 3])
@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base"])
def test_protocol_matches_plain_vflgan(
    make_config, party_spans, party_tables, variant, n_parties, first_part_gp
):
    config = make_config(
        variant,
        shared_d_weight=2.5,
        shared_g_weight=1.5,
        gp_weight=10.0,
        first_part_gp=first_part_gp,
    )
    spans, tables = party_spans[:n_parties], party_tables(n_parties, N_ROWS)
    schedule = Schedule(N_ROWS, 8, 2, epochs=5, max_steps=30)  # 7 steps per epoch
    parties = [
        PartyTrainer(config, s, d, SHARED_SEED, i)
        for i, (s, d) in enumerate(zip(spans, tables, strict=True))
    ]
    server = ServerTrainer(config, n_parties, SERVER_SEED)
    plain = PlainVFLGAN(config, spans, tables, SHARED_SEED, SERVER_SEED)
    initial = [_flat(p) for p in parties]

    _drive_protocol(parties, server, schedule)
    for step in range(schedule.total_steps):
        plain.step(step, schedule.kind(step))

    _assert_same_state([_flat(p) for p in parties], [_flat(p) for p in plain.parties])
    _assert_same_state([_flat(server)], [_flat(plain.server)])
    # 30 steps = 4 epochs of d,d,g,d,d,g,d (2 G steps each) + 2 D steps.
    n_g = sum(schedule.kind(t) is StepKind.GENERATOR for t in range(30))
    assert n_g == 8
    for party, ref in zip(parties, plain.parties, strict=True):
        assert party.state.optimizer_steps() == [n_g, 30 - n_g] == ref.state.optimizer_steps()
    assert server.state.optimizer_steps() == [30 - n_g]
    # Training did move every party's models.
    assert all(not np.array_equal(a, _flat(p)) for a, p in zip(initial, parties, strict=True))


def test_protocol_matches_plain_vflgan_with_a_deeper_local_head(
    make_config, party_spans, party_tables
):
    """VFLGAN's job has a hidden layer in D_i^2 (model.local_head_hidden): the head trains
    at its party, in the protocol exactly as in the one-graph loop."""
    from dataclasses import replace

    base = make_config("vflgan", shared_d_weight=2.5, first_part_gp=True)
    config = replace(base, model=replace(base.model, local_head_hidden=(5,)))
    spans, tables = party_spans[:2], party_tables(2, N_ROWS, seed=3)
    schedule = Schedule(N_ROWS, 8, 2, epochs=5, max_steps=20)
    parties = [
        PartyTrainer(config, s, d, SHARED_SEED, i)
        for i, (s, d) in enumerate(zip(spans, tables, strict=True))
    ]
    heads = [
        [p.detach().clone() for p in party.discriminator.second.parameters()] for party in parties
    ]
    assert [len(h) for h in heads] == [4, 4]  # Linear(feature, 5) and Linear(5, 1)
    server = ServerTrainer(config, 2, SERVER_SEED)
    plain = PlainVFLGAN(config, spans, tables, SHARED_SEED, SERVER_SEED)

    _drive_protocol(parties, server, schedule)
    for step in range(schedule.total_steps):
        plain.step(step, schedule.kind(step))

    _assert_same_state([_flat(p) for p in parties], [_flat(p) for p in plain.parties])
    _assert_same_state([_flat(server)], [_flat(plain.server)])
    for party, before in zip(parties, heads, strict=True):
        after = list(party.discriminator.second.parameters())
        # Both weight matrices trained. (A WGAN loss gives the score's bias no gradient, +1
        # per fake row and -1 per real one, nor the hidden biases where no row changes the
        # LeakyReLU's side.)
        moved = [not torch.equal(a, b) for a, b in zip(after, before, strict=True)]
        assert moved[0] and moved[2]


def _relay_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """Send a tensor through a Flower ArrayRecord and validate it on arrival."""
    content = RecordDict({"msg": tensors_to_record({"x": tensor})})
    return get_tensor(content, "msg", "x", (8, 4))


def _relay(out: StepTensors) -> StepTensors:
    real = None if out.real is None else _relay_tensor(out.real)
    return StepTensors(real=real, fake=_relay_tensor(out.fake))


def test_protocol_with_a_fresh_party_process_per_message(make_config, party_spans, party_tables):
    """As in a deployment: every message rebuilds the party and loads its saved state."""
    config = make_config("vflgan", shared_d_weight=2.5)
    n_parties = 2
    spans, tables = party_spans[:n_parties], party_tables(n_parties, N_ROWS, seed=5)
    schedule = Schedule(N_ROWS, 8, 2, epochs=5, max_steps=16)
    saved = [
        (_flat(p), p.state.optimizer_steps())
        for p in (
            PartyTrainer(config, s, d, SHARED_SEED, i)
            for i, (s, d) in enumerate(zip(spans, tables, strict=True))
        )
    ]
    server = ServerTrainer(config, n_parties, SERVER_SEED)
    plain = PlainVFLGAN(config, spans, tables, SHARED_SEED, SERVER_SEED)

    def message(index: int, work):
        party = PartyTrainer(config, spans[index], tables[index], SHARED_SEED, index)
        party.state.load(*saved[index])
        result = work(party)
        saved[index] = (_flat(party), party.state.optimizer_steps())
        return result

    for step in range(schedule.total_steps):
        kind = schedule.kind(step)
        outs = [_relay(message(i, lambda p: p.forward(step, kind))) for i in range(n_parties)]  # noqa: B023
        grads_real, grads_fake = _server_step(server, step, kind, outs, n_parties)
        for i in range(n_parties):
            g_real = None if grads_real[i] is None else _relay_tensor(grads_real[i])
            g_fake = _relay_tensor(grads_fake[i])
            message(i, lambda p: p.apply(step, kind, g_real, g_fake))  # noqa: B023
        plain.step(step, kind)

    _assert_same_state([flat for flat, _ in saved], [_flat(p) for p in plain.parties])
    _assert_same_state([_flat(server)], [_flat(plain.server)])


@pytest.mark.parametrize("first_part_gp", [False, True])
def test_vflgan_base_parties_have_no_local_head(
    make_config, party_spans, party_tables, first_part_gp
):
    """No local loss: nothing without the first-part penalty, only that penalty (on
    discriminator steps) with it."""
    config = make_config("vflgan_base", first_part_gp=first_part_gp)
    tables = party_tables(2, N_ROWS)
    parties = [PartyTrainer(config, party_spans[i], tables[i], SHARED_SEED, i) for i in range(2)]
    server = ServerTrainer(config, 2, SERVER_SEED)
    assert all(p.discriminator.second is None for p in parties)
    for step, kind in [(0, StepKind.DISCRIMINATOR), (1, StepKind.GENERATOR)]:
        outs = [p.forward(step, kind) for p in parties]
        grads_real, grads_fake = _server_step(server, step, kind, outs, 2)
        losses = [
            p.apply(step, kind, r, f)
            for p, r, f in zip(parties, grads_real, grads_fake, strict=True)
        ]
        if first_part_gp and kind is StepKind.DISCRIMINATOR:
            assert all(loss > 0.0 for loss in losses), losses
        else:
            assert losses == [0.0, 0.0]


def test_vflgan_parties_report_their_local_loss(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    tables = party_tables(2, N_ROWS)
    parties = [PartyTrainer(config, party_spans[i], tables[i], SHARED_SEED, i) for i in range(2)]
    server = ServerTrainer(config, 2, SERVER_SEED)
    assert all(isinstance(p.discriminator.second, nn.Linear) for p in parties)
    outs = [p.forward(0, StepKind.DISCRIMINATOR) for p in parties]
    grads_real, grads_fake = _server_step(server, 0, StepKind.DISCRIMINATOR, outs, 2)
    losses = [
        p.apply(0, StepKind.DISCRIMINATOR, r, f)
        for p, r, f in zip(parties, grads_real, grads_fake, strict=True)
    ]
    assert all(np.isfinite(loss) and loss != 0.0 for loss in losses)


# -- what each step may change --------------------------------------------------------
def test_each_step_changes_only_its_own_models(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    tables = party_tables(2, N_ROWS)
    parties = [PartyTrainer(config, party_spans[i], tables[i], SHARED_SEED, i) for i in range(2)]
    server = ServerTrainer(config, 2, SERVER_SEED)
    schedule = Schedule(N_ROWS, 8, 2, epochs=1)
    for step in range(schedule.total_steps):
        kind = schedule.kind(step)
        outs = [p.forward(step, kind) for p in parties]
        # After the forward (which updates BatchNorm statistics once), nothing else may
        # change the generator's buffers: the apply recomputes with frozen statistics.
        gens = [_module_state(p.generator) for p in parties]
        discs = [_module_state(p.discriminator) for p in parties]
        ds_before = _module_state(server.discriminator)
        grads_real, grads_fake = _server_step(server, step, kind, outs, 2)
        ds_changed = not _same(ds_before, _module_state(server.discriminator))
        assert ds_changed is (kind is StepKind.DISCRIMINATOR)
        for party, r, f, gen, disc in zip(
            parties, grads_real, grads_fake, gens, discs, strict=True
        ):
            party.apply(step, kind, r, f)
            gen_changed = not _same(gen, _module_state(party.generator))
            disc_changed = not _same(disc, _module_state(party.discriminator))
            assert gen_changed is (kind is StepKind.GENERATOR), (step, kind)
            assert disc_changed is (kind is StepKind.DISCRIMINATOR), (step, kind)
            if kind is StepKind.GENERATOR:  # no gradients are left behind on D_i
                assert all(p.grad is None for p in party.discriminator.parameters())


def test_forward_updates_generator_batchnorm_statistics_once(
    make_config, party_spans, party_tables
):
    config = make_config("vflgan")
    party = PartyTrainer(config, party_spans[0], party_tables(1, N_ROWS)[0], SHARED_SEED, 0)
    norm = next(m for m in party.generator.modules() if isinstance(m, nn.BatchNorm1d))
    assert norm.running_mean is not None and norm.running_var is not None
    assert norm.num_batches_tracked is not None
    mean, var = norm.running_mean.clone(), norm.running_var.clone()
    for step, kind in [(0, StepKind.DISCRIMINATOR), (2, StepKind.GENERATOR)]:
        party.forward(step, kind)
        assert not torch.equal(norm.running_mean, mean) and not torch.equal(norm.running_var, var)
        mean, var = norm.running_mean.clone(), norm.running_var.clone()
        grad_real = torch.zeros(8, 4) if kind is StepKind.DISCRIMINATOR else None
        party.apply(step, kind, grad_real, torch.ones(8, 4))
        # The apply recomputes the same forward pass with frozen statistics.
        assert torch.equal(norm.running_mean, mean) and torch.equal(norm.running_var, var)
    assert int(norm.num_batches_tracked) == 2


def test_forward_returns_features_per_step_kind(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    party = PartyTrainer(config, party_spans[0], party_tables(1, N_ROWS)[0], SHARED_SEED, 0)
    d_out = party.forward(0, StepKind.DISCRIMINATOR)
    assert d_out.real is not None and d_out.real.shape == (8, 4)
    assert d_out.fake.shape == (8, 4)
    assert not d_out.real.requires_grad and not d_out.fake.requires_grad
    g_out = party.forward(1, StepKind.GENERATOR)
    assert g_out.real is None and g_out.fake.shape == (8, 4)


def test_discriminator_apply_needs_real_gradients(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    party = PartyTrainer(config, party_spans[0], party_tables(1, N_ROWS)[0], SHARED_SEED, 0)
    party.forward(0, StepKind.DISCRIMINATOR)
    with pytest.raises(
        ValueError, match=r"a discriminator step needs gradients for the real features"
    ):
        party.apply(0, StepKind.DISCRIMINATOR, None, torch.zeros(8, 4))


# -- validation ------------------------------------------------------------------------
def test_party_trainer_rejects_bad_data(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    spans = party_spans[0]  # 4 encoded columns
    good = party_tables(1, N_ROWS)[0]
    with pytest.raises(
        ValueError, match=r"party data must be a 2-D float32 tensor, got torch.float64"
    ):
        PartyTrainer(config, spans, good.double(), SHARED_SEED, 0)
    with pytest.raises(ValueError, match=r"party data must be a 2-D float32 tensor"):
        PartyTrainer(config, spans, good[:, 0], SHARED_SEED, 0)
    bad = good.clone()
    bad[3, 0] = float("nan")
    with pytest.raises(ValueError, match=r"party data contains non-finite values"):
        PartyTrainer(config, spans, bad, SHARED_SEED, 0)
    with pytest.raises(ValueError, match=r"party data has 3 columns, its spans cover 4"):
        PartyTrainer(config, spans, good[:, :3].contiguous(), SHARED_SEED, 0)


def test_server_trainer_rejects_no_parties(make_config):
    with pytest.raises(ValueError, match=r"n_parties must be >= 1, got 0"):
        ServerTrainer(make_config(), 0, 1)


# -- randomness and sampling -------------------------------------------------------------
def test_trainers_never_touch_the_global_generators(make_config, party_spans, party_tables):
    torch.manual_seed(1234)
    np.random.seed(1234)
    torch_state = torch.get_rng_state()
    config = make_config("vflgan")
    tables = party_tables(2, N_ROWS)
    parties = [PartyTrainer(config, party_spans[i], tables[i], SHARED_SEED, i) for i in range(2)]
    server = ServerTrainer(config, 2, SERVER_SEED)
    _drive_protocol(parties, server, Schedule(N_ROWS, 8, 2, epochs=1, max_steps=4))
    for party in parties:
        party.generate(16, draw=0)
    assert torch.equal(torch.get_rng_state(), torch_state)
    drawn = np.random.random(4)
    np.random.seed(1234)
    np.testing.assert_array_equal(drawn, np.random.random(4))


def test_generate_is_deterministic_exact_one_hot_and_restores_mode(
    make_config, party_spans, party_tables
):
    config = make_config("vflgan")
    party = PartyTrainer(config, party_spans[0], party_tables(1, N_ROWS)[0], SHARED_SEED, 0)
    buffers = [b.clone() for b in party.generator.buffers()]
    rows = party.generate(50, draw=3)
    assert rows.shape == (50, 4)
    assert not rows.requires_grad
    assert party.generator.training
    assert _same(buffers, list(party.generator.buffers()))  # eval mode: no statistics update
    one_hot = rows[:, 1:4]
    assert set(one_hot.unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(one_hot.sum(dim=1), torch.ones(50))
    assert torch.equal(party.generate(50, draw=3), rows)
    assert not torch.equal(party.generate(50, draw=4), rows)


def test_parties_with_the_same_shared_seed_use_the_same_noise(make_config, table):
    """Two parties with identical spans and data differ only in their private Gumbel noise."""
    from flwr_vflgan.data import Span

    spans = [Span("x", 0, 2, "identity")]  # no Gumbel span: the outputs depend on z and init
    data = table(spans, N_ROWS, 0)
    config = make_config("vflgan")
    a = PartyTrainer(config, spans, data, SHARED_SEED, 0)
    b = PartyTrainer(config, spans, data, SHARED_SEED, 1)
    b.generator.load_state_dict(a.generator.state_dict())
    assert torch.equal(a.generate(10, draw=0), b.generate(10, draw=0))
    c = PartyTrainer(config, spans, data, SHARED_SEED + 1, 0)
    c.generator.load_state_dict(a.generator.state_dict())
    assert not torch.equal(a.generate(10, draw=0), c.generate(10, draw=0))


def test_generator_snapshot_round_trip(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    party = PartyTrainer(config, party_spans[0], party_tables(1, N_ROWS)[0], SHARED_SEED, 0)
    party.forward(0, StepKind.GENERATOR)  # move the BatchNorm statistics off their defaults
    snapshot = party.generator_snapshot()
    state = _module_state(party.generator)
    n_values = sum(t.numel() for t in state)
    assert snapshot.shape == (n_values,) and snapshot.dtype == np.float32
    with torch.no_grad():
        for t in [*party.generator.parameters(), *party.generator.buffers()]:
            t.add_(1)
    party.load_generator_snapshot(snapshot)
    assert _same(state, _module_state(party.generator))
    with pytest.raises(ValueError, match=rf"generator snapshot must have {n_values} values"):
        party.load_generator_snapshot(snapshot[:-1])


def test_first_part_penalty_of_a_linear_first_part_is_hand_computable() -> None:
    """For D^1(x) = W x (no activation), grad_x sum_k D^1(x)_k = W^T 1 at every x."""
    from flwr_vflgan.gan.vflgan import first_part_penalty
    from flwr_vflgan.nn.models import LocalDiscriminator

    disc = LocalDiscriminator(3, (), 2, local_head=False, leaky_slope=1.0)  # slope 1: linear
    weight = torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 2.0]])
    with torch.no_grad():
        disc.first[0].weight.copy_(weight)
        disc.first[0].bias.zero_()
    real, fake = torch.randn(5, 3), torch.randn(5, 3)
    alpha = torch.rand(5, 1)
    expected = (torch.linalg.norm(weight.sum(dim=0)) - 1.0) ** 2  # ||(1, 2, 2)|| = 3 -> 4
    assert first_part_penalty(disc, real, fake, alpha).item() == pytest.approx(expected.item())
    assert expected.item() == pytest.approx(4.0)


def test_first_part_penalty_changes_training(make_config, party_spans, party_tables):
    tables = party_tables(2, N_ROWS)
    runs = []
    for flag in (False, True):
        config = make_config("vflgan_base", first_part_gp=flag)
        party = PartyTrainer(config, party_spans[0], tables[0], SHARED_SEED, 0)
        out = party.forward(0, StepKind.DISCRIMINATOR)
        party.apply(
            0, StepKind.DISCRIMINATOR, torch.zeros_like(out.fake), torch.zeros_like(out.fake)
        )
        runs.append(_flat(party))
    # With zero server gradients, VFLGAN-base parties only move under the first-part penalty.
    assert not np.array_equal(runs[0], runs[1])


def test_an_empty_poisson_batch_leaves_the_shared_discriminator_alone(make_config):
    config = make_config("vflgan")
    server = ServerTrainer(config, 2, SERVER_SEED)
    before = [p.detach().clone() for p in server.discriminator.parameters()]
    width = config.model.feature_dim
    empty = [torch.zeros(0, width), torch.zeros(0, width)]
    grads_real, grads_fake, loss = server.discriminator_step(0, empty, empty)
    assert [g.shape for g in grads_real + grads_fake] == [(0, width)] * 4
    assert np.isnan(loss)
    for old, new in zip(before, server.discriminator.parameters(), strict=True):
        assert torch.equal(old, new)


def test_poisson_batches_flow_through_a_party(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    config = VFLGANConfig.from_dict(
        {
            **config.to_dict(),
            "dp": {"mechanism": "dpsgd", "target_epsilon": 5.0, "sampling": "poisson"},
        }
    )
    party = PartyTrainer(config, party_spans[0], party_tables(1, N_ROWS)[0], SHARED_SEED, 0)
    sizes = set()
    for step in range(6):
        out = party.forward(step, StepKind.DISCRIMINATOR)
        rows = party.batch_rows(step, StepKind.DISCRIMINATOR)
        assert out.real is not None and out.real.shape[0] == out.fake.shape[0] == rows
        sizes.add(rows)
        zeros = torch.zeros(rows, config.model.feature_dim)
        party.apply(step, StepKind.DISCRIMINATOR, zeros, zeros)
    assert len(sizes) > 1
    assert party.batch_rows(6, StepKind.GENERATOR) == config.train.batch_size


def test_a_dp_party_update_releases_first_layer_noise_of_the_planned_size(
    make_config, party_spans, party_tables
):
    """Through the trainer's own update path (not the mechanism alone): two parties that
    differ only in their DP noise seed step their first layer with gradients whose
    difference is the difference of two noise draws, std sqrt(2) x 2 C sigma (eq. 21)."""
    from dataclasses import replace

    from flwr_vflgan.privacy import DPConfig, Mechanism, plan_privacy

    dp = DPConfig(mechanism=Mechanism.VFLGAN_GAUSSIAN, target_epsilon=10.0, delta=1e-5)
    config = replace(make_config("vflgan"), dp=dp)
    plan = plan_privacy(dp, dataset_size=N_ROWS, batch_size=8, planned_steps=20)
    assert plan.noise_multiplier > 0
    data = party_tables(1, N_ROWS)[0]
    released = []
    for noise_seed in (1, 2):
        party = PartyTrainer(config, party_spans[0], data, SHARED_SEED, 0, plan, noise_seed)
        first = next(m for m in party.discriminator.modules() if isinstance(m, nn.Linear))
        captured: list[torch.Tensor] = []
        step_once = party.d_opt.step

        def spy(*args, _first=first, _captured=captured, _step=step_once, **kwargs):
            _captured.append(_first.weight.grad.detach().clone())
            return _step(*args, **kwargs)

        party.d_opt.step = spy  # type: ignore[method-assign]
        out = party.forward(0, StepKind.DISCRIMINATOR)
        zeros = torch.zeros_like(out.real)
        party.apply(0, StepKind.DISCRIMINATOR, zeros, torch.zeros_like(out.fake))
        (grad,) = captured
        released.append(grad.to(torch.float64))
    difference = released[0] - released[1]
    expected = 2**0.5 * 2 * plan.clip * plan.noise_multiplier
    assert float(difference.std()) == pytest.approx(expected, rel=0.25)


def _rates(optimizer: torch.optim.Optimizer) -> list[float]:
    return [group["lr"] for group in optimizer.param_groups]


def test_generator_lr_reaches_the_generators_optimizers_only(
    make_config, party_spans, party_tables
):
    config = make_config("vflgan", lr=3e-4, generator_lr=1e-4)
    party = PartyTrainer(config, party_spans[0], party_tables(1, N_ROWS)[0], SHARED_SEED, 0)
    assert (_rates(party.g_opt), _rates(party.d_opt)) == ([1e-4], [3e-4])
    assert _rates(ServerTrainer(config, 2, SERVER_SEED).opt) == [3e-4]
    plain = PlainVFLGAN(config, party_spans[:2], party_tables(2, N_ROWS), SHARED_SEED, SERVER_SEED)
    assert [_rates(p.g_opt) for p in plain.parties] == [[1e-4], [1e-4]]


def test_generator_lr_equal_to_lr_changes_nothing_and_keeps_the_protocol_exact(
    make_config, party_spans, party_tables
):
    """A distinct generator rate moves the run off the shared-rate one, a rate equal to
    ``lr`` does not, and the federated protocol still equals the plain loop."""
    spans, tables = party_spans[:2], party_tables(2, N_ROWS)
    schedule = Schedule(N_ROWS, 8, 2, epochs=5, max_steps=12)

    def run(**train: object) -> list[np.ndarray]:
        config = make_config("vflgan", **train)
        parties = [
            PartyTrainer(config, s, d, SHARED_SEED, i)
            for i, (s, d) in enumerate(zip(spans, tables, strict=True))
        ]
        server = ServerTrainer(config, 2, SERVER_SEED)
        _drive_protocol(parties, server, schedule)
        plain = PlainVFLGAN(config, spans, tables, SHARED_SEED, SERVER_SEED)
        for step in range(schedule.total_steps):
            plain.step(step, schedule.kind(step))
        _assert_same_state([_flat(p) for p in parties], [_flat(p) for p in plain.parties])
        return [_flat(p) for p in parties]

    shared = run(lr=5e-4)
    assert all(
        np.array_equal(a, b) for a, b in zip(shared, run(lr=5e-4, generator_lr=5e-4), strict=True)
    )
    assert not any(
        np.array_equal(a, b) for a, b in zip(shared, run(lr=5e-4, generator_lr=1e-3), strict=True)
    )
