"""Column schema of a table: which columns exist, in which order, and of which kind.

A :class:`Schema` is the contract between a party's table and everything that
encodes, splits or synthesises it. It is small, immutable and JSON-able, so it can
travel in configuration, sidecar files and messages.

:func:`infer_schema` guesses the kinds from pandas dtypes; declared kinds always win.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

__all__ = ["ColumnKind", "ColumnSpec", "Schema", "infer_schema"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_SCHEMA_KEYS = ("schema_version", "columns", "label")


class ColumnKind(StrEnum):
    """Kind of a column, which decides how it is encoded.

    A :class:`enum.StrEnum` (so a ``str`` and an ``Enum``): members compare equal to,
    and format as, their values.

    Attributes
    ----------
    CONTINUOUS
        Real-valued numbers.
    INTEGER
        Whole numbers (decoded by rounding).
    CATEGORICAL
        A finite set of labels (strings, ints or bools), one-hot encoded.
    """

    CONTINUOUS = "continuous"
    INTEGER = "integer"
    CATEGORICAL = "categorical"


def parse_kind(value: str | ColumnKind, *, column: str | None = None) -> ColumnKind:
    """Convert a kind name to a :class:`ColumnKind`.

    Parameters
    ----------
    value
        A :class:`ColumnKind` or one of its values (``"continuous"``, ``"integer"``,
        ``"categorical"``).
    column
        Column the kind belongs to, only used in error messages.

    Returns
    -------
    ColumnKind

    Raises
    ------
    ValueError
        If ``value`` names no kind; the message lists the valid kinds.
    """
    if isinstance(value, ColumnKind):
        return value
    where = f" for column {column!r}" if column is not None else ""
    try:
        return ColumnKind(value)
    except ValueError:
        valid = ", ".join(repr(kind.value) for kind in ColumnKind)
        raise ValueError(f"unknown column kind {value!r}{where}; valid kinds: {valid}") from None


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a :class:`Schema`.

    Parameters
    ----------
    name
        Column name (a non-empty string).
    kind
        Column kind; a kind name such as ``"integer"`` is converted.

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    ValueError
        If ``name`` is empty or ``kind`` names no kind.
    """

    name: str
    kind: ColumnKind

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"column name must be a str, got {type(self.name).__name__}")
        if not self.name:
            raise ValueError("column name must be a non-empty string, got ''")
        object.__setattr__(self, "kind", parse_kind(self.kind, column=self.name))


