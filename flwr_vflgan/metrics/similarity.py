"""Statistical similarity of a synthetic table to a real one (paper 001, Section 4.2.2).

VT-GAN reports three column-wise and pair-wise scores, computed as in CTAB-GAN's
evaluation code (same authors):

* the average Jensen-Shannon score of the categorical columns' frequency distributions,
* the average Wasserstein distance of the numeric columns, min-max scaled by the real
  column,
* "Diff. Corr.": the l2 norm of the difference between the real and the synthetic
  association matrices, where the association matrix is dython's ``associations``
  (Pearson's r, the correlation ratio and bias-corrected Cramér's V). With a vertical
  partition it is also split into "Avg-client" (within each party) and
  "Across-client" (between parties).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats
from scipy.spatial import distance

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics.associations import association_matrix
from flwr_vflgan.metrics.tables import (
    categorical_columns,
    category_strings,
    check_pair,
    numeric_columns,
    party_assignment,
)

__all__ = [
    "association_difference",
    "association_matrix",
    "jensen_shannon_divergences",
    "statistical_similarity",
    "wasserstein_distances",
]


def jensen_shannon_divergences(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema | None = None
) -> dict[str, float]:
    """Jensen-Shannon score of each categorical column (paper 001, "Average JSD").

    Parameters
    ----------
    real, synthetic
        The two tables (same columns, at least one row each).
    schema
        Column kinds; inferred from ``real`` when ``None``.

    Returns
    -------
    dict of str to float
        For each categorical column in schema order, a value in [0, 1]: 0 for identical
        category frequencies, 1 for disjoint categories. Empty if there is no
        categorical column.

    Raises
    ------
    MetricInputError
        If the pair is unusable (see :func:`~flwr_vflgan.metrics.tables.check_pair`).

    Notes
    -----
    Paper 001 calls the score a "divergence ... bounded between 0 and 1" without a
    formula. Its evaluation code (CTAB-GAN's ``stat_sim``) returns
    ``scipy.spatial.distance.jensenshannon(real_pmf, fake_pmf, 2.0)``, which is the
    Jensen-Shannon *distance* (the square root of the base-2 divergence); this
    function returns the same quantity so that the numbers are comparable with the
    paper's. Decisions where the paper is silent:

    * the frequencies run over the union of the categories seen in either table
      (CTAB-GAN's code fails on a category only the synthetic table has);
    * categories are compared as strings and a missing value is the category
      ``"nan"`` (:func:`~flwr_vflgan.metrics.tables.category_strings`);
    * a rounding residue that would make the square root undefined counts as 0.
    """
    schema = check_pair(real, synthetic, schema)
    scores: dict[str, float] = {}
    for column in categorical_columns(schema):
        # Codes over the union of both tables' categories.
        codes, categories = pd.factorize(
            np.concatenate([category_strings(real[column]), category_strings(synthetic[column])])
        )
        real_pmf = np.bincount(codes[: len(real)], minlength=len(categories)) / len(real)
        synthetic_pmf = np.bincount(codes[len(real) :], minlength=len(categories)) / len(synthetic)
        value = float(distance.jensenshannon(real_pmf, synthetic_pmf, 2.0))
        scores[column] = min(max(value, 0.0), 1.0) if np.isfinite(value) else 0.0
    return scores


def wasserstein_distances(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema | None = None
) -> dict[str, float]:
    """Wasserstein distance of each numeric column (paper 001, "Average WD").

    Parameters
    ----------
    real, synthetic
        The two tables (same columns, at least one row each).
    schema
        Column kinds; inferred from ``real`` when ``None``.

    Returns
    -------
    dict of str to float
        For each numeric (continuous or integer) column in schema order, the
        1-Wasserstein distance between the real and the synthetic values, both scaled
        by the real column's range. Empty if there is no numeric column.

    Raises
    ------
    MetricInputError
        If the pair is unusable (see :func:`~flwr_vflgan.metrics.tables.check_pair`).

    Notes
    -----
    Paper 001 gives no formula; as in CTAB-GAN's ``stat_sim``, both columns are mapped
    with a min-max scaler fitted on the real column, ``(x - min_r) / (max_r - min_r)``,
    and ``scipy.stats.wasserstein_distance`` is taken of the results, so the distances
    of columns with different units can be averaged. A constant real column is only
    shifted (scale 1, as scikit-learn's ``MinMaxScaler`` does). Synthetic values
    outside the real range are not clipped.
    """
    schema = check_pair(real, synthetic, schema)
    distances: dict[str, float] = {}
    for column in numeric_columns(schema):
        real_values = real[column].to_numpy(dtype=np.float64)
        synthetic_values = synthetic[column].to_numpy(dtype=np.float64)
        low = real_values.min()
        spread = real_values.max() - low
        scale = spread if spread > 0 else 1.0
        distances[column] = float(
            scipy.stats.wasserstein_distance(
                (real_values - low) / scale, (synthetic_values - low) / scale
            )
        )
    return distances


def association_difference(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    parties: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """Frobenius norm of the difference of the association matrices (paper 001, "Diff. Corr.").

    Parameters
    ----------
    real, synthetic
        The two tables (same columns, at least one row each).
    schema
        Column kinds; inferred from ``real`` when ``None``.
    parties
        Optional vertical partition: one list of column names per party. The lists
        must be non-empty and disjoint; together they may cover only some columns.

    Returns
    -------
    dict of str to float
        ``"overall"``: the Frobenius norm of ``assoc(real) - assoc(synthetic)`` over
        all columns. With ``parties`` also ``"avg_client"``, the mean over parties of
        the norm restricted to that party's columns, and ``"across_client"``, the norm
        restricted to the entries whose row and column belong to different parties.

    Raises
    ------
    MetricInputError
        If the pair is unusable (see :func:`~flwr_vflgan.metrics.tables.check_pair`).
    ValueError
        If ``parties`` is empty, a party is empty, names an unknown column, or two
        parties share a column.
    TypeError
        If ``parties`` or one of its entries is a single string.

    Notes
    -----
    The association matrices are those of :func:`association_matrix`. Decisions where
    paper 001 is silent:

    * every norm runs over the full square matrix, so each off-diagonal pair counts
      twice, as ``numpy.linalg.norm(real_corr - fake_corr)`` in CTAB-GAN's code does;
      with parties covering every column, ``overall**2`` is the sum of the squared
      within-party norms plus ``across_client**2``;
    * "Across-client" uses only the cross-party entries, not the whole matrix of the
      concatenated parties (which would repeat the within-party differences); with
      more than two parties it covers all cross-party blocks together;
    * a single party gives ``across_client == 0``; columns outside every party count
      only in ``"overall"``.
    """
    schema = check_pair(real, synthetic, schema)
    names = schema.names
    party_of = party_assignment(parties, names) if parties is not None else None
    difference = (
        association_matrix(real, schema, names).to_numpy()
        - association_matrix(synthetic, schema, names).to_numpy()
    )
    result = {"overall": float(np.linalg.norm(difference))}
    if party_of is not None:
        n_parties = int(party_of.max()) + 1
        within = [
            float(np.linalg.norm(difference[np.ix_(party_of == p, party_of == p)]))
            for p in range(n_parties)
        ]
        assigned = party_of >= 0
        cross = assigned[:, None] & assigned[None, :] & (party_of[:, None] != party_of[None, :])
        result["avg_client"] = float(np.mean(within))
        result["across_client"] = float(np.sqrt(np.sum(difference[cross] ** 2)))
    return result


def statistical_similarity(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    parties: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """All statistical-similarity scores of paper 001, Section 4.2.2.

    Parameters
    ----------
    real, synthetic
        The two tables (same columns, at least one row each).
    schema
        Column kinds; inferred from ``real`` when ``None``.
    parties
        Optional vertical partition for the within/across-party correlation scores
        (see :func:`association_difference`).

    Returns
    -------
    dict
        ``"avg_jsd"``: mean of :func:`jensen_shannon_divergences` (``None`` without
        categorical columns); ``"avg_wd"``: mean of :func:`wasserstein_distances`
        (``None`` without numeric columns); ``"diff_corr"``: the overall
        :func:`association_difference`; ``"diff_corr_avg_client"`` and
        ``"diff_corr_across_client"``: its per-party parts (``None`` without
        ``parties``); ``"jsd_by_column"`` and ``"wd_by_column"``: the per-column
        scores. All numbers are Python floats.

    Raises
    ------
    MetricInputError
        If the pair is unusable (see :func:`~flwr_vflgan.metrics.tables.check_pair`).
    ValueError, TypeError
        If ``parties`` is malformed (see :func:`association_difference`).

    Notes
    -----
    The averages are unweighted means over columns, as in the paper and CTAB-GAN's
    code. See the individual functions for the decisions each score makes.
    """
    schema = check_pair(real, synthetic, schema)
    jsd = jensen_shannon_divergences(real, synthetic, schema)
    wd = wasserstein_distances(real, synthetic, schema)
    correlation = association_difference(real, synthetic, schema, parties)
    return {
        "avg_jsd": float(np.mean(list(jsd.values()))) if jsd else None,
        "avg_wd": float(np.mean(list(wd.values()))) if wd else None,
        "diff_corr": correlation["overall"],
        "diff_corr_avg_client": correlation.get("avg_client"),
        "diff_corr_across_client": correlation.get("across_client"),
        "jsd_by_column": jsd,
        "wd_by_column": wd,
    }
