"""How a party finds and encodes its columns.

In a deployment each party reads its own file (``node_config["data-path"]``, written by
``python -m simulations.export_parties``) and nobody else sees it. In simulation every
node takes its column block of one table named by a :class:`DataSpec`. Either way the
party fits its own :class:`~flwr_vflgan.data.encoder.TabularEncoder` on its own rows;
the encoder's statistics never leave it.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from flwr_vflgan.data import (
    Dataset,
    Schema,
    TabularEncoder,
    drawn_positions,
    drop_columns,
    id_digest,
    list_datasets,
    load_dataset,
    load_party_file,
    load_table,
    partition_columns,
)
from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.files import domain_sidecar
from flwr_vflgan.data.importance import (
    ImportanceSplit,
    feature_importance,
    parse_importance_split,
)
from flwr_vflgan.data.importance import importance_split as split_by_importance
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec
from flwr_vflgan.data.series import (
    SeriesEncoder,
    SeriesTable,
    is_scaled_series,
    is_series_source,
    load_series,
)
from flwr_vflgan.data.series_files import read_series_file, series_file_table

logger = logging.getLogger(__name__)

_PARTITIONS = ("even", "explicit", "random", "importance")
ROWS_SEED = 0
"""Seed of ``dataset.rows``' sample: a row count always means the same rows."""
PartyScaling = Literal["standard", "minmax", "mode", "quantile"]
SCALINGS: tuple[str, ...] = ("standard", "minmax", "mode", "quantile")
"""``dataset.numeric_scaling``: paper 000's standardisation, [-1, 1] for images, CTGAN's
mode-specific normalisation (:class:`~flwr_vflgan.data.modes.ModeSpecificEncoder`), or a
quantile transform to a standard normal."""
FITTED_ONLY: tuple[str, ...] = ("mode", "quantile")
"""Scalings that keep more of the party's rows than bounds (mixtures, quantiles): never
built from a public domain."""
PartyEncoder = TabularEncoder | ModeSpecificEncoder | SeriesEncoder


