"""A table as small integer codes, from public metadata only: what AIM and MST measure.

Every column gets a finite set of codes from its :class:`~flwr_vflgan.data.domain.ColumnDomain`,
never from the rows (so the discretisation is inside the DP guarantee):

* a categorical column: one code per listed category, in the listed order;
* an integer column whose range ``[min, max]`` holds at most ``bins`` integers: one code
  per integer (exact; a binned integer column then has bins at least 1 wide, so every
  bin holds an integer);
* any other numeric column: ``bins`` equal-width bins over ``[min, max]``; a value outside
  the bounds is clipped to them. Decoding draws a value uniformly within the bin (an
  integer column: uniformly among the integers the bin holds);
* a column whose domain says ``missing: true`` gets one more code, the last, for a
  missing value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from flwr_vflgan.data.domain import ColumnDomain, PublicDomain
from flwr_vflgan.data.schema import ColumnKind, Schema

__all__ = ["ColumnCodes", "Discretizer"]


@dataclass(frozen=True)
class ColumnCodes:
    """One column's codes: its domain and, for a binned numeric column, the bin edges
    (``None`` for categories and exact integers)."""

    domain: ColumnDomain
    edges: np.ndarray | None

    @property
    def values(self) -> int:
        """Codes that stand for a value (the missing code excluded)."""
        if self.domain.kind is ColumnKind.CATEGORICAL:
            return len(self.domain.categories)
        if self.edges is None:
            return math.floor(self.domain.maximum) - math.ceil(self.domain.minimum) + 1
        return len(self.edges) - 1

    @property
    def size(self) -> int:
        """Every code, the missing one included."""
        return self.values + int(self.domain.missing)

    def encode(self, series: pd.Series) -> np.ndarray:
        """The column's codes (int64); a missing value where the domain allows none, or a
        category it does not list, is an error that names the column."""
        name, missing = self.domain.name, series.isna().to_numpy()
        if missing.any() and not self.domain.missing:
            raise ValueError(
                f"column {name!r} has {int(missing.sum())} missing values but its domain "
                "says missing: false; declare missing: true in dataset.domain"
            )
        codes = np.full(len(series), self.values, dtype=np.int64)
        present = series[~missing]
        if self.domain.kind is ColumnKind.CATEGORICAL:
            codes[~missing] = self._category_codes(present)
        else:
            codes[~missing] = self._numeric_codes(present.to_numpy(dtype=np.float64))
        return codes

    def _category_codes(self, present: pd.Series) -> np.ndarray:
        index = {value: i for i, value in enumerate(self.domain.categories)}
        unknown = sorted({str(v) for v in present.unique() if v not in index})
        if unknown:
            raise ValueError(
                f"column {self.domain.name!r} holds values its domain does not list: "
                f"{unknown[:10]}; add them to dataset.domain"
            )
        return present.map(index).to_numpy(dtype=np.int64)

    def _numeric_codes(self, values: np.ndarray) -> np.ndarray:
        low, high = self.domain.minimum, self.domain.maximum
        clipped = np.clip(values, low, high)
        if self.edges is None:
            codes = np.rint(clipped).astype(np.int64) - math.ceil(low)
            return np.clip(codes, 0, self.values - 1)
        # The edges decide, so that a decoded value always codes back to its bin.
        codes = np.searchsorted(self.edges, clipped, side="right") - 1
        return np.clip(codes, 0, self.values - 1).astype(np.int64)

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pd.Series:
        """Values for ``codes``: categories, integers, or uniform draws within a bin."""
        missing = codes >= self.values
        kept = np.where(missing, 0, codes)
        if self.domain.kind is ColumnKind.CATEGORICAL:
            values = np.asarray(self.domain.categories, dtype=object)[kept]
            values[missing] = None
            return pd.Series(values, name=self.domain.name)
        if self.edges is None:
            numbers = math.ceil(self.domain.minimum) + kept.astype(np.float64)
        elif self.domain.kind is ColumnKind.INTEGER:
            low, high = self._integer_ranges()
            numbers = np.floor(low[kept] + rng.random(len(codes)) * (high[kept] - low[kept] + 1))
        else:
            numbers = rng.uniform(self.edges[kept], self.edges[kept + 1])
        return pd.Series(np.where(missing, np.nan, numbers), name=self.domain.name)

    def _integer_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """The first and last integer of each bin (a bin of an integer column with more
        integers than bins holds at least one)."""
        assert self.edges is not None
        low = np.ceil(self.edges[:-1])
        high = np.ceil(self.edges[1:]) - 1
        high[-1] = math.floor(self.domain.maximum)
        return low, high


@dataclass(frozen=True)
class Discretizer:
    """Every column's codes, in the table's column order."""

    columns: tuple[ColumnCodes, ...]

    @classmethod
    def from_domain(cls, domain: PublicDomain, schema: Schema, bins: int) -> Discretizer:
        """Codes for each column of ``schema`` from ``domain`` (``bins`` per binned
        numeric column).

        Raises
        ------
        ValueError
            A column has no domain entry (every such column is named), or ``bins < 2``.
        """
        if bins < 2:
            raise ValueError(f"the discretisation needs at least 2 bins, got {bins}")
        kinds = domain.schema_for(schema)  # names every column without an entry
        return cls(tuple(_codes(domain.columns[n], bins) for n in kinds.names))

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [c.domain.name for c in self.columns]

    @property
    def sizes(self) -> dict[str, int]:
        """Codes per column."""
        return {c.domain.name: c.size for c in self.columns}

    def encode(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """Each column's codes."""
        return {c.domain.name: c.encode(frame[c.domain.name]) for c in self.columns}

    def decode(
        self,
        codes: Mapping[str, np.ndarray],
        rng: np.random.Generator,
        dtypes: Mapping[str, object] | None = None,
    ) -> pd.DataFrame:
        """The table ``codes`` stand for; ``dtypes`` (a column's storage type) are kept
        where a column has no missing value to hold."""
        frame = pd.concat([c.decode(codes[c.domain.name], rng) for c in self.columns], axis=1)
        for name, dtype in (dtypes or {}).items():
            if name in frame and not frame[name].isna().any():
                frame[name] = frame[name].astype(dtype)
        return frame


def _codes(column: ColumnDomain, bins: int) -> ColumnCodes:
    if column.kind is ColumnKind.CATEGORICAL:
        return ColumnCodes(column, None)
    integers = math.floor(column.maximum) - math.ceil(column.minimum) + 1
    exact = column.kind is ColumnKind.INTEGER and integers <= bins
    edges = None if exact else np.linspace(column.minimum, column.maximum, bins + 1)
    return ColumnCodes(column, edges)
