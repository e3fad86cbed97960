"""DP mechanisms: the clip bound, the noise scale under a fixed seed, per-sample WGAN-GP grads."""

from __future__ import annotations

import math

import pytest
import torch
from opacus.optimizers import DPOptimizer
from torch import nn

from flwr_vflgan.gan.losses import critic_loss
from flwr_vflgan.nn.models import LocalDiscriminator
from flwr_vflgan.privacy.mechanisms import (
    FirstLayerGaussian,
    make_dp_optimizer,
    per_sample_critic_grads,
    privatize_first_layers,
    set_grad_samples,
)

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _by_hand_clip(g: torch.Tensor, clip: float) -> torch.Tensor:
    wide = g.to(F64)
    norm = math.sqrt(float((wide**2).sum()))
    return wide * min(1.0, clip / norm)


# -- FirstLayerGaussian ------------------------------------------------------------------


def test_sensitivity_and_noise_std_follow_eq_21():
    mechanism = FirstLayerGaussian(clip=1.5, noise_multiplier=0.8)
    assert mechanism.sensitivity == 3.0
    assert mechanism.noise_std == pytest.approx(2.4)


@pytest.mark.parametrize(("scale", "clip"), [(10.0, 1.0), (0.01, 1.0)])
def test_clip_bound_without_noise_keeps_the_direction(scale, clip):
    g = torch.randn(20, 30, generator=_gen(1)) * scale
    norm = math.sqrt(float((g.to(F64) ** 2).sum()))
    out = FirstLayerGaussian(clip=clip, noise_multiplier=0.0).privatize(g, _gen(2))
    assert out.dtype == g.dtype and out.shape == g.shape
    out_norm = math.sqrt(float((out.to(F64) ** 2).sum()))
    assert out_norm == pytest.approx(min(norm, clip), rel=1e-6)
    # Same direction: out is a positive multiple of g.
    cosine = float((out.to(F64) * g.to(F64)).sum()) / (out_norm * norm)
    assert cosine == pytest.approx(1.0, abs=1e-6)
    if norm <= clip:
        assert torch.equal(out, g)


def test_zero_gradient_stays_zero_and_float64_stays_float64():
    mechanism = FirstLayerGaussian(clip=1.0, noise_multiplier=0.0)
    assert torch.equal(mechanism.privatize(torch.zeros(3, 4), _gen(0)), torch.zeros(3, 4))
    g = torch.randn(5, generator=_gen(0), dtype=F64) * 100
    assert mechanism.privatize(g, _gen(0)).dtype == F64


def test_noise_is_full_shape_with_std_2_c_sigma():
    clip, sigma = 1.0, 0.7
    g = torch.randn(200, 300, generator=_gen(3)) * 10.0
    noisy = FirstLayerGaussian(clip=clip, noise_multiplier=sigma).privatize(g, _gen(4))
    noise = noisy.to(F64) - _by_hand_clip(g, clip)
    expected_std = 2 * clip * sigma
    assert float(noise.std()) == pytest.approx(expected_std, rel=0.02)
    # 5 standard errors of the mean of 60,000 draws.
    assert abs(float(noise.mean())) < 5 * expected_std / math.sqrt(noise.numel())
    # One draw per coordinate, not a broadcast scalar (the reference red-wine bug).
    unique = torch.unique(noise.to(torch.float32)).numel()
    assert unique > 0.99 * noise.numel()


