"""Frechet distance between two tables (paper 000, eq. 23).

``FD(X, X~) = ||mu - mu~||_2^2 + Tr(V + V~ - 2 (V V~)^{1/2})`` with ``mu``, ``V`` the mean
and covariance of the real rows and ``mu~``, ``V~`` those of the synthetic rows. For
tabular data the paper computes it directly on the encoded table (one-hot categories,
standardised numbers).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg


@dataclass(frozen=True)
class GaussianStats:
    """Mean and covariance of a table's rows."""

    mean: np.ndarray
    cov: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray) -> GaussianStats:
        """Statistics of ``rows`` (shape ``(n, d)``, ``n >= 2``, finite)."""
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[0] < 2:
            raise ValueError(f"need a 2-D table with at least 2 rows, got shape {rows.shape}")
        if not np.isfinite(rows).all():
            raise ValueError("table contains non-finite values")
        return cls(
            mean=rows.mean(axis=0), cov=np.cov(rows, rowvar=False).reshape(rows.shape[1], -1)
        )


def frechet_distance(
    real: GaussianStats | np.ndarray, synthetic: GaussianStats | np.ndarray
) -> float:
    """Frechet distance of eq. 23 between two tables (or their precomputed statistics)."""
    a = real if isinstance(real, GaussianStats) else GaussianStats.of(real)
    b = synthetic if isinstance(synthetic, GaussianStats) else GaussianStats.of(synthetic)
    if a.mean.shape != b.mean.shape:
        raise ValueError(f"tables differ in width: {a.mean.shape[0]} vs {b.mean.shape[0]} columns")
    with warnings.catch_warnings():
        warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
        try:
            covmean = scipy.linalg.sqrtm(a.cov @ b.cov)
            singular = not np.isfinite(covmean).all()
        except scipy.linalg.LinAlgWarning:
            singular = True
    if singular:
        # A one-hot column the synthetic table never uses makes the product singular:
        # regularise both covariances slightly, as FID implementations do.
        eps = 1e-6 * np.eye(a.cov.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
            covmean = scipy.linalg.sqrtm((a.cov + eps) @ (b.cov + eps))
    covmean = np.real(covmean)
    diff = a.mean - b.mean
    value = diff @ diff + np.trace(a.cov) + np.trace(b.cov) - 2.0 * np.trace(covmean)
    return float(max(value, 0.0))