@dataclass(frozen=True)
class DataSpec:
    """Where the table comes from and how its columns are split between parties.

    Parameters
    ----------
    source
        A registered dataset name (``adult``, ``german_credit``, ``spambase``,
        ``mnist_5k``) or the path of a CSV/Parquet file.
    n_parties
        Number of parties ``M >= 2``.
    partition
        ``even`` (contiguous blocks in column order, as the papers do), ``explicit``
        (``columns`` lists each party's columns), ``random`` (seeded by
        ``partition_seed``) or ``importance`` (VT-GAN's split of two parties by feature
        importance, paper 001 Section 4.3.2; see ``importance_split``).
    columns
        Per-party column lists for ``explicit``.
    partition_seed
        Seed of the ``random`` split, and of the importance estimate of ``importance``
        (0 when None).
    numeric_scaling
        ``standard`` (paper 000 eq. 22), ``minmax`` to [-1, 1] with tanh outputs (images),
        or ``mode``: CTGAN's mode-specific normalisation, each numeric column a scalar in
        (-1, 1) and a one-hot over the modes of a Gaussian mixture fitted on the party's
        rows (:class:`~flwr_vflgan.data.modes.ModeSpecificEncoder`, seed 0, so every
        process encodes a party's rows alike), or ``quantile``: ``Phi^-1(F(x))`` with the
        column's empirical CDF (reference quantiles of the party's rows; point masses and
        long tails decode as the real column has them). ``mode`` and ``quantile`` cannot
        be built from ``domain``.
    data_dir
        Where non-bundled datasets are looked up (else ``$FLWR_VFLGAN_DATA_DIR``).
    file
        A named dataset's file itself (``dataset.file``), read with that dataset's loader
        instead of being looked up in ``data_dir``; only with a registered ``source``.
    declared
        Column kinds for a user file (``continuous``, ``integer``, ``categorical``);
        undeclared columns are inferred.
    label, id_column
        Label column (kept as an ordinary column) and ID column of a user file.
    drop
        Columns left out of the table before anything else (``dataset.drop``).
    domain
        Public metadata of the columns (``dataset.domain``: kinds, numeric bounds,
        category lists; :class:`~flwr_vflgan.data.domain.PublicDomain`). When given, every
        party's encoder is built from it instead of from its rows; ``dp=end_to_end``
        requires it.
    rows
        Train on a uniform sample of this many rows of the table, drawn without
        replacement with :data:`ROWS_SEED` (the same rows in every process and run; the
        row IDs are the sampled rows' IDs). ``None``: every row. For simulated runs at a
        smaller scale (paper 004's 10^5 rows on two cores); a deployed party holds its
        own rows and ignores it.
    time_column
        A user's file of series in long format (VFLGAN-TS): the column of the time step;
        ``id_column`` names the series (``series`` when unset). Its channels are split
        ``even`` or ``explicit`` (channel names per party).
    importance_split
        For ``importance`` only (and required there): ``1090``, ``5050`` or ``9010``,
        the share of the features, most important first, that party 0 holds; party 1
        holds the rest and the label (:func:`~flwr_vflgan.data.importance.importance_split`).
    """

    source: str = "adult"
    n_parties: int = 2
    partition: Literal["even", "explicit", "random", "importance"] = "even"
    columns: tuple[tuple[str, ...], ...] | None = None
    partition_seed: int | None = None
    numeric_scaling: PartyScaling = "standard"
    data_dir: str | None = None
    file: str | None = None
    declared: Mapping[str, str] = field(default_factory=dict)
    label: str | None = None
    id_column: str | None = None
    importance_split: ImportanceSplit | None = None
    drop: tuple[str, ...] = ()
    domain: Mapping[str, Any] | None = None
    time_column: str | None = None
    rows: int | None = None

    def __post_init__(self) -> None:
        # One party is a valid spec for split classification (GAFM: one non-label party
        # holds every feature); the GANs' column split refuses it (partition_columns).
        if (
            isinstance(self.n_parties, bool)
            or not isinstance(self.n_parties, int)
            or self.n_parties < 1
        ):
            raise ValueError(f"n_parties must be an integer >= 1, got {self.n_parties!r}")
        if self.partition not in _PARTITIONS:
            raise ValueError(f"unknown partition {self.partition!r}; valid: {list(_PARTITIONS)}")
        if self.file is not None and not self.is_registered:
            raise ValueError(
                f"dataset.file={self.file!r} is the file of a named dataset "
                f"(dataset=<name>, one of {list_datasets()}); a table of your own is "
                f"dataset=csv dataset.source=<path>"
            )
        self._check_importance()
        if self.rows is not None and (
            isinstance(self.rows, bool) or not isinstance(self.rows, int) or self.rows < 2
        ):
            raise ValueError(f"dataset.rows must be an integer >= 2 (or null), got {self.rows!r}")
        if self.rows is not None and self.time_column is not None:
            raise ValueError(
                "dataset.rows samples the rows of a table; a file of series "
                "(dataset.time_column) cannot be sampled by row: leave dataset.rows unset"
            )
        if self.numeric_scaling not in SCALINGS:
            raise ValueError(
                f"unknown numeric_scaling {self.numeric_scaling!r}; valid: {list(SCALINGS)}"
            )
        if self.numeric_scaling in FITTED_ONLY and self.domain is not None:
            raise ValueError(
                f"numeric_scaling={self.numeric_scaling!r} fits each party's numeric columns "
                "to its rows, so it cannot be built from public metadata (dataset.domain, "
                "which dp=end_to_end needs): use dataset.numeric_scaling=standard"
            )
        if self.columns is not None:
            object.__setattr__(self, "columns", tuple(tuple(c) for c in self.columns))
        object.__setattr__(self, "declared", dict(self.declared))
        if isinstance(self.drop, str) or not all(isinstance(c, str) for c in self.drop):
            raise ValueError(f"drop must be a list of column names, got {self.drop!r}")
        object.__setattr__(self, "drop", tuple(self.drop))
        if self.domain is not None:
            # Validated here, stored plainly so the spec stays JSON (it travels to parties).
            object.__setattr__(self, "domain", PublicDomain.from_mapping(self.domain).to_mapping())

    @property
    def public_domain(self) -> PublicDomain | None:
        """``domain`` parsed, or ``None``."""
        return None if self.domain is None else PublicDomain.from_mapping(self.domain)

    def _check_importance(self) -> None:
        if self.partition != "importance":
            if self.importance_split is not None:
                raise ValueError(
                    f"importance_split is only used with partition='importance', got "
                    f"partition={self.partition!r}"
                )
            return
        if self.n_parties != 2:
            raise ValueError(
                f"partition='importance' splits the columns between two parties (paper 001 "
                f"Section 4.3.2), got n_parties={self.n_parties}"
            )
        if self.importance_split is None:
            raise ValueError(
                "partition='importance' needs importance_split: one of ['1090', '5050', '9010']"
            )
        split = parse_importance_split(self.importance_split, name="importance_split")
        object.__setattr__(self, "importance_split", split)

    @property
    def is_registered(self) -> bool:
        """Whether ``source`` names a registered dataset rather than a file."""
        return self.source in list_datasets()

    def to_json(self) -> str:
        """Compact JSON form (sent to simulated parties in the setup message). ``file``
        and ``rows`` are left out when unset, so specs written before they existed read
        the same."""
        fields = asdict(self)
        for name in ("file", "rows"):
            if fields[name] is None:
                del fields[name]
        return json.dumps(fields, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DataSpec:
        """Inverse of :meth:`to_json`."""
        return cls(**json.loads(text))


@dataclass
class PartyData:
    """One party's rows: raw block, fitted encoder, encoded tensor and row IDs."""

    frame: pd.DataFrame
    schema: Schema
    ids: pd.Series
    encoder: PartyEncoder
    encode: Callable[[], torch.Tensor] = field(repr=False, compare=False)
    """Makes :attr:`encoded` (called once, on first use)."""

    @functools.cached_property
    def encoded(self) -> torch.Tensor:
        """The rows encoded through :attr:`encoder`, made on first use: a family that
        encodes its columns its own way (latent diffusion) never holds them, which keeps
        a stock SuperNode's per-message party process smaller."""
        return self.encode()

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.frame.shape[0])

    @property
    def id_digest(self) -> str:
        """SHA-256 of the row IDs in order (proves alignment without revealing IDs)."""
        return id_digest(self.ids)


