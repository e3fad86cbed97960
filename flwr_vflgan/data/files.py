"""Per-party files for real deployments, and the row-alignment check between parties.

:func:`write_party_files` cuts a dataset into one file per party, each starting with a
shared ID column, next to a ``.schema.json`` sidecar and a ``manifest.json``. Each
party's node reads its own file with :func:`load_party_file`, publishes
:func:`id_digest` of its IDs and its row count, and the server calls
:func:`check_aligned` before training: VFL needs row ``i`` to be the same entity at
every party. The last three live in :mod:`flwr_vflgan.data.alignment` and are
re-exported here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from flwr_vflgan.data._columns import DtypeRecord, dtype_from_record, dtype_record
from flwr_vflgan.data._tables import check_id_column, read_table, table_stem, write_table
from flwr_vflgan.data.alignment import AlignmentError, check_aligned, id_digest
from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.registry import Dataset, numbers_from_text
from flwr_vflgan.data.schema import Schema, infer_schema
from flwr_vflgan.data.series import SeriesEncoder, wide_columns

__all__ = [
    "AlignmentError",
    "check_aligned",
    "domain_sidecar",
    "id_digest",
    "load_party_file",
    "write_party_files",
    "write_series_party_files",
]

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1
_USER_NA_VALUES = ("", "?", "NA", "NaN")


def write_party_files(
    dataset: Dataset,
    parts: Sequence[Sequence[str]],
    out_dir: str | os.PathLike[str],
    *,
    id_column: str = "row_id",
    ids: Sequence[Any] | None = None,
    file_format: Literal["csv", "parquet"] = "csv",
    overwrite: bool = False,
    domain: PublicDomain | None = None,
) -> list[Path]:
    """Write one file per party, all-or-nothing.

    Writes ``party-<i>.<csv|parquet>`` (the ID column, then party ``i``'s columns),
    ``party-<i>.schema.json`` (that party's :meth:`Schema.to_dict` plus ``id_column``
    and the column ``dtypes``) and ``manifest.json`` (dataset name, ``n_rows``,
    ``id_digest`` and each party's files and columns). Everything is written to a
    temporary folder beside ``out_dir`` and renamed into place once all succeeded.

    Parameters
    ----------
    dataset
        The full table.
    parts
        Columns of each party; disjoint, non-empty, all in the dataset.
    out_dir
        Destination folder; it must be absent or empty unless ``overwrite``.
    id_column
        Name of the ID column; must not be a dataset column.
    ids
        One unique, non-missing ID per row; defaults to ``0 .. n_rows - 1``.
    file_format
        ``"csv"`` (missing values are empty fields) or ``"parquet"``. Both give back
        text, integer, float, boolean and ``category`` columns exactly; an object column
        whose values are not all strings comes back from CSV as text, so use Parquet
        for those.
    overwrite
        Replace a non-empty ``out_dir``.
    domain
        Public metadata of the columns; each party then also gets
        ``party-<i>.domain.json`` with its columns' entries, from which its encoder is
        built (required by ``dp=end_to_end``).

    Returns
    -------
    list of pathlib.Path
        The party data files, in party order.

    Raises
    ------
    TypeError
        If ``dataset`` is not a :class:`Dataset`.
    ValueError
        If a part is empty, unknown or repeated columns are named, ``id_column`` clashes
        with a column, ``ids`` has the wrong length, missing or repeated values, or
        ``file_format`` is unknown.
    FileExistsError
        If ``out_dir`` exists, is not empty and ``overwrite`` is false.
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"dataset must be a Dataset, got {type(dataset).__name__}")
    if file_format not in ("csv", "parquet"):
        raise ValueError(f"file_format must be 'csv' or 'parquet', got {file_format!r}")
    if not isinstance(id_column, str) or not id_column:
        raise ValueError(f"id_column must be a non-empty string, got {id_column!r}")
    if id_column in dataset.schema.names:
        raise ValueError(f"id_column {id_column!r} is already a column of the dataset")
    party_columns = _check_parts(dataset.schema, parts)
    id_series = _id_series(ids, dataset.n_rows, id_column)
    target = Path(out_dir)
    with _staged(target, overwrite) as staging:
        manifest_parties = []
        for party, columns in enumerate(party_columns):
            entry = _write_party(dataset, columns, party, id_series, staging, file_format)
            if domain is not None:
                entry["domain_file"] = _write_domain(
                    domain, dataset.schema, columns, staging / entry["file"]
                )
            manifest_parties.append(entry)
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "dataset": dataset.name,
            "n_rows": dataset.n_rows,
            "id_column": id_column,
            "id_digest": id_digest(id_series),
            "file_format": file_format,
            "parties": manifest_parties,
        }
        _write_json(staging / "manifest.json", manifest)
    logger.info("wrote %d party files for %s to %s", len(party_columns), dataset.name, target)
    return [target / entry["file"] for entry in manifest_parties]


