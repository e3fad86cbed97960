"""Reading and writing table files by extension (CSV, TSV, Parquet); internal."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

TableFormat = Literal["csv", "tsv", "parquet"]

# Longest suffixes first, so that ".csv.gz" is matched before ".gz" could be.
_SUFFIXES: tuple[tuple[str, TableFormat], ...] = (
    (".csv.gz", "csv"),
    (".tsv.gz", "tsv"),
    (".csv", "csv"),
    (".tsv", "tsv"),
    (".parquet", "parquet"),
    (".pq", "parquet"),
)
SUPPORTED_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".parquet", ".pq")


def table_format(path: Path) -> TableFormat:
    """Return the format of ``path`` from its extension (case-insensitive)."""
    name = path.name.lower()
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix):
            return fmt
    raise ValueError(
        f"unsupported table file extension for {path}; supported: {list(SUPPORTED_SUFFIXES)}"
    )


def table_stem(path: Path) -> str:
    """Return the file name of ``path`` without its table extension."""
    name = path.name
    for suffix, _ in _SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def read_table(
    path: Path,
    *,
    na_values: Sequence[str],
    text_columns: Sequence[str] = (),
) -> pd.DataFrame:
    """Read a non-empty table file.

    ``na_values`` apply to text formats only (Parquet has real nulls). Columns in
    ``text_columns`` are read as text from CSV/TSV so that codes such as ``"007"`` keep
    their leading zeros.
    """
    fmt = table_format(path)
    if not path.exists():
        raise FileNotFoundError(f"table file {path} does not exist")
    if not path.is_file():
        raise ValueError(f"table path {path} is not a file")
    if path.stat().st_size == 0:
        raise ValueError(f"table file {path} is empty")
    try:
        if fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(
                path,
                sep="," if fmt == "csv" else "\t",
                na_values=list(na_values),
                keep_default_na=False,
                dtype=dict.fromkeys(text_columns, str) or None,
            )
    except ImportError as exc:
        raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow ({exc})") from exc
    except pd.errors.EmptyDataError:
        raise ValueError(f"table file {path} is empty") from None
    except OSError as exc:
        raise OSError(f"cannot read table file {path}: {exc}") from exc
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ValueError(f"cannot parse table file {path}: {exc}") from exc
    if frame.shape[1] == 0:
        raise ValueError(f"table file {path} has no columns")
    if len(frame) == 0:
        raise ValueError(f"table file {path} has a header but no rows")
    return frame


def write_table(frame: pd.DataFrame, path: Path, fmt: Literal["csv", "parquet"]) -> None:
    """Write ``frame`` without its index."""
    if fmt == "parquet":
        try:
            frame.to_parquet(path, index=False)
        except ImportError as exc:
            raise ImportError(f"writing {path} needs pyarrow: pip install pyarrow") from exc
    else:
        frame.to_csv(path, index=False)


def check_id_column(frame: pd.DataFrame, id_column: str, *, where: str) -> pd.Series:
    """Return ``frame[id_column]`` after checking it exists, is complete and unique.

    Raises
    ------
    ValueError
        If the column is absent (the columns found are listed), has missing values, or
        repeats IDs (up to five repeated IDs are named).
    """
    if id_column not in frame.columns:
        raise ValueError(
            f"ID column {id_column!r} not found in {where}; columns: {list(frame.columns)}"
        )
    ids = frame[id_column].reset_index(drop=True)
    n_missing = int(ids.isna().sum())
    if n_missing:
        raise ValueError(f"ID column {id_column!r} in {where} has {n_missing} missing IDs")
    repeated = ids[ids.duplicated()].unique()
    if len(repeated):
        shown = ", ".join(repr(value) for value in repeated[:5].tolist())
        raise ValueError(
            f"ID column {id_column!r} in {where} has {len(repeated)} repeated IDs, e.g. {shown}"
        )
    return ids
