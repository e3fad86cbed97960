"""Zero-concentrated DP (Bun and Steinke 2016): the accounting of AIM and MST.

A mechanism is ``rho``-zCDP when its Rényi divergence of every order ``alpha > 1`` is at
most ``rho * alpha``. The Gaussian mechanism with L2 sensitivity ``s`` and noise ``sigma``
is ``s^2 / (2 sigma^2)``-zCDP, the exponential mechanism with parameter ``epsilon`` (its
quality having sensitivity 1) is ``epsilon^2 / 8``-zCDP (Cesar and Rogers 2021), and
budgets add under composition. A ``rho``-zCDP mechanism is ``(epsilon, delta)``-DP with
(Canonne, Kamath and Steinke 2020, Proposition 7)

    delta = inf_{alpha > 1} exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1)
            * (1 - 1 / alpha)^alpha,

tighter than the classic ``epsilon = rho + 2 sqrt(rho log(1 / delta))``. The infimum's
exponent is convex in ``alpha``, so :func:`zcdp_delta` finds its minimiser by bisection
on the derivative; :func:`zcdp_rho` and :func:`zcdp_epsilon` invert it by bisection.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["exponential_rho", "gaussian_rho", "zcdp_delta", "zcdp_epsilon", "zcdp_rho"]

_BISECTIONS = 200


def _log_delta(rho: float, epsilon: float, alpha: float) -> float:
    """The logarithm of the bound's value at order ``alpha``."""
    return (
        (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)
    )


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest ``delta`` for which ``rho``-zCDP gives ``(epsilon, delta)``-DP.

    Raises
    ------
    ValueError
        ``rho`` or ``epsilon`` is negative.
    """
    if rho < 0 or epsilon < 0:
        raise ValueError(f"zCDP needs rho >= 0 and epsilon >= 0, got {rho!r} and {epsilon!r}")
    if rho == 0:
        return 0.0
    # d/d alpha of the exponent: (2 alpha - 1) rho - epsilon + log(1 - 1/alpha); increasing.
    low, high = _boundary(
        lambda alpha: (2 * alpha - 1) * rho - epsilon + math.log1p(-1 / alpha) < 0,
        1.0 + 1e-9,
        max(2.0, (epsilon + 1) / (2 * rho) + 2),
    )
    return min(1.0, math.exp(_log_delta(rho, epsilon, (low + high) / 2)))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest ``epsilon`` for which ``rho``-zCDP gives ``(epsilon, delta)``-DP."""
    _check_delta(delta)
    if rho < 0:
        raise ValueError(f"zCDP needs rho >= 0, got {rho!r}")
    classic = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    return _boundary(lambda e: zcdp_delta(rho, e) > delta, 0.0, classic + 1.0)[1]


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ``rho`` whose zCDP gives ``(epsilon, delta)``-DP: the budget AIM and
    MST spend for a target ``(epsilon, delta)``."""
    _check_delta(delta)
    if not epsilon > 0:
        raise ValueError(f"the target epsilon must be positive, got {epsilon!r}")
    return _boundary(lambda r: zcdp_delta(r, epsilon) <= delta, 0.0, epsilon + 1.0)[0]


def gaussian_rho(sigma: float, sensitivity: float = 1.0) -> float:
    """zCDP of one Gaussian release with L2 ``sensitivity`` and noise ``sigma``."""
    return sensitivity**2 / (2 * sigma**2)


def exponential_rho(epsilon: float) -> float:
    """zCDP of one exponential-mechanism selection with parameter ``epsilon``."""
    return epsilon**2 / 8


def _boundary(holds: Callable[[float], bool], low: float, high: float) -> tuple[float, float]:
    """Bisection of ``[low, high]`` for a condition true below a point and false above
    it: the last bracket ``(low, high)``, ``holds(low)`` true and ``holds(high)`` false
    (at the ends, where it never changes)."""
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if holds(middle):
            low = middle
        else:
            high = middle
    return low, high


def _check_delta(delta: float) -> None:
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
