"""Label-leakage defenses of Li et al. 2022: max norm and Marvell."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pytest
import torch

from flwr_vflgan.gafm.defenses import (
    MAX_DYNAMIC_STEPS,
    MarvellSolution,
    marvell,
    max_norm,
    solve_marvell,
    sym_kl,
    zero_uv_closed_form,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _obj(l10: Any, l20: Any, l11: Any, l21: Any, u: float, v: float, d: int, gsq: float) -> Any:
    """Independent vectorised restatement of the objective (all denominators > 0)."""
    main = (l10 + u + gsq) / (l11 + v) + (l11 + v + gsq) / (l10 + u)
    if d == 1:
        return main
    return (d - 1) * ((l20 + u) / (l21 + v) + (l21 + v) / (l20 + u)) + main


def _power(sol: MarvellSolution) -> float:
    p, d = sol.p, sol.d
    return (
        p * sol.lam11
        + p * (d - 1) * sol.lam21
        + (1 - p) * sol.lam10
        + (1 - p) * (d - 1) * sol.lam20
    )


# --- max norm ---------------------------------------------------------------------------


def _norm_batch() -> torch.Tensor:
    g = torch.randn(6, 4, generator=_gen(1), dtype=torch.float64)
    g[2] *= 5.0  # the unique max-norm row
    g[4] = 0.0  # a zero row
    return g


def test_max_norm_expected_square_norm_formula_and_monte_carlo() -> None:
    g = _norm_batch()
    sq = g.pow(2).sum(1)
    max_sq = sq.max()
    nz = sq > 0
    sigma2 = torch.clamp(max_sq / sq[nz] - 1, min=0)
    # Exact: ||g_i||^2 (1 + sigma_i^2) = max_j ||g_j||^2 for every nonzero row.
    torch.testing.assert_close(sq[nz] * (1 + sigma2), max_sq.expand(int(nz.sum())))
    # Monte Carlo over many independent draws: repeating the batch keeps its max norm, so
    # one call on the stacked copies draws every copy's noise independently.
    reps = 40000
    draws = max_norm(g.repeat(reps, 1), _gen(2)).reshape(reps, *g.shape)
    mean_sq = draws.pow(2).sum(-1).mean(0)
    assert torch.allclose(mean_sq[nz], max_sq.expand(int(nz.sum())), rtol=0.05)
    assert torch.all(draws[:, 4] == 0)


def test_max_norm_direction_and_max_row() -> None:
    g = _norm_batch()
    out = max_norm(g, _gen(3))
    assert out.shape == g.shape and out.dtype == g.dtype
    torch.testing.assert_close(out[2], g[2])  # sigma = 0 for the max-norm row
    assert torch.all(out[4] == 0) and not torch.isnan(out).any()
    for i in (0, 1, 3, 5):
        cos = torch.nn.functional.cosine_similarity(out[i], g[i], dim=0)
        assert abs(abs(float(cos)) - 1.0) < 1e-10


def test_max_norm_reproducible_and_edge_cases() -> None:
    g = _norm_batch()
    torch.testing.assert_close(max_norm(g, _gen(7)), max_norm(g, _gen(7)))
    assert not torch.equal(max_norm(g, _gen(7)), max_norm(g, _gen(8)))
    z = torch.zeros(3, 2)
    assert torch.equal(max_norm(z, _gen()), z)
    assert max_norm(torch.zeros(0, 2), _gen()).shape == (0, 2)


@pytest.mark.parametrize(
    ("grads", "match"),
    [
        (torch.ones(3), "2-D"),
        (torch.ones(2, 2, 2), "2-D"),
        (torch.tensor([[1.0, float("nan")]]), "non-finite"),
        (torch.tensor([[1.0, float("inf")]]), "non-finite"),
        (torch.ones(2, 2, dtype=torch.int64), "floating"),
    ],
)
def test_max_norm_validation(grads: torch.Tensor, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        max_norm(grads, _gen())


# --- Marvell: objective and solver ------------------------------------------------------


def test_sym_kl_values_and_conventions() -> None:
    # d = 1, no noise: (u+g)/v + (v+g)/u with u = 1, v = 2, g = 3 -> 4/2 + 5/1 = 7.
    assert sym_kl(0, 0, 0, 0, 1.0, 2.0, 1, 3.0) == pytest.approx(0.5 * 7 - 1)
    # Identical classes: zero divergence, in any dimension.
    assert sym_kl(0.3, 0.1, 0.3, 0.1, 0.5, 0.5, 4, 0.0) == pytest.approx(0.0, abs=1e-12)
    assert sym_kl(0, 0, 0, 0, 0, 0, 3, 0.0) == pytest.approx(0.0)
    assert sym_kl(0, 0, 0, 0, 0, 0, 1, 1.0) == math.inf
    with pytest.raises(ValueError, match="d must"):
        sym_kl(0, 0, 0, 0, 1, 1, 0, 1.0)


@pytest.mark.parametrize(
    ("gsq", "p", "power"), [(1.0, 0.3, 2.0), (4.0, 0.5, 0.5), (0.01, 0.9, 3.0)]
)
def test_zero_uv_closed_form_matches_solver(gsq: float, p: float, power: float) -> None:
    l10, l11 = zero_uv_closed_form(gsq, p, power)
    for d in (1, 5):
        sol = solve_marvell(0.0, 0.0, d, gsq, p, power)
        assert sol.lam20 == 0 and sol.lam21 == 0
        assert sol.lam10 == pytest.approx(l10, rel=1e-5)
        assert sol.lam11 == pytest.approx(l11, rel=1e-5)
        closed = 0.5 * ((l10 + gsq) / l11 + (l11 + gsq) / l10) - 1
        assert sol.sum_kl == pytest.approx(closed, rel=1e-9)
        assert sol.sum_kl_before == math.inf
    # Brute force on the constraint line.
    grid = np.linspace(0, power / (1 - p), 200001)[1:-1]
    vals = (grid + gsq) / ((power - (1 - p) * grid) / p) + (
        (power - (1 - p) * grid) / p + gsq
    ) / grid
    assert 0.5 * vals.min() - 1 >= sol.sum_kl - 1e-12
    assert 0.5 * vals.min() - 1 == pytest.approx(sol.sum_kl, rel=1e-8)


def _feasible_from_free(
    a: np.ndarray, b: np.ndarray, u: float, v: float, d: int, p: float, power: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Full lambdas from the free variables, keeping only the feasible points.

    ``d = 1``: ``a = lam10`` (``b`` unused). ``u <= v``: ``(a, b) = (lam10, lam20)`` and
    ``lam21 = 0``. ``u > v``: ``(a, b) = (lam11, lam21)`` and ``lam20 = 0``.
    """
    if d == 1:
        l11 = (power - (1 - p) * a) / p
        ok = (a >= 0) & (l11 >= 0)
        z = np.zeros(int(ok.sum()))
        return a[ok], z, l11[ok], z
    w_free, w_rest = (1 - p, p) if u <= v else (p, 1 - p)
    rest = (power - w_free * a - w_free * (d - 1) * b) / w_rest
    ok = (b >= 0) & (b <= a) & (rest >= 0)
    z = np.zeros(int(ok.sum()))
    if u <= v:
        return a[ok], b[ok], rest[ok], z
    return rest[ok], z, a[ok], b[ok]


