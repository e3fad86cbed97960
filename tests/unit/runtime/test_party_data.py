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
