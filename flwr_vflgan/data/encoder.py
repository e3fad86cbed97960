"""VFLGAN's per-party table encoding (seed paper 000, eq. 22).

Each party encodes its own columns into a float32 matrix that its generator learns to
produce and its discriminator reads:

- ``CATEGORICAL`` columns become one-hot blocks over the categories seen in ``fit``,
  sorted by their string form; the generator emits them through a Gumbel-softmax.
- ``CONTINUOUS`` and ``INTEGER`` columns become one standardised value,
  ``(x - mean) / std`` (identity output activation), or with
  ``numeric_scaling="minmax"`` a value in [-1, 1] from the fitted [min, max] (tanh
  output activation, used for MNIST pixels), or with ``numeric_scaling="quantile"`` its
  quantile transform to a standard normal, ``Phi^-1(F(x))`` with the column's empirical
  CDF (identity output activation; point masses and long tails decode as the real column
  has them).

Decoding takes the arg-max of each one-hot block, and un-scales numerics, rounding
``INTEGER`` columns and clipping both to the fitted [min, max].

Missing values: a missing categorical value is kept as an explicit extra category (the
last slot of its block, present only if ``fit`` saw missing values), which decodes back
to NaN. A numeric column in which ``fit`` saw missing values gets a missingness indicator
(as SDV-style tools do): its block is ``[value, present, missing]``, the value 0 where
missing, the indicator generated with a Gumbel-softmax (activation ``identity_missing``
or ``tanh_missing``), so the generator learns the missing rate jointly with the other
columns and decoding gives NaN where the indicator says missing (integer columns with
gaps decode to float64, as pandas reads them). Statistics come from the present values.
Infinite values are rejected, and so are missing values in a column that had none at
``fit``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from flwr_vflgan.data._columns import CategoricalColumn, NumericColumn, dtype_record
from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.schema import ColumnKind, Schema

__all__ = ["ActivationKind", "NumericScaling", "Span", "TabularEncoder"]

logger = logging.getLogger(__name__)

ActivationKind = Literal["identity", "tanh", "gumbel_softmax", "identity_missing", "tanh_missing"]
"""``*_missing``: a numeric value (identity or tanh) followed by a two-slot
``[present, missing]`` one-hot drawn with a Gumbel-softmax."""
NumericScaling = Literal["standard", "minmax", "quantile"]
ENCODER_STATE_VERSION = 3
_STATE_KEYS = frozenset(
    {
        "schema_version", "numeric_scaling", "schema", "means", "stds", "mins", "maxes",
        "categories", "missing_category", "dtypes", "public", "missing_numeric", "quantiles",
    }
)  # fmt: skip

FittedColumn = NumericColumn | CategoricalColumn


@dataclass(frozen=True)
class Span:
    """Where one column lives in the encoded matrix, and how the generator emits it.

    Parameters
    ----------
    column
        Column name.
    start
        First output index of the column.
    width
        Number of outputs (1 for numerics; categories, plus one if missing values were
        seen, for categoricals).
    activation
        Output activation the generator applies to the block.
    """

    column: str
    start: int
    width: int
    activation: ActivationKind

    def __post_init__(self) -> None:
        if self.start < 0:
            raise ValueError(f"span {self.column!r}: start must be >= 0, got {self.start}")
        if self.width < 1:
            raise ValueError(f"span {self.column!r}: width must be >= 1, got {self.width}")
        if self.activation not in get_args(ActivationKind):
            raise ValueError(
                f"span {self.column!r}: activation must be one of {list(get_args(ActivationKind))}"
                f", got {self.activation!r}"
            )

    @property
    def stop(self) -> int:
        """One past the last output index (``start + width``)."""
        return self.start + self.width


class TabularEncoder:
    """Encode one party's table as one-hot categoricals and scaled numerics.

    Parameters
    ----------
    numeric_scaling
        ``"standard"``: ``(x - mean) / std`` with the population standard deviation
        (``ddof=0``; a constant column uses std 1), identity activation. ``"minmax"``:
        the fitted [min, max] mapped linearly onto [-1, 1] (a constant column maps to 0),
        tanh activation. ``"quantile"``: ``Phi^-1(F(x))`` with ``F`` the column's
        empirical CDF over at most 1,000 reference quantiles, identity activation; it
        needs the party's rows, so :meth:`fit_domain` refuses it.

    Raises
    ------
    ValueError
        If ``numeric_scaling`` is not one of the values above.

    Notes
    -----
    Encoded values are float32, so an ``INTEGER`` column decodes exactly only while
    ``|x - mean|`` stays below about 2**23 (8 million); every built-in dataset does.
    """

    def __init__(self, numeric_scaling: NumericScaling = "standard") -> None:
        if numeric_scaling not in get_args(NumericScaling):
            raise ValueError(
                f"numeric_scaling must be one of {list(get_args(NumericScaling))}, "
                f"got {numeric_scaling!r}"
            )
        self._numeric_scaling: NumericScaling = numeric_scaling
        self._public = False
        self._schema: Schema | None = None
        self._columns: tuple[FittedColumn, ...] = ()
        self._spans: tuple[Span, ...] = ()

    def __repr__(self) -> str:
        fitted = f", output_dim={self.output_dim}" if self._schema is not None else ""
        return f"TabularEncoder(numeric_scaling={self.numeric_scaling!r}{fitted})"

    @property
    def numeric_scaling(self) -> NumericScaling:
        """How numeric columns are scaled (``"standard"``, ``"minmax"`` or ``"quantile"``)."""
        return self._numeric_scaling

    # -- fitted attributes -------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        """The schema given to :meth:`fit`."""
        return self._fitted_schema()

    @property
    def spans(self) -> tuple[Span, ...]:
        """One span per schema column, in schema order, tiling ``[0, output_dim)``."""
        self._fitted_schema()
        return self._spans

    @property
    def output_dim(self) -> int:
        """Width of the encoded matrix."""
        self._fitted_schema()
        return self._spans[-1].stop

    def _fitted_schema(self) -> Schema:
        if self._schema is None:
            raise ValueError("this TabularEncoder is not fitted yet: call fit(frame, schema)")
        return self._schema

    def _set_columns(self, schema: Schema, columns: tuple[FittedColumn, ...]) -> None:
        numeric_activation: ActivationKind = (
            "tanh" if self.numeric_scaling == "minmax" else "identity"
        )
        spans, start = [], 0
        for column in columns:
            activation: ActivationKind = numeric_activation
            if isinstance(column, CategoricalColumn):
                activation = "gumbel_softmax"
            elif column.has_missing:
                activation = "tanh_missing" if numeric_activation == "tanh" else "identity_missing"
            spans.append(Span(column.name, start, column.width, activation))
            start += column.width
        self._schema, self._columns, self._spans = schema, columns, tuple(spans)

    # -- fit / transform / inverse ------------------------------------------------------

    def fit(self, frame: pd.DataFrame, schema: Schema) -> TabularEncoder:
        """Learn categories and scaling statistics of ``schema``'s columns in ``frame``.

        Parameters
        ----------
        frame
            Non-empty table holding at least the schema's columns (others are ignored).
        schema
            Columns to encode, in output order.

        Returns
        -------
        TabularEncoder
            ``self``.

        Raises
        ------
        TypeError
            If ``schema`` is not a :class:`Schema`, ``frame`` not a DataFrame, or a
            category is not a str, int, float or bool.
        ValueError
            If ``frame`` is empty or lacks columns, or a numeric column has missing or
            infinite values (the column and the count are named).
        """
        if not isinstance(schema, Schema):
            raise TypeError(f"schema must be a Schema, got {type(schema).__name__}")
        schema.validate_frame(frame)
        if len(frame) == 0:
            raise ValueError("cannot fit a TabularEncoder on a frame with 0 rows")
        minmax, quantile = self.numeric_scaling == "minmax", self.numeric_scaling == "quantile"
        columns: list[FittedColumn] = []
        for spec in schema.columns:
            series = frame[spec.name]
            if spec.kind is ColumnKind.CATEGORICAL:
                columns.append(CategoricalColumn.fit(series))
            else:
                columns.append(
                    NumericColumn.fit(series, spec.kind, minmax=minmax, quantile=quantile)
                )
        self._set_columns(schema, tuple(columns))
        self._public = False
        logger.debug("fitted TabularEncoder on %d rows: output_dim=%d", len(frame), self.output_dim)
        return self

    def fit_domain(
        self, frame: pd.DataFrame, schema: Schema, domain: PublicDomain
    ) -> TabularEncoder:
        """Build the encoding of ``schema``'s columns from public metadata alone.

        Kinds, numeric bounds and category lists come from ``domain``; of ``frame`` only
        the columns' storage dtypes are read (to decode to the same types). The encoder
        is then :attr:`public`.

        Raises
        ------
        ValueError
            A column has no entry in ``domain`` or ``frame`` lacks a column.
        """
        if self.numeric_scaling == "quantile":
            raise ValueError(
                "numeric_scaling='quantile' keeps quantiles of the party's rows; it cannot be "
                "built from a public domain: use numeric_scaling='standard'"
            )
        schema = domain.schema_for(schema)
        missing = [name for name in schema.names if name not in frame.columns]
        if missing:
            raise ValueError(f"frame lacks columns {missing}")
        minmax = self.numeric_scaling == "minmax"
        columns: list[FittedColumn] = []
        for spec in schema.columns:
            entry, dtype = domain.columns[spec.name], dtype_record(frame[spec.name].dtype)
            if spec.kind is ColumnKind.CATEGORICAL:
                columns.append(CategoricalColumn(spec.name, dtype, entry.categories, entry.missing))
            else:
                bounds = (entry.minimum, entry.maximum)
                columns.append(
                    NumericColumn.from_bounds(
                        spec.name,
                        spec.kind,
                        dtype,
                        bounds,
                        minmax=minmax,
                        has_missing=entry.missing,
                    )
                )
        self._set_columns(schema, tuple(columns))
        self._public = True
        return self

    @property
    def public(self) -> bool:
        """Whether the encoding came from public metadata (:meth:`fit_domain`) rather
        than from statistics of private rows (:meth:`fit`)."""
        return self._public

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """Encode ``frame``'s schema columns.

        Returns
        -------
        numpy.ndarray
            float32 array of shape ``(len(frame), output_dim)``.

        Raises
        ------
        ValueError
            If not fitted, columns are missing, a numeric column has missing or infinite
            values, or a categorical value was not seen by :meth:`fit`.
        """
        schema = self._fitted_schema()
        schema.validate_frame(frame)
        out = np.zeros((len(frame), self.output_dim), dtype=np.float32)
        for column, span in zip(self._columns, self._spans, strict=True):
            column.encode(frame[column.name], out[:, span.start : span.stop])
        return out

    def fit_transform(self, frame: pd.DataFrame, schema: Schema) -> np.ndarray:
        """:meth:`fit` then :meth:`transform` the same frame."""
        return self.fit(frame, schema).transform(frame)

    def inverse_transform(self, x: np.ndarray) -> pd.DataFrame:
        """Decode an encoded (or generated) matrix back to a table.

        Parameters
        ----------
        x
            Array of shape ``(n_rows, output_dim)`` with finite values.

        Returns
        -------
        pandas.DataFrame
            The schema's columns in order with a ``RangeIndex``. Categorical columns come
            back with their fitted dtype and category values (the missing slot gives
            NaN); ``INTEGER`` columns are rounded, clipped to the fitted [min, max] and
            keep an integer fitted dtype (else int64); ``CONTINUOUS`` columns are clipped
            and keep a float fitted dtype (else float64).

        Raises
        ------
        TypeError
            If ``x`` is not numeric.
        ValueError
            If not fitted, ``x`` is not 2-D with ``output_dim`` columns, or holds NaN or
            infinite values.
        """
        schema = self._fitted_schema()
        array = encoded_matrix(x, self.output_dim)
        data = {
            column.name: column.decode(array[:, span.start : span.stop])
            for column, span in zip(self._columns, self._spans, strict=True)
        }
        return pd.DataFrame(data, columns=schema.names)

    # -- persistence -------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Return the fitted state as a JSON-serialisable dict (``schema_version`` 3;
        version 2 had no ``quantiles``, version 1 no ``public``).

        Raises
        ------
        ValueError
            If not fitted.
        """
        schema = self._fitted_schema()
        numeric = [col for col in self._columns if isinstance(col, NumericColumn)]
        categorical = [col for col in self._columns if isinstance(col, CategoricalColumn)]
        return {
            "schema_version": ENCODER_STATE_VERSION,
            "numeric_scaling": self.numeric_scaling,
            "schema": schema.to_dict(),
            "means": {col.name: col.mean for col in numeric},
            "stds": {col.name: col.std for col in numeric},
            "mins": {col.name: col.minimum for col in numeric},
            "maxes": {col.name: col.maximum for col in numeric},
            "categories": {col.name: list(col.categories) for col in categorical},
            "missing_category": {col.name: col.has_missing for col in categorical},
            "dtypes": {col.name: col.dtype for col in self._columns},
            "public": self._public,
            "missing_numeric": {col.name: col.has_missing for col in numeric},
            "quantiles": {col.name: list(col.quantiles) for col in numeric if col.quantiles},
        }

    @classmethod
    def from_state_dict(cls, d: Mapping[str, Any]) -> TabularEncoder:
        """Rebuild a fitted encoder from :meth:`state_dict` output.

        Raises
        ------
        TypeError
            If ``d`` is not a mapping or a category has an unsupported type.
        ValueError
            If the version is unsupported, keys are missing or unknown, a column has no
            entry, or a statistic is invalid (non-finite, std <= 0, min > max).
        """
        if isinstance(d, Mapping) and d.get("schema_version") == 2:  # before quantiles
            d = {**d, "schema_version": ENCODER_STATE_VERSION, "quantiles": {}}
        check_state(d, "encoder state", ENCODER_STATE_VERSION, _STATE_KEYS)
        encoder = cls(d["numeric_scaling"])
        schema = Schema.from_dict(d["schema"])
        columns = tuple(_column_from_state(d, schema, name) for name in schema.names)
        encoder._set_columns(schema, columns)
        encoder._public = bool(d["public"])
        return encoder


