"""GS-WGAN: the shards, the sanitized gradients, their accounting and the trainer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data import Span
from flwr_vflgan.gan import gs_wgan
from flwr_vflgan.gan.config import GSWGANSettings
from flwr_vflgan.gan.gs_wgan import CentralizedGSWGAN, gs_wgan_plan, shards
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.privacy import DPConfig, GaussianSteps, epsilon
from flwr_vflgan.privacy.mechanisms import sanitize_sample_gradients

SPANS = [
    Span("a", 0, 1, "identity"),
    Span("b", 1, 3, "gumbel_softmax"),
    Span("c", 4, 2, "tanh"),
]
N_ROWS = 60


def _model(make_config, table, k: int = 4, seed: int = 0, privacy=None, **train):
    config = make_config("gs_wgan", **train)
    data = table(SPANS, N_ROWS, 3)
    return CentralizedGSWGAN(config, SPANS, data, 2, seed, GSWGANSettings(k), privacy)


# -- shards -----------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "k"), [(60, 4), (61, 7), (5, 5), (10, 1)])
def test_shards_partition_the_rows_in_near_equal_parts(n, k):
    parts = shards(n, k, seed=3)
    assert len(parts) == k
    joined = torch.cat(parts)
    assert sorted(joined.tolist()) == list(range(n))  # disjoint and complete
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert all(torch.equal(a, b) for a, b in zip(parts, shards(n, k, seed=3), strict=True))
    if k < n:
        assert not all(torch.equal(a, b) for a, b in zip(parts, shards(n, k, seed=4), strict=True))


def test_more_discriminators_than_rows_is_refused():
    with pytest.raises(ValueError, match=r"gs_wgan.discriminators=6 exceeds the 5 training rows"):
        shards(5, 6, seed=0)


# -- the sanitization -----------------------------------------------------------------
def test_sanitization_clips_each_row_to_c_and_keeps_its_direction():
    grads = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [-6.0, 8.0]])
    out = sanitize_sample_gradients(grads, 1.0, 0.0, None)
    expected = torch.tensor([[0.6, 0.8], [0.3, 0.4], [0.0, 0.0], [-0.6, 0.8]])
    torch.testing.assert_close(out, expected)
    # Rows of any shape are clipped as a whole.
    cube = torch.full((2, 2, 2), 2.0)
    torch.testing.assert_close(
        sanitize_sample_gradients(cube, 2.0, 0.0, None).flatten(1).norm(dim=1),
        torch.tensor([2.0, 2.0]),
    )


def test_sanitization_noise_has_the_asked_standard_deviation_and_seed():
    grads = torch.randn(20_000, 10, generator=torch.Generator().manual_seed(0)) * 5
    clipped = sanitize_sample_gradients(grads, 0.5, 0.0, None)
    noisy = sanitize_sample_gradients(grads, 0.5, 3.0, torch.Generator().manual_seed(1))
    noise = (noisy - clipped).numpy()
    assert abs(noise.mean()) < 0.01 and abs(noise.std() - 3.0) < 0.02
    again = sanitize_sample_gradients(grads, 0.5, 3.0, torch.Generator().manual_seed(1))
    assert torch.equal(noisy, again)
    assert clipped.norm(dim=1).max() <= 0.5 + 1e-6


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((1.0, 1.0, None), TypeError, "generator must be a torch.Generator"),
        ((0.0, 0.0, None), ValueError, "clip must be a finite number > 0"),
        ((1.0, -1.0, None), ValueError, "noise_std must be a finite number >= 0"),
    ],
)
def test_sanitization_rejects_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        sanitize_sample_gradients(torch.ones(2, 3), *args)


# -- accounting -----------------------------------------------------------------------
def _dp_config(make_config, batch: int, **dp) -> VFLGANConfig:
    config = make_config("gs_wgan", batch_size=batch)
    settings = {"mechanism": "gs_wgan", "target_epsilon": 10.0, "delta": 1e-5, **dp}
    return VFLGANConfig(
        variant=config.variant, model=config.model, train=config.train, dp=DPConfig(**settings)
    )


def test_one_generator_step_is_the_batchs_gradients_in_one_subsampled_gaussian(make_config):
    config = _dp_config(make_config, batch=16, noise_multiplier=6.0)
    plan = gs_wgan_plan(config, GSWGANSettings(50), n_rows=10_000, generator_steps=300)
    # B gradients of sensitivity 2C under noise 2C sigma: one mechanism of multiplier
    # sigma / sqrt(B), read from one shard in K.
    assert plan.accountant_multiplier == pytest.approx(6.0 / 4.0)
    assert (plan.dataset_size, plan.batch_size, plan.parts, plan.clip) == (50, 1, 16, 1.0)
    direct = epsilon([GaussianSteps(50, 1, 1.5, 300)], 1e-5)
    assert plan.ledger("c", 300).spent() == pytest.approx(direct)


def test_the_calibrated_noise_spends_the_target_over_the_planned_generator_steps(make_config):
    config = _dp_config(make_config, batch=32)
    plan = gs_wgan_plan(config, GSWGANSettings(100), n_rows=40_000, generator_steps=4_000)
    assert plan.allowed_steps >= 4_000
    assert 9.9 < plan.ledger("c", 4_000).spent() <= 10.0
    # Fewer shards, so a higher sampling rate, needs more noise for the same budget.
    fewer = gs_wgan_plan(config, GSWGANSettings(10), n_rows=40_000, generator_steps=4_000)
    assert fewer.noise_multiplier > plan.noise_multiplier


def test_the_authors_count_gives_their_epsilon_and_the_joint_count_a_far_larger_one():
    """The authors' script composes B * T subsampled Gaussians of multiplier sigma
    (sigma 1.07, K 1000, B 32, 20,000 steps: their (10, 1e-5)); one shard serves the whole
    batch, so the sound count is T subsampled mechanisms of multiplier sigma / sqrt(B)."""
    authors = epsilon([GaussianSteps(1000, 1, 1.07, 20_000 * 32)], 1e-5)
    joint = epsilon([GaussianSteps(1000, 1, 1.07 / math.sqrt(32), 20_000)], 1e-5)
    assert 9.9 < authors < 10.1
    assert joint > 1e5


def test_the_plan_needs_gs_wgan_and_a_delta_below_one_over_n(make_config):
    config = _dp_config(make_config, batch=8, delta=1e-2)
    with pytest.raises(ValueError, match=r"dp.delta=0.01 must be below 1/n = 0.002"):
        gs_wgan_plan(config, GSWGANSettings(4), n_rows=500, generator_steps=10)
    with pytest.raises(ValueError, match=r"gs_wgan_plan needs dp=gs_wgan, got dp=none"):
        gs_wgan_plan(make_config("gs_wgan"), GSWGANSettings(4), n_rows=500, generator_steps=10)
    tight = _dp_config(make_config, batch=8, noise_multiplier=0.5)
    with pytest.raises(ValueError, match=r"too small for even one generator step"):
        gs_wgan_plan(tight, GSWGANSettings(4), n_rows=500, generator_steps=10)


# -- the trainer ----------------------------------------------------------------------
def test_critic_steps_train_the_chosen_critic_on_its_shard_only(make_config, table):
    model = _model(make_config, table, k=4, batch_size=8, n_critic=2)
    chosen = model.chosen
    # Every row outside the chosen shard is NaN: reading one would poison the critic.
    outside = torch.ones(N_ROWS, dtype=torch.bool)
    outside[model.shards[chosen]] = False
    model.data[outside] = float("nan")
    critic, _ = model._critic(chosen)
    before = [p.detach().clone() for p in critic.parameters()]
    for step in range(2):
        assert np.isfinite(model.step(step, StepKind.DISCRIMINATOR))
    after = list(critic.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert set(model.critics) == {0, chosen}  # no other critic was made or trained


def test_a_shard_smaller_than_the_batch_is_read_whole(make_config, table):
    model = _model(make_config, table, k=12, batch_size=8, n_critic=2)  # shards of 5 rows
    assert {len(s) for s in model.shards} == {5}
    assert np.isfinite(model.step(0, StepKind.DISCRIMINATOR))


@pytest.mark.parametrize("private", [False, True])
def test_the_generator_learns_from_exactly_the_sanitized_gradients(
    make_config, table, monkeypatch, private
):
    config = make_config("gs_wgan", batch_size=8, n_critic=2)
    plan = None
    if private:
        dp = _dp_config(make_config, batch=8, noise_multiplier=5.0, max_grad_norm=0.05)
        config = dp
        plan = gs_wgan_plan(dp, GSWGANSettings(3), n_rows=N_ROWS, generator_steps=10)
    model = CentralizedGSWGAN(config, SPANS, table(SPANS, N_ROWS, 3), 2, 0, GSWGANSettings(3), plan)
    seen: dict[str, torch.Tensor] = {}
    real_sanitize = gs_wgan.sanitize_sample_gradients

    def recording(grads, clip, noise_std, generator):
        seen["in"], seen["std"] = grads.clone(), noise_std
        seen["out"] = real_sanitize(grads, clip, noise_std, generator)
        return seen["out"]

    monkeypatch.setattr(gs_wgan, "sanitize_sample_gradients", recording)
    critic, _ = model._critic(model.chosen)
    model.g_opt.step = lambda: None  # keep the gradients, skip the update
    model.step(5, StepKind.GENERATOR)
    params = list(model.generator.parameters())
    got = [p.grad.clone() for p in params]
    # The same synthetic batch again (the draws are seeded by the step).
    fake = model._fake(5)
    if private:
        sample = fake.detach().requires_grad_(True)
        (per_row,) = torch.autograd.grad(-critic(sample).sum(), sample)
        torch.testing.assert_close(seen["in"], per_row)
        assert seen["std"] == pytest.approx(2 * 0.05 * plan.noise_multiplier)
        sent = seen["out"]
        assert not torch.allclose(sent, per_row)
    else:
        assert not seen  # no sanitization without DP
        sample = fake.detach().requires_grad_(True)
        (sent,) = torch.autograd.grad(-critic(sample).sum(), sample)
    expected = torch.autograd.grad(fake, params, grad_outputs=sent / 8, allow_unused=True)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, torch.zeros_like(g) if e is None else e)


def test_each_generator_step_draws_its_critic_uniformly_and_reproducibly(make_config, table):
    model = _model(make_config, table, k=5, batch_size=8, n_critic=1)
    draws = [model._draw(i) for i in range(5_000)]
    counts = np.bincount(draws, minlength=5)
    assert counts.min() > 900 and counts.max() < 1100
    assert draws[:50] == [model._draw(i) for i in range(50)]
    schedule = Schedule(N_ROWS, 8, 1, epochs=1)
    chosen = []
    for step in range(schedule.total_steps):
        if schedule.kind(step) is StepKind.GENERATOR:
            chosen.append(model.chosen)
        model.step(step, schedule.kind(step))
    assert chosen == draws[: len(chosen)]
    assert model.generator_steps == len(chosen)


def test_the_warm_start_trains_every_critic_against_a_generator_of_its_own(
    make_config, table, monkeypatch
):
    config = make_config("gs_wgan", batch_size=8, n_critic=2)
    data = table(SPANS, N_ROWS, 3)
    calls: list[tuple[int, int]] = []
    original = CentralizedGSWGAN._critic_step

    def counting(self, k, generator, seed, step):
        calls.append((k, step))
        assert generator is not self.generator  # never the published generator
        return original(self, k, generator, seed, step)

    monkeypatch.setattr(CentralizedGSWGAN, "_critic_step", counting)
    cold = CentralizedGSWGAN(config, SPANS, data, 2, 0, GSWGANSettings(3))
    assert calls == [] and set(cold.critics) == {0}
    warm = CentralizedGSWGAN(config, SPANS, data, 2, 0, GSWGANSettings(3, warmup_iterations=2))
    # K critics x 2 iterations x n_critic steps, each iteration's steps numbered 0, 1 | 3, 4.
    assert calls == [(k, s) for k in range(3) for s in (0, 1, 3, 4)]
    assert set(warm.critics) == {0, 1, 2}
    cold_critic = cold._critic(1)[0].state_dict()
    warm_critic = warm._critic(1)[0].state_dict()
    assert any(not torch.equal(cold_critic[n], warm_critic[n]) for n in cold_critic)
    # The run's generator is untouched by the warm start.
    for a, b in zip(cold.generator.parameters(), warm.generator.parameters(), strict=True):
        assert torch.equal(a, b)
    again = CentralizedGSWGAN(config, SPANS, data, 2, 0, GSWGANSettings(3, warmup_iterations=2))
    assert all(torch.equal(warm_critic[n], v) for n, v in again._critic(1)[0].state_dict().items())


def test_training_is_reproducible_and_seed_dependent(make_config, table):
    outputs = []
    for seed in (1, 1, 2):
        model = _model(make_config, table, k=3, seed=seed, batch_size=8, n_critic=2)
        schedule = Schedule(N_ROWS, 8, 2, epochs=2)
        for step in range(schedule.total_steps):
            assert np.isfinite(model.step(step, schedule.kind(step)))
        outputs.append(model.generate(20, draw=0))
    assert torch.equal(outputs[0], outputs[1])
    assert not torch.equal(outputs[0], outputs[2])


def test_a_plan_of_another_mechanism_is_refused(make_config, table):
    from flwr_vflgan.privacy import plan_privacy

    config = make_config("wgan_gp")
    dp = DPConfig(mechanism="dpsgd", target_epsilon=5.0, delta=1e-4)
    plan = plan_privacy(dp, dataset_size=N_ROWS, batch_size=8, planned_steps=10)
    with pytest.raises(ValueError, match=r"sanitizes with dp=gs_wgan, got dp=dpsgd"):
        CentralizedGSWGAN(config, SPANS, table(SPANS, N_ROWS, 0), 2, 0, GSWGANSettings(2), plan)


# -- settings -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"discriminators": 0}, r"gs_wgan.discriminators must be an integer >= 1, got 0"),
        ({"discriminators": 2.5}, r"gs_wgan.discriminators must be an integer >= 1, got 2.5"),
        ({"drift_weight": -1.0}, r"gs_wgan.drift_weight must be a finite number >= 0, got -1.0"),
        ({"drift_weight": float("inf")}, r"drift_weight must be a finite number >= 0, got inf"),
        ({"warmup_iterations": -1}, r"gs_wgan.warmup_iterations must be an integer >= 0, got -1"),
    ],
)
def test_settings_reject_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GSWGANSettings(**kwargs)


def test_settings_round_trip_and_reject_unknown_keys():
    settings = GSWGANSettings(7, 0.0, 3)
    assert GSWGANSettings.from_dict(settings.to_dict()) == settings
    with pytest.raises(ValueError, match=r"unknown gs_wgan config keys \['k'\]"):
        GSWGANSettings.from_dict({"k": 3})


@pytest.mark.parametrize(
    ("variant", "mechanism", "message"),
    [
        ("gs_wgan", "dpsgd", r"algorithm=gs_wgan is made private by its own gradient sanitization"),
        ("gs_wgan", "vflgan_gaussian", r"use dp=gs_wgan \(or dp=none\), not dp=vflgan_gaussian"),
        ("wgan_gp", "gs_wgan", r"dp=gs_wgan sanitizes .* algorithm=wgan_gp has none"),
        ("vflgan", "gs_wgan", r"algorithm=vflgan has none"),
    ],
)
def test_gs_wgan_and_its_mechanism_go_together(variant, mechanism, message):
    dp = {"mechanism": mechanism, "target_epsilon": 5.0, "delta": 1e-5}
    with pytest.raises(ValueError, match=message):
        VFLGANConfig.from_dict({"variant": variant, "dp": dp})
