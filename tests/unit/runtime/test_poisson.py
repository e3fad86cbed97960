"""Poisson-sampled discriminator batches (DP-SGD with dp.sampling=poisson)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flwr_vflgan.runtime.rng import discriminator_batch, poisson_batch_indices


def test_every_row_joins_with_the_sampling_rate() -> None:
    n, rate, steps = 200, 0.1, 4000
    counts = np.zeros(n)
    sizes = []
    for step in range(steps):
        rows = poisson_batch_indices(7, step, n, rate).numpy()
        assert len(set(rows)) == len(rows) and (np.diff(rows) > 0).all()
        counts[rows] += 1
        sizes.append(len(rows))
    # Each row's inclusion frequency ~ Binomial(steps, rate)/steps: sd = sqrt(0.1*0.9/4000).
    assert np.abs(counts / steps - rate).max() < 5 * np.sqrt(rate * (1 - rate) / steps)
    # Batch sizes are Binomial(n, rate): mean 20, variance 18.
    assert np.mean(sizes) == pytest.approx(20, abs=0.3)
    assert np.var(sizes) == pytest.approx(18, rel=0.15)


def test_batches_are_shared_by_seed_and_can_be_empty() -> None:
    assert torch.equal(
        poisson_batch_indices(3, 5, 1000, 0.05), poisson_batch_indices(3, 5, 1000, 0.05)
    )
    assert not torch.equal(
        poisson_batch_indices(3, 5, 1000, 0.05), poisson_batch_indices(4, 5, 1000, 0.05)
    )
    sizes = [len(poisson_batch_indices(1, step, 100, 0.005)) for step in range(400)]
    assert 0 in sizes and max(sizes) >= 2
    with pytest.raises(ValueError, match=r"rate must be in \(0, 1\], got 0"):
        poisson_batch_indices(1, 0, 10, 0.0)


def test_discriminator_batch_picks_the_scheme() -> None:
    fixed = discriminator_batch(1, 2, 500, 64)
    assert len(fixed) == 64
    poisson = discriminator_batch(1, 2, 500, 64, poisson=True)
    assert torch.equal(poisson, poisson_batch_indices(1, 2, 500, 64 / 500))
