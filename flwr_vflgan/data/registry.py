"""Named datasets and user tables, loaded as a :class:`Dataset` (a frame plus its schema).

``adult`` ships inside the package. ``german_credit``, ``spambase`` and ``mnist_5k``
are read from a data directory laid out as ``<data_dir>/<name>/<file>``; the directory
is the ``data_dir`` argument, else the ``FLWR_VFLGAN_DATA_DIR`` environment variable,
else ``~/.cache/flwr_vflgan/datasets``. Nothing is downloaded: a missing file raises
:class:`DatasetUnavailableError` saying where it was looked for and where to get it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from flwr_vflgan.data._builtin import BUILTIN_DATASETS, BuiltinDataset
from flwr_vflgan.data._papers import PAPER_DATASETS
from flwr_vflgan.data._tables import check_id_column, read_table, table_format, table_stem
from flwr_vflgan.data.schema import ColumnKind, Schema, infer_schema

__all__ = [
    "DATA_DIR_ENV",
    "Dataset",
    "DatasetUnavailableError",
    "image_shape_of",
    "list_datasets",
    "load_dataset",
    "load_table",
]

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "FLWR_VFLGAN_DATA_DIR"
_DEFAULT_DATA_DIR = "~/.cache/flwr_vflgan/datasets"


class DatasetUnavailableError(FileNotFoundError):
    """A named dataset's file is not on this machine (nothing is downloaded)."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A table and its schema.

    Parameters
    ----------
    name
        Dataset name (for example ``"adult"`` or a file's name).
    frame
        The rows; its columns are exactly ``schema.names``, in that order.
    schema
        Kinds of the columns and the label, if any.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If ``name`` is empty, the frame's columns differ from the schema's, or a column's
        dtype does not fit its kind.
    """

    name: str
    frame: pd.DataFrame = field(repr=False)
    schema: Schema

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.frame, pd.DataFrame):
            raise TypeError(f"frame must be a pandas DataFrame, got {type(self.frame).__name__}")
        if not isinstance(self.schema, Schema):
            raise TypeError(f"schema must be a Schema, got {type(self.schema).__name__}")
        if list(self.frame.columns) != self.schema.names:
            raise ValueError(
                f"dataset {self.name!r}: frame columns {list(self.frame.columns)} differ from "
                f"schema columns {self.schema.names} (same names in the same order required)"
            )
        self.schema.validate_frame(self.frame)

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return len(self.frame)


# The datasets this package reads by name: its own, then the seed papers' others.
_DATASETS: tuple[BuiltinDataset, ...] = BUILTIN_DATASETS + PAPER_DATASETS


def list_datasets() -> list[str]:
    """Return the names :func:`load_dataset` accepts, sorted."""
    return sorted(spec.name for spec in _DATASETS)


def image_shape_of(name: str) -> tuple[int, int] | None:
    """``(height, width)`` of a built-in image dataset's rows; ``None`` for tables and
    for names that are not built-in datasets (for example a file path)."""
    for spec in _DATASETS:
        if spec.name == name:
            return spec.image_shape
    return None


def load_dataset(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    file: str | os.PathLike[str] | None = None,
) -> Dataset:
    """Load a built-in dataset.

    Parameters
    ----------
    name
        One of :func:`list_datasets`.
    data_dir
        Folder holding ``<name>/<file>`` for the datasets that are not bundled; defaults
        to ``$FLWR_VFLGAN_DATA_DIR``, else ``~/.cache/flwr_vflgan/datasets``.
    file
        The dataset's file itself, wherever it is (``dataset.file``): read with the
        dataset's loader instead of searching ``data_dir``. Not for bundled datasets.

    Returns
    -------
    Dataset
        Rows in file order, with a ``RangeIndex``; categorical missing values (``?``)
        are NaN.

    Raises
    ------
    ValueError
        If ``name`` is unknown (the message lists valid names) or the file is malformed.
    DatasetUnavailableError
        If the dataset's file is not found; the message names every path searched, the
        environment variable and the public source.

    Notes
    -----
    ``adult`` combines UCI's training and test files (48,842 rows). ``german_credit``
    keeps UCI's codes (``A11``...) as categories and its label 1 (good) / 2 (bad) as
    integer categories. ``spambase``'s 57 features are float64 and its label ``spam``
    is a 0/1 category. ``mnist_5k`` has 784 integer pixel columns and a ``label``
    category.
    """
    specs = {spec.name: spec for spec in _DATASETS}
    if name not in specs:
        raise ValueError(f"unknown dataset {name!r}; valid names: {list_datasets()}")
    spec = specs[name]
    if file is not None:
        path = Path(file).expanduser()
        if spec.bundled_file is not None:
            raise ValueError(f"dataset {name!r} ships with the package: it takes no file")
        if not path.is_file():
            raise DatasetUnavailableError(
                f"the {name} file {path} does not exist: set dataset.file to the file "
                f"published as {spec.file_names[0]} ({spec.source})"
            )
        frame = spec.read(str(path), where=str(path))
    elif spec.bundled_file is not None:
        frame = _read_bundled(spec, spec.bundled_file)
    else:
        path = _find_file(spec, data_dir)
        frame = spec.read(str(path), where=str(path))
    logger.debug("loaded dataset %s: %d rows x %d columns", name, *frame.shape)
    return Dataset(name, frame, spec.schema())


def _read_bundled(spec: BuiltinDataset, file_name: str) -> pd.DataFrame:
    resource = resources.files("flwr_vflgan.data").joinpath("bundled", file_name)
    with resource.open("rb") as handle:
        return spec.read(handle, where=f"flwr_vflgan/data/bundled/{file_name}")


def _data_dir(data_dir: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """The directory to search and where its choice came from."""
    if data_dir is not None:
        return Path(data_dir).expanduser(), "the data_dir argument"
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser(), f"${DATA_DIR_ENV}"
    return Path(_DEFAULT_DATA_DIR).expanduser(), f"the default (${DATA_DIR_ENV} is not set)"


def _used_by(spec: BuiltinDataset) -> str:
    """`` (paper 000, Section 5.1.1)``: where a seed paper uses the dataset."""
    return f" ({spec.paper})" if spec.paper else ""


def _find_file(spec: BuiltinDataset, data_dir: str | os.PathLike[str] | None) -> Path:
    root, origin = _data_dir(data_dir)
    candidates = [root / spec.name / file_name for file_name in spec.file_names]
    for path in candidates:
        if path.is_file():
            return path
    searched = ", ".join(str(path) for path in candidates)
    raise DatasetUnavailableError(
        f"dataset {spec.name!r}{_used_by(spec)} is not available: searched {searched} (data directory "
        f"{root}, from {origin}). Set dataset.file=<path> to the file (file=...), or "
        f"dataset.data_dir (data_dir=...) or {DATA_DIR_ENV} to a folder holding "
        f"{spec.name}/{spec.file_names[0]}. Source: {spec.source}. "
        f"Nothing is downloaded automatically."
    )


def load_table(
    path: str | os.PathLike[str],
    *,
    schema: Mapping[str, str | ColumnKind] | None = None,
    label: str | None = None,
    id_column: str | None = None,
    na_values: Sequence[str] = ("", "?", "NA", "NaN"),
    drop: Sequence[str] = (),
    leave_out: Sequence[str] = (),
) -> tuple[Dataset, pd.Series | None]:
    """Load a user table from ``.csv``, ``.csv.gz``, ``.tsv``, ``.tsv.gz``, ``.parquet`` or ``.pq``.

    Parameters
    ----------
    path
        The file; the first CSV/TSV row is the header.
    schema
        Kinds for some or all columns (``"continuous"``, ``"integer"``,
        ``"categorical"``); the others are inferred with :func:`infer_schema`.
    label
        Name of the label column, if any.
    id_column
        Column holding row IDs; it is removed from the dataset and returned separately.
    na_values
        Strings read as missing in CSV/TSV files (Parquet has real nulls).
    drop
        Columns to leave out before anything is inferred (free text, IDs, leaks).
    leave_out
        Columns to leave out where the file has them (a synthetic table may lack the real
        table's ID and dropped columns); unlike ``drop``, an absent one is no error.

    Returns
    -------
    dataset : Dataset
        Named after the file (without its extension); the ID column is not in it.
    ids : pandas.Series or None
        The ID column (``RangeIndex``), or ``None`` without ``id_column``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the extension is unsupported (the message lists the supported ones), the file
        is empty or cannot be parsed, the ID column is absent, has missing values or
        repeats an ID (a few repeats are named), or a schema rule fails.
    """
    if isinstance(na_values, str):
        raise TypeError(f"na_values must be a sequence of strings, got the string {na_values!r}")
    file_path = Path(path)
    table_format(file_path)  # unsupported extensions fail before touching the disk
    frame = read_table(file_path, na_values=na_values)
    frame = frame.drop(columns=[name for name in leave_out if name in frame.columns])
    ids = None
    if id_column is not None:
        ids = check_id_column(frame, id_column, where=str(file_path))
        frame = frame.drop(columns=[id_column])
        if frame.shape[1] == 0:
            raise ValueError(f"table file {file_path} has no columns besides {id_column!r}")
    frame.columns = [str(column) for column in frame.columns]
    if id_column is not None and id_column in drop:
        raise ValueError(
            f"dataset.drop names the ID column {id_column!r}; it is already kept apart"
        )
    frame = frame.drop(columns=checked_drop(list(frame.columns), drop, label, str(file_path)))
    frame = numbers_from_text(frame, schema or {}, str(file_path))
    inferred = infer_schema(frame, schema, label=label)
    return Dataset(table_stem(file_path), frame, inferred), ids


def numbers_from_text(
    frame: pd.DataFrame, declared: Mapping[str, str | ColumnKind], where: str
) -> pd.DataFrame:
    """``frame`` with every text column whose non-blank values are all numbers read as
    numbers, blanks (empty or white space) as missing values; one log line per file and
    column in a process (later loads of the same file log at DEBUG).

    Columns declared categorical stay text. Anything else that is not a plain number
    (``1,234``, ``12 kg``) keeps the column text.
    """
    out = frame
    for name in frame.columns:
        series = frame[name]
        kind = declared.get(name)
        if kind is not None and str(kind) == ColumnKind.CATEGORICAL.value:
            continue
        if not (ptypes.is_object_dtype(series.dtype) or ptypes.is_string_dtype(series.dtype)):
            continue
        text = series.astype("string").str.strip()
        blank = text.isna() | (text == "")
        numbers = pd.to_numeric(text.where(~blank), errors="coerce")
        if blank.all() or numbers[~blank].isna().any():
            continue
        if out is frame:
            out = frame.copy()
        out[name] = numbers.astype(np.float64)
        # A run loads its table several times (each party's block, the evaluator): say it
        # once per file and column in a process.
        level = logging.DEBUG if (where, name) in _ANNOUNCED else logging.INFO
        _ANNOUNCED.add((where, name))
        logger.log(
            level,
            "%s: column %r holds numbers stored as text; read as numbers, with %d blank "
            "values as missing",
            where,
            name,
            int(blank.sum()),
        )
    return out


_ANNOUNCED: set[tuple[str, str]] = set()
"""(file, column) pairs :func:`numbers_from_text` has logged at INFO in this process."""


def checked_drop(
    columns: Sequence[str], drop: Sequence[str], label: str | None, where: str
) -> list[str]:
    """``drop`` as a list, after checking that it names columns of ``where`` (not its
    label) and leaves at least one.

    Raises
    ------
    ValueError
        Naming the unknown columns (and the valid ones), the label, or that nothing
        would be left.
    """
    if isinstance(drop, str):
        raise TypeError(f"drop must be a sequence of column names, got the string {drop!r}")
    unknown = [name for name in drop if name not in columns]
    if unknown:
        raise ValueError(
            f"dataset.drop names columns that {where} does not have: {unknown}; its columns: "
            f"{list(columns)}"
        )
    if label is not None and label in drop:
        raise ValueError(f"dataset.drop names the label {label!r}; the evaluation needs it")
    if len(set(drop)) == len(columns):
        raise ValueError(f"dataset.drop leaves no column of {where}")
    return list(drop)


def drop_columns(dataset: Dataset, drop: Sequence[str]) -> Dataset:
    """``dataset`` without the columns ``drop`` (checked as :func:`checked_drop` does)."""
    if not drop:
        return dataset
    schema = dataset.schema
    names = checked_drop(schema.names, drop, schema.label, f"dataset {dataset.name!r}")
    kept = [name for name in schema.names if name not in names]
    return Dataset(dataset.name, dataset.frame[kept], schema.subset(kept))
