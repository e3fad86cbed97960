"""Label-leakage defenses of Li et al. 2022 on the cut-layer gradients (paper 002's baselines).

"Label Leakage and Protection in Two-party Split Learning" (Li, Sun, Wang, Yang, Chen,
Han; ICLR 2022) perturbs the per-example gradients ``g`` (shape ``(n, d)``) that the
label party sends back to a non-label party. This module implements the paper's two
defenses from the formulas (not from the reference TensorFlow code):

**max norm** (:func:`max_norm`, ``"expectation"`` in the reference code). Every example is
rescaled by a random factor so that, in expectation, its squared norm equals the largest
squared norm in the batch, which defeats the norm attack::

    sigma_i = sqrt(max(max_j ||g_j||^2 / ||g_i||^2 - 1, 0))
    g~_i    = g_i * (1 + sigma_i * xi_i),    xi_i ~ N(0, 1), one scalar per example

so ``E||g~_i||^2 = ||g_i||^2 (1 + sigma_i^2) = max_j ||g_j||^2``. The noise only moves
``g_i`` along its own direction (up to a sign flip). Rows of norm zero stay zero.

**Marvell** (:func:`marvell`, ``"sumKL"`` in the reference code). Let ``mean_1``,
``mean_0`` be the mean gradients of the batch's positives and negatives,
``g_diff = mean_1 - mean_0``, ``gsq = ||g_diff||^2``, ``v`` (``u``) the per-coordinate
population variance of the positives' (negatives') gradients averaged over the ``d``
coordinates, ``p`` the fraction of positives and ``P = scale * gsq`` the noise power.
Class ``k`` receives zero-mean Gaussian noise with covariance
``Sigma_k = (lam1k - lam2k) w w^T + lam2k I`` (``w = g_diff / ||g_diff||``): variance
``lam1k`` along ``g_diff`` and ``lam2k`` in every orthogonal direction. Modelling the
perturbed gradients of class ``k`` as ``N(mean_k, u_k I + Sigma_k)``, the lambdas minimise
the symmetric KL divergence between the two classes,

    obj = (d-1)(lam20+u)/(lam21+v) + (d-1)(lam21+v)/(lam20+u)
          + (lam10+u+gsq)/(lam11+v) + (lam11+v+gsq)/(lam10+u),
    sum_kl = obj / 2 - d,

over ``lam >= 0`` with ``lam20 <= lam10``, ``lam21 <= lam11``, the power constraint
``p tr(Sigma_1) + (1-p) tr(Sigma_0) = P``, i.e.
``p lam11 + p(d-1) lam21 + (1-p) lam10 + (1-p)(d-1) lam20 = P``, and ``lam21 = 0`` when
``u <= v`` (``lam20 = 0`` when ``u > v``): only the class with the smaller spread gets
isotropic noise. ``uv_choice`` selects the ``u, v`` the optimisation assumes: ``"uv"``
(as measured), ``"same"`` (both ``(u+v)/2``) or ``"zero"`` (both 0).

Solver (:func:`solve_marvell`). The problem is homogeneous of degree 0, so it is solved in
units of ``max(gsq, u, v, P)``. Eliminating one variable by the equality constraint
leaves, for ``d = 1``, a convex one-dimensional problem in ``lam10`` (solved by bounded
Brent minimisation, compared with the interval's end points) and, for ``d > 1``, a
two-dimensional problem on a triangle (solved by a dense barycentric grid search whose
best points start SLSQP and a Nelder-Mead polish; the best feasible point is kept, and
every candidate is projected back onto the triangle so the power constraint holds
exactly).

Decisions
---------
* When ``u = v = 0`` (``uv_choice="zero"``, or a batch whose classes have no spread) the
  perturbed distributions are one-dimensional: only ``lam10`` and ``lam11`` are optimised
  (``lam20 = lam21 = 0``), the objective is ``(lam10+gsq)/lam11 + (lam11+gsq)/lam10`` and
  ``sum_kl = obj / 2 - 1`` (the paper's closed form is :func:`zero_uv_closed_form`).
* In :func:`sym_kl` a ratio ``0/0`` counts as 1 (two identical degenerate directions add
  no divergence) and ``x/0`` with ``x > 0`` as ``+inf``; ``sum_kl_before`` (the divergence
  without noise) is therefore ``+inf`` when a class has no spread.
* A batch with a single class, or with ``g_diff = 0``, has no Marvell perturbation
  defined: :func:`marvell` returns the gradients unchanged (a copy) and ``None``.
* Dynamic mode (``sum_kl_threshold``): the scale is multiplied by 1.5 until
  ``sum_kl <= threshold``, at most :data:`MAX_DYNAMIC_STEPS` times. If the threshold is
  still not met, a warning is logged and the perturbation at the largest scale tried is
  returned (training goes on; the returned solution's ``sum_kl`` shows the shortfall).
* Noise is drawn from the given ``torch.Generator`` (on the gradients' device) in the
  gradients' dtype, so results are reproducible from the generator's seed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import torch
from scipy.optimize import minimize, minimize_scalar

__all__ = [
    "MAX_DYNAMIC_STEPS",
    "UV_CHOICES",
    "MarvellSolution",
    "marvell",
    "max_norm",
    "solve_marvell",
    "sym_kl",
    "zero_uv_closed_form",
]

_LOG = logging.getLogger(__name__)

UvChoice = Literal["uv", "same", "zero"]
UV_CHOICES: tuple[str, ...] = ("uv", "same", "zero")
"""Accepted values of :func:`marvell`'s ``uv_choice``."""

