"""Tests for the zCDP accounting of AIM and MST (Canonne, Kamath and Steinke 2020)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flwr_vflgan.privacy.zcdp import (
    exponential_rho,
    gaussian_rho,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_rho,
)


def _delta_on_a_grid(rho: float, epsilon: float) -> float:
    """The conversion's infimum over a fine grid of orders, computed independently."""
    alpha = np.linspace(1.0001, 400.0, 400_000)
    log_values = (
        (alpha - 1) * (alpha * rho - epsilon) + alpha * np.log1p(-1 / alpha) - np.log(alpha - 1)
    )
    return float(np.exp(log_values.min()))


@pytest.mark.parametrize("rho, epsilon", [(0.05, 1.0), (0.5, 3.0), (1.78, 10.0), (0.004, 0.5)])
def test_delta_is_the_infimum_over_orders(rho: float, epsilon: float) -> None:
    assert zcdp_delta(rho, epsilon) == pytest.approx(_delta_on_a_grid(rho, epsilon), rel=1e-3)


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-5), (10.0, 1e-5), (0.5, 1e-9), (3.0, 1e-4)])
def test_rho_and_epsilon_invert_delta(epsilon: float, delta: float) -> None:
    rho = zcdp_rho(epsilon, delta)
    assert zcdp_delta(rho, epsilon) == pytest.approx(delta, rel=1e-6)
    assert zcdp_delta(rho, epsilon) <= delta
    assert zcdp_epsilon(rho, delta) == pytest.approx(epsilon, rel=1e-9)
    # A larger rho would break the target: the budget is the largest that keeps it.
    assert zcdp_delta(rho * 1.01, epsilon) > delta


@pytest.mark.parametrize("rho", [0.01, 0.1, 1.0, 5.0])
def test_the_conversion_is_tighter_than_the_classic_one(rho: float) -> None:
    classic = rho + 2 * math.sqrt(rho * math.log(1 / 1e-5))
    assert zcdp_epsilon(rho, 1e-5) < classic


def test_known_values() -> None:
    # AIM's and MST's budget at (1, 1e-5): the classic bound would allow only 0.0225.
    assert zcdp_rho(1.0, 1e-5) == pytest.approx(0.030557, rel=1e-4)
    assert gaussian_rho(sigma=2.0) == pytest.approx(0.125)
    assert gaussian_rho(sigma=2.0, sensitivity=2.0) == pytest.approx(0.5)
    assert exponential_rho(0.4) == pytest.approx(0.02)
    assert zcdp_delta(0.0, 1.0) == 0.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: zcdp_delta(-0.1, 1.0), "rho >= 0"),
        (lambda: zcdp_rho(0.0, 1e-5), "epsilon must be positive"),
        (lambda: zcdp_rho(1.0, 0.0), "delta must be in"),
        (lambda: zcdp_epsilon(0.1, 1.5), "delta must be in"),
    ],
)
def test_bad_budgets_are_named(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