def _free_of(lams: tuple[np.ndarray, ...] | list[float], u: float, v: float, d: int) -> tuple:
    l10, l20, l11, l21 = lams
    if d == 1 or u <= v:
        return l10, l20
    return l11, l21


@pytest.mark.parametrize(
    ("u", "v", "d", "gsq", "p", "power"),
    [
        (0.5, 1.0, 1, 2.0, 0.3, 1.5),
        (1.0, 0.2, 1, 0.5, 0.7, 4.0),
        (0.5, 1.0, 3, 2.0, 0.3, 1.5),
        (1.0, 0.2, 3, 2.0, 0.6, 4.0),
        (0.3, 0.3, 3, 1.0, 0.5, 0.8),
        (2e-8, 5e-8, 3, 1e-7, 0.2, 3e-7),  # tiny gradients: the solver is scale-free
    ],
)
def test_solver_beats_dense_random_search(
    u: float, v: float, d: int, gsq: float, p: float, power: float
) -> None:
    sol = solve_marvell(u, v, d, gsq, p, power)
    assert sol.lam10 >= 0 and sol.lam20 >= 0 and sol.lam11 >= 0 and sol.lam21 >= 0
    assert sol.lam20 <= sol.lam10 + 1e-15 and sol.lam21 <= sol.lam11 + 1e-15
    assert (sol.lam21 == 0) if u <= v else (sol.lam20 == 0)
    assert _power(sol) == pytest.approx(power, rel=1e-8)
    best = _obj(sol.lam10, sol.lam20, sol.lam11, sol.lam21, u, v, d, gsq)
    assert sol.sum_kl == pytest.approx(0.5 * best - d, rel=1e-12, abs=1e-12)

    rng = np.random.default_rng(0)
    w_free = (1 - p) if (d == 1 or u <= v) else p
    hi = power / w_free  # box holding the free variables
    n = 200000
    pts = _feasible_from_free(rng.uniform(0, hi, n), rng.uniform(0, hi, n), u, v, d, p, power)
    vals = _obj(*pts, u, v, d, gsq)
    assert len(vals) > 1000 and np.all(vals >= best * (1 - 1e-12))
    # Zoom in around the best random point: the best found approaches the solver's value.
    k = int(np.argmin(vals))
    centre = np.array(_free_of([x[k] for x in pts], u, v, d))
    found = float(vals[k])
    radius = hi / 20
    for _ in range(20):
        a = centre[0] + rng.uniform(-radius, radius, 20000)
        b = centre[1] + rng.uniform(-radius, radius, 20000)
        cand = _feasible_from_free(a, b, u, v, d, p, power)
        if len(cand[0]):
            cv = _obj(*cand, u, v, d, gsq)
            assert np.all(cv >= best * (1 - 1e-12))
            j = int(np.argmin(cv))
            if cv[j] < found:
                found = float(cv[j])
                centre = np.array(_free_of([x[j] for x in cand], u, v, d))
        radius /= 2
    assert found >= best * (1 - 1e-12)
    assert (found - best) / best <= 1e-6, (found - best) / best