def load_full_table(spec: DataSpec) -> tuple[Dataset, pd.Series]:
    """The whole table of a spec with its row IDs (0..n-1 for registered datasets), or
    its sample of ``spec.rows`` rows (:func:`sample_rows`)."""
    dataset, ids = _load_table(spec)
    return (dataset, ids) if spec.rows is None else sample_rows(dataset, ids, spec.rows)


def sample_rows(dataset: Dataset, ids: pd.Series, rows: int) -> tuple[Dataset, pd.Series]:
    """``rows`` rows drawn uniformly without replacement with :data:`ROWS_SEED`, kept in
    table order, with their IDs; more rows than the table has is an error that says how
    many it has."""
    n = len(dataset.frame)
    if rows > n:
        raise ValueError(
            f"dataset.rows={rows} but the {dataset.name} table has {n} rows: set "
            f"dataset.rows to at most {n}, or null for every row"
        )
    keep = drawn_positions(n, rows, ROWS_SEED)
    frame = dataset.frame.iloc[keep].reset_index(drop=True)
    return Dataset(dataset.name, frame, dataset.schema), ids.iloc[keep].reset_index(drop=True)


def _load_table(spec: DataSpec) -> tuple[Dataset, pd.Series]:
    if spec.is_registered:
        dataset = load_dataset(spec.source, data_dir=spec.data_dir, file=spec.file)
        dataset = drop_columns(dataset, spec.drop)
        ids = pd.Series(range(len(dataset.frame)), name="row_id")
        return dataset, ids
    path = Path(spec.source)
    if not path.suffix:
        raise ValueError(
            f"dataset {spec.source!r} is neither a registered dataset {list_datasets()} "
            "nor a file path with an extension"
        )
    dataset, ids = load_table(
        path,
        schema=spec.declared or None,
        label=spec.label,
        id_column=spec.id_column,
        drop=spec.drop,
    )
    if ids is None:
        ids = pd.Series(range(len(dataset.frame)), name="row_id")
    return dataset, ids


