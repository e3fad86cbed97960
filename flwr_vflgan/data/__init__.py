"""Tabular data for vertical federated learning.

Datasets and their schemas (:mod:`~flwr_vflgan.data.schema`,
:mod:`~flwr_vflgan.data.registry`), the vertical split into per-party column blocks
(:mod:`~flwr_vflgan.data.partition`), VFLGAN's per-party encoding
(:mod:`~flwr_vflgan.data.encoder`), per-party files for deployments
(:mod:`~flwr_vflgan.data.files`) and the row-alignment check between parties
(:mod:`~flwr_vflgan.data.alignment`).
"""

from flwr_vflgan.data._papers import drawn_positions
from flwr_vflgan.data.alignment import AlignmentError, check_aligned, id_digest
from flwr_vflgan.data.encoder import ActivationKind, NumericScaling, Span, TabularEncoder
from flwr_vflgan.data.files import load_party_file, write_party_files
from flwr_vflgan.data.partition import PartitionStrategy, partition_columns, split_frame
from flwr_vflgan.data.registry import (
    DATA_DIR_ENV,
    Dataset,
    DatasetUnavailableError,
    drop_columns,
    list_datasets,
    load_dataset,
    load_table,
)
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema, infer_schema

__all__ = [
    "DATA_DIR_ENV",
    "ActivationKind",
    "AlignmentError",
    "ColumnKind",
    "ColumnSpec",
    "Dataset",
    "DatasetUnavailableError",
    "NumericScaling",
    "PartitionStrategy",
    "Schema",
    "Span",
    "TabularEncoder",
    "check_aligned",
    "drawn_positions",
    "drop_columns",
    "id_digest",
    "infer_schema",
    "list_datasets",
    "load_dataset",
    "load_party_file",
    "load_table",
    "partition_columns",
    "split_frame",
    "write_party_files",
]