@pytest.mark.parametrize(("u", "v", "d"), [(0.5, 1.0, 1), (0.5, 1.0, 3), (2.0, 0.5, 8), (0, 0, 4)])
def test_noise_reduces_sum_kl(u: float, v: float, d: int) -> None:
    for power in (1e-3, 0.5, 10.0):
        sol = solve_marvell(u, v, d, 1.0, 0.4, power)
        assert sol.sum_kl < sol.sum_kl_before
        assert sol.sum_kl == pytest.approx(
            sym_kl(sol.lam10, sol.lam20, sol.lam11, sol.lam21, u, v, 1 if u == v == 0 else d, 1.0)
        )
    # More power, less divergence.
    kls = [solve_marvell(u, v, d, 1.0, 0.4, P).sum_kl for P in (0.1, 1.0, 10.0)]
    assert kls[0] > kls[1] > kls[2]
    none = solve_marvell(u, v, d, 1.0, 0.4, 0.0)
    assert (none.lam10, none.lam20, none.lam11, none.lam21) == (0, 0, 0, 0)
    assert none.sum_kl == none.sum_kl_before


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"u": -1.0}, "u must"),
        ({"v": math.nan}, "v must"),
        ({"gsq": -0.1}, "gsq must"),
        ({"p": 0.0}, "p must"),
        ({"p": 1.0}, "p must"),
        ({"power": -1.0}, "power must"),
        ({"d": 0}, "d must"),
        ({"d": 2.5}, "d must"),
    ],
)
def test_solve_marvell_validation(kwargs: dict, match: str) -> None:
    args = {"u": 1.0, "v": 1.0, "d": 2, "gsq": 1.0, "p": 0.5, "power": 1.0} | kwargs
    with pytest.raises(ValueError, match=match):
        solve_marvell(**args)


# --- Marvell: the defense ---------------------------------------------------------------