@contextlib.contextmanager
def _staged(target: Path, overwrite: bool) -> Iterator[Path]:
    """A fresh folder beside ``target`` to write into; renamed to ``target`` (replacing
    it) when the block succeeds, removed when it fails.

    Raises
    ------
    ValueError
        ``target`` is a file.
    FileExistsError
        ``target`` is a non-empty folder and ``overwrite`` is false.
    """
    if target.exists() and not target.is_dir():
        raise ValueError(f"out_dir {target} exists and is not a folder")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise FileExistsError(
            f"out_dir {target} exists and is not empty; pass overwrite=True to replace it"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield staging
        _move_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_series_party_files(
    name: str,
    parties: Sequence[tuple[np.ndarray, SeriesEncoder]],
    out_dir: str | os.PathLike[str],
    *,
    file_format: Literal["csv", "parquet"] = "csv",
    overwrite: bool = False,
) -> list[Path]:
    """Write one wide series file per party, all-or-nothing (VFLGAN-TS on real nodes).

    ``parties``: each party's series ``(n, C_i, T)`` and its encoder. Party ``i`` gets
    ``party-<i>.<csv|parquet>``: a ``series`` ID column (``0 .. n-1``, the same at every
    party) and one column per channel and step, ``<channel>@<step>``; where its encoder
    is not fitted on its rows (public bounds, or the sine data's identity scaling) also
    ``party-<i>.domain.json`` with those bounds, so the party encodes exactly as a
    simulated run does. ``manifest.json`` lists the files and channels.

    Raises
    ------
    ValueError
        The parties hold different numbers of series, or ``file_format`` is unknown.
    FileExistsError
        ``out_dir`` is not empty and ``overwrite`` is false.
    """
    if file_format not in ("csv", "parquet"):
        raise ValueError(f"file_format must be 'csv' or 'parquet', got {file_format!r}")
    counts = {len(values) for values, _ in parties}
    if len(counts) != 1:
        raise ValueError(f"the parties hold different numbers of series: {sorted(counts)}")
    target = Path(out_dir)
    with _staged(target, overwrite) as staging:
        entries = []
        for party, (values, encoder) in enumerate(parties):
            entries.append(_write_series_party(values, encoder, party, staging, file_format))
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "dataset": name,
            "n_rows": counts.pop(),
            "id_column": "series",
            "file_format": file_format,
            "parties": entries,
        }
        _write_json(staging / "manifest.json", manifest)
    return [target / entry["file"] for entry in entries]


def _write_series_party(
    values: np.ndarray,
    encoder: SeriesEncoder,
    party: int,
    folder: Path,
    file_format: Literal["csv", "parquet"],
) -> dict[str, Any]:
    columns = wide_columns(encoder.channels, encoder.length)
    frame = pd.DataFrame(values.reshape(len(values), -1), columns=columns)
    frame.insert(0, "series", range(len(values)))
    file_name = f"party-{party}.{file_format}"
    write_table(frame, folder / file_name, file_format)
    entry: dict[str, Any] = {"party": party, "file": file_name, "channels": list(encoder.channels)}
    if not encoder.reads_private:
        sidecar = domain_sidecar(folder / file_name)
        _write_json(sidecar, encoder.domain().to_mapping())
        entry["domain_file"] = sidecar.name
    return entry


