"""Tests for the importance partition of flwr_vflgan.runtime.party_data.DataSpec."""

from __future__ import annotations

import pytest

from flwr_vflgan.runtime.party_data import DataSpec, party_block


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