def check_keys(what: str, d: Mapping[str, Any], expected: frozenset[str]) -> None:
    """``d`` has exactly the ``expected`` keys, or a ValueError lists the missing and
    unknown ones."""
    if set(d) != expected:
        raise ValueError(
            f"{what} keys must be {sorted(expected)}; missing {sorted(expected - set(d))}, "
            f"unknown {sorted(set(d) - expected)}"
        )


def check_state(d: object, what: str, version: int, expected: frozenset[str]) -> None:
    """A saved state is a mapping of this ``schema_version`` with exactly these keys.

    Raises
    ------
    TypeError
        If ``d`` is not a mapping.
    ValueError
        On another version, or missing or unknown keys.
    """
    if not isinstance(d, Mapping):
        raise TypeError(f"state must be a mapping, got {type(d).__name__}")
    if d.get("schema_version") != version:
        raise ValueError(
            f"{what} schema_version must be {version}, got {d.get('schema_version')!r}"
        )
    check_keys(what, d, expected)


def encoded_matrix(x: np.ndarray, output_dim: int) -> np.ndarray:
    """``x`` as a float64 matrix of ``output_dim`` columns, checked before decoding.

    Raises
    ------
    TypeError
        If ``x`` is not numeric.
    ValueError
        If ``x`` is not 2-D with ``output_dim`` columns, or holds NaN or infinite values.
    """
    array = np.asarray(x)
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"x must be a numeric array, got dtype {array.dtype}")
    if array.ndim != 2 or array.shape[1] != output_dim:
        raise ValueError(
            f"x must have shape (n_rows, {output_dim}) (output_dim), got {array.shape}"
        )
    array = array.astype(np.float64)
    n_bad = int((~np.isfinite(array)).sum())
    if n_bad:
        raise ValueError(f"x has {n_bad} NaN or infinite values; it must be finite")
    return array