@dataclass(frozen=True)
class Schema:
    """Ordered columns of a table and, optionally, which one is the label.

    Parameters
    ----------
    columns
        The columns in table order; names must be unique. A list is converted to a tuple.
    label
        Name of the label column, which must be one of ``columns``; ``None`` if there is
        no label (for example a party that does not hold it).

    Raises
    ------
    TypeError
        If an element of ``columns`` is not a :class:`ColumnSpec`.
    ValueError
        If there are no columns, a name repeats, or ``label`` is not a column.
    """

    columns: tuple[ColumnSpec, ...]
    label: str | None = None

    def __post_init__(self) -> None:
        columns = tuple(self.columns)
        for position, spec in enumerate(columns):
            if not isinstance(spec, ColumnSpec):
                raise TypeError(
                    f"columns[{position}] must be a ColumnSpec, got {type(spec).__name__}"
                )
        if not columns:
            raise ValueError("a schema needs at least one column, got none")
        names = [spec.name for spec in columns]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"column names must be unique; repeated: {duplicates}")
        if self.label is not None and self.label not in names:
            raise ValueError(f"label {self.label!r} is not a column; columns: {names}")
        object.__setattr__(self, "columns", columns)

    @property
    def names(self) -> list[str]:
        """Column names in order."""
        return [spec.name for spec in self.columns]

    def kind_of(self, name: str) -> ColumnKind:
        """Return the kind of column ``name``.

        Raises
        ------
        ValueError
            If there is no such column; the message lists the valid names.
        """
        for spec in self.columns:
            if spec.name == name:
                return spec.kind
        raise ValueError(f"unknown column {name!r}; valid columns: {self.names}")

    def subset(self, names: Sequence[str]) -> Schema:
        """Return the schema of ``names``, in the order given.

        The label is kept only if it is among ``names``.

        Raises
        ------
        TypeError
            If ``names`` is a single string.
        ValueError
            If a name is unknown or repeated, or ``names`` is empty.
        """
        if isinstance(names, str):
            raise TypeError(f"names must be a sequence of column names, got the string {names!r}")
        unknown = [name for name in names if name not in self.names]
        if unknown:
            raise ValueError(f"unknown columns {unknown}; valid columns: {self.names}")
        columns = tuple(ColumnSpec(name, self.kind_of(name)) for name in names)
        label = self.label if self.label in names else None
        return Schema(columns, label=label)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict; :meth:`from_dict` reverses it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "columns": [{"name": spec.name, "kind": spec.kind.value} for spec in self.columns],
            "label": self.label,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        """Build a schema from the output of :meth:`to_dict`.

        Raises
        ------
        TypeError
            If ``d`` or one of its column entries is not a mapping.
        ValueError
            If a key is unknown or missing, or ``schema_version`` is not supported.
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"schema must be a mapping, got {type(d).__name__}")
        unknown = sorted(set(d) - set(_SCHEMA_KEYS))
        if unknown:
            raise ValueError(f"unknown schema keys {unknown}; valid keys: {list(_SCHEMA_KEYS)}")
        version = d.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise ValueError(f"schema_version must be {SCHEMA_VERSION}, got {version!r}")
        if "columns" not in d:
            raise ValueError("schema dict has no 'columns' key")
        columns = []
        for position, entry in enumerate(d["columns"]):
            if not isinstance(entry, Mapping) or set(entry) != {"name", "kind"}:
                raise TypeError(
                    f"columns[{position}] must be a mapping with keys 'name' and 'kind', "
                    f"got {entry!r}"
                )
            columns.append(ColumnSpec(entry["name"], entry["kind"]))
        return cls(tuple(columns), label=d.get("label"))

    def validate_frame(self, df: pd.DataFrame) -> None:
        """Check that ``df`` has this schema's columns with compatible dtypes.

        Extra columns are allowed. Numeric kinds need a numeric, non-boolean dtype and
        ``INTEGER`` columns need whole-number values (missing values are allowed here;
        the encoder rejects them).

        Raises
        ------
        TypeError
            If ``df`` is not a DataFrame.
        ValueError
            If columns are missing (all are named) or a column's dtype or values do not
            fit its kind.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
        missing = [name for name in self.names if name not in df.columns]
        if missing:
            raise ValueError(
                f"frame is missing columns {missing}; it has {[str(c) for c in df.columns]}"
            )
        for spec in self.columns:
            if spec.kind is not ColumnKind.CATEGORICAL:
                _check_numeric_column(df[spec.name], spec)


def _check_numeric_column(series: pd.Series, spec: ColumnSpec) -> None:
    if not ptypes.is_numeric_dtype(series.dtype) or ptypes.is_bool_dtype(series.dtype):
        raise ValueError(
            f"column {spec.name!r} is declared {spec.kind.value} but has dtype "
            f"{series.dtype}; convert it to numbers or declare it categorical"
        )
    if spec.kind is ColumnKind.INTEGER and ptypes.is_float_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        finite = values[np.isfinite(values)]
        fractional = finite[finite != np.round(finite)]
        if fractional.size:
            raise ValueError(
                f"column {spec.name!r} is declared integer but has {fractional.size} "
                f"non-integral values (first: {fractional[0]!r}); declare it continuous"
            )