def _check_parts(schema: Schema, parts: Sequence[Sequence[str]]) -> list[list[str]]:
    if isinstance(parts, str) or any(isinstance(part, str) for part in parts):
        raise TypeError("parts must be a list of column lists, one per party")
    owner: dict[str, int] = {}
    result = []
    for party, part in enumerate(parts):
        columns = list(part)
        if not columns:
            raise ValueError(f"party {party} has no columns")
        for name in columns:
            if name not in schema.names:
                raise ValueError(
                    f"party {party}: unknown column {name!r}; valid columns: {schema.names}"
                )
            if name in owner:
                raise ValueError(
                    f"column {name!r} is assigned to both party {owner[name]} and party {party}"
                )
            owner[name] = party
        result.append(columns)
    if not result:
        raise ValueError("parts must list at least one party")
    return result


def _id_series(ids: Sequence[Any] | None, n_rows: int, id_column: str) -> pd.Series:
    if ids is None:
        return pd.Series(range(n_rows), name=id_column, dtype="int64")
    if isinstance(ids, str):
        raise TypeError(f"ids must be a sequence of IDs, got the string {ids!r}")
    series = pd.Series(list(ids), name=id_column)
    if len(series) != n_rows:
        raise ValueError(f"ids has {len(series)} values, the dataset has {n_rows} rows")
    return check_id_column(series.to_frame(), id_column, where="ids")


def _write_party(
    dataset: Dataset,
    columns: list[str],
    party: int,
    id_series: pd.Series,
    folder: Path,
    file_format: Literal["csv", "parquet"],
) -> dict[str, Any]:
    id_column = str(id_series.name)
    frame = dataset.frame[columns].reset_index(drop=True)
    frame.insert(0, id_column, id_series.reset_index(drop=True))
    file_name = f"party-{party}.{file_format}"
    write_table(frame, folder / file_name, file_format)
    sidecar = {
        **dataset.schema.subset(columns).to_dict(),
        "id_column": id_column,
        "dtypes": {name: dtype_record(frame[name].dtype) for name in frame.columns},
    }
    schema_name = f"party-{party}.schema.json"
    _write_json(folder / schema_name, sidecar)
    return {"party": party, "file": file_name, "schema_file": schema_name, "columns": columns}


def domain_sidecar(path: str | os.PathLike[str]) -> Path:
    """Where a party file's public domain lies: ``<name>.domain.json`` beside it (the
    file :func:`write_party_files` writes and a party node reads)."""
    path = Path(path)
    return path.with_name(f"{table_stem(path)}.domain.json")


def _write_domain(domain: PublicDomain, schema: Schema, columns: list[str], data_file: Path) -> str:
    """The party's :func:`domain_sidecar`: the domain entries of its columns."""
    domain.schema_for(schema.subset(columns))  # every column has an entry
    sidecar = domain_sidecar(data_file)
    mapping = domain.to_mapping()
    _write_json(sidecar, {column: mapping[column] for column in columns})
    return sidecar.name