MAX_DYNAMIC_STEPS = 60
"""Most times dynamic Marvell multiplies the scale by 1.5 before giving up."""

_DYNAMIC_FACTOR = 1.5
_GRID = 64  # barycentric lattice resolution of the 2-D grid search
_N_STARTS = 4  # best grid points that start a local refinement


# --- validation -------------------------------------------------------------------------


def _check_grads(grads: torch.Tensor) -> None:
    if not isinstance(grads, torch.Tensor):
        raise ValueError(f"grads must be a torch.Tensor; got {type(grads).__name__}")
    if grads.ndim != 2:
        raise ValueError(
            f"grads must be a 2-D tensor of shape (n, d); got shape {tuple(grads.shape)}"
        )
    if not grads.is_floating_point():
        raise ValueError(f"grads must be a floating-point tensor; got dtype {grads.dtype}")
    if not bool(torch.isfinite(grads).all()):
        raise ValueError("grads contain non-finite values (NaN or inf)")


def _check_labels(labels: torch.Tensor, n: int) -> torch.Tensor:
    """Return ``labels`` as a boolean mask of the positives."""
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels must be a torch.Tensor; got {type(labels).__name__}")
    if labels.ndim != 1:
        raise ValueError(f"labels must be a 1-D tensor; got shape {tuple(labels.shape)}")
    if labels.shape[0] != n:
        raise ValueError(f"labels have length {labels.shape[0]} but grads have {n} rows")
    if labels.dtype == torch.bool:
        return labels
    if labels.is_complex() or not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels must contain only the values 0 and 1")
    return labels == 1


