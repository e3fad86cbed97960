"""Who holds what in split classification.

The label column belongs to the label party alone; the feature columns (every column
but the label and the row ID) are split among the ``P`` non-label parties: all of them
for one party, contiguous even blocks for several (the paper's 1:1:1 assignment,
Appendix C.2), or ``partition=explicit|random`` as for the GANs. Each party standardises
its numeric columns and one-hot encodes its categories with its own encoder
(Appendix E.1: missing values become 0 after reading; the features are normalised).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from flwr_vflgan.data.partition import partition_columns
from flwr_vflgan.runtime.party_data import DataSpec, PartyData, encode_block, load_full_table


def label_name(spec: DataSpec, schema_label: str | None) -> str:
    """The label column: the spec's, else the dataset's own."""
    label = spec.label or schema_label
    if label is None:
        raise ValueError(
            f"split classification needs a label column, but {spec.source!r} has none: "
            "name it with dataset.label=COLUMN"
        )
    return label


def feature_columns(spec: DataSpec) -> list[list[str]]:
    """Each non-label party's feature columns under the spec's partition."""
    dataset, _ = load_full_table(spec)
    label = label_name(spec, dataset.schema.label)
    names = [c for c in dataset.schema.names if c != label]
    if label not in dataset.schema.names:
        raise ValueError(
            f"label column {label!r} is not in {spec.source!r}; columns: {dataset.schema.names}"
        )
    if spec.partition == "importance":
        raise ValueError(
            "partition=importance is a VT-GAN split; GAFM takes even, explicit or random"
        )
    if spec.n_parties == 1:
        if spec.columns is not None and sorted(spec.columns[0]) != sorted(names):
            raise ValueError(
                f"one non-label party must hold every feature column {names}, got {list(spec.columns[0])}"
            )
        return [names]
    return partition_columns(
        names,
        spec.n_parties,
        strategy=spec.partition,
        explicit=[list(c) for c in spec.columns] if spec.columns is not None else None,
        seed=spec.partition_seed,
    )


def party_features(spec: DataSpec, partition_id: int) -> PartyData:
    """Non-label party ``partition_id``'s encoded feature block (simulation)."""
    if not 0 <= partition_id < spec.n_parties:
        raise ValueError(
            f"partition-id {partition_id} is out of range for {spec.n_parties} parties"
        )
    dataset, ids = load_full_table(spec)
    columns = feature_columns(spec)[partition_id]
    frame = dataset.frame[columns].reset_index(drop=True)
    return encode_block(frame, dataset.schema.subset(columns), ids, spec.numeric_scaling)


def block_fields(block: PartyData) -> list[int]:
    """The width of each column's block in ``block``'s encoded rows (its encoder's spans):
    the fields ``gafm.local_model=wide_deep`` embeds one by one."""
    return [span.width for span in block.encoder.spans]


def all_features(spec: DataSpec) -> list[PartyData]:
    """Every non-label party's block, encoded as each would (plain runs and tests)."""
    return [party_features(spec, p) for p in range(spec.n_parties)]


def spec_labels(spec: DataSpec) -> tuple[pd.Series, pd.Series, str]:
    """The label party's view of a spec: the label column, the row IDs and the label's name."""
    dataset, ids = load_full_table(spec)
    label = label_name(spec, dataset.schema.label)
    if label not in dataset.frame.columns:
        raise ValueError(f"label column {label!r} is not in {spec.source!r}")
    return dataset.frame[label].reset_index(drop=True), ids.reset_index(drop=True), label


def labels_file(path: str | Path) -> tuple[pd.Series, pd.Series, str]:
    """A deployment's label file: a CSV whose first column is the row ID and whose second
    is the label (its header names the label). Returns labels, IDs and the label's name."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"label file {path} does not exist (gafm.labels_path)")
    frame = pd.read_csv(path)
    if frame.shape[1] != 2:
        raise ValueError(
            f"label file {path} must have exactly two columns (row ID, label), got {list(frame.columns)}"
        )
    ids, labels = frame.iloc[:, 0], frame.iloc[:, 1]
    if ids.isna().any() or labels.isna().any():
        raise ValueError(f"label file {path} has missing IDs or labels")
    if ids.duplicated().any():
        raise ValueError(
            f"label file {path} repeats row IDs, e.g. {ids[ids.duplicated()].iloc[0]!r}"
        )
    return labels.reset_index(drop=True), ids.reset_index(drop=True), str(frame.columns[1])
