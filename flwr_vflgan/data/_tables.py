"""Reading and writing table files by extension (CSV, TSV, Parquet); internal."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

logger = logging.getLogger(__name__)

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


_OTHER_SEPARATORS = (";", "\t", "|")


def csv_separator(path: Path) -> str:
    """The field separator of a ``.csv`` (or ``.csv.gz``) file: ``","``, unless its header
    line has no comma and exactly one of ``;``, tab and ``|`` (the export of a spreadsheet
    in a locale whose decimal mark is the comma, for example)."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as handle:
        header = handle.readline()
    if "," in header:
        return ","
    found = [separator for separator in _OTHER_SEPARATORS if separator in header]
    if len(found) != 1:
        return ","
    separator = found[0]
    logger.info(
        "%s: its header has no comma but %r: reading it as %r-separated", path, separator, separator
    )
    return separator


def _read_text_table(
    path: Path, separator: str, na_values: Sequence[str], text_columns: Sequence[str]
) -> pd.DataFrame:
    """``pd.read_csv`` in UTF-8, or in Windows-1252 (a spreadsheet's plain "CSV" export in
    Western locales) with a warning when the file is not UTF-8."""
    options = {
        "sep": separator,
        "na_values": list(na_values),
        "keep_default_na": False,
        "dtype": dict.fromkeys(text_columns, str) or None,
    }
    try:
        return pd.read_csv(path, encoding="utf-8", **options)
    except UnicodeDecodeError as exc:
        try:
            frame = pd.read_csv(path, encoding="cp1252", **options)
        except UnicodeDecodeError:
            raise ValueError(
                f"{path} is neither UTF-8 nor Windows-1252 ({exc.reason}): save it as UTF-8"
            ) from exc
        logger.warning(
            "%s is not UTF-8 (%s): read as Windows-1252; save it as UTF-8 if its text looks wrong",
            path,
            exc.reason,
        )
        return frame


def _decimal_commas(frame: pd.DataFrame, path: Path, keep_text: Sequence[str]) -> pd.DataFrame:
    """``frame`` with every text column (but those in ``keep_text``) whose non-blank values
    are all numbers written with a decimal comma (``79,5``; at least one comma, no point)
    read as numbers: a ``;``-separated file comes from a locale that writes them so. One
    log line each."""
    out = frame
    for name in frame.columns:
        if name in keep_text:
            continue
        series = frame[name]
        if not (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)):
            continue
        text = series.astype("string").str.strip()
        present = text[text.notna() & (text != "")]
        if present.empty or not present.str.fullmatch(r"[+-]?\d+(,\d+)?").all():
            continue
        if not present.str.contains(",", regex=False).any():
            continue
        if out is frame:
            out = frame.copy()
        numbers = pd.to_numeric(text.str.replace(",", ".", regex=False).where(text != ""))
        out[name] = numbers.to_numpy(dtype="float64", na_value=float("nan"))
        logger.info("%s: column %r holds numbers with a decimal comma: read as numbers", path, name)
    return out


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
    separator = "\t"
    try:
        if fmt == "csv":
            separator = csv_separator(path)
        if fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            frame = _read_text_table(path, separator, na_values, text_columns)
    except ImportError as exc:
        raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow ({exc})") from exc
    except pd.errors.EmptyDataError:
        raise ValueError(f"table file {path} is empty") from None
    except OSError as exc:
        raise OSError(f"cannot read table file {path}: {exc}") from exc
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ValueError(f"cannot parse table file {path}: {exc}") from exc
    if separator == ";" and fmt == "csv":
        frame = _decimal_commas(frame, path, keep_text=text_columns)
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
