"""A user's table of multivariate series, read and checked.

Three layouts are read. **Long format**, the layout series usually come in: one row per
series and time step, a column naming the series, a column giving the step, and one
numeric column per channel::

    series,t,heart_rate,blood_pressure,spo2
    p01,0,71,118,0.97
    p01,1,73,121,0.97
    ...

**Wide format**, one row per series: the series' ID column (optional; rows are numbered
without it) and one column per channel and step, named ``<channel>@<step>``::

    series,heart_rate@0,heart_rate@1,...,spo2@0,spo2@1,...

A file is read as wide when it has no ``dataset.time_column`` and some column is named
``<channel>@<step>``; then every other column must be the ID or dropped.

**The UEA & UCR archives' ``.ts`` files** (``.ts`` or ``.ts.gz``;
:mod:`flwr_vflgan.data.ts_format`): channels named ``dim_0``, ``dim_1``, ..., class
labels left out.

Every series must have the same steps (the same set of ``t`` values), no cell may be
missing, and every channel must be numeric; each problem is refused with a message that
names the column, the series or the step. Steps are sorted; series keep the order in
which they first appear.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ._tables import read_table
from .series import SeriesTable, check_parties, even_parties
from .ts_format import read_ts

WIDE_COLUMN = re.compile(r"^(?P<channel>.+)@(?P<step>\d+)$")
"""A wide file's series column: ``<channel>@<step>`` (the project's own wide layout)."""


def wide_layout(columns: Sequence[object]) -> tuple[tuple[str, ...], int]:
    """The channels (in order) and length of wide ``<channel>@<step>`` columns, steps
    ``0 .. T-1`` for every channel (what the parties publish).

    Raises
    ------
    ValueError
        A column is not ``<channel>@<step>``, or the channels' steps differ.
    """
    steps = _channel_steps(
        columns, lambda column: f"column {column!r} is not a series column <channel>@<step>"
    )
    if not steps:
        raise ValueError("no series columns <channel>@<step>")
    for channel, held in steps.items():
        if held != list(range(len(held))) or len(held) != len(next(iter(steps.values()))):
            raise ValueError(
                f"channel {channel!r} has steps {held[:5]}...: every channel needs steps 0..T-1"
            )
    return tuple(steps), len(next(iter(steps.values())))


def _channel_steps(
    columns: Sequence[object], stray: Callable[[object], str]
) -> dict[str, list[int]]:
    """The steps of each channel of wide ``<channel>@<step>`` columns, channels and steps
    in column order; a column of another form is refused with ``stray(column)``."""
    steps: dict[str, list[int]] = {}
    for column in columns:
        match = WIDE_COLUMN.match(str(column))
        if match is None:
            raise ValueError(stray(column))
        steps.setdefault(match["channel"], []).append(int(match["step"]))
    return steps


def read_series_file(
    path: str | Path, *, id_column: str, time_column: str, drop: Sequence[str] = ()
) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """The series of a long-format, wide-format or ``.ts`` file: ``(values (n, C, T)
    float32, channel names, series IDs)``, channels in file order.

    Raises
    ------
    ValueError
        A named column is missing; a channel is not numeric or has missing or infinite
        values; a series repeats a step or lacks one another series has; fewer than two
        series or two steps.
    """
    path = Path(path)
    if path.name.endswith((".ts", ".ts.gz")):
        return _ts_file(path, drop)
    frame = read_table(path, na_values=("", "NA", "NaN", "nan", "?"))
    frame = frame.drop(columns=[c for c in drop if c in frame.columns])
    if time_column not in frame.columns and any(WIDE_COLUMN.match(str(c)) for c in frame.columns):
        values, channels, ids = _wide(frame, path, id_column)
    else:
        values, channels, ids = _long(frame, path, id_column, time_column)
    if values.shape[0] < 2 or values.shape[2] < 2:
        raise ValueError(
            f"{path} holds {values.shape[0]} series of {values.shape[2]} steps; need >= 2 of >= 2"
        )
    return values, channels, ids


def _ts_file(path: Path, drop: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """A ``.ts`` file's series; ``drop`` may name channels (``dim_<j>``)."""
    values = read_ts(path).values
    names = [f"dim_{j}" for j in range(values.shape[1])]
    kept = [j for j, name in enumerate(names) if name not in drop]
    if not kept:
        raise ValueError(f"dataset.drop leaves none of the channels of {path}: {names}")
    values = np.ascontiguousarray(values[:, kept])
    if values.shape[0] < 2 or values.shape[2] < 2:
        raise ValueError(
            f"{path} holds {values.shape[0]} series of {values.shape[2]} steps; need >= 2 of >= 2"
        )
    return values, tuple(names[j] for j in kept), np.arange(len(values))