def test_noise_is_reproducible_from_the_generator_and_never_reads_the_global_rng():
    mechanism = FirstLayerGaussian(clip=2.0, noise_multiplier=1.0)
    g = torch.randn(50, 40, generator=_gen(5))
    global_state = torch.get_rng_state()
    first = mechanism.privatize(g, _gen(11))
    assert torch.equal(torch.get_rng_state(), global_state)
    assert torch.equal(first, mechanism.privatize(g, _gen(11)))
    assert not torch.equal(first, mechanism.privatize(g, _gen(12)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"clip": 0.0, "noise_multiplier": 1.0}, r"clip must be a finite number > 0, got 0\.0"),
        ({"clip": -1.0, "noise_multiplier": 1.0}, r"clip must be .* got -1\.0"),
        ({"clip": math.inf, "noise_multiplier": 1.0}, r"clip must be .* got inf"),
        ({"clip": True, "noise_multiplier": 1.0}, r"clip must be .* got True"),
        ({"clip": 1.0, "noise_multiplier": -0.5}, r"noise_multiplier must be .* >= 0, got -0\.5"),
        ({"clip": 1.0, "noise_multiplier": math.nan}, r"noise_multiplier must be .* got nan"),
    ],
)
def test_mechanism_configuration_is_validated(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FirstLayerGaussian(**kwargs)


def test_privatize_rejects_bad_inputs():
    mechanism = FirstLayerGaussian(clip=1.0, noise_multiplier=1.0)
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        mechanism.privatize(torch.ones(3), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="grad must be a floating-point"):
        mechanism.privatize(torch.ones(3, dtype=torch.int64), _gen(0))
    with pytest.raises(ValueError, match="non-finite"):
        mechanism.privatize(torch.tensor([1.0, math.nan]), _gen(0))


# -- privatize_first_layers --------------------------------------------------------------


def _grad(param: torch.Tensor) -> torch.Tensor:
    assert param.grad is not None
    return param.grad


def _first(disc: LocalDiscriminator) -> nn.Linear:
    layer = disc.first[0]
    assert isinstance(layer, nn.Linear)
    return layer


def _discriminator_with_grads(seed: int = 0) -> LocalDiscriminator:
    torch.manual_seed(seed)
    disc = LocalDiscriminator(7, (16,), 8, local_head=True)
    x = torch.randn(12, 7, generator=_gen(seed + 100))
    (disc(x).pow(2).mean() * 50).backward()
    return disc


def test_only_the_first_linear_layer_changes():
    disc = _discriminator_with_grads()
    before = {n: _grad(p).clone() for n, p in disc.named_parameters()}
    privatize_first_layers([disc], FirstLayerGaussian(clip=0.1, noise_multiplier=1.0), _gen(7))
    for name, param in disc.named_parameters():
        if name in ("first.0.weight", "first.0.bias"):
            assert not torch.equal(_grad(param), before[name]), name
        else:
            assert torch.equal(_grad(param), before[name]), name


def test_weight_and_bias_are_clipped_jointly():
    disc = _discriminator_with_grads()
    w_before, b_before = _grad(_first(disc).weight).clone(), _grad(_first(disc).bias).clone()
    joint = math.sqrt(float((w_before**2).sum() + (b_before**2).sum()))
    clip = joint / 4
    privatize_first_layers([disc], FirstLayerGaussian(clip=clip, noise_multiplier=0.0), _gen(0))
    # One factor C / ||(w, b)|| = 1/4 for both, not one per tensor.
    torch.testing.assert_close(_grad(_first(disc).weight), w_before / 4)
    torch.testing.assert_close(_grad(_first(disc).bias), b_before / 4)


def test_modules_draw_different_noise_and_bias_free_layers_work():
    a, b = _discriminator_with_grads(0), _discriminator_with_grads(0)
    privatize_first_layers([a, b], FirstLayerGaussian(clip=1.0, noise_multiplier=1.0), _gen(3))
    assert not torch.equal(_grad(_first(a).weight), _grad(_first(b).weight))
    first, head = nn.Linear(4, 3, bias=False), nn.Linear(3, 1)
    net = nn.Sequential(first, head)
    net(torch.ones(2, 4)).sum().backward()
    head_before = _grad(head.weight).clone()
    privatize_first_layers([net], FirstLayerGaussian(clip=1e-3, noise_multiplier=0.0), _gen(0))
    assert float(_grad(first.weight).norm()) == pytest.approx(1e-3, rel=1e-5)
    assert torch.equal(_grad(head.weight), head_before)


def test_privatize_first_layers_errors_name_the_module():
    mechanism = FirstLayerGaussian(clip=1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match=r"Sequential has no nn\.Linear"):
        privatize_first_layers([nn.Sequential(nn.ReLU())], mechanism, _gen(0))
    fresh = LocalDiscriminator(3, (4,), 2, local_head=True)
    with pytest.raises(
        ValueError, match=r"modules\[1\] \(LocalDiscriminator\).*weight has no gradient"
    ):
        privatize_first_layers([_discriminator_with_grads(), fresh], mechanism, _gen(0))
    disc = _discriminator_with_grads()
    with pytest.raises(ValueError, match=r"modules\[1\].*shares its first nn.Linear"):
        privatize_first_layers([disc, disc], mechanism, _gen(0))


# -- per-sample critic gradients ---------------------------------------------------------


def _mlp_critic(in_dim: int = 5) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(in_dim, 8), nn.LeakyReLU(0.2), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1)
    )


