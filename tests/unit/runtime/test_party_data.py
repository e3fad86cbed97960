"""Tests for flwr_vflgan.runtime.party_data.DataSpec: the importance partition, the
numeric scalings."""

from __future__ import annotations

import pytest

from flwr_vflgan.data.domain import resolve_domain
from flwr_vflgan.runtime.party_data import DataSpec, party_block

ADULT_DOMAIN = resolve_domain("adult").to_mapping()  # type: ignore[union-attr]


def test_importance_split_is_checked_and_survives_json() -> None:
    spec = DataSpec(partition="importance", importance_split=9010)  # type: ignore[arg-type]
    assert spec.importance_split == "9010"
    assert DataSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"partition": "importance"},
            r"partition='importance' needs importance_split: one of \['1090', '5050', '9010'\]",
        ),
        (
            {"partition": "importance", "importance_split": "1000"},
            r"unknown importance split importance_split='1000'; valid: \['1090', '5050', '9010'\]",
        ),
        (
            {"partition": "importance", "importance_split": "5050", "n_parties": 3},
            r"splits the columns between two parties \(paper 001 Section 4\.3\.2\), "
            r"got n_parties=3",
        ),
        (
            {"partition": "even", "importance_split": "5050"},
            "importance_split is only used with partition='importance', got partition='even'",
        ),
        (
            {"partition": "by_name"},
            r"unknown partition 'by_name'; valid: \['even', 'explicit', 'random', 'importance'\]",
        ),
        (
            {"numeric_scaling": "rank"},
            r"unknown numeric_scaling 'rank'; valid: \['standard', 'minmax', 'mode', 'quantile'\]",
        ),
        (
            {"numeric_scaling": "quantile", "domain": ADULT_DOMAIN},
            r"numeric_scaling='quantile' fits each party's numeric columns to its rows, so it "
            r"cannot be built from public metadata",
        ),
        (
            {"numeric_scaling": "mode", "domain": ADULT_DOMAIN},
            r"numeric_scaling='mode' fits each party's numeric columns .* cannot be built from public "
            r"metadata \(dataset\.domain, which dp=end_to_end needs\): use "
            r"dataset\.numeric_scaling=standard",
        ),
    ],
)
def test_rejects(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DataSpec(**arguments)  # type: ignore[arg-type]


def test_a_spec_carries_its_dropped_columns_to_the_parties() -> None:
    spec = DataSpec(source="adult", n_parties=2, drop=["fnlwgt"])
    assert spec.drop == ("fnlwgt",)
    assert DataSpec.from_json(spec.to_json()) == spec
    blocks = [party_block(spec, i) for i in range(2)]
    assert all("fnlwgt" not in b.schema.names for b in blocks)
    assert sum(len(b.schema.names) for b in blocks) == 14  # Adult's 15 columns, one dropped
    with pytest.raises(ValueError, match="drop must be a list of column names"):
        DataSpec(drop="fnlwgt")  # type: ignore[arg-type]


def test_a_named_datasets_file_is_read_by_its_loader_and_travels_in_json(tmp_path) -> None:
    from flwr_vflgan.runtime.party_data import load_full_table

    path = tmp_path / "winequality-red.csv"
    header = ";".join(
        f'"{c}"' for c in ("fixed acidity", "volatile acidity", "citric acid", "residual sugar",
                           "chlorides", "free sulfur dioxide", "total sulfur dioxide", "density",
                           "pH", "sulphates", "alcohol", "quality")
    )  # fmt: skip
    path.write_text(header + "\n" + ";".join(["1.5"] * 11) + ";5\n" + ";".join(["2"] * 11) + ";6\n")
    spec = DataSpec(source="wine_red", file=str(path))
    assert DataSpec.from_json(spec.to_json()) == spec
    dataset, ids = load_full_table(spec)
    assert dataset.name == "wine_red" and dataset.frame["quality"].tolist() == [5, 6]
    assert ids.tolist() == [0, 1]


def test_an_unset_file_leaves_the_json_as_before() -> None:
    """Specs saved before ``file`` existed (run directories, checkpoints) read the same."""
    assert '"file"' not in DataSpec().to_json()


def test_a_file_needs_a_named_dataset() -> None:
    with pytest.raises(ValueError, match=r"dataset.file='x.csv' is the file of a named dataset"):
        DataSpec(source="table.csv", file="x.csv")
