"""Numeric columns with missing values, made measurable.

A missing number has no distance, correlation or split point, so before the metric suite
runs, each numeric column that has missing values in any of the tables becomes two
columns: the numbers with the gaps filled by the real table's median (so the present
values are measured as they are), and a categorical column ``"<name> is missing"``
(``yes``/``no``) right after it, so the missing rate and how it goes with the other
columns are measured like any category. Tables without gaps are returned unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

MISSING_SUFFIX = " is missing"


@dataclass(frozen=True)
class GapSplit:
    """The tables, schema and partition with every gappy numeric column split in two."""

    real: pd.DataFrame
    synthetic: pd.DataFrame
    holdout: pd.DataFrame | None
    schema: Schema
    parties: Sequence[Sequence[str]] | None
    columns: tuple[str, ...]
    """The numeric columns that were split."""


def split_numeric_gaps(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    holdout: pd.DataFrame | None,
    schema: Schema,
    parties: Sequence[Sequence[str]] | None,
) -> GapSplit:
    """Split every numeric column with missing values in any table (see the module doc)."""
    tables = [t for t in (real, synthetic, holdout) if t is not None]
    gappy = tuple(
        spec.name
        for spec in schema.columns
        if spec.kind is not ColumnKind.CATEGORICAL
        and spec.name in real.columns
        and any(t[spec.name].isna().any() for t in tables if spec.name in t.columns)
    )
    if not gappy:
        return GapSplit(real, synthetic, holdout, schema, parties, ())
    fill = {}
    for name in gappy:
        present = pd.to_numeric(real[name], errors="coerce").dropna()
        median = float(present.median()) if len(present) else 0.0
        fill[name] = float(round(median)) if schema.kind_of(name) is ColumnKind.INTEGER else median
    columns: list[ColumnSpec] = []
    for spec in schema.columns:
        columns.append(spec)
        if spec.name in gappy:
            columns.append(ColumnSpec(spec.name + MISSING_SUFFIX, ColumnKind.CATEGORICAL))
    split_parties = (
        None
        if parties is None
        else [
            [
                c
                for name in party
                for c in ((name, name + MISSING_SUFFIX) if name in gappy else (name,))
            ]
            for party in parties
        ]
    )
    return GapSplit(
        _split(real, gappy, fill),
        _split(synthetic, gappy, fill),
        None if holdout is None else _split(holdout, gappy, fill),
        Schema(tuple(columns), label=schema.label),
        split_parties,
        gappy,
    )


def _split(frame: pd.DataFrame, gappy: Sequence[str], fill: dict[str, float]) -> pd.DataFrame:
    out = {}
    for column in frame.columns:
        if column in gappy:
            missing = frame[column].isna().to_numpy()
            out[column] = frame[column].astype(np.float64).fillna(fill[column])
            out[column + MISSING_SUFFIX] = np.where(missing, "yes", "no")
        else:
            out[column] = frame[column]
    return pd.DataFrame(out, index=frame.index)