def _write_json(path: Path, content: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


def _move_into_place(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``, replacing an existing ``target`` folder."""
    if not target.exists():
        os.replace(staging, target)
        return
    graveyard = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    old = graveyard / target.name
    os.replace(target, old)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(old, target)
        raise
    finally:
        shutil.rmtree(graveyard, ignore_errors=True)


def load_party_file(
    path: str | os.PathLike[str],
    *,
    id_column: str = "row_id",
    schema_path: str | os.PathLike[str] | None = None,
) -> tuple[Dataset, pd.Series]:
    """Read one party's file and split off its ID column.

    The schema comes from ``schema_path``, else the sidecar ``<name>.schema.json``
    beside the file if present (then only empty CSV fields are missing values and the
    recorded dtypes are restored), else it is inferred (then ``""``, ``"?"``, ``"NA"``
    and ``"NaN"`` are missing values, and text columns of numbers with blank cells are
    read as numbers, as :func:`~flwr_vflgan.data.registry.load_table` reads them).

    Parameters
    ----------
    path
        A ``.csv``, ``.csv.gz``, ``.tsv``, ``.tsv.gz``, ``.parquet`` or ``.pq`` file.
    id_column
        Name of the ID column.
    schema_path
        Schema sidecar to use instead of the default one.

    Returns
    -------
    dataset : Dataset
        Named after the file, without the ID column, columns in schema order.
    ids : pandas.Series
        The IDs, in row order.

    Raises
    ------
    FileNotFoundError
        If ``path`` or an explicit ``schema_path`` does not exist.
    ValueError
        If the file cannot be read, the ID column is absent (the columns found are
        listed), has missing or repeated IDs, the sidecar is malformed or names another
        ID column, or the file's columns differ from the schema's (extra and missing
        columns are named).
    """
    file_path = Path(path)
    sidecar_path = (
        Path(schema_path)
        if schema_path is not None
        else file_path.with_name(f"{table_stem(file_path)}.schema.json")
    )
    if schema_path is not None and not sidecar_path.is_file():
        raise FileNotFoundError(f"schema file {sidecar_path} does not exist")
    if not sidecar_path.is_file():
        frame = read_table(file_path, na_values=_USER_NA_VALUES)
        ids = check_id_column(frame, id_column, where=str(file_path))
        features = frame.drop(columns=[id_column]).reset_index(drop=True)
        features.columns = [str(name) for name in features.columns]
        features = numbers_from_text(features, {}, str(file_path))
        return Dataset(table_stem(file_path), features, infer_schema(features)), ids
    schema, dtypes = _read_sidecar(sidecar_path, id_column)
    text_columns = [name for name, record in dtypes.items() if _is_text(record)]
    frame = read_table(file_path, na_values=("",), text_columns=text_columns)
    ids = check_id_column(frame, id_column, where=str(file_path))
    found = [str(name) for name in frame.columns if name != id_column]
    extra = [name for name in found if name not in schema.names]
    missing = [name for name in schema.names if name not in found]
    if extra or missing:
        raise ValueError(
            f"{file_path} does not match its schema {sidecar_path}: extra columns {extra}, "
            f"missing columns {missing}"
        )
    features = _cast(frame[schema.names].reset_index(drop=True), dtypes)
    ids = _cast(ids.to_frame(), dtypes)[id_column]
    return Dataset(table_stem(file_path), features, schema), ids


def _read_sidecar(path: Path, id_column: str) -> tuple[Schema, dict[str, DtypeRecord]]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read schema file {path}: {exc}") from exc
    if not isinstance(content, dict):
        raise ValueError(f"schema file {path} must hold a JSON object, got {content!r}")
    recorded_id = content.pop("id_column", id_column)
    if recorded_id != id_column:
        raise ValueError(
            f"schema file {path} says the ID column is {recorded_id!r}, but id_column={id_column!r}"
        )
    dtypes = content.pop("dtypes", {})
    try:
        schema = Schema.from_dict(content)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid schema file {path}: {exc}") from exc
    if id_column in schema.names:
        raise ValueError(f"schema file {path} lists the ID column {id_column!r} as a column")
    return schema, dtypes


def _is_text(record: DtypeRecord) -> bool:
    if isinstance(record, dict):
        return all(isinstance(value, str) for value in record["categories"])
    dtype = dtype_from_record(record)
    return ptypes.is_string_dtype(dtype) or ptypes.is_object_dtype(dtype)


def _cast(frame: pd.DataFrame, dtypes: Mapping[str, DtypeRecord]) -> pd.DataFrame:
    for name, record in dtypes.items():
        if name not in frame.columns:
            continue
        target = dtype_from_record(record)
        if frame[name].dtype == target:
            continue
        try:
            frame[name] = frame[name].astype(target)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"column {name!r} cannot be read as its recorded dtype {target}: {exc}"
            ) from exc
    return frame