def _batch(b: int, d: int, seed: int = 0, dtype: torch.dtype = torch.float32):
    gen = _gen(seed)
    real = torch.randn(b, d, generator=gen, dtype=dtype)
    fake = torch.randn(b, d, generator=gen, dtype=dtype) + 0.5
    alpha = torch.rand(b, 1, generator=gen, dtype=dtype)
    return real, fake, alpha


def _autograd_batch_grads(critic, real, fake, alpha, gp_weight):
    xhat = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    (gx,) = torch.autograd.grad(critic(xhat).sum(), xhat, create_graph=True)
    penalty = ((gx.norm(2, dim=1) - 1) ** 2).mean()
    loss = critic(fake).mean() - critic(real).mean() + gp_weight * penalty
    params = [p for p in critic.parameters()]
    return dict(
        zip(
            [n for n, _ in critic.named_parameters()],
            torch.autograd.grad(loss, params),
            strict=True,
        )
    )


def test_linear_critic_per_sample_grads_by_hand():
    # D(x) = w.x + b: row loss w.(f_i - r_i) + lam (||w|| - 1)^2, so
    # dw = f_i - r_i + 2 lam (||w|| - 1) w / ||w|| and db = 0.
    critic = nn.Linear(2, 1).double()
    with torch.no_grad():
        critic.weight.copy_(torch.tensor([[3.0, 4.0]]))
        critic.bias.fill_(0.5)
    real, fake, alpha = _batch(3, 2, dtype=F64)
    grads = per_sample_critic_grads(critic, real, fake, alpha, gp_weight=10.0)
    w = torch.tensor([3.0, 4.0], dtype=F64)
    expected = fake - real + 2 * 10.0 * (5.0 - 1.0) * w / 5.0
    torch.testing.assert_close(grads["weight"], expected.unsqueeze(1))
    torch.testing.assert_close(grads["bias"], torch.zeros(3, 1, dtype=F64))


def test_per_sample_grads_match_plain_autograd_row_by_row_and_in_mean():
    critic = _mlp_critic()
    real, fake, alpha = _batch(16, 5)
    grads = per_sample_critic_grads(critic, real, fake, alpha, gp_weight=10.0)
    for name, p in critic.named_parameters():
        assert grads[name].shape == (16, *p.shape)
    batch = _autograd_batch_grads(critic, real, fake, alpha, 10.0)
    for name in batch:
        torch.testing.assert_close(grads[name].mean(0), batch[name], atol=1e-5, rtol=1e-5)
    for i in (0, 9):
        row = _autograd_batch_grads(
            critic, real[i : i + 1], fake[i : i + 1], alpha[i : i + 1], 10.0
        )
        for name in row:
            torch.testing.assert_close(grads[name][i], row[name], atol=1e-5, rtol=1e-5)