def _long(
    frame: pd.DataFrame, path: Path, id_column: str, time_column: str
) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """A long-format table's series (module docstring)."""
    for role, name in (("dataset.id_column", id_column), ("dataset.time_column", time_column)):
        if name not in frame.columns:
            raise ValueError(
                f"{role}={name!r} is not a column of {path}; its columns: {list(frame.columns)} "
                "(a wide file names its series columns <channel>@<step>)"
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
    ordered = frame.set_index([id_column, time_column]).loc[
        pd.MultiIndex.from_product([ids, steps])
    ]
    values = ordered[channels].to_numpy(dtype=np.float32)
    values = values.reshape(len(ids), len(steps), len(channels)).transpose(0, 2, 1)
    return np.ascontiguousarray(values), tuple(str(c) for c in channels), ids


def _wide(
    frame: pd.DataFrame, path: Path, id_column: str
) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """A wide-format table's series (module docstring)."""
    steps = _channel_steps(
        [c for c in frame.columns if c != id_column],
        lambda column: (
            f"{path} is read as wide (no {id_column!r}/time column pair, columns named "
            f"<channel>@<step>), but column {column!r} is neither the ID nor a series column: "
            "leave it out with dataset.drop"
        ),
    )
    first, *_ = steps.values()
    for channel, held in steps.items():
        if sorted(held) != sorted(first) or len(set(held)) != len(held):
            raise ValueError(
                f"channel {channel!r} of {path} has steps {sorted(held)[:5]}..., another has "
                f"{sorted(first)[:5]}...: every channel needs each step once"
            )
    order = sorted(first)
    names = [f"{channel}@{step}" for channel in steps for step in order]
    _check_channels(frame, names)
    ids = _wide_ids(frame, path, id_column)
    values = frame[names].to_numpy(dtype=np.float32).reshape(len(frame), len(steps), len(order))
    return np.ascontiguousarray(values), tuple(steps), ids


def _wide_ids(frame: pd.DataFrame, path: Path, id_column: str) -> np.ndarray:
    if id_column not in frame.columns:
        return np.arange(len(frame))
    ids = frame[id_column]
    if ids.isna().any():
        raise ValueError(f"{path}: the series ID {id_column!r} is missing in some rows")
    repeated = ids[ids.duplicated()]
    if len(repeated):
        raise ValueError(
            f"series {str(repeated.iloc[0])!r} has more than one row of {path}: a wide file "
            "holds one row per series"
        )
    return ids.to_numpy()


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
    """A series file (any layout of :func:`read_series_file`) as a
    :class:`SeriesTable`: channels split evenly and in order
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
        parties = even_parties(len(channels), n_parties)
    else:
        unknown = sorted({n for held in columns for n in held} - set(channels))
        if unknown:
            raise ValueError(
                f"partition.columns names {unknown}, not channels of {path}: {list(channels)}"
            )
        parties = tuple(tuple(channels.index(n) for n in held) for held in columns)
        check_parties(parties, len(channels))
    return SeriesTable(values, channels, parties)
