"""Encoders built from public metadata (dataset.domain) read nothing but dtypes from the rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data import load_dataset
from flwr_vflgan.data.domain import PublicDomain, bundled_domain, resolve_domain
from flwr_vflgan.data.encoder import TabularEncoder
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

DOMAIN = {
    "age": {"kind": "integer", "min": 0, "max": 100},
    "city": {"kind": "categorical", "categories": ["b", "a", "c"], "missing": True},
}
SCHEMA = Schema((ColumnSpec("age", "continuous"), ColumnSpec("city", "categorical")))


def _frame(ages: list[float], cities: list[object]) -> pd.DataFrame:
    return pd.DataFrame({"age": ages, "city": cities})


def test_the_encoding_comes_from_the_domain_not_the_rows() -> None:
    domain = PublicDomain.from_mapping(DOMAIN)
    small = TabularEncoder().fit_domain(_frame([20, 30], ["a", "a"]), SCHEMA, domain)
    other = TabularEncoder().fit_domain(_frame([70, 90, 95], ["c", None, "b"]), SCHEMA, domain)
    assert (
        small.public
        and other.public
        and not TabularEncoder().fit(_frame([1], ["a"]), SCHEMA).public
    )
    # Same domain, different rows: the same encoding.
    assert small.state_dict() == other.state_dict()
    assert small.schema.kind_of("age") is ColumnKind.INTEGER  # the domain's kind wins
    # Categories in the domain's order with the declared missing slot, unseen ones included.
    encoded = small.transform(_frame([50, 50, 50], ["b", "c", None]))
    np.testing.assert_array_equal(encoded[:, 1:], np.eye(4)[[0, 2, 3]])
    # Bounds scale to [-1, 1]; a value outside is clipped, not an error.
    np.testing.assert_allclose(
        small.transform(_frame([0, 50, 100, 250], ["a"] * 4))[:, 0], [-1, 0, 1, 1]
    )


def test_decoding_stays_within_the_public_bounds_and_round_trips_the_state() -> None:
    domain = PublicDomain.from_mapping(DOMAIN)
    encoder = TabularEncoder().fit_domain(_frame([20, 30], ["a", "b"]), SCHEMA, domain)
    decoded = encoder.inverse_transform(np.array([[5.0, 0, 1, 0, 0], [-5.0, 0, 0, 0, 1]]))
    assert decoded["age"].tolist() == [100, 0]
    assert decoded["city"].iloc[0] == "a" and pd.isna(decoded["city"].iloc[1])
    restored = TabularEncoder.from_state_dict(encoder.state_dict())
    assert restored.public
    np.testing.assert_array_equal(
        restored.transform(_frame([250], ["c"])), encoder.transform(_frame([250], ["c"]))
    )


def test_a_value_outside_the_domain_or_a_column_without_one_is_named() -> None:
    domain = PublicDomain.from_mapping(DOMAIN)
    encoder = TabularEncoder().fit_domain(_frame([20], ["a"]), SCHEMA, domain)
    with pytest.raises(ValueError, match=r"'city' has 1 values not seen at fit time, e.g. \['z'\]"):
        encoder.transform(_frame([20], ["z"]))
    wider = Schema((*SCHEMA.columns, ColumnSpec("zip", "categorical")))
    with pytest.raises(ValueError, match=r"dataset.domain has no entry for columns \['zip'\]"):
        TabularEncoder().fit_domain(_frame([1], ["a"]).assign(zip=["1"]), wider, domain)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"kind": "integer", "min": 5, "max": 5}, r"column 'x' needs min < max, got \[5, 5\]"),
        ({"kind": "integer", "max": 5}, r"numeric column 'x' needs 'min' and 'max'"),
        ({"kind": "categorical", "categories": []}, r"needs a non-empty list 'categories'"),
        ({"kind": "categorical", "categories": ["a", "a"]}, "lists a category twice"),
        ({"kind": "continuous", "min": 0, "max": 1, "mean": 0}, r"unknown keys \['mean'\]"),
        ({"min": 0, "max": 1}, "must be a mapping with a 'kind'"),
        ({"kind": "integer", "min": "0", "max": 1}, "min must be a finite number, got '0'"),
    ],
)
def test_malformed_entries_name_the_column_and_the_rule(entry: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PublicDomain.from_mapping({"x": entry})


def test_files_names_and_the_bundled_adult_domain(tmp_path: Path) -> None:
    path = tmp_path / "domain.json"
    path.write_text(json.dumps(DOMAIN), encoding="utf-8")
    yaml_path = tmp_path / "domain.yaml"
    yaml_path.write_text("age: {kind: integer, min: 0, max: 100}\n", encoding="utf-8")
    assert resolve_domain(str(path)) == PublicDomain.from_mapping(DOMAIN)
    assert resolve_domain(str(yaml_path)).columns["age"].maximum == 100.0  # type: ignore[union-attr]
    assert resolve_domain(None) is None and bundled_domain("spambase") is None
    with pytest.raises(ValueError, match="neither a bundled domain"):
        resolve_domain("spambase")
    with pytest.raises(ValueError, match="does not exist"):
        resolve_domain(str(tmp_path / "missing.json"))
    # Adult's codebook lists every category the table holds.
    adult, domain = load_dataset("adult"), bundled_domain("adult")
    assert domain is not None and set(domain.columns) == set(adult.schema.names)
    encoder = TabularEncoder().fit_domain(adult.frame, adult.schema, domain)
    assert encoder.transform(adult.frame).shape[0] == len(adult.frame)


def test_german_credits_codebook_domain_covers_its_table() -> None:
    german, domain = load_dataset("german_credit"), bundled_domain("german_credit")
    assert domain is not None and list(domain.columns) == german.schema.names
    assert domain.schema_for(german.schema) == german.schema  # the same kinds
    for name, column in domain.columns.items():
        values = german.frame[name]
        if column.kind is ColumnKind.CATEGORICAL:
            assert set(values.unique()) <= set(column.categories), name
        else:
            assert column.minimum <= values.min() and values.max() <= column.maximum, name
    # The codebook lists codes this sample never uses (purpose A47, status A95).
    assert "A47" in domain.columns["purpose"].categories
    assert "A95" in domain.columns["personal_status_sex"].categories


def test_quantile_scaling_is_never_built_from_a_public_domain() -> None:
    domain = PublicDomain.from_mapping(DOMAIN)
    with pytest.raises(ValueError, match=r"'quantile' keeps quantiles of the party's rows"):
        TabularEncoder("quantile").fit_domain(_frame([20, 30], ["a", "b"]), SCHEMA, domain)