def test_per_sample_grads_average_to_the_repo_critic_loss_gradient():
    torch.manual_seed(1)
    disc = LocalDiscriminator(6, (16,), 8, local_head=True)
    real, fake, alpha = _batch(10, 6, seed=2)
    grads = per_sample_critic_grads(disc, real, fake, alpha, gp_weight=10.0)
    loss, _ = critic_loss(disc, real, fake, alpha, gp_weight=10.0)
    loss.backward()
    for name, p in disc.named_parameters():
        torch.testing.assert_close(grads[name].mean(0), p.grad, atol=1e-5, rtol=1e-5)


def test_per_sample_grads_validate_inputs():
    critic = _mlp_critic()
    real, fake, alpha = _batch(4, 5)
    with pytest.raises(ValueError, match=r"BatchNorm \(1: BatchNorm1d\)"):
        per_sample_critic_grads(
            nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)),
            real,
            fake,
            alpha,
            10.0,
        )
    with pytest.raises(ValueError, match=r"differ in shape: \(4, 5\) vs \(3, 5\)"):
        per_sample_critic_grads(critic, real, fake[:3], alpha, 10.0)
    with pytest.raises(ValueError, match=r"alpha must have shape \(4, 1\), got \(4,\)"):
        per_sample_critic_grads(critic, real, fake, alpha[:, 0], 10.0)
    with pytest.raises(ValueError, match=r"gp_weight must be .* got -1\.0"):
        per_sample_critic_grads(critic, real, fake, alpha, -1.0)
    with pytest.raises(ValueError, match="one score per row"):
        per_sample_critic_grads(nn.Linear(5, 2), real, fake, alpha, 10.0)


# -- DP optimizer ------------------------------------------------------------------------


def _flat_per_sample(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)


@pytest.mark.parametrize("clip_rule", ["tiny", "median"])
def test_noiseless_dp_sgd_step_is_lr_times_mean_of_clipped_per_sample_grads(clip_rule):
    critic = _mlp_critic().double()
    real, fake, alpha = _batch(8, 5, dtype=F64)
    grads = per_sample_critic_grads(critic, real, fake, alpha, gp_weight=10.0)
    flat = _flat_per_sample(grads)
    norms = flat.norm(dim=1)
    clip = 1e-3 if clip_rule == "tiny" else float(norms.median())
    # By hand: each row scaled to norm <= clip, then averaged over the 8 rows.
    factors = torch.tensor([min(1.0, clip / float(n)) for n in norms], dtype=F64)
    expected_update = 0.5 * (factors[:, None] * flat).mean(0)
    before = torch.cat([p.detach().reshape(-1).clone() for p in critic.parameters()])
    optimizer = make_dp_optimizer(
        critic,
        torch.optim.SGD(critic.parameters(), lr=0.5),
        noise_multiplier=0.0,
        max_grad_norm=clip,
        expected_batch_size=8,
        generator=_gen(0),
    )
    assert isinstance(optimizer, DPOptimizer)
    set_grad_samples(critic, grads)
    optimizer.step()
    after = torch.cat([p.detach().reshape(-1) for p in critic.parameters()])
    # Opacus divides by (norm + 1e-6): a relative difference below 1e-6 / norm.
    torch.testing.assert_close(before - after, expected_update, rtol=1e-5, atol=1e-12)


def _one_noisy_step(seed: int | None) -> torch.Tensor:
    critic = _mlp_critic()
    real, fake, alpha = _batch(8, 5)
    optimizer = make_dp_optimizer(
        critic,
        torch.optim.SGD(critic.parameters(), lr=0.1),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        expected_batch_size=8,
        generator=None if seed is None else _gen(seed),
    )
    set_grad_samples(critic, per_sample_critic_grads(critic, real, fake, alpha, 10.0))
    optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in critic.parameters()])


