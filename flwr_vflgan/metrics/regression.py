"""Paper 000's TRTR/TSTS/TRTS/TSTR for a continuous label, scored by R².

Paper 000 measures utility with random-forest classifiers (accuracy and macro F1), which a
continuous label such as California housing's ``MedHouseVal`` (one class per distinct
price) cannot feed. The synthesis literature that evaluates on that table (TabDDPM,
TabSyn, SiloFuse) trains regressors and reports R²; this module does the same with the
settings and splits of :func:`~flwr_vflgan.metrics.utility.ai_training_utility`, so that
``total_difference`` keeps its meaning (the summed distance of the synthetic settings
from TRTR; lower is better) over one score instead of two. Decision recorded in
docs/evaluation.md ("Continuous labels").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics.tables import FeatureEncoder, check_pair
from flwr_vflgan.metrics.utility import _check_seed, _random_states

__all__ = ["regression_utility"]

_SETTINGS = ("tsts", "trts", "tstr")
_FAST_SPLITS = 5  # folds=0: the first of five shuffled folds, an 80/20 split


def regression_utility(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    label: str,
    folds: int = 10,
    seed: int = 0,
    n_estimators: int = 100,
    n_jobs: int | None = None,
) -> dict[str, float]:
    """TRTR, TSTS, TRTS and TSTR with random-forest regressors, scored by R².

    Parameters
    ----------
    real, synthetic
        The two tables (same columns); ``label`` holds numbers in both.
    schema
        Column kinds; inferred from ``real`` when omitted.
    label
        The continuous column to predict from all others.
    folds
        Folds of TRTR and TSTS (shuffled k-fold); ``0`` is one 80/20 split.
    seed, n_estimators, n_jobs
        As in :func:`~flwr_vflgan.metrics.utility.ai_training_utility`.

    Returns
    -------
    dict of str to float
        ``"trtr_r2"``, ``"tsts_r2"``, ``"trts_r2"``, ``"tstr_r2"``; the absolute
        differences ``"<setting>_r2_difference"`` from TRTR; their sum
        ``"total_difference"``; and ``"folds"``.

    Raises
    ------
    ValueError
        If ``folds`` is negative or 1, ``seed`` is negative, a table has fewer rows than
        the splits need, or the label is constant in the real table.
    """
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 0 or folds == 1:
        raise ValueError(f"folds must be 0 or at least 2, got {folds!r}")
    _check_seed(seed)
    schema = check_pair(real, synthetic, schema, label=label)
    y_real, y_synthetic = _numbers(real, label, "real"), _numbers(synthetic, label, "synthetic")
    if np.ptp(y_real) == 0:
        raise ValueError(f"label {label!r} is constant in the real table; R² needs variation")
    splits = folds or _FAST_SPLITS
    for name, y in (("real", y_real), ("synthetic", y_synthetic)):
        if len(y) < splits:
            raise ValueError(f"the {name} table has {len(y)} rows; {splits} splits need more")
    encoder = FeatureEncoder(schema, exclude=[label], scaling="minmax").fit(real)
    x_real, x_synthetic = encoder.transform(real), encoder.transform(synthetic)
    forest_state, split_state = _random_states(seed, 2)
    forest = RandomForestRegressor(
        n_estimators=int(n_estimators), random_state=forest_state, n_jobs=n_jobs
    )
    scores = {
        "trtr_r2": _within(x_real, y_real, folds, forest, split_state),
        "tsts_r2": _within(x_synthetic, y_synthetic, folds, forest, split_state),
        "trts_r2": _r2(clone(forest).fit(x_real, y_real), x_synthetic, y_synthetic),
        "tstr_r2": _r2(clone(forest).fit(x_synthetic, y_synthetic), x_real, y_real),
    }
    for setting in _SETTINGS:
        scores[f"{setting}_r2_difference"] = abs(scores[f"{setting}_r2"] - scores["trtr_r2"])
    scores["total_difference"] = float(sum(scores[f"{s}_r2_difference"] for s in _SETTINGS))
    scores["folds"] = float(folds)
    return scores


def _numbers(table: pd.DataFrame, label: str, name: str) -> np.ndarray:
    values = pd.to_numeric(table[label], errors="coerce").to_numpy(dtype=float)
    bad = int((~np.isfinite(values)).sum())
    if bad:
        raise ValueError(
            f"label {label!r} of the {name} table has {bad} values that are not numbers"
        )
    return values


def _r2(model: Any, x: np.ndarray, y: np.ndarray) -> float:
    if np.ptp(y) == 0:  # R² is undefined on a constant target
        return float("nan")
    return float(r2_score(y, model.predict(x)))


def _splits(n_rows: int, folds: int, random_state: int) -> Iterator[tuple[Any, Any]]:
    splitter = KFold(n_splits=folds or _FAST_SPLITS, shuffle=True, random_state=random_state)
    pairs = list(splitter.split(np.zeros(n_rows)))
    return iter(pairs[:1] if folds == 0 else pairs)


def _within(x: np.ndarray, y: np.ndarray, folds: int, forest: Any, split_state: int) -> float:
    """Mean held-out R² of ``forest`` over the splits of one table."""
    results = [
        _r2(clone(forest).fit(x[train], y[train]), x[test], y[test])
        for train, test in _splits(len(y), folds, split_state)
    ]
    return float(np.mean(results))
