"""Mixed-type association matrix of a table, as dython's ``associations`` computes it.

Pearson's r between numeric columns, the correlation ratio between a categorical and a
numeric column, and bias-corrected Cramér's V between categorical columns: the matrix
paper 001's "Diff. Corr." compares (:func:`~flwr_vflgan.metrics.similarity.association_difference`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.stats

from flwr_vflgan.data.schema import ColumnKind, Schema
from flwr_vflgan.metrics.tables import category_strings, check_pair

__all__ = ["association_matrix", "pearson_matrix"]


def association_matrix(
    frame: pd.DataFrame, schema: Schema, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """Mixed-type association matrix of a table, as dython's ``associations`` computes it.

    Parameters
    ----------
    frame
        The table (at least one row).
    schema
        Column kinds; its columns must be those of ``frame``.
    columns
        The columns to include, in this order; all of ``schema``'s columns in schema
        order when ``None``.

    Returns
    -------
    pandas.DataFrame
        A symmetric ``len(columns) x len(columns)`` matrix indexed by column name, with
        1 on the diagonal. Numeric-numeric entries are Pearson's r (in [-1, 1]),
        categorical-numeric entries the correlation ratio eta and
        categorical-categorical entries the bias-corrected Cramér's V (both in
        [0, 1]).

    Raises
    ------
    MetricInputError
        If ``frame`` is empty, its columns differ from the schema's, or a numeric
        column holds missing or non-finite values.
    ValueError
        If ``columns`` is empty, repeats a column or names one that does not exist.
    TypeError
        If ``columns`` is a single string.

    Notes
    -----
    Paper 001 computes its correlation matrices with dython's ``associations`` and its
    defaults; this function reproduces them without the dependency:

    * Cramér's V uses ``scipy.stats.chi2_contingency`` with its default arguments, so a
      2 x 2 table gets Yates' continuity correction (dython's behaviour), followed by
      the bias correction of Bergsma (2013). When the correction is undefined
      (``min(r~, k~) - 1 == 0``, only possible for tiny tables) dython returns NaN and
      ``associations`` writes 0; so does this function.
    * The correlation ratio is 0 when the between-category sum of squares is 0.
    * A column with a single value (missing counts as a value) has association 0 with
      every other column, as in dython. Unlike dython, which also writes 0 on such a
      column's diagonal, the diagonal is always 1, so a synthetic column that
      collapsed to one value is penalised only through its lost associations.
    * Categories are compared as strings; a missing value is the category ``"nan"``.
    """
    check_pair(frame, frame, schema, names=("input", "input"))
    selected = _selected_columns(schema, columns)
    values = _associations(frame, schema, selected)
    return pd.DataFrame(values, index=selected, columns=selected)


def _selected_columns(schema: Schema, columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return schema.names
    if isinstance(columns, str):
        raise TypeError(f"columns must be a sequence of column names, got the string {columns!r}")
    selected = list(columns)
    if not selected:
        raise ValueError("columns must name at least one column, got none")
    unknown = [c for c in selected if c not in schema.names]
    if unknown:
        raise ValueError(f"columns has unknown columns {unknown}; valid columns: {schema.names}")
    repeated = sorted({c for c in selected if selected.count(c) > 1})
    if repeated:
        raise ValueError(f"columns must not repeat a column; repeated: {repeated}")
    return selected


def _associations(frame: pd.DataFrame, schema: Schema, columns: list[str]) -> np.ndarray:
    """The association matrix of ``columns`` of a validated ``frame`` as an array."""
    numeric = [c for c in columns if schema.kind_of(c) is not ColumnKind.CATEGORICAL]
    categorical = [c for c in columns if schema.kind_of(c) is ColumnKind.CATEGORICAL]
    codes = {c: pd.factorize(category_strings(frame[c]))[0] for c in categorical}
    position = {c: i for i, c in enumerate(columns)}
    result = np.eye(len(columns))

    def put(a: str, b: str, value: float) -> None:
        result[position[a], position[b]] = result[position[b], position[a]] = value

    pearson = pearson_matrix(frame[numeric].to_numpy(dtype=np.float64))
    for i, a in enumerate(numeric):
        for j in range(i + 1, len(numeric)):
            put(a, numeric[j], float(pearson[i, j]))
    for a in categorical:
        for b in numeric:
            put(a, b, _correlation_ratio(codes[a], frame[b].to_numpy(dtype=np.float64)))
    for i, a in enumerate(categorical):
        for b in categorical[i + 1 :]:
            put(a, b, _cramers_v(codes[a], codes[b]))
    return result


def pearson_matrix(values: np.ndarray) -> np.ndarray:
    """Pearson's r between the columns of ``values``; 0 for a constant column."""
    centred = values - values.mean(axis=0)
    norms = np.sqrt(np.sum(centred**2, axis=0))
    constant = (values.max(axis=0) == values.min(axis=0)) | (norms == 0)
    unit = centred / np.where(constant, 1.0, norms)
    unit[:, constant] = 0.0
    return np.clip(unit.T @ unit, -1.0, 1.0)


def _correlation_ratio(codes: np.ndarray, measurements: np.ndarray) -> float:
    """eta = sqrt(sum_c n_c (mean_c - mean)^2 / sum_i (y_i - mean)^2), as dython."""
    counts = np.bincount(codes)
    if len(counts) < 2 or measurements.max() == measurements.min():
        return 0.0
    means = np.bincount(codes, weights=measurements) / counts
    overall = measurements.mean()
    between = float(counts @ (means - overall) ** 2)
    total = float(np.sum((measurements - overall) ** 2))
    if between == 0 or total == 0:
        return 0.0
    return float(np.clip(np.sqrt(between / total), 0.0, 1.0))


def _cramers_v(a: np.ndarray, b: np.ndarray) -> float:
    """Bias-corrected Cramér's V (Bergsma 2013) of two code arrays, as dython."""
    rows, cols = int(a.max()) + 1, int(b.max()) + 1
    n = len(a)
    if rows < 2 or cols < 2 or n < 2:
        return 0.0
    table = np.bincount(a * cols + b, minlength=rows * cols).reshape(rows, cols)
    chi2 = float(scipy.stats.chi2_contingency(table).statistic)
    phi2 = chi2 / n
    phi2_corrected = max(0.0, phi2 - (cols - 1) * (rows - 1) / (n - 1))
    rows_corrected = rows - (rows - 1) ** 2 / (n - 1)
    cols_corrected = cols - (cols - 1) ** 2 / (n - 1)
    denominator = min(rows_corrected - 1, cols_corrected - 1)
    if denominator <= 0:
        return 0.0
    return float(np.clip(np.sqrt(phi2_corrected / denominator), 0.0, 1.0))
