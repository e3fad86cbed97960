"""Stadler, Oprisanu and Troncoso's (USENIX Security 2022) feature maps of a synthetic
table: one vector per table, the input of a shadow-model membership adversary (paper
000's ASSD and ASIF)."""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics.tables import (
    FeatureEncoder,
    categorical_columns,
    category_strings,
    numeric_columns,
)

__all__ = ["FEATURE_MAPS", "TableFeatures"]

FeatureMap = Literal["naive", "correlation", "histogram", "range"]
FEATURE_MAPS: tuple[FeatureMap, ...] = ("naive", "correlation", "histogram", "range")
"""Stadler et al.'s feature sets (paper 000 reports ``naive`` and ``correlation``) and
``range``, the numeric columns' extremes: where an encoder that takes its range from the
training rows (min-max scaling) shows whether an outlier was among them."""


class TableFeatures:
    """Stadler et al.'s feature map of a synthetic table: one vector per table.

    ``naive``: per numeric column its mean, median and variance; per categorical column
    the number of distinct categories, and the most and the least frequent category (as
    its position among the reference table's categories, one past them for a category
    the reference lacks). ``correlation``: the Pearson correlations of every pair of
    columns of the one-hot, min-max scaled design matrix (upper triangle; a constant
    column correlates 0). ``histogram``: per numeric column the share of rows in each of
    ``bins`` equal bins over the reference's range (values outside fall in the end
    bins), per categorical column the share of each reference category and of any other.
    ``range`` (not Stadler et al.'s): per numeric column its smallest and largest value,
    which none of their maps reads (the histogram's end bins take in everything beyond
    the reference's range).

    Parameters
    ----------
    kind
        The feature map.
    reference
        The table the categories, scales and bin edges come from (the auditor's training
        table), so that every synthetic table maps to the same coordinates.
    schema
        Column kinds.
    bins
        Histogram bins per numeric column.
    """

    def __init__(
        self, kind: FeatureMap, reference: pd.DataFrame, schema: Schema, bins: int = 10
    ) -> None:
        if kind not in FEATURE_MAPS:
            raise ValueError(f"unknown feature map {kind!r}; valid: {list(FEATURE_MAPS)}")
        if bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        self.kind = kind
        self.schema = schema
        self.bins = bins
        self.numeric = numeric_columns(schema)
        self.categorical = categorical_columns(schema)
        self.encoder = FeatureEncoder(schema).fit(reference)
        self.categories = {
            c: pd.Index(np.unique(category_strings(reference[c]))) for c in self.categorical
        }
        values = reference[self.numeric].to_numpy(dtype=np.float64)
        self.low = np.nanmin(values, axis=0) if len(self.numeric) else np.zeros(0)
        self.high = np.nanmax(values, axis=0) if len(self.numeric) else np.zeros(0)

    def __call__(self, table: pd.DataFrame) -> np.ndarray:
        """The feature vector of ``table`` (float64; NaN-free)."""
        missing = [c for c in self.schema.names if c not in table.columns]
        if missing:
            raise ValueError(f"the synthetic table lacks columns {missing}")
        features = {
            "naive": self._naive,
            "correlation": self._correlation,
            "range": self._range,
        }.get(self.kind, self._histogram)(table)
        return np.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0)

    def _naive(self, table: pd.DataFrame) -> np.ndarray:
        out: list[float] = []
        for name in self.numeric:
            values = table[name].to_numpy(dtype=np.float64)
            out += [np.nanmean(values), np.nanmedian(values), np.nanvar(values)]
        for name in self.categorical:
            counts = pd.Series(category_strings(table[name])).value_counts(sort=False)
            codes = self.categories[name].get_indexer(counts.index)
            codes = np.where(codes < 0, len(self.categories[name]), codes)
            order = np.lexsort([codes, -counts.to_numpy()])  # most frequent, then first code
            rare = np.lexsort([codes, counts.to_numpy()])
            out += [float(len(counts)), float(codes[order[0]]), float(codes[rare[0]])]
        return np.asarray(out, dtype=np.float64)

    def _range(self, table: pd.DataFrame) -> np.ndarray:
        values = table[self.numeric].to_numpy(dtype=np.float64)
        if not len(values):
            return np.zeros(2 * len(self.numeric))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-missing column: NaN, then 0
            return np.column_stack([np.nanmin(values, axis=0), np.nanmax(values, axis=0)]).ravel()

    def _correlation(self, table: pd.DataFrame) -> np.ndarray:
        design = np.nan_to_num(self.encoder.transform(table[self.schema.names]))
        with np.errstate(invalid="ignore", divide="ignore"):
            matrix = np.corrcoef(design, rowvar=False)
        matrix = np.atleast_2d(matrix)
        return matrix[np.triu_indices(matrix.shape[0], k=1)]

    def _histogram(self, table: pd.DataFrame) -> np.ndarray:
        out: list[np.ndarray] = []
        rows = max(len(table), 1)
        for position, name in enumerate(self.numeric):
            values = table[name].to_numpy(dtype=np.float64)
            values = values[~np.isnan(values)]
            low, high = self.low[position], self.high[position]
            width = (high - low) / self.bins if high > low else 1.0
            index = np.clip(np.floor((values - low) / width), 0, self.bins - 1).astype(int)
            out.append(np.bincount(index, minlength=self.bins) / rows)
        for name in self.categorical:
            codes = self.categories[name].get_indexer(category_strings(table[name]))
            codes = np.where(codes < 0, len(self.categories[name]), codes)
            out.append(np.bincount(codes, minlength=len(self.categories[name]) + 1) / rows)
        return np.concatenate(out) if out else np.zeros(0)