def _separable_batch(
    n: int = 400, d: int = 4, pos_spread: float = 0.5, neg_spread: float = 0.2, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = _gen(seed)
    labels = (torch.arange(n) % 4 == 0).long()  # 25% positives
    mu1 = torch.tensor([-2.0, 1.0, 0.5, 0.0][:d] + [0.0] * max(d - 4, 0), dtype=torch.float64)
    mu0 = torch.tensor([1.0, -0.5, 0.0, 0.2][:d] + [0.0] * max(d - 4, 0), dtype=torch.float64)
    spread = torch.where(labels == 1, pos_spread, neg_spread).to(torch.float64)
    noise = torch.randn(n, d, generator=gen, dtype=torch.float64) * spread.unsqueeze(1)
    grads = torch.where(labels.bool().unsqueeze(1), mu1, mu0) + noise
    return grads, labels


@pytest.mark.parametrize(("pos_spread", "neg_spread"), [(0.5, 0.2), (0.2, 0.5)])
def test_marvell_noise_covariance_matches_lambdas(pos_spread: float, neg_spread: float) -> None:
    grads, labels = _separable_batch(n=80000, d=3, pos_spread=pos_spread, neg_spread=neg_spread)
    out, sol = marvell(grads, labels, _gen(5), scale=2.0)
    assert sol is not None and out.dtype == grads.dtype
    assert sol.p == pytest.approx(0.25) and sol.scale == 2.0
    assert sol.power == pytest.approx(2.0 * sol.gsq)
    pos = labels == 1
    g_diff = grads[pos].mean(0) - grads[~pos].mean(0)
    assert sol.gsq == pytest.approx(float(g_diff.pow(2).sum()))
    assert sol.v == pytest.approx(float(grads[pos].var(0, unbiased=False).mean()))
    assert sol.u == pytest.approx(float(grads[~pos].var(0, unbiased=False).mean()))
    w = g_diff / g_diff.norm()
    noise = out - grads
    for mask, lam1, lam2 in ((pos, sol.lam11, sol.lam21), (~pos, sol.lam10, sol.lam20)):
        e = noise[mask]
        cov = e.T @ e / e.shape[0]
        along = float(w @ cov @ w)
        assert along == pytest.approx(lam1, rel=0.05)
        proj = torch.eye(3, dtype=torch.float64) - torch.outer(w, w)
        orth = proj @ cov @ proj
        # Orthogonal covariance ~ lam2 * (I - w w^T); cross-covariance ~ 0.
        tol = 0.05 * max(lam1, 1e-3)
        assert torch.allclose(orth, lam2 * proj, atol=tol)
        assert float((cov @ w - along * w).norm()) < tol
    # The class with the larger spread gets no isotropic noise.
    assert (sol.lam21 == 0) if sol.u <= sol.v else (sol.lam20 == 0)


def test_marvell_zero_uv_noise_only_along_g_diff() -> None:
    grads, labels = _separable_batch(n=200)
    out, sol = marvell(grads, labels, _gen(1), scale=1.0, uv_choice="zero")
    assert sol is not None and sol.u == sol.v == 0 and sol.lam20 == sol.lam21 == 0
    pos = labels == 1
    g_diff = grads[pos].mean(0) - grads[~pos].mean(0)
    noise = out - grads
    resid = noise - torch.outer(noise @ g_diff / g_diff.norm() ** 2, g_diff)
    assert float(resid.abs().max()) < 1e-10
    _, same = marvell(grads, labels, _gen(1), uv_choice="same")
    assert same is not None and same.u == same.v


def test_marvell_reduces_separability() -> None:
    grads, labels = _separable_batch(n=2000)
    pos = labels == 1
    mu1, mu0 = grads[pos].mean(0), grads[~pos].mean(0)

    def accuracy(g: torch.Tensor) -> float:
        pred = (g - mu1).norm(dim=1) <= (g - mu0).norm(dim=1)
        return float((pred == pos).double().mean())

    assert accuracy(grads) > 0.99
    out, sol = marvell(grads, labels, _gen(2), scale=4.0)
    assert sol is not None
    assert accuracy(out) < 0.8
    # The norm attack (Li et al.'s) also loses power: AUC of ||g|| against the labels.
    from flwr_vflgan.gafm.attacks import leak_auc

    before = leak_auc(labels.numpy(), grads.norm(dim=1).numpy())
    after = leak_auc(labels.numpy(), out.norm(dim=1).numpy())
    assert after < before


def test_marvell_reproducible() -> None:
    grads, labels = _separable_batch(n=50)
    a, sa = marvell(grads, labels, _gen(4))
    b, sb = marvell(grads, labels, _gen(4))
    assert torch.equal(a, b) and sa == sb
    c, _ = marvell(grads.float(), labels.bool(), _gen(4))
    assert c.dtype == torch.float32


def test_marvell_degenerate_batches_unchanged() -> None:
    grads, _ = _separable_batch(n=20)
    for labels in (torch.zeros(20, dtype=torch.long), torch.ones(20, dtype=torch.long)):
        out, sol = marvell(grads, labels, _gen())
        assert sol is None and torch.equal(out, grads) and out is not grads
    same = torch.ones(4, 3)
    out, sol = marvell(same, torch.tensor([0, 1, 0, 1]), _gen())
    assert sol is None and torch.equal(out, same)


def test_marvell_dynamic_mode_meets_threshold() -> None:
    grads, labels = _separable_batch(n=400)
    threshold = 0.25
    _, sol = marvell(grads, labels, _gen(3), scale=0.01, sum_kl_threshold=threshold)
    assert sol is not None and sol.sum_kl <= threshold
    assert sol.scale > 0.01
    steps = round(math.log(sol.scale / 0.01) / math.log(1.5))
    assert sol.scale == pytest.approx(0.01 * 1.5**steps)
    # One step less would not have met the threshold.
    prev = solve_marvell(sol.u, sol.v, sol.d, sol.gsq, sol.p, sol.power / 1.5)
    assert prev.sum_kl > threshold
    # A threshold already met keeps the starting scale.
    _, easy = marvell(grads, labels, _gen(3), scale=100.0, sum_kl_threshold=10.0)
    assert easy is not None and easy.scale == 100.0


def test_marvell_dynamic_mode_gives_up_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    grads, labels = _separable_batch(n=40)
    with caplog.at_level(logging.WARNING, logger="flwr_vflgan.gafm.defenses"):
        _, sol = marvell(grads, labels, _gen(), scale=1e-30, sum_kl_threshold=1e-3)
    assert sol is not None and sol.sum_kl > 1e-3
    assert sol.scale == pytest.approx(1e-30 * 1.5**MAX_DYNAMIC_STEPS)
    assert "threshold" in caplog.text


@pytest.mark.parametrize(
    ("grads", "labels", "kwargs", "match"),
    [
        (torch.ones(4), torch.tensor([0, 1, 0, 1]), {}, "grads must be a 2-D"),
        (torch.full((4, 2), math.nan), torch.tensor([0, 1, 0, 1]), {}, "non-finite"),
        (torch.ones(4, 2), torch.tensor([[0, 1, 0, 1]]), {}, "labels must be a 1-D"),
        (torch.ones(4, 2), torch.tensor([0, 1, 0]), {}, "labels have length 3"),
        (torch.ones(4, 2), torch.tensor([0, 1, 2, 1]), {}, "labels must contain only"),
        (torch.ones(4, 2), torch.tensor([0, 1, 0, 1]), {"scale": 0.0}, "scale must"),
        (torch.ones(4, 2), torch.tensor([0, 1, 0, 1]), {"scale": -1.0}, "scale must"),
        (torch.ones(4, 2), torch.tensor([0, 1, 0, 1]), {"uv_choice": "both"}, "uv_choice"),
        (torch.ones(4, 2), torch.tensor([0, 1, 0, 1]), {"p_frac": 1.5}, "p_frac"),
        (
            torch.ones(4, 2),
            torch.tensor([0, 1, 0, 1]),
            {"sum_kl_threshold": 0.0},
            "sum_kl_threshold",
        ),
    ],
)
def test_marvell_validation(
    grads: torch.Tensor, labels: torch.Tensor, kwargs: dict, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        marvell(grads, labels, _gen(), **kwargs)


def test_marvell_p_frac_used_in_power_constraint() -> None:
    grads, labels = _separable_batch(n=100)
    _, sol = marvell(grads, labels, _gen(), scale=1.5, p_frac=0.5)
    assert sol is not None and sol.p == 0.5
    assert _power(sol) == pytest.approx(sol.power, rel=1e-8)
