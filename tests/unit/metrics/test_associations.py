"""Mixed-type association matrix (dython's defaults), against numpy, scipy and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.metrics.associations import association_matrix


def _schema(**kinds: str) -> Schema:
    return Schema(tuple(ColumnSpec(name, ColumnKind(kind)) for name, kind in kinds.items()))


# --- association matrix --------------------------------------------------------------


def _mixed_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "y": 2 * x + rng.normal(size=n),
            "z": rng.uniform(size=n),
            "c": np.where(x > 0, "pos", "neg"),
            "d": rng.choice(["u", "v", "w"], size=n),
        }
    )


MIXED = _schema(x="continuous", y="continuous", z="continuous", c="categorical", d="categorical")


def test_numeric_pairs_match_numpy_corrcoef():
    frame = _mixed_frame(200, 0)
    matrix = association_matrix(frame, MIXED)
    expected = np.corrcoef(frame[["x", "y", "z"]].to_numpy(), rowvar=False)
    np.testing.assert_allclose(matrix.loc[["x", "y", "z"], ["x", "y", "z"]], expected, atol=1e-12)


def test_matrix_is_symmetric_with_unit_diagonal():
    matrix = association_matrix(_mixed_frame(100, 1), MIXED)
    assert list(matrix.index) == list(matrix.columns) == MIXED.names
    np.testing.assert_allclose(matrix.to_numpy(), matrix.to_numpy().T)
    np.testing.assert_array_equal(np.diag(matrix), np.ones(5))


def test_correlation_ratio_by_hand():
    # Means: a -> 2, b -> 6, overall 4. Between SS = 2*4 + 2*4 = 16, total SS = 9+1+1+9 = 20.
    frame = pd.DataFrame({"c": ["a", "a", "b", "b"], "y": [1.0, 3.0, 5.0, 7.0]})
    matrix = association_matrix(frame, _schema(c="categorical", y="continuous"))
    assert matrix.loc["c", "y"] == pytest.approx(math.sqrt(16 / 20))


def _bias_corrected_v(chi2: float, n: int, r: int, k: int) -> float:
    """Bergsma (2013), as written in dython's cramers_v."""
    phi2 = max(0.0, chi2 / n - (k - 1) * (r - 1) / (n - 1))
    r_corr = r - (r - 1) ** 2 / (n - 1)
    k_corr = k - (k - 1) ** 2 / (n - 1)
    return math.sqrt(phi2 / min(r_corr - 1, k_corr - 1))


def test_cramers_v_perfect_and_independent():
    schema = _schema(a="categorical", b="categorical")
    perfect = pd.DataFrame({"a": ["p", "q", "r"] * 10, "b": ["x", "y", "z"] * 10})
    assert association_matrix(perfect, schema).loc["a", "b"] == pytest.approx(1.0)
    # Every (a, b) pair equally often: chi2 = 0, the corrected phi2 is clipped to 0.
    independent = pd.DataFrame({"a": ["p", "q", "r"] * 8, "b": ["x"] * 12 + ["y"] * 12})
    assert association_matrix(independent, schema).loc["a", "b"] == 0.0


def test_cramers_v_2x3_by_hand():
    # Table rows a in {p, q}, columns b in {x, y, z}: [[10, 5, 5], [2, 8, 10]], n = 40.
    table = np.array([[10, 5, 5], [2, 8, 10]])
    expected_counts = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    chi2 = float(((table - expected_counts) ** 2 / expected_counts).sum())
    a, b = [], []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a += ["pq"[i]] * int(count)
            b += ["xyz"[j]] * int(count)
    frame = pd.DataFrame({"a": a, "b": b})
    got = association_matrix(frame, _schema(a="categorical", b="categorical")).loc["a", "b"]
    assert got == pytest.approx(_bias_corrected_v(chi2, 40, 2, 3))


def test_cramers_v_2x2_uses_yates_like_dython():
    # [[15, 5], [5, 15]]: expected 10 everywhere, |O - E| = 5, Yates: (5 - 0.5)^2 / 10 each.
    chi2 = 4 * (5 - 0.5) ** 2 / 10
    frame = pd.DataFrame(
        {"a": ["p"] * 20 + ["q"] * 20, "b": ["x"] * 15 + ["y"] * 5 + ["x"] * 5 + ["y"] * 15}
    )
    got = association_matrix(frame, _schema(a="categorical", b="categorical")).loc["a", "b"]
    assert got == pytest.approx(_bias_corrected_v(chi2, 40, 2, 2))


def test_constant_columns_have_zero_associations():
    frame = _mixed_frame(50, 2).assign(z=3.0, d="same")
    matrix = association_matrix(frame, MIXED)
    for column in ("z", "d"):
        others = [c for c in MIXED.names if c != column]
        np.testing.assert_array_equal(matrix.loc[column, others], 0.0)
        np.testing.assert_array_equal(matrix.loc[others, column], 0.0)
        assert matrix.loc[column, column] == 1.0
    assert not matrix.isna().to_numpy().any()


def test_columns_restrict_and_order():
    frame = _mixed_frame(60, 3)
    full = association_matrix(frame, MIXED)
    part = association_matrix(frame, MIXED, columns=["d", "x"])
    assert list(part.index) == ["d", "x"]
    assert part.loc["d", "x"] == full.loc["d", "x"]
    with pytest.raises(ValueError, match=r"unknown columns \['nope'\]"):
        association_matrix(frame, MIXED, columns=["x", "nope"])
    with pytest.raises(ValueError, match="repeated: \\['x'\\]"):
        association_matrix(frame, MIXED, columns=["x", "x"])
    with pytest.raises(TypeError, match="got the string 'x'"):
        association_matrix(frame, MIXED, columns="x")
