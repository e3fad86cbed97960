"""Frechet distance of paper 000, eq. 23, against its closed form."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.metrics.frechet import GaussianStats, frechet_distance


def _psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    """Square root of a symmetric positive semi-definite matrix by eigendecomposition."""
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T


def _closed_form(m1, s1, m2, s2) -> float:
    """||m1 - m2||^2 + Tr(S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2): an independent reference."""
    root = _psd_sqrt(s1)
    return float(np.sum((m1 - m2) ** 2) + np.trace(s1 + s2 - 2 * _psd_sqrt(root @ s2 @ root)))


def _rotation(d: int, seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q


def test_diagonal_gaussians_by_hand():
    a = GaussianStats(mean=np.zeros(3), cov=np.diag([1.0, 4.0, 9.0]))
    b = GaussianStats(mean=np.array([1.0, 2.0, 2.0]), cov=np.diag([4.0, 1.0, 16.0]))
    # ||m1 - m2||^2 = 1 + 4 + 4 = 9; sum (sqrt a - sqrt b)^2 = (1-2)^2 + (2-1)^2 + (3-4)^2 = 3.
    assert frechet_distance(a, b) == pytest.approx(12.0, abs=1e-9)
    assert frechet_distance(b, a) == pytest.approx(12.0, abs=1e-9)


def test_commuting_covariances_by_hand():
    # Same eigenvectors: the trace term is still sum((sqrt(a_i) - sqrt(b_i))^2).
    r = _rotation(4, 0)
    a_eig, b_eig = np.array([0.5, 1.0, 2.0, 3.0]), np.array([2.0, 1.0, 0.5, 3.0])
    a = GaussianStats(mean=np.ones(4), cov=r @ np.diag(a_eig) @ r.T)
    b = GaussianStats(mean=np.ones(4), cov=r @ np.diag(b_eig) @ r.T)
    expected = float(np.sum((np.sqrt(a_eig) - np.sqrt(b_eig)) ** 2))
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-9)


def test_general_covariances_match_the_closed_form():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(5, 5)), rng.normal(size=(5, 5))
    s1, s2 = x @ x.T + 0.1 * np.eye(5), y @ y.T + 0.1 * np.eye(5)
    m1, m2 = rng.normal(size=5), rng.normal(size=5)
    got = frechet_distance(GaussianStats(m1, s1), GaussianStats(m2, s2))
    assert got == pytest.approx(_closed_form(m1, s1, m2, s2), rel=1e-8)


def test_samples_approach_the_closed_form():
    rng = np.random.default_rng(2)
    r = _rotation(3, 3)
    m1, m2 = np.array([0.0, 1.0, -1.0]), np.array([0.5, 0.0, -1.0])
    s1, s2 = np.diag([1.0, 2.0, 0.5]), r @ np.diag([0.3, 1.5, 3.0]) @ r.T
    real = rng.multivariate_normal(m1, s1, size=40_000)
    fake = rng.multivariate_normal(m2, s2, size=40_000)
    expected = _closed_form(m1, s1, m2, s2)
    assert frechet_distance(real, fake) == pytest.approx(expected, rel=0.03)


def test_identical_tables_are_at_distance_zero():
    rows = np.random.default_rng(4).normal(size=(500, 6))
    assert frechet_distance(rows, rows) == pytest.approx(0.0, abs=1e-8)


def test_identical_encoded_tables_with_one_hot_columns_are_at_distance_zero():
    # One-hot blocks make the covariance singular (each block sums to 1).
    rng = np.random.default_rng(5)
    one_hot = np.eye(3)[rng.integers(0, 3, size=300)]
    rows = np.hstack([rng.normal(size=(300, 2)), one_hot])
    value = frechet_distance(rows, rows)
    assert np.isfinite(value)
    assert value == pytest.approx(0.0, abs=1e-6)


def test_distance_grows_with_the_mean_shift():
    rows = np.random.default_rng(6).normal(size=(400, 3))
    shifted = rows + np.array([3.0, 0.0, 0.0])
    assert frechet_distance(rows, shifted) == pytest.approx(9.0, abs=1e-6)  # covariances equal


def test_gaussian_stats_by_hand():
    stats = GaussianStats.of(np.array([[1.0, 2.0], [3.0, 6.0]]))
    np.testing.assert_allclose(stats.mean, [2.0, 4.0])
    # Unbiased: var_x = (1 + 1) / 1, var_y = (4 + 4) / 1, cov = (2 + 2) / 1.
    np.testing.assert_allclose(stats.cov, [[2.0, 4.0], [4.0, 8.0]])
    single = GaussianStats.of(np.array([[1.0], [2.0], [3.0]]))
    assert single.cov.shape == (1, 1)
    assert single.cov[0, 0] == pytest.approx(1.0)


def test_width_mismatch_raises():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"tables differ in width: 3 vs 2 columns"):
        frechet_distance(rng.normal(size=(4, 3)), rng.normal(size=(4, 2)))


@pytest.mark.parametrize(
    "rows", [np.ones((1, 3)), np.ones(5), np.ones((2, 2, 2))], ids=["one_row", "1d", "3d"]
)
def test_too_few_rows_or_wrong_rank_raise(rows):
    with pytest.raises(ValueError, match=r"need a 2-D table with at least 2 rows"):
        frechet_distance(rows, np.random.default_rng(0).normal(size=(5, 3)))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_values_raise(bad):
    rows = np.random.default_rng(0).normal(size=(5, 3))
    broken = rows.copy()
    broken[1, 2] = bad
    with pytest.raises(ValueError, match=r"table contains non-finite values"):
        frechet_distance(rows, broken)
    with pytest.raises(ValueError, match=r"table contains non-finite values"):
        GaussianStats.of(broken)
