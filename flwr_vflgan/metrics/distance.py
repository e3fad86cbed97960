"""Distance-to-closest-record checks: does a generator copy its training rows?

For every synthetic row the distance to its nearest real training row (DCR) and the
ratio of the nearest to the second-nearest distance (NNDR) are computed in a common
encoding. Rows at distance 0 are copies; a DCR distribution far below that of real
rows the generator never saw (a holdout) means the generator memorises.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.neighbors import NearestNeighbors

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics.tables import FeatureEncoder, MetricInputError, check_pair

__all__ = ["closest_record_distances"]

# A distance this small is an exact copy (the encoding of equal rows is equal, so
# their recomputed distance is exactly 0; the tolerance only absorbs rounding).
_EXACT_MATCH_TOLERANCE = 1e-12
# Rows whose exact distances are recomputed at once (bounds the temporary memory).
_CHUNK_ROWS = 8192


def closest_record_distances(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    holdout: pd.DataFrame | None = None,
    max_rows: int | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """Distance to closest record (DCR) and nearest-neighbour distance ratio (NNDR).

    Parameters
    ----------
    real
        The real rows the generator was trained on (at least two).
    synthetic
        The synthetic rows (same columns).
    schema
        Column kinds; inferred from ``real`` when ``None``.
    holdout
        Optional real rows the generator did not see (same columns). Their distances
        to ``real`` are the baseline a generator that does not copy should match.
    max_rows
        Compare at most this many synthetic rows (and at most this many holdout rows),
        drawn without replacement; ``None`` compares all of them.
    seed
        Seed of the :class:`numpy.random.Generator` that draws the subsample (first the
        synthetic rows, then the holdout rows).

    Returns
    -------
    dict of str to float
        ``"dcr_mean"``, ``"dcr_median"``, ``"dcr_p05"`` (5th percentile) of the
        synthetic rows' DCR; ``"exact_match_fraction"``, the fraction of synthetic rows
        with DCR 0; ``"nndr_median"``, ``"nndr_p05"``; ``"rows_compared"``, the number
        of synthetic rows used. With ``holdout`` also ``"holdout_dcr_median"``,
        ``"holdout_nndr_median"`` and ``"dcr_median_ratio"`` (``dcr_median /
        holdout_dcr_median``).

    Raises
    ------
    MetricInputError
        If a pair is unusable (see :func:`~flwr_vflgan.metrics.tables.check_pair`) or
        ``real`` has fewer than two rows.
    ValueError
        If ``max_rows`` is smaller than 1.
    TypeError
        If ``max_rows`` or ``seed`` is not an integer.

    Notes
    -----
    DCR and NNDR are the privacy sanity checks of the tabular-GAN literature (for
    example CTAB-GAN's evaluation); papers 000-004 do not define them, so every choice
    here is ours:

    * rows are encoded with :class:`~flwr_vflgan.metrics.tables.FeatureEncoder`
      (``scaling="minmax"``) fitted on ``real``: numbers scaled to the real range,
      one indicator per real category (a category only another table has encodes as
      all zeros). All columns count, the label included: a copy is a copy of the
      whole record;
    * the distance is Euclidean. Neighbours are found by
      ``sklearn.neighbors.NearestNeighbors(n_neighbors=2)`` (exact search), and the
      two distances are then recomputed directly from the rows, so an exact copy has
      distance exactly 0 (the search's fast formula leaves rounding residues of order
      1e-8); a row is an exact match when its DCR is at most 1e-12;
    * NNDR = DCR / distance to the second-nearest real row; when both are 0 (the row
      copies a record that ``real`` holds twice) the NNDR is 0, the value of a copy;
    * percentiles use numpy's default linear interpolation;
    * ``dcr_median_ratio`` is ``inf`` when only the holdout median is 0 and 1 when
      both medians are 0.
    """
    schema = check_pair(real, synthetic, schema)
    if holdout is not None:
        check_pair(real, holdout, schema, names=("real", "holdout"))
    if len(real) < 2:
        raise MetricInputError(
            f"closest_record_distances needs at least 2 real rows (for the NNDR), got {len(real)}"
        )
    if max_rows is not None:
        if isinstance(max_rows, bool) or not isinstance(max_rows, int | np.integer):
            raise TypeError(f"max_rows must be an integer or None, got {max_rows!r}")
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1 or None, got {max_rows}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    encoder = FeatureEncoder(schema, scaling="minmax").fit(real)
    training = encoder.transform(real)
    search = NearestNeighbors(n_neighbors=2).fit(training)

    def distances(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        rows = encoder.transform(_subsample(frame, max_rows, rng))
        return _two_nearest(search, training, rows)

    dcr, nndr = distances(synthetic)
    result = {
        "dcr_mean": float(np.mean(dcr)),
        "dcr_median": float(np.median(dcr)),
        "dcr_p05": float(np.percentile(dcr, 5)),
        "exact_match_fraction": float(np.mean(dcr <= _EXACT_MATCH_TOLERANCE)),
        "nndr_median": float(np.median(nndr)),
        "nndr_p05": float(np.percentile(nndr, 5)),
        "rows_compared": float(len(dcr)),
    }
    if holdout is not None:
        holdout_dcr, holdout_nndr = distances(holdout)
        baseline = float(np.median(holdout_dcr))
        result["holdout_dcr_median"] = baseline
        result["holdout_nndr_median"] = float(np.median(holdout_nndr))
        result["dcr_median_ratio"] = _ratio(result["dcr_median"], baseline)
    return result


def _subsample(frame: pd.DataFrame, max_rows: int | None, rng: np.random.Generator) -> pd.DataFrame:
    if max_rows is None or max_rows >= len(frame):
        return frame
    chosen = np.sort(rng.choice(len(frame), size=max_rows, replace=False))
    return frame.iloc[chosen]


def _two_nearest(
    search: NearestNeighbors, training: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact distance of each row to its nearest training row, and the NNDR."""
    _, neighbours = search.kneighbors(rows)
    nearest = np.empty((len(rows), 2))
    for start in range(0, len(rows), _CHUNK_ROWS):
        stop = start + _CHUNK_ROWS
        gaps = rows[start:stop, None, :] - training[neighbours[start:stop]]
        nearest[start:stop] = np.sqrt(np.einsum("ijk,ijk->ij", gaps, gaps))
    nearest.sort(axis=1)
    first, second = nearest[:, 0], nearest[:, 1]
    ratio = np.divide(first, second, out=np.zeros_like(first), where=second > 0)
    return first, ratio


def _ratio(value: float, baseline: float) -> float:
    if baseline > 0:
        return value / baseline
    return 1.0 if value == 0 else float("inf")