def infer_schema(
    df: pd.DataFrame,
    declared: Mapping[str, str | ColumnKind] | None = None,
    *,
    max_categories: int = 50,
    label: str | None = None,
) -> Schema:
    """Infer a :class:`Schema` for every column of ``df``, in frame order.

    Parameters
    ----------
    df
        The table; column names must be strings.
    declared
        Kinds to use for some columns; they win over inference.
    max_categories
        Largest number of distinct values a text column may have before it is
        rejected as a likely identifier or free text.
    label
        Name of the label column, if any.

    Returns
    -------
    Schema

    Raises
    ------
    TypeError
        If ``df`` is not a DataFrame or has a non-string column name.
    ValueError
        If a declared kind is unknown, a declared column or the label is not in ``df``,
        a text column has more than ``max_categories`` distinct values, a dtype cannot
        be encoded (for example datetimes), or a declared kind does not fit the data.

    Notes
    -----
    Rules, in order: a declared kind; boolean, text (object, string) and pandas
    ``category`` dtypes are ``CATEGORICAL``; integer dtypes, and float columns whose
    non-missing values are all whole numbers (at least one), are ``INTEGER``; other
    float columns are ``CONTINUOUS``. A 0/1 column is therefore ``INTEGER`` unless
    declared ``"categorical"``, which is what a label usually wants. An undeclared
    whole-number column whose values are distinct consecutive integers (at least
    :data:`ROW_INDEX_MIN_ROWS` rows, none missing) numbers the rows and is refused as a
    likely row ID, as a text column with too many distinct values is (as dates, which are
    not modelled, when every non-blank value is an ISO 8601 date or time).
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    if isinstance(max_categories, bool) or not isinstance(max_categories, int):
        raise TypeError(f"max_categories must be an int, got {type(max_categories).__name__}")
    if max_categories < 1:
        raise ValueError(f"max_categories must be >= 1, got {max_categories}")
    for column in df.columns:
        if not isinstance(column, str):
            raise TypeError(f"column names must be strings, got {column!r}")
    declared_kinds = {
        name: parse_kind(kind, column=name) for name, kind in dict(declared or {}).items()
    }
    not_in_frame = [name for name in declared_kinds if name not in df.columns]
    if not_in_frame:
        raise ValueError(
            f"declared columns {not_in_frame} are not in the table; it has {list(df.columns)}"
        )
    if label is not None and label not in df.columns:
        raise ValueError(f"label {label!r} is not in the table; it has {list(df.columns)}")
    columns = []
    for name in df.columns:
        if name in declared_kinds:
            columns.append(ColumnSpec(name, declared_kinds[name]))
        else:
            columns.append(ColumnSpec(name, _infer_kind(df[name], max_categories)))
    schema = Schema(tuple(columns), label=label)
    schema.validate_frame(df)
    logger.debug("inferred schema %s", schema.to_dict())
    return schema


def _refuse_dates(series: pd.Series) -> None:
    """Refuse a text column whose every non-blank value is an ISO 8601 date or time
    (``YYYY-MM-DD``, optionally followed by a time) with a message that says so: dates are
    not modelled, and the generic refusal would call them an ID or free text."""
    present = series.dropna().astype(str).str.strip()
    present = present[present != ""]
    if present.empty or not present.str.match(r"\d{4}-\d{2}-\d{2}").all():
        return
    parsed = pd.to_datetime(present, errors="coerce", format="ISO8601", utc=True)
    if parsed.isna().any():
        return
    name = series.name
    raise ValueError(
        f"column {name!r} holds dates ({present.nunique()} distinct values such as "
        f"{present.iloc[0]!r}), which are not modelled: leave it out (dataset.drop=[{name}]) "
        "or store it as a number (for example days since a reference date)"
    )


def _infer_kind(series: pd.Series, max_categories: int) -> ColumnKind:
    dtype = series.dtype
    name = series.name
    if ptypes.is_bool_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype):
        return ColumnKind.CATEGORICAL
    if ptypes.is_object_dtype(dtype) or ptypes.is_string_dtype(dtype):
        n_distinct = int(series.nunique(dropna=True))
        if n_distinct > max_categories:
            _refuse_dates(series)
            raise ValueError(
                f"column {name!r} has {n_distinct} distinct text values, more than "
                f"max_categories={max_categories}; it looks like an ID or free text: drop it "
                f"(dataset.drop=[{name}]), declare its kind, or raise max_categories"
            )
        return ColumnKind.CATEGORICAL
    if ptypes.is_integer_dtype(dtype):
        _refuse_row_index(series)
        return ColumnKind.INTEGER
    if ptypes.is_float_dtype(dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        present = values[~np.isnan(values)]
        finite = np.isfinite(present).all()
        if present.size and finite and bool((present == np.round(present)).all()):
            _refuse_row_index(series)
            return ColumnKind.INTEGER
        return ColumnKind.CONTINUOUS
    raise ValueError(
        f"column {name!r} has dtype {dtype}, which cannot be encoded; convert it or "
        f"declare its kind"
    )


ROW_INDEX_MIN_ROWS = 20
"""Shortest table in which a column of distinct consecutive integers counts as a row ID."""


def _refuse_row_index(series: pd.Series) -> None:
    """Refuse a whole-number column that numbers the rows: complete, every value distinct,
    and together a run of consecutive integers (``Id``: 1, 2, ..., n, in any order).

    Trained as a feature it would be learned and published as made-up IDs; a real
    feature of this shape is very unlikely, and declaring its kind keeps it.
    """
    n = len(series)
    if n < ROW_INDEX_MIN_ROWS or series.isna().any():
        return
    values = series.to_numpy(dtype=np.float64)
    if len(np.unique(values)) == n and values.max() - values.min() == n - 1:
        raise ValueError(
            f"column {series.name!r} numbers the rows ({n} distinct consecutive integers, "
            f"{values.min():.0f} to {values.max():.0f}): it looks like a row ID, not a "
            f"feature. Name it as the ID column (dataset.id_column={series.name}) to align "
            f"parties by it, leave it out (dataset.drop=[{series.name}]), or declare its kind "
            f"(dataset.declared={{{series.name}: integer}}) to train on it anyway"
        )
