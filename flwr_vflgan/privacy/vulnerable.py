"""The most exposed records of a table, as paper 000's Appendix A.7 picks the targets of
its membership audits: Meeus et al.'s (2023) nearest-neighbour distance (eq. 32, the
paper's Record 1) and Stadler et al.'s (2022) count of outlying attributes (eqs. 30-31,
Record 2)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics.tables import FeatureEncoder, categorical_columns, numeric_columns

__all__ = [
    "VULNERABILITY",
    "nearest_neighbour_distances",
    "outlier_counts",
    "vulnerable_records",
]

Vulnerability = Literal["distance", "outliers"]
VULNERABILITY: tuple[Vulnerability, ...] = ("distance", "outliers")
"""Appendix A.7's two rankings: Meeus et al.'s nearest-neighbour distance (the paper's
Record 1) and Stadler et al.'s count of outlying attributes (Record 2)."""


def outlier_counts(
    frame: pd.DataFrame, schema: Schema, quartiles_of: pd.DataFrame | None = None
) -> np.ndarray:
    """How many of each row's numeric attributes are outliers (Appendix A.7, eqs. 30-31).

    With ``Q1`` and ``Q3`` a column's first and third quartiles and ``T = Q3 - Q1``, a
    value ``a`` is an outlier when ``Q1 - a > T`` or ``a - Q3 > T``. Categorical
    attributes have no quartiles and never count; a missing value is no outlier. The
    quartiles are ``frame``'s, or ``quartiles_of``'s when given.
    """
    counts = np.zeros(len(frame), dtype=np.int64)
    fitted = frame if quartiles_of is None else quartiles_of
    for name in numeric_columns(schema):
        values = frame[name].to_numpy(dtype=np.float64)
        reference = fitted[name].to_numpy(dtype=np.float64)
        if np.isnan(reference).all():
            continue
        q1, q3 = np.nanpercentile(reference, [25, 75])
        spread = q3 - q1
        with np.errstate(invalid="ignore"):
            counts += ((q1 - values > spread) | (values - q3 > spread)).astype(np.int64)
    return counts


def nearest_neighbour_distances(
    frame: pd.DataFrame, schema: Schema, chunk: int = 2048
) -> np.ndarray:
    """Each row's distance to its nearest other row (Appendix A.7, eq. 32, Meeus et al.).

    ``d(x_i, x_j) = 1 - |F_cat|/F cos(h_i, h_j) - |F_cont|/F cos(c_i, c_j)``, with ``h``
    the one-hot categories and ``c`` the numbers, min-max scaled to [0, 1] over
    ``frame`` (the paper does not say how it scales them; unscaled, the widest column
    would decide alone). A missing number counts as the column's minimum. Two zero
    vectors have cosine 1 (they are equal); a zero vector and another, 0. A row with an
    exact copy in ``frame`` is at distance 0.

    Parameters
    ----------
    frame
        The table, at least two rows.
    schema
        Its column kinds.
    chunk
        Rows compared at once (memory ``chunk * len(frame)`` floats).
    """
    if len(frame) < 2:
        raise ValueError(f"nearest-neighbour distances need at least 2 rows, got {len(frame)}")
    numeric, categorical = numeric_columns(schema), categorical_columns(schema)
    filled = frame.fillna({name: frame[name].min() for name in numeric})
    design = np.nan_to_num(FeatureEncoder(schema).fit_transform(filled))
    parts = [
        (design[:, : len(numeric)], len(numeric)),
        (design[:, len(numeric) :], len(categorical)),
    ]
    total = len(numeric) + len(categorical)
    distances = np.full(len(frame), np.inf)
    for start in range(0, len(frame), chunk):
        rows = slice(start, min(start + chunk, len(frame)))
        similarity = np.zeros((rows.stop - start, len(frame)))
        for block, weight in parts:
            if weight:
                similarity += weight / total * _cosine(block[rows], block)
        distance = 1.0 - similarity
        distance[np.arange(rows.stop - start), np.arange(start, rows.stop)] = np.inf
        distances[rows] = distance.min(axis=1)
    return np.maximum(distances, 0.0)


def _cosine(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``left`` with every row of ``right``; 1 for two
    zero rows, 0 for a zero row and another."""
    left_norm = np.linalg.norm(left, axis=1)
    right_norm = np.linalg.norm(right, axis=1)
    denominator = np.outer(left_norm, right_norm)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.where(denominator > 0, (left @ right.T) / denominator, 0.0)
    both_zero = np.outer(left_norm == 0, right_norm == 0)
    return np.where(both_zero, 1.0, cosine)


def vulnerable_records(
    frame: pd.DataFrame, schema: Schema, method: Vulnerability, count: int = 1
) -> list[int]:
    """The positions of the ``count`` most exposed rows of ``frame``, most exposed first.

    ``distance``: the largest nearest-neighbour distance (:func:`nearest_neighbour_distances`).
    ``outliers``: the most outlying attributes (:func:`outlier_counts`); the paper notes
    that several rows often tie, so ties go to the larger nearest-neighbour distance, then
    to the earlier row (a decision of this implementation).
    """
    if method not in VULNERABILITY:
        raise ValueError(f"unknown vulnerability ranking {method!r}; valid: {list(VULNERABILITY)}")
    if not 1 <= count <= len(frame):
        raise ValueError(f"count must be between 1 and {len(frame)} rows, got {count}")
    distance = nearest_neighbour_distances(frame, schema)
    keys: list[np.ndarray] = [np.arange(len(frame)), -distance]
    if method == "outliers":
        keys.append(-outlier_counts(frame, schema))
    return [int(i) for i in np.lexsort(keys)[:count]]
