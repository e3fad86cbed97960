"""The ``.ts`` format of the UEA & UCR time-series archives (and of sktime and aeon).

A ``.ts`` file is a header of ``@`` tags, then one series per line: its channels
separated by ``:``, the values of a channel by ``,``, and, when ``@classLabel true``,
the series' class after the last ``:``. Lines starting with ``#`` are comments::

    @problemName BasicMotions
    @timeStamps false
    @univariate false
    @dimensions 6
    @equalLength true
    @seriesLength 100
    @classLabel true Standing Running Walking Badminton
    @data
    0.079,0.079,...:0.394,0.394,...:...:Standing

Only what the series family trains on is read: equal-length series without time stamps
or missing values. Anything else is refused with a message that names the line.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class TsSeries:
    """The content of a ``.ts`` file.

    Parameters
    ----------
    values
        ``(n_series, n_channels, length)`` float32.
    labels
        Each series' class (as written), or ``None`` when the file has none.
    problem
        ``@problemName``, if given.
    """

    values: np.ndarray
    labels: np.ndarray | None
    problem: str | None


def read_ts(path: str | Path) -> TsSeries:
    """The series of a ``.ts`` file (gzip-compressed when its name ends in ``.gz``).

    Raises
    ------
    ValueError
        The file uses time stamps, has a missing value (``?``), a value that is not a
        number, series of different lengths or channel counts, no ``@data`` section,
        or fewer than one series.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        return parse_ts(lines, name=str(path))


def parse_ts(lines: Iterable[str], *, name: str = "the .ts file") -> TsSeries:
    """:func:`read_ts` on lines of text (``name`` is used in messages)."""
    tags: dict[str, str] = {}
    series: list[list[list[float]]] = []
    labels: list[str] = []
    in_data = False
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            in_data = _header_line(line, tags, name, number)
            continue
        fields = line.split(":")
        if (tags.get("classlabel") or "false").split()[0].lower() == "true":
            labels.append(fields.pop().strip())
        if not fields:
            raise ValueError(f"{name}, line {number}: a series line without values")
        series.append([_channel(field, name, number) for field in fields])
    if not in_data:
        raise ValueError(f"{name} has no @data line: it is not a .ts file")
    return TsSeries(
        _stack(series, name), np.asarray(labels) if labels else None, tags.get("problemname")
    )


def _header_line(line: str, tags: dict[str, str], name: str, number: int) -> bool:
    """Record a header tag; whether the data section starts after this line."""
    if not line.startswith("@"):
        raise ValueError(f"{name}, line {number}: data before the @data line")
    tag, _, value = line[1:].partition(" ")
    tag = tag.lower()
    if tag == "data":
        return True
    if tag == "timestamps" and value.strip().lower() == "true":
        raise ValueError(
            f"{name} stores time stamps with its values (@timeStamps true): write the series "
            "in long format (series, t, channels) and read that instead"
        )
    tags[tag] = value.strip()
    return False


def _channel(field: str, name: str, number: int) -> list[float]:
    values = []
    for cell in field.split(","):
        cell = cell.strip()
        if cell == "?" or not cell:
            raise ValueError(
                f"{name}, line {number}: a value is missing ('?' or empty): fill or "
                "interpolate the series first (series are modelled complete)"
            )
        try:
            values.append(float(cell))
        except ValueError:
            raise ValueError(f"{name}, line {number}: {cell!r} is not a number") from None
    return values


def _stack(series: list[list[list[float]]], name: str) -> np.ndarray:
    if not series:
        raise ValueError(f"{name} holds no series after its @data line")
    shape = (len(series[0]), len(series[0][0]))
    for index, channels in enumerate(series):
        lengths = {len(channel) for channel in channels}
        if len(channels) != shape[0] or lengths != {shape[1]}:
            raise ValueError(
                f"{name}: series {index} has {len(channels)} channels of lengths "
                f"{sorted(lengths)}, series 0 has {shape[0]} of length {shape[1]}: every series "
                "needs the same channels and length (cut or pad them to one length)"
            )
    values = np.asarray(series, dtype=np.float32)
    if not np.isfinite(values).all():
        raise ValueError(f"{name} holds values that are not finite (nan or inf)")
    return values
