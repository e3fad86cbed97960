"""VDGAN-PATE's voting (paper 004, Algorithm 4) and its account (Algorithm 5, corrected)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flwr_vflgan.privacy.pate import (
    PateAccount,
    calibrate_sigma,
    compress,
    vote,
    vote_sensitivity,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_compression_keeps_the_top_k_entries_as_signs_by_hand():
    """g = (0.5, -2, 0.1, 3), K = 2, c = 1: entries 3 and 1 are kept, clipped to 1 and -1,
    normalised by 1, so their signs are certain (+1 with probability (1 + g) / 2)."""
    grads = torch.tensor([[[0.5, -2.0, 0.1, 3.0]]])
    for seed in range(5):
        signs = compress(grads, top_k=2, clip=1.0, generator=_gen(seed))
        assert signs.tolist() == [[[0.0, -1.0, 0.0, 1.0]]]


def test_a_kept_entry_is_positive_with_probability_one_plus_g_over_two():
    """One teacher, K = 2, entries 0.5 and 1.0 after clipping at 1 (the largest is 1, so
    0.5 stays 0.5): +1 with probability 0.75 and 1."""
    grads = torch.tensor([[0.5, 4.0, 0.0]]).expand(1, 20000, 3).contiguous()
    signs = compress(grads, top_k=2, clip=1.0, generator=_gen(1))
    assert (signs[..., 2] == 0).all() and (signs[..., 1] == 1).all()
    assert float((signs[..., 0] == 1).float().mean()) == pytest.approx(0.75, abs=0.01)
    assert (signs.abs().sum(dim=2) == 2).all()  # exactly K non-zero entries per row


def test_normalisation_divides_by_the_largest_kept_magnitude():
    """Clipped at c = 10, the kept entries (0.2, 0.4) become (0.5, 1): +1 with probability
    0.75 and 1."""
    grads = torch.tensor([[0.2, 0.4, 0.0]]).expand(1, 20000, 3).contiguous()
    signs = compress(grads, top_k=2, clip=10.0, generator=_gen(2))
    assert (signs[..., 1] == 1).all()
    assert float((signs[..., 0] == 1).float().mean()) == pytest.approx(0.75, abs=0.01)


def test_the_vote_keeps_a_direction_only_past_the_threshold():
    """Three teachers, beta = 0.5 (1.5 votes): sums 3, 1, -2, -1 become 1, 0, -1, 0."""
    signs = torch.tensor(
        [
            [[1.0, 1.0, -1.0, -1.0]],
            [[1.0, 1.0, -1.0, 0.0]],
            [[1.0, -1.0, 0.0, 0.0]],
        ]
    )
    voted = vote(signs, sigma=1e-6, threshold=0.5, generator=_gen())
    assert voted.tolist() == [[1.0, 0.0, -1.0, 0.0]]
    # Noise of the given scale is added to the sum before the threshold.
    many = vote(torch.zeros(1, 20000, 1), sigma=2.0, threshold=0.5, generator=_gen(3))
    # P(|N(0, 4)| >= 0.5) = 2 (1 - Phi(0.25)) = 0.8026
    assert float(many.abs().mean()) == pytest.approx(0.8026, abs=0.01)


def test_the_sensitivity_is_that_of_k_flipped_signs():
    """Two teachers' sign vectors with the same K entries and every sign flipped are the
    farthest apart: 2 sqrt(K) (eq. 4.16 prints sqrt(2) K)."""
    k = 9
    a = torch.zeros(30)
    a[:k] = 1
    assert float((a - (-a)).norm()) == pytest.approx(vote_sensitivity(k)) == 6.0
    b = torch.zeros(30)
    b[k : 2 * k] = 1  # disjoint entries: sqrt(2K), smaller
    assert float((a - b).norm()) < vote_sensitivity(k)
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        vote_sensitivity(0)


def test_the_account_matches_a_hand_computed_case():
    """sigma 10, K 1 (s = 2), m 1, T 1: rdp(alpha) = 4 alpha / 200 = alpha / 50. At
    delta 1e-5 the best order is 1 + sqrt(50 log 1e5) = 24.99; order 25 gives
    0.5 + log(1e5) / 24 = 0.97971."""
    account = PateAccount(sigma=10.0, top_k=1, batch_size=1)
    want = 25 / 50 + math.log(1e5) / 24
    assert account.epsilon(1, 1e-5) == pytest.approx(want, rel=1e-9)
    # Releases compose: T iterations of m rows at N parties is T m N of them.
    joint = PateAccount(sigma=10.0, top_k=1, batch_size=4, parties=3)
    np.testing.assert_allclose(joint.rdp(5), 60 * account.rdp(1))
    # No release: only the conversion's term, smallest at the largest order (1024).
    assert account.epsilon(0, 1e-5) == pytest.approx(math.log(1e5) / 1023, rel=1e-9)


def test_the_budget_stop_and_the_calibration_agree():
    account = PateAccount(sigma=50.0, top_k=4, batch_size=64, parties=2)
    allowed = account.allowed_iterations(5.0, 1e-5)
    assert allowed > 0
    assert account.epsilon(allowed, 1e-5) <= 5.0 < account.epsilon(allowed + 1, 1e-5)
    sigma = calibrate_sigma(5.0, 1e-5, iterations=allowed, batch_size=64, top_k=4, parties=2)
    assert sigma <= 50.0 * 1.001
    calibrated = PateAccount(sigma, 4, 64, 2)
    assert calibrated.epsilon(allowed, 1e-5) <= 5.0
    assert PateAccount(sigma / 1.01, 4, 64, 2).epsilon(allowed, 1e-5) > 5.0
    assert PateAccount(0.1, 4, 64).allowed_iterations(1.0, 1e-5) == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: compress(torch.zeros(2, 3), 1, 1.0, None), "grads must be"),
        (lambda: compress(torch.zeros(1, 2, 3), 4, 1.0, None), r"top_k must be in \[1, 3\]"),
        (lambda: compress(torch.zeros(1, 2, 3), 1, 0.0, None), "clip must be > 0"),
        (lambda: compress(torch.full((1, 1, 2), math.nan), 1, 1.0, None), "non-finite"),
        (lambda: vote(torch.zeros(1, 2, 3), 0.0, 0.5, None), "sigma must be > 0"),
        (lambda: vote(torch.zeros(1, 2, 3), 1.0, -0.1, None), "threshold must be >= 0"),
        (lambda: PateAccount(1.0, 1, 0), "batch_size must be >= 1"),
        (lambda: PateAccount(1.0, 1, 1).epsilon(1, 1.0), r"delta must be in \(0, 1\)"),
        (lambda: calibrate_sigma(0.0, 1e-5, iterations=1, batch_size=1, top_k=1), "> 0"),
    ],
)
def test_bad_arguments_are_refused_with_their_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_plan_calibrates_reports_and_round_trips():
    from flwr_vflgan.privacy import DPConfig
    from flwr_vflgan.privacy.pate import PatePlan

    dp = DPConfig(mechanism="pate", target_epsilon=4.0, delta=1e-5, pate_top_k=3)
    plan = PatePlan.calibrate(dp, iterations=100, batch_size=16, parties=2)
    assert plan.allowed_iterations >= 100
    assert PatePlan.restore(plan.state()) == plan
    spent = plan.summary("client 0", 100)
    assert spent["accountant"] == "pate-votes" and spent["parts"] == 2
    assert 3.9 < spent["epsilon"] <= 4.0
    fixed = DPConfig(mechanism="pate", target_epsilon=4.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="too small for one iteration of votes"):
        PatePlan.calibrate(fixed, iterations=100, batch_size=16, parties=2)
