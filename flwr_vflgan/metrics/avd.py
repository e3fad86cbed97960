"""Joint-distribution and correlation distances of paper 004, Section 5.2.1.

* :func:`k_avd`: the k-way Average Variance Distance (eq. 5.1), the mean total
  variation distance between the real and synthetic k-way marginals of random
  attribute combinations.
* :func:`k_avd_by_party`: the same, over combinations within one party and over
  combinations that span parties (not in the paper).
* :func:`correlation_matrix_distance`: the Distance of Correlation Matrix (eq. 5.2),
  one minus the cosine between the flattened Pearson correlation matrices.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import ColumnKind, Schema
from flwr_vflgan.metrics.associations import pearson_matrix
from flwr_vflgan.metrics.tables import (
    FeatureEncoder,
    category_strings,
    check_pair,
    party_assignment,
)

__all__ = ["correlation_matrix_distance", "k_avd", "k_avd_by_party"]

# Joint codes above this many cells are compressed to the observed tuples first.
_MAX_DIRECT_CELLS = 1 << 22
# Up to this many k-combinations of a partition's columns are listed rather than drawn.
_MAX_ENUMERATED = 200_000


def k_avd(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    k: int = 2,
    n_combinations: int = 100,
    bins: int = 10,
    seed: int = 0,
) -> float:
    """k-way Average Variance Distance (paper 004, eq. 5.1).

    ``k-AVD = 1/m sum_i 1/2 sum_w |P_r(w) - P_s(w)|`` over ``m`` combinations of ``k``
    columns, ``w`` running over the value tuples of a combination.

    Parameters
    ----------
    real, synthetic
        The two tables (same columns, at least one row each).
    schema
        Column kinds; inferred from ``real`` when ``None``.
    k
        Number of columns per combination, ``1 <= k <= number of columns``.
    n_combinations
        Number ``m`` of distinct combinations to average over (at least 1). If fewer
        combinations exist, every one is used once.
    bins
        Number of equal-frequency bins a numeric column is cut into (at least 2).
    seed
        Seed of the :class:`numpy.random.Generator` that draws the combinations.

    Returns
    -------
    float
        A value in [0, 1]: 0 when every sampled k-way marginal is identical, 1 when
        they all have disjoint supports.

    Raises
    ------
    MetricInputError
        If the pair is unusable (see :func:`~flwr_vflgan.metrics.tables.check_pair`).
    ValueError
        If ``k``, ``n_combinations`` or ``bins`` is out of range.
    TypeError
        If one of them, or ``seed``, is not an integer.

    Notes
    -----
    Paper 004's attributes are all categorical; decisions for other tables and where
    the paper is silent:

    * a numeric column is cut into ``bins`` equal-frequency bins whose edges are
      quantiles of the *real* column (right-closed intervals as in ``pandas.qcut``;
      repeated edges merge, so a column with a heavy value such as 0 gets fewer
      bins); synthetic values below or above the real range fall into the end bins;
    * an integer column with at most ``bins`` distinct real values keeps its values
      (synthetic values the real column lacks are values of their own);
    * categorical values are compared as strings, missing values being ``"nan"``;
    * the sum runs over the union of the value tuples observed in either table;
    * the combinations are drawn uniformly without repetition (rejection of repeated
      draws) with ``numpy.random.default_rng(seed)``; every column, the label
      included, can be drawn.
    """
    schema = check_pair(real, synthetic, schema)
    n_columns = len(schema.names)
    _check_arguments(k, n_combinations, bins, seed, n_columns)
    codes = _Codes(real, synthetic, schema, bins)
    return codes.mean_distance(
        _draw_combinations(n_columns, k, n_combinations, np.random.default_rng(seed))
    )


def k_avd_by_party(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    parties: Sequence[Sequence[str]],
    k: int = 2,
    n_combinations: int = 100,
    bins: int = 10,
    seed: int = 0,
) -> dict[str, float | None]:
    """:func:`k_avd` split by where a combination's columns live.

    Parameters
    ----------
    real, synthetic, schema, k, n_combinations, bins, seed
        As for :func:`k_avd`.
    parties
        The vertical partition: one list of column names per party (non-empty,
        disjoint; columns outside every party are left out).

    Returns
    -------
    dict
        ``"within"``: the k-AVD over combinations whose ``k`` columns all belong to
        one party; ``"across"``: over combinations whose columns belong to two or more
        parties. Each averages up to ``n_combinations`` distinct combinations of its
        kind, drawn uniformly (every one when fewer exist); ``None`` where no
        combination of the kind exists (``k`` larger than every party, or one party).

    Raises
    ------
    MetricInputError, ValueError, TypeError
        As for :func:`k_avd`; also a malformed ``parties`` (see
        :func:`~flwr_vflgan.metrics.tables.party_assignment`).

    Notes
    -----
    Not in paper 004. It separates what a party's own model can see (its columns'
    joint) from what only a cross-party signal can teach (the joint of columns held by
    different parties). Applied to the real table with each party's rows permuted
    independently, ``"across"`` measures how far the table is from the product of its
    parties' marginals. Each kind draws its combinations with its own
    ``numpy.random.default_rng(seed)``.
    """
    schema = check_pair(real, synthetic, schema)
    party_of = party_assignment(parties, schema.names)
    _check_arguments(k, n_combinations, bins, seed, len(schema.names))
    codes = _Codes(real, synthetic, schema, bins)
    result: dict[str, float | None] = {}
    for kind in ("within", "across"):
        combinations = _party_combinations(
            party_of, k, n_combinations, np.random.default_rng(seed), across=kind == "across"
        )
        result[kind] = codes.mean_distance(combinations) if combinations else None
    return result


def _check_arguments(k: int, n_combinations: int, bins: int, seed: int, n_columns: int) -> None:
    _check_int("k", k, low=1, high=n_columns, high_rule="the number of columns")
    _check_int("n_combinations", n_combinations, low=1)
    _check_int("bins", bins, low=2)
    _check_int("seed", seed, low=None)


class _Codes:
    """Every column's codes, the real rows' first, and the mean total variation."""

    def __init__(self, real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, bins: int):
        self.n_real = len(real)
        self.codes: list[np.ndarray] = []
        self.cardinalities: list[int] = []
        for spec in schema.columns:
            column_codes, cardinality = _discretise(
                real[spec.name], synthetic[spec.name], spec.kind, bins
            )
            self.codes.append(column_codes)
            self.cardinalities.append(cardinality)

    def mean_distance(self, combinations: Sequence[tuple[int, ...]]) -> float:
        distances = [
            _total_variation(*_joint_codes(self.codes, self.cardinalities, c), self.n_real)
            for c in combinations
        ]
        return float(np.clip(np.mean(distances), 0.0, 1.0))


def _check_int(
    name: str, value: int, *, low: int | None, high: int | None = None, high_rule: str = ""
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high_rule} ({high}), got {value}")


def _discretise(
    real: pd.Series, synthetic: pd.Series, kind: ColumnKind, bins: int
) -> tuple[np.ndarray, int]:
    """Codes of the real values followed by the synthetic ones, and how many codes exist."""
    if kind is ColumnKind.CATEGORICAL:
        values = np.concatenate([category_strings(real), category_strings(synthetic)])
        codes, uniques = pd.factorize(values)
        return codes, len(uniques)
    real_values = real.to_numpy(dtype=np.float64)
    synthetic_values = synthetic.to_numpy(dtype=np.float64)
    if kind is ColumnKind.INTEGER and len(np.unique(real_values)) <= bins:
        codes, uniques = pd.factorize(np.concatenate([real_values, synthetic_values]))
        return codes, len(uniques)
    edges = np.quantile(real_values, np.linspace(0.0, 1.0, bins + 1))
    interior = np.unique(edges[1:-1])
    values = np.concatenate([real_values, synthetic_values])
    return np.searchsorted(interior, values, side="left"), len(interior) + 1


def _draw_combinations(
    n_columns: int, k: int, n_combinations: int, rng: np.random.Generator
) -> list[tuple[int, ...]]:
    if math.comb(n_columns, k) <= n_combinations:
        return list(itertools.combinations(range(n_columns), k))
    drawn: dict[tuple[int, ...], None] = {}
    while len(drawn) < n_combinations:
        combination = tuple(sorted(int(i) for i in rng.choice(n_columns, size=k, replace=False)))
        drawn.setdefault(combination, None)
    return list(drawn)


def _party_combinations(
    party_of: np.ndarray, k: int, n_combinations: int, rng: np.random.Generator, *, across: bool
) -> list[tuple[int, ...]]:
    """Up to ``n_combinations`` distinct k-combinations of the assigned columns that span
    two or more parties (``across``) or lie in one, drawn uniformly; all when fewer."""
    columns = np.flatnonzero(party_of >= 0)
    within = sum(math.comb(int(size), k) for size in np.bincount(party_of[columns]))
    total = math.comb(len(columns), k)
    count = total - within if across else within
    if count == 0:
        return []

    def kind_of(combination: tuple[int, ...]) -> bool:
        return len({int(party_of[c]) for c in combination}) > 1

    if total <= _MAX_ENUMERATED:
        pool = [c for c in itertools.combinations(columns.tolist(), k) if kind_of(c) == across]
        if len(pool) <= n_combinations:
            return pool
        return [pool[i] for i in sorted(rng.choice(len(pool), n_combinations, replace=False))]
    # Within: a party with probability C(n_p, k) / count, then k of its columns (uniform
    # over the within-combinations; rejection would almost never hit one when there are
    # many parties). Across: rejection, which accepts about half of the draws or more
    # unless one party holds most of the columns.
    members = [np.flatnonzero(party_of == p) for p in range(int(party_of.max()) + 1)]
    sizes = np.array([math.comb(len(m), k) for m in members], dtype=np.float64)
    drawn: dict[tuple[int, ...], None] = {}
    while len(drawn) < min(n_combinations, count):
        pool_of = columns if across else members[int(rng.choice(len(members), p=sizes / within))]
        combination = tuple(sorted(int(i) for i in rng.choice(pool_of, size=k, replace=False)))
        if kind_of(combination) == across:
            drawn.setdefault(combination, None)
    return list(drawn)


def _joint_codes(
    codes: list[np.ndarray], cardinalities: list[int], combination: tuple[int, ...]
) -> tuple[np.ndarray, int]:
    """One code per row for the value tuple of ``combination``, and the number of codes."""
    joint = codes[combination[0]].astype(np.int64)
    cells = cardinalities[combination[0]]
    for column in combination[1:]:
        if cells * cardinalities[column] > _MAX_DIRECT_CELLS:
            joint, uniques = pd.factorize(joint)
            cells = len(uniques)
        joint = joint * cardinalities[column] + codes[column]
        cells *= cardinalities[column]
    if cells > _MAX_DIRECT_CELLS:
        joint, uniques = pd.factorize(joint)
        cells = len(uniques)
    return joint, cells


def _total_variation(joint: np.ndarray, cells: int, n_real: int) -> float:
    real_pmf = np.bincount(joint[:n_real], minlength=cells) / n_real
    synthetic_pmf = np.bincount(joint[n_real:], minlength=cells) / (len(joint) - n_real)
    return 0.5 * float(np.abs(real_pmf - synthetic_pmf).sum())


def correlation_matrix_distance(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema | None = None
) -> float:
    """Distance of Correlation Matrix (paper 004, eq. 5.2).

    ``DCM = 1 - tr(R_r R_s) / (||R_r|| ||R_s||)`` with ``R_r`` and ``R_s`` the Pearson
    correlation matrices of the real and the synthetic table.

    Parameters
    ----------
    real, synthetic
        The two tables (same columns, at least one row each).
    schema
        Column kinds; inferred from ``real`` when ``None``.

    Returns
    -------
    float
        A value in [0, 1]; 0 when the two correlation matrices are proportional
        (in particular equal).

    Raises
    ------
    MetricInputError
        If the pair is unusable (see :func:`~flwr_vflgan.metrics.tables.check_pair`).

    Notes
    -----
    Paper 004 correlates one-hot encoded categorical attributes and writes the norm as
    "L2"; since it equates DCM with one minus the cosine of the flattened matrices, the
    norm is the Frobenius norm. Decisions where the paper is silent:

    * the correlations are taken over the design matrix of
      :class:`~flwr_vflgan.metrics.tables.FeatureEncoder` with ``scaling="standard"``
      fitted on the real table: numeric columns plus one indicator per real category
      (all columns, the label included). A category only the synthetic table has
      encodes as all zeros, i.e. it is ignored;
    * a feature that is constant in a table (a category the table never or always
      uses) has correlation 0 with every other feature of that table and 1 with
      itself, instead of NaN. Both matrices then stay positive semi-definite, so
      ``tr(R_r R_s) >= 0`` and DCM lies in [0, 1]; rounding is clipped.
    """
    schema = check_pair(real, synthetic, schema)
    encoder = FeatureEncoder(schema, scaling="standard").fit(real)
    real_corr = _correlation(encoder.transform(real))
    synthetic_corr = _correlation(encoder.transform(synthetic))
    # tr(A B) for symmetric A, B is the sum of their elementwise product.
    cosine = float(np.sum(real_corr * synthetic_corr)) / (
        float(np.linalg.norm(real_corr)) * float(np.linalg.norm(synthetic_corr))
    )
    return float(np.clip(1.0 - cosine, 0.0, 1.0))


def _correlation(design: np.ndarray) -> np.ndarray:
    corr = pearson_matrix(design)
    np.fill_diagonal(corr, 1.0)
    return corr