def split_columns(spec: DataSpec, schema: Schema) -> list[list[str]]:
    """Each party's columns under the spec's partition.

    ``importance`` ranks the features of the spec's whole table (its label must be
    known: a registered dataset's, or ``label`` for a file) with
    :func:`~flwr_vflgan.data.importance.feature_importance`, seeded by
    ``partition_seed`` (0 when None); it is the same on every call and in every process
    with the same libraries (one BLAS thread), and is computed once per process. One
    party holds every column (a family run centralized: ``latent_diffusion``'s reference).
    """
    if spec.n_parties == 1:
        return [list(schema.names)]
    if spec.partition == "importance":
        parts = [list(part) for part in _importance_parts(spec.to_json())]
        if sorted(name for part in parts for name in part) != sorted(schema.names):
            raise ValueError(
                f"the importance split of {spec.source!r} covers columns "
                f"{sorted(name for part in parts for name in part)}, but the schema has "
                f"{sorted(schema.names)}"
            )
        return parts
    return partition_columns(
        schema.names,
        spec.n_parties,
        strategy=spec.partition,
        explicit=[list(c) for c in spec.columns] if spec.columns is not None else None,
        seed=spec.partition_seed,
    )


@functools.lru_cache(maxsize=8)
def _importance_parts(spec_json: str) -> tuple[tuple[str, ...], ...]:
    """The importance split of a spec (keyed on its JSON: every party calls this)."""
    spec = DataSpec.from_json(spec_json)
    dataset, _ = load_full_table(spec)
    label = dataset.schema.label
    if label is None:
        raise ValueError(
            f"partition='importance' ranks features by how well they predict the label, but "
            f"{spec.source!r} has none: name it with dataset.label=COLUMN (DataSpec.label)"
        )
    seed = spec.partition_seed if spec.partition_seed is not None else 0
    importance = feature_importance(dataset.frame, dataset.schema, label, seed=seed)
    assert spec.importance_split is not None  # DataSpec checks it for partition='importance'
    parts = split_by_importance(importance, label, spec.importance_split, dataset.schema.names)
    logger.info(
        "importance split %s of %r (seed %d): party 0 %s, party 1 %s",
        spec.importance_split,
        spec.source,
        seed,
        parts[0],
        parts[1],
    )
    return tuple(tuple(part) for part in parts)


def encode_block(
    frame: pd.DataFrame,
    schema: Schema,
    ids: pd.Series,
    numeric_scaling: str,
    domain: PublicDomain | None = None,
) -> PartyData:
    """The party's encoder, fitted on its own rows or, with ``domain``, built from public
    metadata only; and its rows encoded."""
    encoder: PartyEncoder
    if numeric_scaling == "mode":
        if domain is not None:
            raise ValueError(
                "numeric_scaling='mode' fits mixtures to the party's rows; it cannot be "
                "built from a public domain: use numeric_scaling='standard'"
            )
        encoder = ModeSpecificEncoder(seed=0).fit(frame, schema)
    else:
        encoder = TabularEncoder(numeric_scaling=numeric_scaling)  # type: ignore[arg-type]
        if domain is None:
            encoder.fit(frame, schema)
        else:
            encoder.fit_domain(frame, schema, domain)
    return PartyData(
        frame=frame,
        schema=encoder.schema,
        ids=ids.reset_index(drop=True),
        encoder=encoder,
        encode=lambda: torch.from_numpy(encoder.transform(frame)).float(),
    )