def test_noisy_dp_sgd_step_is_reproducible_from_the_seed():
    assert torch.equal(_one_noisy_step(5), _one_noisy_step(5))
    assert not torch.equal(_one_noisy_step(5), _one_noisy_step(6))
    state = torch.get_rng_state()
    unseeded = _one_noisy_step(None)
    assert torch.equal(torch.get_rng_state(), state)
    assert not torch.equal(unseeded, _one_noisy_step(None))


def test_dp_sgd_noise_std_is_sigma_c_over_batch():
    # Zero per-sample grads: the SGD update is lr * N(0, (sigma C)^2) / B per coordinate.
    critic = nn.Linear(100, 100, bias=False)
    before = critic.weight.detach().clone()
    sigma, clip, batch = 2.0, 0.5, 4
    optimizer = make_dp_optimizer(
        critic,
        torch.optim.SGD(critic.parameters(), lr=1.0),
        noise_multiplier=sigma,
        max_grad_norm=clip,
        expected_batch_size=batch,
        generator=_gen(9),
    )
    set_grad_samples(critic, {"weight": torch.zeros(batch, 100, 100)})
    optimizer.step()
    step = (before - critic.weight.detach()).reshape(-1)
    assert float(step.std()) == pytest.approx(sigma * clip / batch, rel=0.05)
    set_grad_samples(critic, {"weight": torch.zeros(batch, 100, 100)})
    with pytest.raises(ValueError, match="zero_grad"):
        optimizer.step()


def test_make_dp_optimizer_validates():
    critic = _mlp_critic()
    sgd = torch.optim.SGD(critic.parameters(), lr=0.1)
    ok = {"noise_multiplier": 1.0, "max_grad_norm": 1.0, "expected_batch_size": 8}
    for key, value, match in [
        ("noise_multiplier", -1.0, r"noise_multiplier must be .* >= 0, got -1\.0"),
        ("max_grad_norm", 0.0, r"max_grad_norm must be .* > 0, got 0\.0"),
        ("expected_batch_size", 0, "expected_batch_size must be a positive integer, got 0"),
        ("expected_batch_size", 8.0, "expected_batch_size must be a positive integer, got 8.0"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_dp_optimizer(critic, sgd, **{**ok, key: value})  # type: ignore[arg-type]
    foreign = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"param_groups\[0\] .* not a parameter of the critic"):
        make_dp_optimizer(critic, foreign, **ok)  # type: ignore[arg-type]
    wrapped = make_dp_optimizer(critic, sgd, **ok)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="already a DPOptimizer"):
        make_dp_optimizer(critic, wrapped, **ok)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        make_dp_optimizer(critic, sgd, **ok, generator=1)  # type: ignore[arg-type]
    bn = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    with pytest.raises(ValueError, match="BatchNorm"):
        make_dp_optimizer(bn, torch.optim.SGD(bn.parameters(), lr=0.1), **ok)  # type: ignore[arg-type]


def test_set_grad_samples_validates_names_and_shapes():
    critic = _mlp_critic()
    real, fake, alpha = _batch(4, 5)
    grads = per_sample_critic_grads(critic, real, fake, alpha, 10.0)
    with pytest.raises(ValueError, match=r"missing \['4.bias'\], unknown \['extra'\]"):
        set_grad_samples(
            critic, {**{k: v for k, v in grads.items() if k != "4.bias"}, "extra": grads["4.bias"]}
        )
    with pytest.raises(
        ValueError, match=r"grads\['0.weight'\] must have shape \(B, 8, 5\), got \(4, 5, 8\)"
    ):
        set_grad_samples(critic, {**grads, "0.weight": grads["0.weight"].transpose(1, 2)})
    with pytest.raises(ValueError, match="disagree on the batch size"):
        set_grad_samples(critic, {**grads, "4.bias": grads["4.bias"][:3]})
    set_grad_samples(critic, grads)
    assert torch.equal(critic.get_parameter("0.weight").grad_sample, grads["0.weight"])  # type: ignore[attr-defined]
