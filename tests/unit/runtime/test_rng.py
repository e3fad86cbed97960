"""Counter-based random streams: pure functions of (seed, purpose, step)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from flwr_vflgan.data import Span
from flwr_vflgan.nn.models import LocalDiscriminator, PartyGenerator, seeded_init
from flwr_vflgan.runtime.rng import (
    Stream,
    batch_indices,
    derive_seed,
    latent_noise,
    numpy_generator,
    seed_commitment,
    torch_generator,
    uniform_alpha,
)


def test_derive_seed_is_a_pure_function_in_63_bits():
    assert derive_seed(7, Stream.BATCH, 3) == derive_seed(7, Stream.BATCH, 3)
    assert derive_seed(7, Stream.BATCH) == derive_seed(7, Stream.BATCH, 0, 0)
    seeds = {
        derive_seed(seed, stream, step, extra)
        for seed in (0, 1, 2**40)
        for stream in Stream
        for step in (0, 1, 1000)
        for extra in (0, 1)
    }
    assert len(seeds) == 3 * len(Stream) * 3 * 2  # no collisions between any inputs
    assert all(0 <= s < 2**63 for s in seeds)


@pytest.mark.parametrize(("seed", "step", "extra"), [(-1, 0, 0), (0, -1, 0), (0, 0, -2)])
def test_derive_seed_rejects_negative_inputs(seed, step, extra):
    with pytest.raises(ValueError, match=r"seed, step and extra must be >= 0"):
        derive_seed(seed, Stream.NOISE, step, extra)


def test_generators_are_seeded_by_derive_seed():
    a = torch.rand(5, generator=torch_generator(3, Stream.GUMBEL, 4, 1))
    b = torch.rand(5, generator=torch.Generator().manual_seed(derive_seed(3, Stream.GUMBEL, 4, 1)))
    assert torch.equal(a, b)
    x = numpy_generator(3, Stream.PUBLISH, 2).random(5)
    y = np.random.default_rng(derive_seed(3, Stream.PUBLISH, 2)).random(5)
    np.testing.assert_array_equal(x, y)


def test_batch_indices_unique_in_range_fixed_size_and_shared():
    for step in range(20):
        party_a = batch_indices(shared_seed=5, step=step, n_rows=50, batch_size=10)
        party_b = batch_indices(shared_seed=5, step=step, n_rows=50, batch_size=10)
        assert torch.equal(party_a, party_b)  # every party draws the same rows
        assert party_a.shape == (10,) and party_a.dtype == torch.int64
        assert len(set(party_a.tolist())) == 10
        assert int(party_a.min()) >= 0 and int(party_a.max()) < 50
    assert not torch.equal(batch_indices(5, 0, 50, 10), batch_indices(5, 1, 50, 10))
    assert not torch.equal(batch_indices(5, 0, 50, 10), batch_indices(6, 0, 50, 10))
    # The whole table as one batch is a permutation.
    assert sorted(batch_indices(5, 0, 50, 50).tolist()) == list(range(50))


def test_batch_indices_cover_rows_uniformly():
    counts = torch.zeros(20)
    for step in range(2000):
        counts[batch_indices(1, step, 20, 5)] += 1
    # Each row is drawn with probability 5/20: expected 500 of 2000, sd ~19.
    assert torch.all((counts - 500).abs() < 100)


def test_batch_larger_than_table_raises():
    with pytest.raises(ValueError, match=r"batch_size=11 exceeds the 10 training rows"):
        batch_indices(0, 0, n_rows=10, batch_size=11)


def test_latent_noise_streams():
    z = latent_noise(4, 2, 6, 3)
    assert z.shape == (6, 3) and z.dtype == torch.float32
    assert torch.equal(z, latent_noise(4, 2, 6, 3))
    assert not torch.equal(z, latent_noise(4, 3, 6, 3))  # other step
    assert not torch.equal(z, latent_noise(5, 2, 6, 3))  # other seed
    assert not torch.equal(z, latent_noise(4, 2, 6, 3, Stream.EVAL_NOISE))  # other stream
    # Same draw as a generator seeded from (seed, NOISE, step).
    assert torch.equal(z, torch.randn(6, 3, generator=torch_generator(4, Stream.NOISE, 2)))


def test_uniform_alpha():
    alpha = uniform_alpha(1, Stream.LOCAL_ALPHA, 7, 1000)
    assert alpha.shape == (1000, 1)
    assert torch.all(alpha >= 0) and torch.all(alpha < 1)
    assert abs(alpha.mean().item() - 0.5) < 0.05
    assert torch.equal(alpha, uniform_alpha(1, Stream.LOCAL_ALPHA, 7, 1000))
    assert not torch.equal(alpha, uniform_alpha(1, Stream.LOCAL_ALPHA, 8, 1000))
    assert not torch.equal(alpha, uniform_alpha(1, Stream.SERVER_ALPHA, 7, 1000))


def test_nothing_touches_the_global_generators():
    torch.manual_seed(2024)
    np.random.seed(2024)
    torch_state = torch.get_rng_state()

    derive_seed(1, Stream.INIT, 2)
    batch_indices(1, 2, 30, 10)
    latent_noise(1, 2, 4, 3)
    uniform_alpha(1, Stream.SERVER_ALPHA, 2, 4)
    numpy_generator(1, Stream.PUBLISH).permutation(10)
    torch.rand(3, generator=torch_generator(1, Stream.GUMBEL, 5))
    with seeded_init(derive_seed(1, Stream.INIT)):
        PartyGenerator(4, [8, 8], [Span("x", 0, 3, "gumbel_softmax")])
        LocalDiscriminator(3, [8], 4, local_head=True)

    assert torch.equal(torch.get_rng_state(), torch_state)
    # NumPy's global generator continues exactly where seeding left it.
    drawn = np.random.random(4)
    np.random.seed(2024)
    np.testing.assert_array_equal(drawn, np.random.random(4))


def test_seed_commitment_is_sha256_of_tag_run_seed_and_shared_seed():
    shared, run = 2**63 - 25, 42
    payload = b"flwr-vflgan shared-seed commitment v1\0" + run.to_bytes(8, "big")
    expected = hashlib.sha256(payload + shared.to_bytes(8, "big")).hexdigest()
    assert seed_commitment(shared, run) == expected
    assert seed_commitment(shared + 1, run) != expected  # another shared seed
    assert seed_commitment(shared, run + 1) != expected  # the same seed in another run
    assert str(shared) not in expected


def test_seed_commitment_refuses_seeds_outside_64_bits():
    with pytest.raises(ValueError, match=r"seeds must be integers in \[0, 2\^64\)"):
        seed_commitment(-1, 0)
    with pytest.raises(ValueError, match="run 18446744073709551616"):
        seed_commitment(0, 2**64)
