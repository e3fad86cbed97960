"""Distance to closest record (DCR) and nearest-neighbour distance ratio (NNDR)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.metrics.distance import closest_record_distances
from flwr_vflgan.metrics.tables import MetricInputError

SCHEMA = Schema(
    (
        ColumnSpec("x", ColumnKind.CONTINUOUS),
        ColumnSpec("y", ColumnKind.CONTINUOUS),
        ColumnSpec("c", ColumnKind.CATEGORICAL),
    )
)
# Real ranges of x and y are [0, 1], so min-max scaling leaves them unchanged.
REAL = pd.DataFrame({"x": [0.0, 1.0, 0.0], "y": [0.0, 0.0, 1.0], "c": ["a", "a", "b"]})
KEYS = {
    "dcr_mean",
    "dcr_median",
    "dcr_p05",
    "exact_match_fraction",
    "nndr_median",
    "nndr_p05",
    "rows_compared",
}


def _p05(values: list[float]) -> float:
    """5th percentile with linear interpolation, written out for three values."""
    low, mid, _ = sorted(values)
    position = 0.05 * 2  # (n - 1) * q
    return low + position * (mid - low)


def test_three_rows_by_hand():
    synthetic = pd.DataFrame({"x": [0.5, 0.0, 2.0], "y": [0.0, 0.9, 0.0], "c": ["a", "b", "a"]})
    # Row 1 (0.5, 0, a): 0.5 to both a-rows, sqrt(0.25 + 1 + 2) to (0, 1, b).
    # Row 2 (0, 0.9, b): 0.1 to (0, 1, b), sqrt(0.81 + 2) to (0, 0, a) (the one-hot
    #   columns differ in two places).
    # Row 3 (2, 0, a): 1 to (1, 0, a), 2 to (0, 0, a).
    dcr = [0.5, 0.1, 1.0]
    nndr = [1.0, 0.1 / math.sqrt(2.81), 0.5]
    got = closest_record_distances(REAL, synthetic, SCHEMA)
    assert set(got) == KEYS
    assert got["dcr_mean"] == pytest.approx(np.mean(dcr))
    assert got["dcr_median"] == pytest.approx(0.5)
    assert got["dcr_p05"] == pytest.approx(_p05(dcr))
    assert got["exact_match_fraction"] == 0.0
    assert got["nndr_median"] == pytest.approx(0.5)
    assert got["nndr_p05"] == pytest.approx(_p05(nndr))
    assert got["rows_compared"] == 3.0


def test_exact_copy_is_detected():
    rng = np.random.default_rng(0)
    real = pd.DataFrame(
        {
            "x": rng.normal(size=30) * 1e5,
            "y": rng.uniform(size=30),
            "c": rng.choice(list("abc"), 30),
        }
    )
    got = closest_record_distances(real, real.sample(frac=1, random_state=1), SCHEMA)
    assert got["dcr_mean"] == 0.0
    assert got["dcr_p05"] == 0.0
    assert got["exact_match_fraction"] == 1.0
    assert got["nndr_median"] == 0.0


def test_copy_of_a_duplicated_record_has_nndr_zero():
    real = pd.concat([REAL, REAL.iloc[[0]]], ignore_index=True)
    got = closest_record_distances(real, REAL.iloc[[0]], SCHEMA)
    assert got["dcr_median"] == 0.0
    assert got["nndr_median"] == 0.0


def test_far_synthetic_rows_have_large_dcr():
    far = REAL.assign(x=REAL["x"] + 100.0)
    got = closest_record_distances(REAL, far, SCHEMA)
    # Each row moved by 100 real ranges; the nearest real row is at least 99 away.
    assert got["dcr_p05"] >= 99.0
    assert got["exact_match_fraction"] == 0.0


def test_holdout_gives_the_baseline():
    synthetic = REAL.copy()
    holdout = pd.DataFrame({"x": [0.0, 0.4], "y": [0.2, 0.0], "c": ["a", "a"]})
    # Holdout DCRs: 0.2 (to (0, 0, a)) and 0.4 (to (0, 0, a)); median 0.3.
    # NNDRs: 0.2 / 1.0198... and 0.4 / 0.6; median their mean.
    got = closest_record_distances(REAL, synthetic, SCHEMA, holdout=holdout)
    assert set(got) == KEYS | {"holdout_dcr_median", "holdout_nndr_median", "dcr_median_ratio"}
    assert got["holdout_dcr_median"] == pytest.approx(0.3)
    expected_nndr = (0.2 / math.sqrt(1 + 0.04) + 0.4 / 0.6) / 2
    assert got["holdout_nndr_median"] == pytest.approx(expected_nndr)
    assert got["dcr_median_ratio"] == 0.0  # the synthetic rows are copies


def test_max_rows_subsamples_deterministically():
    rng = np.random.default_rng(2)
    real = pd.DataFrame(
        {"x": rng.uniform(size=40), "y": rng.uniform(size=40), "c": rng.choice(list("ab"), 40)}
    )
    synthetic = pd.DataFrame(
        {"x": rng.uniform(size=50), "y": rng.uniform(size=50), "c": rng.choice(list("ab"), 50)}
    )
    holdout = real.iloc[:20].assign(x=lambda f: f["x"] + 0.01)
    first = closest_record_distances(real, synthetic, SCHEMA, holdout=holdout, max_rows=10, seed=3)
    again = closest_record_distances(real, synthetic, SCHEMA, holdout=holdout, max_rows=10, seed=3)
    assert first["rows_compared"] == 10.0
    assert first == again
    full = closest_record_distances(real, synthetic, SCHEMA, max_rows=500)
    assert full["rows_compared"] == 50.0
    others = [
        closest_record_distances(real, synthetic, SCHEMA, max_rows=10, seed=s)["dcr_mean"]
        for s in range(4)
    ]
    assert len(set(others)) > 1


def test_bad_inputs():
    with pytest.raises(MetricInputError, match="at least 2 real rows"):
        closest_record_distances(REAL.iloc[:1], REAL, SCHEMA)
    with pytest.raises(MetricInputError, match="different columns"):
        closest_record_distances(REAL, REAL.drop(columns="c"), SCHEMA)
    with pytest.raises(MetricInputError, match="the holdout table is empty"):
        closest_record_distances(REAL, REAL, SCHEMA, holdout=REAL.iloc[:0])
    with pytest.raises(ValueError, match="max_rows must be >= 1 or None, got 0"):
        closest_record_distances(REAL, REAL, SCHEMA, max_rows=0)
    with pytest.raises(TypeError, match=r"max_rows must be an integer or None, got 2\.5"):
        closest_record_distances(REAL, REAL, SCHEMA, max_rows=2.5)  # type: ignore[arg-type]
