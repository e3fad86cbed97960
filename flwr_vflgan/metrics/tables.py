"""Input checks and feature encodings shared by the table metrics.

Every metric takes a real and a synthetic :class:`pandas.DataFrame` plus a
:class:`~flwr_vflgan.data.schema.Schema` that says which columns are categorical and
which are numeric (``continuous`` or ``integer``). :func:`check_pair` validates such a
pair once, with errors that name what is wrong; :class:`FeatureEncoder` turns tables
into the numeric design matrices that classifiers and nearest-neighbour searches need,
fitted on the real table only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import ColumnKind, Schema, infer_schema

__all__ = [
    "FeatureEncoder",
    "MetricInputError",
    "categorical_columns",
    "category_strings",
    "check_pair",
    "numeric_columns",
    "party_assignment",
]


class MetricInputError(ValueError):
    """A table handed to a metric is unusable (empty, mismatched, non-finite, ...)."""


def categorical_columns(schema: Schema, exclude: Sequence[str] = ()) -> list[str]:
    """Names of the categorical columns of ``schema`` in table order."""
    return [
        c.name for c in schema.columns if c.kind is ColumnKind.CATEGORICAL and c.name not in exclude
    ]


def numeric_columns(schema: Schema, exclude: Sequence[str] = ()) -> list[str]:
    """Names of the continuous and integer columns of ``schema`` in table order."""
    return [
        c.name
        for c in schema.columns
        if c.kind is not ColumnKind.CATEGORICAL and c.name not in exclude
    ]


def category_strings(series: pd.Series) -> np.ndarray:
    """A categorical column as an array of strings; missing values become ``"nan"``.

    Comparing categories as strings makes ``1`` and ``"1"`` (a CSV round trip) the same
    category and gives missing values (Adult's ``?``) a category of their own.
    """
    values = series.astype(object).where(series.notna(), "nan")
    return values.astype(str).to_numpy()


def check_pair(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    label: str | None = None,
    names: tuple[str, str] = ("real", "synthetic"),
    values: bool = True,
) -> Schema:
    """Validate a real/synthetic pair and return the schema to evaluate it with
    (``values=False``: the shapes and columns only, not the numeric values).

    Parameters
    ----------
    real, synthetic
        The two tables. They must hold the same columns (order may differ) and at
        least one row each.
    schema
        Column kinds. Without one, the kinds are inferred from ``real``.
    label
        The label column, if a metric needs one: it must be in both tables. Overrides
        ``schema.label``.
    names
        What to call the two tables in error messages (for example ``("real train",
        "real test")``).

    Returns
    -------
    Schema
        ``schema`` (or the inferred one) with ``label`` set when given.

    Raises
    ------
    MetricInputError
        If a table is not a DataFrame or is empty, the column sets differ, the schema
        does not match the columns, the label is missing, or a numeric column holds
        missing, non-numeric or non-finite values. Missing categorical values are
        allowed: they count as one more category.
    """
    for frame, name in ((real, names[0]), (synthetic, names[1])):
        if not isinstance(frame, pd.DataFrame):
            raise MetricInputError(
                f"the {name} table must be a pandas DataFrame, got {type(frame).__name__}"
            )
        if len(frame) == 0 or frame.shape[1] == 0:
            raise MetricInputError(f"the {name} table is empty (shape {frame.shape})")
    if label is not None:
        for frame, name in ((real, names[0]), (synthetic, names[1])):
            if label not in frame.columns:
                raise MetricInputError(
                    f"label column {label!r} is missing from the {name} table; "
                    f"it has {list(frame.columns)}"
                )
    missing = [c for c in real.columns if c not in synthetic.columns]
    extra = [c for c in synthetic.columns if c not in real.columns]
    if missing or extra:
        raise MetricInputError(
            f"the {names[0]} and {names[1]} tables have different columns: "
            f"missing from {names[1]}: {missing}; not in {names[0]}: {extra}"
        )
    if schema is None:
        schema = infer_schema(real, label=label)
    elif set(schema.names) != set(real.columns):
        raise MetricInputError(
            f"the schema's columns {schema.names} do not match the tables' columns "
            f"{list(real.columns)}"
        )
    if label is not None and schema.label != label:
        schema = Schema(schema.columns, label=label)
    if values:
        for frame, name in ((real, names[0]), (synthetic, names[1])):
            _check_values(frame, schema, name)
    return schema


def _check_values(frame: pd.DataFrame, schema: Schema, name: str) -> None:
    # A missing categorical value is a category of its own (Adult's '?'); a missing
    # number has no distance or correlation, so it is an error.
    for column in numeric_columns(schema):
        values = pd.to_numeric(frame[column], errors="coerce")
        if frame[column].isna().any():
            raise MetricInputError(
                f"numeric column {column!r} of the {name} table has "
                f"{int(frame[column].isna().sum())} missing values"
            )
        bad = int(values.isna().sum())
        if bad:
            raise MetricInputError(
                f"numeric column {column!r} of the {name} table has {bad} non-numeric values "
                f"(first: {frame[column][values.isna()].iloc[0]!r})"
            )
        if not np.isfinite(values.to_numpy(dtype=np.float64)).all():
            raise MetricInputError(f"numeric column {column!r} of the {name} table is not finite")


class FeatureEncoder:
    """One-hot categoricals and scaled numbers, fitted on a real table.

    Parameters
    ----------
    schema
        Column kinds.
    exclude
        Columns to leave out (typically the label).
    scaling
        ``"minmax"`` maps each numeric column's real range to [0, 1] (distances);
        ``"standard"`` subtracts the real mean and divides by the real standard
        deviation (linear models, networks). Constant columns map to 0.

    Notes
    -----
    Categories are the real table's, compared as strings (a missing value is the
    category ``"nan"``); a category that only the synthetic table has
    encodes as all zeros, so it is far from every real row rather than an error.
    """

    def __init__(
        self,
        schema: Schema,
        exclude: Sequence[str] = (),
        scaling: Literal["minmax", "standard"] = "minmax",
    ) -> None:
        if scaling not in ("minmax", "standard"):
            raise ValueError(f"scaling must be 'minmax' or 'standard', got {scaling!r}")
        self.schema = schema
        self.exclude = tuple(exclude)
        self.scaling = scaling
        self.numeric = numeric_columns(schema, self.exclude)
        self.categorical = categorical_columns(schema, self.exclude)
        if not self.numeric and not self.categorical:
            raise MetricInputError(f"no feature columns left after excluding {list(exclude)}")
        self._shift = np.zeros(0)
        self._scale = np.ones(0)
        self._categories: list[np.ndarray] = []

    def fit(self, real: pd.DataFrame) -> FeatureEncoder:
        """Learn scales and categories from ``real``."""
        values = real[self.numeric].to_numpy(dtype=np.float64)
        if self.scaling == "minmax":
            self._shift = values.min(axis=0) if len(values) else np.zeros(len(self.numeric))
            spread = values.max(axis=0) - self._shift if len(values) else np.ones(0)
        else:
            self._shift = values.mean(axis=0)
            spread = values.std(axis=0)
        self._scale = np.where(spread > 0, spread, 1.0)
        self._categories = [np.unique(category_strings(real[c])) for c in self.categorical]
        return self

    @property
    def feature_names(self) -> list[str]:
        """Names of the output columns (``column=category`` for one-hot columns)."""
        names = list(self.numeric)
        for column, categories in zip(self.categorical, self._categories, strict=True):
            names.extend(f"{column}={c}" for c in categories)
        return names

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """The design matrix of ``frame`` (float64, one row per row)."""
        parts = [(frame[self.numeric].to_numpy(dtype=np.float64) - self._shift) / self._scale]
        for column, categories in zip(self.categorical, self._categories, strict=True):
            codes = pd.Index(categories).get_indexer(category_strings(frame[column]))
            onehot = np.zeros((len(frame), len(categories)))
            known = codes >= 0
            onehot[np.flatnonzero(known), codes[known]] = 1.0
            parts.append(onehot)
        return np.concatenate(parts, axis=1)

    def fit_transform(self, real: pd.DataFrame) -> np.ndarray:
        """:meth:`fit` then :meth:`transform` on ``real``."""
        return self.fit(real).transform(real)


def party_assignment(parties: Sequence[Sequence[str]], names: list[str]) -> np.ndarray:
    """Party index of each column in ``names`` (-1 for columns outside every party)."""
    if isinstance(parties, str):
        raise TypeError(f"parties must be a sequence of column lists, got the string {parties!r}")
    if len(parties) == 0:
        raise ValueError("parties must hold at least one party, got none")
    party_of = np.full(len(names), -1)
    for p, party in enumerate(parties):
        if isinstance(party, str):
            raise TypeError(
                f"parties[{p}] must be a sequence of column names, got the string {party!r}"
            )
        if len(party) == 0:
            raise ValueError(f"parties[{p}] is empty; every party needs at least one column")
        for column in party:
            if column not in names:
                raise ValueError(
                    f"parties[{p}] names unknown column {column!r}; valid columns: {names}"
                )
            index = names.index(column)
            if party_of[index] >= 0:
                raise ValueError(
                    f"column {column!r} is in parties[{party_of[index]}] and parties[{p}]; "
                    "parties must be disjoint"
                )
            party_of[index] = p
    return party_of