def party_block(spec: DataSpec, partition_id: int) -> PartyData:
    """Party ``partition_id``'s block of the spec's table (simulation)."""
    if not 0 <= partition_id < spec.n_parties:
        raise ValueError(
            f"partition-id {partition_id} is out of range for {spec.n_parties} parties"
        )
    if is_series_spec(spec):
        return series_block(spec, partition_id)
    dataset, ids = load_full_table(spec)
    columns = split_columns(spec, dataset.schema)[partition_id]
    schema = dataset.schema.subset(columns)
    frame = dataset.frame[columns].reset_index(drop=True)
    return encode_block(frame, schema, ids, spec.numeric_scaling, spec.public_domain)


def is_series_spec(spec: DataSpec) -> bool:
    """Whether ``spec`` names series (a built-in series dataset, or a file with
    ``time_column``) rather than a table."""
    return is_series_source(spec.source) or spec.time_column is not None


def series_table(spec: DataSpec) -> SeriesTable:
    """The series of a spec, split by channel across its parties."""
    if is_series_source(spec.source):
        return load_series(spec.source, spec.n_parties)
    if spec.partition not in ("even", "explicit"):
        raise ValueError(
            f"partition={spec.partition} splits a table's columns; series split their "
            "channels evenly (partition=even) or by name (partition=explicit)"
        )
    assert spec.time_column is not None  # is_series_spec
    return series_file_table(
        spec.source,
        spec.n_parties,
        id_column=spec.id_column or "series",
        time_column=spec.time_column,
        drop=spec.drop,
        columns=spec.columns if spec.partition == "explicit" else None,
    )


def series_block(spec: DataSpec, partition_id: int) -> PartyData:
    """Party ``partition_id``'s channels of the spec's series (VFLGAN-TS): its block is
    its channels end to end (:class:`~flwr_vflgan.data.series.SeriesEncoder`), each
    channel of a user's file or of a real built-in min-max scaled by the party, or by
    the public bounds of ``dataset.domain`` when given."""
    table = series_table(spec)
    return _series_party(table, partition_id, is_scaled_series(spec.source), spec.public_domain)


def series_blocks(spec: DataSpec) -> list[PartyData]:
    """Every party's block of the spec's series, encoded as each party would."""
    table = series_table(spec)
    scaled, domain = is_scaled_series(spec.source), spec.public_domain
    return [_series_party(table, i, scaled, domain) for i in range(len(table.parties))]


SERIES_ID_COLUMN = "series"
"""The series ID column of a party's series file (and of ``synthetic.csv``)."""
SERIES_TIME_COLUMN = "t"
"""The time column of a party's long-format series file (and of ``synthetic.csv``)."""


def party_file_ids(path: str | Path, series: bool = False) -> list[Any]:
    """The IDs of a party's own file, in file order: its ``row_id`` column, or for a
    series file (``series``) its ``series`` column (``.ts`` files: ``0 .. n-1``)."""
    if series:
        _, _, ids = _read_party_series(path)
        return list(ids.tolist())
    _, frame_ids = load_party_file(path)
    return list(frame_ids.tolist())


def _read_party_series(path: str | Path) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """:func:`read_series_file` of a party's series file, refused in one line that names
    the layouts a series party reads."""
    try:
        return read_series_file(path, id_column=SERIES_ID_COLUMN, time_column=SERIES_TIME_COLUMN)
    except ValueError as exc:
        raise ValueError(
            f"party file {path} is not a series file this run can read ({exc}); VFLGAN-TS "
            "parties read wide files (series, <channel>@<step> columns: python -m "
            "simulations.export_parties algorithm=vflgan_ts writes them), long files "
            "(series, t, one column per channel) or .ts files"
        ) from exc


