"""Reading a dataset's published file: decompression, parse errors named, columns by
position; internal, shared by the built-in and the papers' datasets."""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Sequence
from typing import IO, cast

import pandas as pd


def open_file(path: str) -> IO[bytes]:
    """The file, decompressed when its name ends in .gz or .bz2 (the caller closes it)."""
    if path.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    return open(path, "rb")


def read_delimited(
    source: str | IO[bytes], where: str, name: str, **options: object
) -> pd.DataFrame:
    """``pd.read_csv(source, **options)`` for the ``name`` dataset's file, a path (opened
    with :func:`open_file`) or an open binary file (gunzipped when ``where`` ends in
    .gz); any read or parse failure becomes one ``ValueError`` naming ``where``."""
    try:
        if isinstance(source, str):
            with open_file(source) as handle:
                return pd.read_csv(handle, **options)
        if where.endswith(".gz"):
            with gzip.GzipFile(fileobj=source) as handle:
                return pd.read_csv(handle, **options)
        return pd.read_csv(source, **options)
    except (ValueError, OSError, EOFError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ValueError(f"cannot parse the {name} file {where}: {exc}") from exc


def by_position(frame: pd.DataFrame, columns: Sequence[str], name: str, where: str) -> pd.DataFrame:
    """``frame`` with its columns renamed to ``columns``, which must match their count."""
    if frame.shape[1] != len(columns):
        raise ValueError(
            f"the {name} file {where} has {frame.shape[1]} columns, expected {len(columns)}"
        )
    frame.columns = list(columns)
    return frame
