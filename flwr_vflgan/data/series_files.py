"""A user's table of multivariate series, read and checked.

The file is in **long format**, the layout series usually come in: one row per series and
time step, a column naming the series, a column giving the step, and one numeric column
per channel::

    series,t,heart_rate,blood_pressure,spo2
    p01,0,71,118,0.97
    p01,1,73,121,0.97
    ...

Every series must have the same steps (the same set of ``t`` values), no cell may be
missing, and every channel must be numeric; each problem is refused with a message that
names the column, the series or the step. Steps are sorted; series keep the order in
which they first appear.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ._tables import read_table
from .series import SeriesTable, check_parties


def read_series_file(
    path: str | Path, *, id_column: str, time_column: str, drop: Sequence[str] = ()
) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """The series of a long-format file: ``(values (n, C, T) float32, channel names,
    series IDs)``, channels in file order.

    Raises
    ------
    ValueError
        A named column is missing; a channel is not numeric or has missing or infinite
        values; a series repeats a step or lacks one another series has; fewer than two
        series or two steps.
    """
    frame = read_table(Path(path), na_values=("", "NA", "NaN", "nan", "?"))
    frame = frame.drop(columns=[c for c in drop if c in frame.columns])
    for role, name in (("dataset.id_column", id_column), ("dataset.time_column", time_column)):
        if name not in frame.columns:
            raise ValueError(
                f"{role}={name!r} is not a column of {path}; its columns: {list(frame.columns)}"
            )
    channels = [c for c in frame.columns if c not in (id_column, time_column)]
    if not channels:
        raise ValueError(f"{path} has no channel columns besides {id_column!r} and {time_column!r}")
    _check_channels(frame, channels)
    if frame[time_column].isna().any() or frame[id_column].isna().any():
        raise ValueError(f"{path}: the series ID or time step is missing in some rows")
    repeated = frame.duplicated([id_column, time_column])
    if repeated.any():
        row = frame[repeated].iloc[0]
        raise ValueError(
            f"series {str(row[id_column])!r} has step {row[time_column]} more than once: one row "
            "per series and step"
        )
    steps = np.sort(frame[time_column].unique())
    ids = frame[id_column].drop_duplicates().to_numpy()
    counts = frame.groupby(id_column, sort=False)[time_column].nunique()
    short = counts[counts != len(steps)]
    if len(short):
        raise ValueError(
            f"series {str(short.index[0])!r} has {short.iloc[0]} of the {len(steps)} steps the file "
            "holds: every series needs every step (fill or cut the series to one length)"
        )
    if len(ids) < 2 or len(steps) < 2:
        raise ValueError(f"{path} holds {len(ids)} series of {len(steps)} steps; need >= 2 of >= 2")
    ordered = frame.set_index([id_column, time_column]).loc[
        pd.MultiIndex.from_product([ids, steps])
    ]
    values = ordered[channels].to_numpy(dtype=np.float32)
    values = values.reshape(len(ids), len(steps), len(channels)).transpose(0, 2, 1)
    return np.ascontiguousarray(values), tuple(str(c) for c in channels), ids


def _check_channels(frame: pd.DataFrame, channels: Sequence[str]) -> None:
    for name in channels:
        column = frame[name]
        if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            raise ValueError(
                f"channel {name!r} is not numeric (first value {column.iloc[0]!r}): a series "
                "channel holds numbers; leave other columns out with dataset.drop"
            )
        missing = int(column.isna().sum())
        if missing:
            raise ValueError(
                f"channel {name!r} has {missing} missing values: fill or interpolate them "
                "first (series are modelled complete)"
            )
        if not np.isfinite(column.to_numpy(dtype=np.float64)).all():
            raise ValueError(f"channel {name!r} has infinite values")


def series_file_table(
    path: str | Path,
    n_parties: int,
    *,
    id_column: str,
    time_column: str,
    drop: Sequence[str] = (),
    columns: Sequence[Sequence[str]] | None = None,
) -> SeriesTable:
    """A long-format file as a :class:`SeriesTable`: channels split evenly and in order
    across ``n_parties``, or as ``columns`` lists them (channel names per party).

    Raises
    ------
    ValueError
        The file is refused (:func:`read_series_file`), or the split names an unknown
        channel or does not cover every channel once.
    """
    values, channels, _ = read_series_file(
        path, id_column=id_column, time_column=time_column, drop=drop
    )
    if columns is None:
        if not 1 <= n_parties <= len(channels):
            raise ValueError(
                f"{len(channels)} channels cannot be split over partition.n_parties={n_parties}"
            )
        split = np.array_split(np.arange(len(channels)), n_parties)
        parties = tuple(tuple(int(c) for c in held) for held in split)
    else:
        unknown = sorted({n for held in columns for n in held} - set(channels))
        if unknown:
            raise ValueError(
                f"partition.columns names {unknown}, not channels of {path}: {list(channels)}"
            )
        parties = tuple(tuple(channels.index(n) for n in held) for held in columns)
        check_parties(parties, len(channels))
    return SeriesTable(values, channels, parties)