def series_party_file(path: str | Path, rows: Sequence[int] | None = None) -> PartyData:
    """A party's own series file (deployment of VFLGAN-TS): wide (``series``, then
    ``<channel>@<step>`` columns, as ``export_parties`` writes), long (``series``, ``t``,
    one column per channel) or ``.ts``. Scaled by the public bounds of its domain
    sidecar (:func:`domain_sidecar`) when present, else min-max fitted on its rows.

    ``rows``: only these series, in this order (after an alignment by ID); a fitted
    scaling is fitted on them alone."""
    values, channels, ids = _read_party_series(path)
    if rows is not None:
        index = np.asarray(rows, dtype=np.int64)
        values, ids = np.ascontiguousarray(values[index]), ids[index]
    sidecar = domain_sidecar(path)
    domain = PublicDomain.load(sidecar) if sidecar.is_file() else None
    table = SeriesTable(values, channels, (tuple(range(len(channels))),))
    return _series_party(table, 0, True, domain, ids)


def _series_party(
    table: SeriesTable,
    partition_id: int,
    scaled: bool,
    domain: PublicDomain | None = None,
    ids: np.ndarray | None = None,
) -> PartyData:
    held = list(table.parties[partition_id])
    channels = tuple(table.channels[c] for c in held)
    values = table.values[:, held, :]
    if domain is not None:
        encoder = SeriesEncoder.from_domain(channels, table.length, domain)
    elif scaled:
        encoder = SeriesEncoder.fitted(channels, values)
    else:
        encoder = SeriesEncoder(channels, table.length)
    return PartyData(
        frame=pd.DataFrame(values.reshape(table.n_series, -1)),
        schema=Schema(tuple(ColumnSpec(name, ColumnKind.CONTINUOUS) for name in channels)),
        ids=pd.Series(range(table.n_series) if ids is None else ids, name="row_id"),
        encoder=encoder,
        encode=lambda: torch.from_numpy(encoder.encode(values)),
    )


def party_file(
    path: str | Path, numeric_scaling: str = "standard", rows: Sequence[int] | None = None
) -> PartyData:
    """A party's own file (deployment), with its schema sidecar if present, and its
    encoder built from the public domain sidecar (:func:`domain_sidecar`) if present
    (``mode`` fits its mixtures on the rows and leaves the sidecar unread).

    ``rows``: only these rows, in this order (the people every party holds, after an
    alignment by ID). The encoder is fitted on them alone: a person outside the run
    shapes nothing it publishes (no category, no bound of a number)."""
    dataset, ids = load_party_file(path)
    frame = dataset.frame.reset_index(drop=True)
    if rows is not None:
        index = np.asarray(rows, dtype=np.int64)
        frame = frame.iloc[index].reset_index(drop=True)
        ids = ids.iloc[index].reset_index(drop=True)
    sidecar = domain_sidecar(path)
    domain = (
        PublicDomain.load(sidecar)
        if sidecar.is_file() and numeric_scaling not in FITTED_ONLY
        else None
    )
    return encode_block(frame, dataset.schema, ids, numeric_scaling, domain)


def all_blocks(spec: DataSpec, table: tuple[Dataset, pd.Series] | None = None) -> list[PartyData]:
    """Every party's block, encoded as each party would (for evaluation and the plain loop).

    ``table`` is the spec's :func:`load_full_table` when the caller has loaded it already.
    """
    dataset, ids = table if table is not None else load_full_table(spec)
    blocks = []
    for columns in split_columns(spec, dataset.schema):
        schema = dataset.schema.subset(columns)
        frame = dataset.frame[columns].reset_index(drop=True)
        blocks.append(encode_block(frame, schema, ids, spec.numeric_scaling, spec.public_domain))
    return blocks


def spec_from_mapping(values: Mapping[str, Any]) -> DataSpec:
    """Build a DataSpec from a plain mapping, listing valid keys on error."""
    valid = set(DataSpec.__dataclass_fields__)
    unknown = sorted(set(values) - valid)
    if unknown:
        raise ValueError(f"unknown dataset keys {unknown}; valid: {sorted(valid)}")
    values = dict(values)
    if values.get("columns") is not None:
        values["columns"] = tuple(tuple(c) for c in values["columns"])
    return DataSpec(**values)


def concat_encoded(blocks: Sequence[PartyData]) -> torch.Tensor:
    """The joint encoded table (what an evaluator with all columns would compute)."""
    return torch.cat([b.encoded for b in blocks], dim=1)
