"""Fitted per-column encodings used by :class:`~flwr_vflgan.data.encoder.TabularEncoder`; internal.

Each record knows how to encode its column into a block of the output matrix and how
to decode that block, fully vectorised over rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from flwr_vflgan.data.schema import ColumnKind

DtypeRecord = str | dict[str, Any]
CategoryValue = str | int | float | bool

_MAX_SHOWN = 5
MAX_QUANTILES = 1000
"""Reference quantiles a quantile-scaled column keeps (fewer for fewer present values)."""
_TAIL = 1e-7
"""Levels are clipped to [_TAIL, 1 - _TAIL], so encoded values stay within about +-5.2."""

logger = logging.getLogger(__name__)


def dtype_record(dtype: Any) -> DtypeRecord:
    """A JSON-able description of a pandas dtype, restored by :func:`dtype_from_record`."""
    if isinstance(dtype, pd.CategoricalDtype):
        return {
            "name": "category",
            "categories": [native(value) for value in dtype.categories.tolist()],
            "ordered": bool(dtype.ordered),
        }
    return str(dtype)


def dtype_from_record(record: DtypeRecord) -> Any:
    """Inverse of :func:`dtype_record`."""
    if isinstance(record, dict):
        return pd.CategoricalDtype(record["categories"], ordered=record["ordered"])
    return ptypes.pandas_dtype(record)


def native(value: Any) -> Any:
    """Turn numpy scalars into the Python scalars JSON understands."""
    return value.item() if isinstance(value, np.generic) else value


def numeric_values(series: pd.Series, name: str, *, allow_missing: bool = False) -> np.ndarray:
    """The column as float64 (missing values NaN when ``allow_missing``), rejecting
    non-finite values and, unless allowed, missing ones."""
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    n_missing = int(np.isnan(values).sum())
    if n_missing and not allow_missing:
        raise ValueError(
            f"numeric column {name!r} has {n_missing} missing values; numeric columns must be "
            f"complete: impute or drop those rows, leave the column out "
            f"(dataset.drop=[{name}]), or declare it categorical"
        )
    n_infinite = int(np.isinf(values).sum())
    if n_infinite:
        raise ValueError(
            f"numeric column {name!r} has {n_infinite} non-finite values (inf); replace or drop "
            f"those rows"
        )
    return values


@dataclass(frozen=True)
class NumericColumn:
    """An affine scaling ``(x - offset) / scale`` of a numeric column or, with
    ``quantiles``, its quantile transform to a standard normal."""

    name: str
    kind: ColumnKind
    dtype: DtypeRecord
    mean: float
    std: float
    minimum: float
    maximum: float
    minmax: bool
    clip_input: bool = False
    """Clip values to [minimum, maximum] when encoding (bounds from public metadata)."""
    has_missing: bool = False
    """The column has missing values: two more slots, a one-hot ``[present, missing]``
    indicator after the value (which is 0 where missing); decoding gives NaN where the
    indicator says missing."""
    quantiles: tuple[float, ...] = ()
    """Quantile scaling: the column's quantiles at evenly spaced levels from 0 to 1. A
    value is encoded as ``Phi^-1(F(x))``, with ``F`` the interpolated empirical CDF (tied
    values, such as a mass of zeros, take the middle of their levels), and decoded as
    ``F^-1(Phi(y))``, so point masses and long tails come back as the real column has them
    (as scikit-learn's ``QuantileTransformer(output_distribution="normal")``)."""

    @classmethod
    def from_bounds(
        cls,
        name: str,
        kind: ColumnKind,
        dtype: DtypeRecord,
        bounds: tuple[float, float],
        *,
        minmax: bool,
        has_missing: bool = False,
    ) -> NumericColumn:
        """Scaling by public bounds, ``(x - mid) / half_range`` under either scaling;
        inputs are clipped to the bounds."""
        minimum, maximum = bounds
        mid, half_range = (maximum + minimum) / 2, (maximum - minimum) / 2
        return cls(name, kind, dtype, mid, half_range, minimum, maximum, minmax, True, has_missing)

    @classmethod
    def fit(
        cls, series: pd.Series, kind: ColumnKind, *, minmax: bool, quantile: bool = False
    ) -> NumericColumn:
        name = str(series.name)
        values = numeric_values(series, name, allow_missing=True)
        missing = np.isnan(values)
        present = values[~missing]
        if present.size == 0:
            raise ValueError(
                f"numeric column {name!r} has no values at all: leave it out "
                f"(dataset.drop=[{name}])"
            )
        std = float(present.std())
        return cls(
            name=name,
            kind=kind,
            dtype=dtype_record(series.dtype),
            mean=float(present.mean()),
            std=std if std > 0 else 1.0,
            minimum=float(present.min()),
            maximum=float(present.max()),
            minmax=minmax,
            has_missing=bool(missing.any()),
            quantiles=fit_quantiles(present) if quantile else (),
        )

    @property
    def width(self) -> int:
        return 3 if self.has_missing else 1

    @property
    def offset_and_scale(self) -> tuple[float, float]:
        if not self.minmax:
            return self.mean, self.std
        half_range = (self.maximum - self.minimum) / 2
        return (self.maximum + self.minimum) / 2, half_range if half_range > 0 else 1.0

    def encode(self, series: pd.Series, out: np.ndarray) -> None:
        offset, scale = self.offset_and_scale
        values = numeric_values(series, self.name, allow_missing=self.has_missing)
        missing = np.isnan(values)
        if self.has_missing:
            out[:, 1] = ~missing
            out[:, 2] = missing
            values = np.where(missing, offset, values)  # encodes to 0
        if self.clip_input:
            outside = int(((values < self.minimum) | (values > self.maximum)).sum())
            if outside:
                logger.info(
                    "column %r: %d values outside its public bounds [%g, %g] were clipped",
                    self.name,
                    outside,
                    self.minimum,
                    self.maximum,
                )
            values = np.clip(values, self.minimum, self.maximum)
        if self.quantiles:
            out[:, 0] = quantile_encode(values, self.quantiles)
            if self.has_missing:
                out[missing, 0] = 0.0
            return
        out[:, 0] = (values - offset) / scale

    def decode(self, block: np.ndarray) -> pd.Series:
        offset, scale = self.offset_and_scale
        if self.quantiles:
            values = quantile_decode(block[:, 0], self.quantiles)
        else:
            values = block[:, 0] * scale + offset
        if self.kind is ColumnKind.INTEGER:
            values = np.rint(values)
        values = np.clip(values, self.minimum, self.maximum)
        original = dtype_from_record(self.dtype)
        if self.has_missing:
            # Integers with gaps stay float64 (NaN), as pandas reads such a column.
            values = np.where(block[:, 2] > block[:, 1], np.nan, values)
            target = original if ptypes.is_float_dtype(original) else np.dtype(np.float64)
            return pd.Series(values, name=self.name).astype(target)
        if self.kind is ColumnKind.INTEGER:
            target = original if ptypes.is_integer_dtype(original) else np.dtype(np.int64)
        else:
            target = original if ptypes.is_float_dtype(original) else np.dtype(np.float64)
        return pd.Series(values, name=self.name).astype(target)


def fit_quantiles(present: np.ndarray) -> tuple[float, ...]:
    """The reference quantiles of a column's present values (at most
    :data:`MAX_QUANTILES`, at evenly spaced levels from 0 to 1)."""
    levels = np.linspace(0.0, 1.0, min(MAX_QUANTILES, present.size))
    return tuple(float(q) for q in np.quantile(present, levels))


def quantile_encode(values: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """``Phi^-1(F(x))``; a value tied across several reference quantiles gets the middle
    of their levels (the mean of the left- and right-continuous interpolations)."""
    from scipy.special import ndtri  # here: a party process loads scipy only for this

    q = np.asarray(quantiles)
    if q.size == 1:
        return np.zeros_like(values)
    levels = np.linspace(0.0, 1.0, q.size)
    up = np.interp(values, q, levels)
    down = -np.interp(-values, -q[::-1], -levels[::-1])
    return ndtri(np.clip(0.5 * (up + down), _TAIL, 1.0 - _TAIL))


def quantile_decode(encoded: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """``F^-1(Phi(y))``: the inverse of :func:`quantile_encode` on the reference grid."""
    from scipy.special import ndtr

    q = np.asarray(quantiles)
    levels = np.linspace(0.0, 1.0, q.size)
    return np.interp(ndtr(encoded), levels, q) if q.size > 1 else np.full(encoded.shape, q[0])


@dataclass(frozen=True)
class CategoricalColumn:
    """One-hot over the fitted categories, plus a last slot for missing values if seen."""

    name: str
    dtype: DtypeRecord
    categories: tuple[CategoryValue, ...]
    has_missing: bool

    def __post_init__(self) -> None:
        for value in self.categories:
            if not isinstance(value, str | int | float | bool) or value != value:
                raise TypeError(
                    f"categorical column {self.name!r}: categories must be str, int, float or "
                    f"bool (not NaN), got {value!r} of type {type(value).__name__}"
                )
        if len(set(self.categories)) != len(self.categories):
            raise ValueError(f"categorical column {self.name!r} has repeated categories")

    @classmethod
    def fit(cls, series: pd.Series) -> CategoricalColumn:
        missing = series.isna().to_numpy()
        present = series[~missing].astype(object).unique()
        values = [native(value) for value in present]
        categories = tuple(sorted(values, key=lambda value: (str(value), type(value).__name__)))
        return cls(
            name=str(series.name),
            dtype=dtype_record(series.dtype),
            categories=categories,
            has_missing=bool(missing.any()),
        )

    @property
    def width(self) -> int:
        return len(self.categories) + int(self.has_missing)

    def encode(self, series: pd.Series, out: np.ndarray) -> None:
        missing = series.isna().to_numpy()
        codes = pd.Index(self.categories, dtype=object).get_indexer(series.astype(object))
        unseen = (codes < 0) & ~missing
        if unseen.any():
            shown = pd.unique(series[unseen].astype(object))[:_MAX_SHOWN].tolist()
            raise ValueError(
                f"categorical column {self.name!r} has {int(unseen.sum())} values not seen at "
                f"fit time, e.g. {shown}; fitted categories: {list(self.categories)}"
            )
        if missing.any():
            if not self.has_missing:
                raise ValueError(
                    f"categorical column {self.name!r} has {int(missing.sum())} missing values, "
                    f"but had none at fit time"
                )
            codes[missing] = len(self.categories)
        out[np.arange(len(codes)), codes] = 1.0

    def decode(self, block: np.ndarray) -> pd.Series:
        lookup = np.empty(self.width, dtype=object)
        lookup[: len(self.categories)] = self.categories
        if self.has_missing:
            lookup[-1] = np.nan
        values = lookup[block.argmax(axis=1)]
        original = dtype_from_record(self.dtype)
        if isinstance(original, pd.CategoricalDtype):
            return pd.Series(pd.Categorical(values, dtype=original), name=self.name)
        return pd.Series(values, dtype=object, name=self.name).astype(original)