def _column_from_state(d: Mapping[str, Any], schema: Schema, name: str) -> FittedColumn:
    kind = schema.kind_of(name)
    tables = ("categories", "missing_category") if kind is ColumnKind.CATEGORICAL else (
        "means", "stds", "mins", "maxes",
    )  # fmt: skip
    for table in (*tables, "dtypes"):
        if name not in d[table]:
            raise ValueError(f"encoder state has no {table!r} entry for column {name!r}")
    if kind is ColumnKind.CATEGORICAL:
        return CategoricalColumn(
            name=name,
            dtype=d["dtypes"][name],
            categories=tuple(d["categories"][name]),
            has_missing=bool(d["missing_category"][name]),
        )
    stats = [float(d[table][name]) for table in tables]
    mean, std, minimum, maximum = stats
    if not np.isfinite(stats).all() or std <= 0 or minimum > maximum:
        raise ValueError(
            f"encoder state for column {name!r} is invalid: mean={mean}, std={std}, "
            f"min={minimum}, max={maximum} (need finite values, std > 0, min <= max)"
        )
    return NumericColumn(
        name=name,
        kind=kind,
        dtype=d["dtypes"][name],
        mean=mean,
        std=std,
        minimum=minimum,
        maximum=maximum,
        minmax=d["numeric_scaling"] == "minmax",
        clip_input=bool(d["public"]),
        has_missing=bool(d["missing_numeric"].get(name, False)),
        quantiles=_quantiles_from_state(d, name, minimum, maximum),
    )


def _quantiles_from_state(
    d: Mapping[str, Any], name: str, minimum: float, maximum: float
) -> tuple[float, ...]:
    """A quantile-scaled column's reference quantiles: finite, non-decreasing, within
    [min, max]; ``()`` for the other scalings."""
    if d["numeric_scaling"] != "quantile":
        return ()
    values = np.asarray(d["quantiles"].get(name, ()), dtype=np.float64)
    if (
        values.ndim != 1
        or values.size == 0
        or not np.isfinite(values).all()
        or (np.diff(values) < 0).any()
        or values[0] < minimum
        or values[-1] > maximum
    ):
        raise ValueError(
            f"encoder state for column {name!r} has invalid quantiles: need a non-empty, "
            f"non-decreasing list of finite values within [min, max]"
        )
    return tuple(float(v) for v in values)