def _check_nonneg(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {value}")
    return value


def _check_p(name: str, value: float) -> float:
    value = float(value)
    if not (0.0 < value < 1.0):
        raise ValueError(f"{name} must lie strictly between 0 and 1; got {value}")
    return value


# --- max norm ---------------------------------------------------------------------------


def max_norm(grads: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Max-norm defense: randomly rescale each gradient to the batch's largest norm in expectation.

    Parameters
    ----------
    grads
        Per-example cut-layer gradients, shape ``(n, d)``, finite floating point.
    generator
        Source of the ``n`` standard-normal draws (on ``grads``' device).

    Returns
    -------
    torch.Tensor
        ``g~_i = g_i (1 + sigma_i xi_i)`` with
        ``sigma_i = sqrt(max(max_j ||g_j||^2 / ||g_i||^2 - 1, 0))`` and ``xi_i ~ N(0, 1)``;
        same shape, dtype and device as ``grads``. Zero rows stay zero.

    Raises
    ------
    ValueError
        If ``grads`` is not a 2-D floating-point tensor or holds NaN/inf.
    """
    _check_grads(grads)
    n = grads.shape[0]
    if n == 0:
        return grads.clone()
    sq = grads.pow(2).sum(dim=1)
    max_sq = sq.max()
    nonzero = sq > 0
    ratio = torch.where(nonzero, max_sq / torch.where(nonzero, sq, torch.ones_like(sq)), 1.0)
    sigma = torch.sqrt(torch.clamp(ratio - 1.0, min=0.0))
    xi = torch.randn(n, generator=generator, dtype=grads.dtype, device=grads.device)
    return grads * (1.0 + sigma * xi).unsqueeze(1)


# --- Marvell: objective -----------------------------------------------------------------


def _ratio(num: npt.ArrayLike, den: npt.ArrayLike) -> np.ndarray:
    """``num / den`` elementwise with ``0/0 = 1`` and ``x/0 = inf`` for ``x > 0``."""
    n = np.asarray(num, dtype=np.float64)
    m = np.asarray(den, dtype=np.float64)
    safe = np.where(m > 0, m, 1.0)
    return np.where(m > 0, n / safe, np.where(n > 0, np.inf, 1.0))


def _objective(
    lam10: npt.ArrayLike,
    lam20: npt.ArrayLike,
    lam11: npt.ArrayLike,
    lam21: npt.ArrayLike,
    u: float,
    v: float,
    d: int,
    gsq: float,
) -> np.ndarray:
    """The symmetric-KL objective ``obj`` (vectorised over the lambdas)."""
    l10 = np.asarray(lam10, dtype=np.float64)
    l11 = np.asarray(lam11, dtype=np.float64)
    main = _ratio(l10 + u + gsq, l11 + v) + _ratio(l11 + v + gsq, l10 + u)
    if d == 1:
        return np.asarray(main, dtype=np.float64)
    a = np.asarray(lam20, dtype=np.float64) + u
    b = np.asarray(lam21, dtype=np.float64) + v
    return np.asarray((d - 1) * (_ratio(a, b) + _ratio(b, a)) + main, dtype=np.float64)


def sym_kl(
    lam10: float,
    lam20: float,
    lam11: float,
    lam21: float,
    u: float,
    v: float,
    d: int,
    gsq: float,
) -> float:
    """Sum of the two KL divergences between the perturbed class distributions.

    Parameters
    ----------
    lam10, lam20
        Noise variance of the negatives along ``g_diff`` and in each orthogonal direction.
    lam11, lam21
        The same for the positives.
    u, v
        Mean per-coordinate variance of the negatives' and the positives' gradients.
    d
        Gradient dimension.
    gsq
        ``||mean_1 - mean_0||^2``.

    Returns
    -------
    float
        ``0.5 * obj - d`` with ``obj`` as in the module docstring; ``0/0`` ratios count as
        1 and ``x/0`` (``x > 0``) as ``+inf``.
    """
    if int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d}")
    obj = float(_objective(lam10, lam20, lam11, lam21, u, v, int(d), gsq))
    return 0.5 * obj - int(d)


# --- Marvell: solver --------------------------------------------------------------------


@dataclass(frozen=True)
class MarvellSolution:
    """Optimal Marvell noise variances and the divergences they achieve.

    Attributes
    ----------
    lam10, lam20
        Negatives' noise variance along ``g_diff`` and in each orthogonal direction.
    lam11, lam21
        Positives' noise variance along ``g_diff`` and in each orthogonal direction.
    sum_kl
        Symmetric KL divergence between the classes after the noise.
    sum_kl_before
        The same without noise (all lambdas 0); ``+inf`` when a class has no spread.
    u, v
        Negatives' and positives' mean per-coordinate variance the optimisation assumed.
    p
        Fraction of positives used in the power constraint.
    power
        Power budget ``P = p tr(Sigma_1) + (1-p) tr(Sigma_0)``.
    scale
        ``P / gsq`` (NaN when ``gsq = 0``).
    d
        Gradient dimension.
    gsq
        ``||mean_1 - mean_0||^2``.
    """

    lam10: float
    lam20: float
    lam11: float
    lam21: float
    sum_kl: float
    sum_kl_before: float
    u: float
    v: float
    p: float
    power: float
    scale: float
    d: int = 1
    gsq: float = 0.0


def zero_uv_closed_form(gsq: float, p: float, power: float) -> tuple[float, float]:
    """Closed-form ``(lam10, lam11)`` of the one-dimensional ``u = v = 0`` problem.

    Minimises ``(lam10+gsq)/lam11 + (lam11+gsq)/lam10`` subject to
    ``p lam11 + (1-p) lam10 = power``: with ``E = sqrt((P+(1-p)gsq)/(P+p gsq))`` and
    ``tau = max((P/p)/(E+(1-p)/p), 0)``, the optimum is ``lam10 = tau``,
    ``lam11 = max(P/p - (1-p) tau / p, 0)`` when ``tau <= P/(1-p)``, else the better of the
    corners ``(0, P/p)`` and ``(P/(1-p), 0)``.
    """
    gsq = _check_nonneg("gsq", gsq)
    p = _check_p("p", p)
    big_p = _check_nonneg("power", power)
    if big_p == 0:
        return 0.0, 0.0
    e = math.sqrt((big_p + (1 - p) * gsq) / (big_p + p * gsq))
    tau = max((big_p / p) / (e + (1 - p) / p), 0.0)
    if tau <= big_p / (1 - p):
        return tau, max(big_p / p - (1 - p) * tau / p, 0.0)
    corners = [(0.0, big_p / p), (big_p / (1 - p), 0.0)]
    values = [float(_objective(a, 0.0, b, 0.0, 0.0, 0.0, 1, gsq)) for a, b in corners]
    return corners[int(np.argmin(values))]


def _solve_1d(u: float, v: float, gsq: float, p: float, big_p: float) -> tuple[float, float]:
    """``(lam10, lam11)`` minimising the ``d = 1`` objective (convex in ``lam10``)."""
    hi = big_p / (1 - p)

    def lam11_of(lam10: float) -> float:
        return max((big_p - (1 - p) * lam10) / p, 0.0)

    def f(lam10: float) -> float:
        lam10 = min(max(lam10, 0.0), hi)
        val = float(_objective(lam10, 0.0, lam11_of(lam10), 0.0, u, v, 1, gsq))
        return val if math.isfinite(val) else 1e300

    candidates = [0.0, hi]
    res = minimize_scalar(
        f, bounds=(0.0, hi), method="bounded", options={"xatol": 1e-13 * max(hi, 1e-300)}
    )
    candidates.append(float(min(max(res.x, 0.0), hi)))
    best = min(candidates, key=f)
    return best, lam11_of(best)


def _project_2d(w: np.ndarray) -> tuple[float, float]:
    """Barycentric weights ``w`` clipped at 0 and scaled onto ``w1 + w2 <= 1`` (the triangle)."""
    w1, w2 = max(float(w[0]), 0.0), max(float(w[1]), 0.0)
    s = w1 + w2
    if s > 1:
        w1, w2 = w1 / s, w2 / s
    return w1, w2


def _refine_2d(
    f: Callable[[np.ndarray], float], gw1: np.ndarray, gw2: np.ndarray, order: np.ndarray
) -> tuple[float, float]:
    """Best weights among the grid starts ``order``, their SLSQP refinements and a polish."""
    candidates: list[tuple[float, float]] = [(float(gw1[k]), float(gw2[k])) for k in order]
    cons = [{"type": "ineq", "fun": lambda w: 1.0 - w[0] - w[1]}]
    for k in order:
        start = np.array([gw1[k], gw2[k]])
        res = minimize(
            f,
            start,
            method="SLSQP",
            bounds=[(0.0, 1.0), (0.0, 1.0)],
            constraints=cons,
            options={"ftol": 1e-15, "maxiter": 500},
        )
        candidates.append(_project_2d(res.x))
    best = min(candidates, key=lambda w: f(np.asarray(w)))
    polish = minimize(
        f,
        np.asarray(best),
        method="Nelder-Mead",
        options={"xatol": 1e-12, "fatol": 1e-15, "maxfev": 600},
    )
    candidates.append(_project_2d(polish.x))
    return min(candidates, key=lambda w: f(np.asarray(w)))


def _solve_2d(
    u: float, v: float, d: int, gsq: float, p: float, big_p: float
) -> tuple[float, float, float, float]:
    """``(lam10, lam20, lam11, lam21)`` minimising the ``d > 1`` objective."""
    # Free variables (a, b) with 0 <= b <= a and c1 a + c2 b <= P; the remaining lambda
    # follows from the equality constraint. u <= v: (a, b) = (lam10, lam20), lam21 = 0;
    # u > v: (a, b) = (lam11, lam21), lam20 = 0.
    low_u = u <= v
    w_free, w_rest = (1 - p, p) if low_u else (p, 1 - p)
    c1, c2 = w_free, w_free * (d - 1)
    a1 = big_p / c1  # vertex (P/c1, 0)
    a2 = big_p / (c1 + c2)  # vertex (P/(c1+c2), P/(c1+c2))

    def lambdas(
        w1: npt.ArrayLike, w2: npt.ArrayLike
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        w1, w2 = np.asarray(w1, dtype=np.float64), np.asarray(w2, dtype=np.float64)
        a = w1 * a1 + w2 * a2
        b = w2 * a2
        rest = np.maximum((big_p - c1 * a - c2 * b) / w_rest, 0.0)
        zero = np.zeros_like(a)
        if low_u:
            return a, b, rest, zero
        return rest, zero, a, b

    def f(w: np.ndarray) -> float:
        w1, w2 = _project_2d(w)
        val = float(_objective(*lambdas(np.float64(w1), np.float64(w2)), u, v, d, gsq))
        return val if math.isfinite(val) else 1e300

    i, j = np.meshgrid(np.arange(_GRID + 1), np.arange(_GRID + 1), indexing="ij")
    keep = i + j <= _GRID
    gw1, gw2 = i[keep] / _GRID, j[keep] / _GRID
    values = _objective(*lambdas(gw1, gw2), u, v, d, gsq)
    order = np.argsort(values)[:_N_STARTS]
    w1, w2 = _refine_2d(f, gw1, gw2, order)
    lam10, lam20, lam11, lam21 = lambdas(np.float64(w1), np.float64(w2))
    return float(lam10), float(lam20), float(lam11), float(lam21)


def solve_marvell(
    u: float,
    v: float,
    d: int,
    gsq: float,
    p: float,
    power: float,
    *,
    scale: float | None = None,
) -> MarvellSolution:
    """Optimal Marvell noise variances for one batch's statistics.

    Parameters
    ----------
    u, v
        Mean per-coordinate variance of the negatives' and the positives' gradients (>= 0).
    d
        Gradient dimension (positive integer).
    gsq
        ``||mean_1 - mean_0||^2`` (>= 0).
    p
        Fraction of positives, strictly between 0 and 1.
    power
        Power budget ``P >= 0`` of ``p tr(Sigma_1) + (1-p) tr(Sigma_0)``.
    scale
        Recorded in the solution; defaults to ``power / gsq`` (NaN when ``gsq = 0``).

    Returns
    -------
    MarvellSolution
        The minimising lambdas (the power constraint holds up to rounding), ``sum_kl``
        after and ``sum_kl_before`` (all lambdas 0). When ``u = v = 0`` the problem is the
        one-dimensional one (``lam20 = lam21 = 0``, ``sum_kl = obj / 2 - 1``).

    Raises
    ------
    ValueError
        On a negative or non-finite ``u``, ``v``, ``gsq`` or ``power``, a ``p`` outside
        ``(0, 1)`` or a ``d`` that is not a positive integer.
    """
    u = _check_nonneg("u", u)
    v = _check_nonneg("v", v)
    gsq = _check_nonneg("gsq", gsq)
    p = _check_p("p", p)
    big_p = _check_nonneg("power", power)
    if isinstance(d, bool) or int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d}")
    d = int(d)
    if scale is None:
        scale = big_p / gsq if gsq > 0 else math.nan
    zero_uv = u == 0 and v == 0
    d_eff = 1 if zero_uv else d
    before = sym_kl(0.0, 0.0, 0.0, 0.0, u, v, d_eff, gsq)

    unit = max(gsq, u, v, big_p)
    if big_p == 0 or unit == 0:
        lams = (0.0, 0.0, 0.0, 0.0)
    else:
        nu, nv, ng, npow = u / unit, v / unit, gsq / unit, big_p / unit
        if d_eff == 1:
            l10, l11 = _solve_1d(nu, nv, ng, p, npow)
            lams = (l10 * unit, 0.0, l11 * unit, 0.0)
        else:
            l10, l20, l11, l21 = _solve_2d(nu, nv, d, ng, p, npow)
            lams = (l10 * unit, l20 * unit, l11 * unit, l21 * unit)
    after = sym_kl(*lams, u, v, d_eff, gsq)
    return MarvellSolution(
        lam10=lams[0],
        lam20=lams[1],
        lam11=lams[2],
        lam21=lams[3],
        sum_kl=after,
        sum_kl_before=before,
        u=u,
        v=v,
        p=p,
        power=big_p,
        scale=float(scale),
        d=d,
        gsq=gsq,
    )


# --- Marvell: the defense ---------------------------------------------------------------


def marvell(
    grads: torch.Tensor,
    labels: torch.Tensor,
    generator: torch.Generator,
    scale: float = 1.0,
    uv_choice: UvChoice = "uv",
    p_frac: float | None = None,
    sum_kl_threshold: float | None = None,
) -> tuple[torch.Tensor, MarvellSolution | None]:
    """Marvell defense: class-dependent Gaussian noise minimising the classes' symmetric KL.

    Parameters
    ----------
    grads
        Per-example cut-layer gradients, shape ``(n, d)``, finite floating point.
    labels
        The examples' labels, shape ``(n,)``, values 0/1 (or boolean).
    generator
        Source of the noise (on ``grads``' device).
    scale
        Power budget relative to the class-mean gap: ``P = scale * ||mean_1 - mean_0||^2``
        (> 0). In dynamic mode, the starting scale.
    uv_choice
        ``"uv"``: the measured spreads ``u`` (negatives), ``v`` (positives); ``"same"``:
        both ``(u+v)/2``; ``"zero"``: both 0 (noise only along ``g_diff``).
    p_frac
        Fraction of positives for the power constraint; defaults to the batch's.
    sum_kl_threshold
        Dynamic mode: multiply ``scale`` by 1.5 and re-solve until ``sum_kl`` is at most
        this (> 0); after :data:`MAX_DYNAMIC_STEPS` increases a warning is logged and the
        last (largest-scale) perturbation is returned.

    Returns
    -------
    tuple[torch.Tensor, MarvellSolution | None]
        The perturbed gradients (same shape, dtype, device) and the solution used, or a
        copy of ``grads`` and ``None`` when the batch has a single class or
        ``mean_1 = mean_0`` (no perturbation is defined).

    Raises
    ------
    ValueError
        On malformed ``grads``/``labels``, ``scale <= 0``, an unknown ``uv_choice``, a
        ``p_frac`` outside ``(0, 1)`` or a ``sum_kl_threshold <= 0``.
    """
    _check_grads(grads)
    n, d = grads.shape
    pos_mask = _check_labels(labels, n).to(grads.device)
    scale, p_frac, sum_kl_threshold = _check_marvell_args(
        scale, uv_choice, p_frac, sum_kl_threshold
    )
    n_pos = int(pos_mask.sum())
    if n_pos == 0 or n_pos == n or d == 0:
        return grads.clone(), None

    g64 = grads.detach().to(torch.float64)
    pos, neg = g64[pos_mask], g64[~pos_mask]
    g_diff = pos.mean(dim=0) - neg.mean(dim=0)
    gsq = float(g_diff.pow(2).sum())
    if gsq == 0:
        return grads.clone(), None
    v = float(pos.var(dim=0, unbiased=False).mean())
    u = float(neg.var(dim=0, unbiased=False).mean())
    if uv_choice == "same":
        u = v = 0.5 * (u + v)
    elif uv_choice == "zero":
        u = v = 0.0
    p = p_frac if p_frac is not None else n_pos / n

    sol = _dynamic_solution(u, v, d, gsq, p, scale, sum_kl_threshold)
    return grads + _marvell_noise(grads, pos_mask, g_diff, gsq, sol, generator), sol


def _check_marvell_args(
    scale: float, uv_choice: UvChoice, p_frac: float | None, sum_kl_threshold: float | None
) -> tuple[float, float | None, float | None]:
    """Checked ``(scale, p_frac, sum_kl_threshold)`` of :func:`marvell` (``uv_choice`` checked only)."""
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0; got {scale}")
    if uv_choice not in UV_CHOICES:
        raise ValueError(f"uv_choice must be one of {UV_CHOICES}; got {uv_choice!r}")
    if p_frac is not None:
        p_frac = _check_p("p_frac", p_frac)
    if sum_kl_threshold is not None:
        sum_kl_threshold = float(sum_kl_threshold)
        if not (math.isfinite(sum_kl_threshold) and sum_kl_threshold > 0):
            raise ValueError(
                f"sum_kl_threshold must be a finite number > 0; got {sum_kl_threshold}"
            )
    return scale, p_frac, sum_kl_threshold


def _dynamic_solution(
    u: float,
    v: float,
    d: int,
    gsq: float,
    p: float,
    scale: float,
    sum_kl_threshold: float | None,
) -> MarvellSolution:
    """Marvell's solution at ``scale``, enlarged by 1.5 until ``sum_kl`` meets the threshold."""
    sol = solve_marvell(u, v, d, gsq, p, scale * gsq, scale=scale)
    if sum_kl_threshold is not None:
        steps = 0
        while sol.sum_kl > sum_kl_threshold and steps < MAX_DYNAMIC_STEPS:
            scale *= _DYNAMIC_FACTOR
            steps += 1
            sol = solve_marvell(u, v, d, gsq, p, scale * gsq, scale=scale)
        if sol.sum_kl > sum_kl_threshold:
            _LOG.warning(
                "Marvell: sum_kl %.6g still above the threshold %.6g after %d scale increases "
                "(scale %.6g); using the last perturbation",
                sol.sum_kl,
                sum_kl_threshold,
                steps,
                scale,
            )
    return sol


def _marvell_noise(
    grads: torch.Tensor,
    pos_mask: torch.Tensor,
    g_diff: torch.Tensor,
    gsq: float,
    sol: MarvellSolution,
    generator: torch.Generator,
) -> torch.Tensor:
    """Per-class Gaussian noise with covariance ``Sigma_k`` of ``sol`` (draws xi, then z)."""
    n, d = grads.shape
    unit = (g_diff / math.sqrt(gsq)).to(grads.dtype)
    along = torch.where(
        pos_mask,
        math.sqrt(max(sol.lam11 - sol.lam21, 0.0)),
        math.sqrt(max(sol.lam10 - sol.lam20, 0.0)),
    ).to(grads.dtype)
    iso = torch.where(pos_mask, math.sqrt(max(sol.lam21, 0.0)), math.sqrt(max(sol.lam20, 0.0))).to(
        grads.dtype
    )
    xi = torch.randn(n, generator=generator, dtype=grads.dtype, device=grads.device)
    z = torch.randn(n, d, generator=generator, dtype=grads.dtype, device=grads.device)
    return (along * xi).unsqueeze(1) * unit.unsqueeze(0) + iso.unsqueeze(1) * z
