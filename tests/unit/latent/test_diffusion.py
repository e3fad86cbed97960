"""Tests for the server's latent DDPM: the schedule's algebra, fitting a known mixture,
determinism and checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flwr_vflgan.latent import diffusion
from flwr_vflgan.latent.config import LatentSettings
from flwr_vflgan.latent.diffusion import (
    LatentDiffusion,
    NoiseSchedule,
    cosine_betas,
    linear_betas,
    timestep_embedding,
)

TINY = LatentSettings(
    diffusion_min_steps=1,
    diffusion_steps=20,
    denoiser_hidden=(16, 16),
    diffusion_epochs=2,
    diffusion_batch_size=32,
)


def _mixture(rows: int, seed: int) -> np.ndarray:
    """Two Gaussian clusters in 2-D, half the rows each: (-2, 0) and (2, 1), std 0.3."""
    rng = np.random.default_rng(seed)
    side = rng.random(rows) < 0.5
    centres = np.where(side[:, None], [-2.0, 0.0], [2.0, 1.0])
    return (centres + 0.3 * rng.normal(size=(rows, 2))).astype(np.float32)


# -- the noise schedule ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cosine", "linear"])
@pytest.mark.parametrize("steps", [1, 10, 100, 1000])
def test_alphas_cumprod_decrease_from_near_one_towards_zero(kind: str, steps: int) -> None:
    schedule = NoiseSchedule.of(steps, kind)  # type: ignore[arg-type]
    abar = schedule.alphas_cumprod
    assert schedule.steps == steps
    assert np.all((abar > 0) & (abar < 1))
    assert np.all(np.diff(abar) < 0)
    if steps >= 100:
        assert abar[0] > 0.99 and abar[-1] < 0.01


def test_cosine_schedule_matches_its_closed_form() -> None:
    # Nichol and Dhariwal eq. 17: abar_t = f(t) / f(0), f(t) = cos((t/T + s)/(1 + s) pi/2)^2.
    steps, s = 50, 0.008
    f = [math.cos((t / steps + s) / (1 + s) * math.pi / 2) ** 2 for t in range(steps + 1)]
    expected = [f[t] / f[0] for t in range(1, steps + 1)]
    # The last beta is clipped at 0.999, so the last abar is 0.001 abar_{T-1}, not 0.
    np.testing.assert_allclose(
        NoiseSchedule(cosine_betas(steps)).alphas_cumprod[:-1], expected[:-1]
    )


def test_linear_schedule_is_ho_et_al_rescaled() -> None:
    np.testing.assert_allclose(linear_betas(1000)[[0, -1]], [1e-4, 0.02])
    np.testing.assert_allclose(linear_betas(100)[[0, -1]], [1e-3, 0.2])


def test_q_sample_has_the_closed_form_mean_and_variance() -> None:
    schedule = NoiseSchedule.of(100, "cosine")
    gen = torch.Generator().manual_seed(0)
    rows, t = 200_000, 30
    x0 = torch.full((rows, 1), 1.5)
    xt = schedule.q_sample(x0, torch.full((rows,), t), torch.randn(rows, 1, generator=gen))
    abar = float(np.prod([1 - b for b in schedule.betas[: t + 1]]))  # by hand
    assert float(xt.mean()) == pytest.approx(1.5 * math.sqrt(abar), abs=0.01)
    assert float(xt.var()) == pytest.approx(1 - abar, rel=0.02)


@pytest.mark.parametrize("kind", ["cosine", "linear"])
def test_posterior_mean_of_a_noiseless_path_is_the_previous_level(kind: str) -> None:
    # With x_t = sqrt(abar_t) x0 exactly, the posterior mean must be sqrt(abar_{t-1}) x0.
    schedule = NoiseSchedule.of(40, kind)  # type: ignore[arg-type]
    x0_coef, xt_coef, sigma = schedule.posterior_coefficients()
    abar = schedule.alphas_cumprod
    previous = np.concatenate([[1.0], abar[:-1]])
    np.testing.assert_allclose(x0_coef + xt_coef * np.sqrt(abar), np.sqrt(previous), rtol=1e-9)
    assert sigma[0] == 0.0 and np.all(sigma[1:] > 0)


def test_betas_outside_the_open_unit_interval_are_refused() -> None:
    with pytest.raises(ValueError, match=r"betas must be a non-empty 1-D array in \(0, 1\)"):
        NoiseSchedule(np.array([0.1, 1.0]))
    with pytest.raises(ValueError, match="schedule kind must be 'cosine' or 'linear'"):
        NoiseSchedule.of(10, "quadratic")  # type: ignore[arg-type]


def test_time_embedding_is_sines_and_cosines_of_the_level() -> None:
    embedding = timestep_embedding(torch.tensor([0, 7]), dim=8)
    assert embedding.shape == (2, 8)
    torch.testing.assert_close(embedding[0], torch.tensor([1.0] * 4 + [0.0] * 4))
    assert float(embedding[1, 4]) == pytest.approx(math.sin(7.0), abs=1e-6)


# -- fitting and sampling ---------------------------------------------------------------------


def test_the_ddpm_fits_a_two_dimensional_gaussian_mixture() -> None:
    data = _mixture(2000, seed=0)
    settings = LatentSettings(
        diffusion_min_steps=1,
        diffusion_steps=50,
        denoiser_hidden=(64, 64, 64),
        diffusion_epochs=100,
        diffusion_batch_size=64,
        diffusion_lr=2e-3,
    )
    model = LatentDiffusion(2, settings, seed=0)
    losses = model.fit(data)
    assert losses[-1] < losses[0]
    samples = model.sample(2000, seed=1)
    assert samples.dtype == np.float32 and samples.shape == (2000, 2)
    # The moments of the whole: the mixture's mean is (0, 0.5), its covariance
    # [[4.09, 1], [1, 0.34]] (half the squared distance of the centres, plus 0.09).
    np.testing.assert_allclose(samples.mean(axis=0), data.mean(axis=0), atol=0.25)
    np.testing.assert_allclose(np.cov(samples.T), np.cov(data.T), atol=0.5)
    # Each mode keeps its weight, centre and spread, and is sharp: most samples lie
    # within 3 standard deviations of a centre.
    left = samples[:, 0] < 0
    assert 0.44 < left.mean() < 0.56
    near = np.linalg.norm(samples - np.where(left[:, None], [-2.0, 0.0], [2.0, 1.0]), axis=1) < 0.9
    assert near.mean() > 0.85
    for mode, centre in ((left & near, [-2.0, 0.0]), (~left & near, [2.0, 1.0])):
        np.testing.assert_allclose(samples[mode].mean(axis=0), centre, atol=0.1)
        assert np.all((samples[mode].std(axis=0) > 0.2) & (samples[mode].std(axis=0) < 0.4))


def test_samples_stay_in_the_box_of_the_training_latents() -> None:
    data = _mixture(200, seed=1)
    model = LatentDiffusion(2, TINY, seed=0)
    model.fit(data)  # barely trained: the clip of x0 keeps the samples in range anyway
    samples = model.sample(500, seed=0)
    assert np.all(samples >= data.min(axis=0) - 1e-4) and np.all(samples <= data.max(axis=0) + 1e-4)


def test_the_same_seed_gives_the_same_losses_and_samples() -> None:
    data = _mixture(200, seed=2)
    first, second = LatentDiffusion(2, TINY, seed=5), LatentDiffusion(2, TINY, seed=5)
    assert first.fit(data) == second.fit(data)
    assert np.array_equal(first.sample(50, seed=3), second.sample(50, seed=3))
    assert np.array_equal(first.sample(50, seed=3), first.sample(50, seed=3))
    assert not np.array_equal(first.sample(50, seed=3), first.sample(50, seed=4))
    other = LatentDiffusion(2, TINY, seed=6)
    other.fit(data)
    assert not np.array_equal(first.sample(50, seed=3), other.sample(50, seed=3))


def test_fitting_leaves_the_global_generator_alone() -> None:
    before = torch.get_rng_state()
    LatentDiffusion(2, TINY, seed=0).fit(_mixture(100, seed=0))
    assert torch.equal(torch.get_rng_state(), before)


def test_a_checkpoint_gives_back_the_same_samples() -> None:
    model = LatentDiffusion(2, TINY, seed=0)
    model.fit(_mixture(200, seed=3))
    state = model.state()
    assert {"latent_mean", "latent_std", "latent_low", "latent_high"} <= set(state)
    copy = LatentDiffusion.restore(2, TINY, 0, state)
    assert np.array_equal(copy.sample(64, seed=9), model.sample(64, seed=9))
    # The state is a copy: changing it does not change the model.
    state["latent_mean"][:] = 100.0
    assert np.array_equal(copy.sample(8, seed=1), model.sample(8, seed=1))


def test_a_checkpoint_of_another_shape_is_refused() -> None:
    model = LatentDiffusion(2, TINY, seed=0)
    model.fit(_mixture(100, seed=0))
    state = model.state()
    with pytest.raises(ValueError, match=r"latent_mean has shape \(2,\), expected \(3,\)"):
        LatentDiffusion.restore(3, TINY, 0, state)
    with pytest.raises(ValueError, match=r"diffusion state lacks \['latent_std'\]"):
        LatentDiffusion.restore(2, TINY, 0, {k: v for k, v in state.items() if k != "latent_std"})
    with pytest.raises(ValueError, match=r"unknown entries \['extra'\]"):
        LatentDiffusion.restore(2, TINY, 0, {**state, "extra": np.zeros(1)})
    wider = LatentSettings(**{**TINY.to_dict(), "denoiser_hidden": [8, 16]})
    with pytest.raises(
        ValueError, match=r"net.0.weight has shape \(16, \d+\), expected \(8, \d+\)"
    ):
        LatentDiffusion.restore(2, wider, 0, state)


def test_sampling_runs_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diffusion, "SAMPLE_BATCH", 7)
    model = LatentDiffusion(2, TINY, seed=0)
    model.fit(_mixture(100, seed=0))
    samples = model.sample(20, seed=0)
    assert samples.shape == (20, 2) and np.isfinite(samples).all()


def test_bad_inputs_are_named() -> None:
    model = LatentDiffusion(2, TINY, seed=0)
    with pytest.raises(ValueError, match="not fitted yet"):
        model.sample(3, seed=0)
    with pytest.raises(ValueError, match="not fitted yet"):
        model.state()
    with pytest.raises(ValueError, match=r"latents must have shape \(n >= 2, 2\), got \(5, 3\)"):
        model.fit(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="latents must be finite: 1 rows"):
        model.fit(np.array([[0.0, 1.0], [np.inf, 0.0]]))
    model.fit(_mixture(50, seed=0))
    with pytest.raises(ValueError, match="n must be a positive integer, got 0"):
        model.sample(0, seed=0)
    with pytest.raises(ValueError, match="dim must be a positive integer, got 0"):
        LatentDiffusion(0, TINY, seed=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        LatentDiffusion(2, TINY, seed=-1)


def test_a_constant_latent_column_is_kept_constant() -> None:
    data = np.column_stack([_mixture(100, seed=0)[:, 0], np.full(100, 3.0)]).astype(np.float32)
    model = LatentDiffusion(2, TINY, seed=0)
    model.fit(data)
    assert np.all(model.sample(30, seed=0)[:, 1] == 3.0)
