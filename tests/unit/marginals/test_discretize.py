"""Tests for the public-metadata discretisation of AIM and MST."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flwr_vflgan.data.domain import PublicDomain, bundled_domain
from flwr_vflgan.data.registry import load_dataset
from flwr_vflgan.data.schema import Schema, infer_schema
from flwr_vflgan.marginals.discretize import Discretizer

DOMAIN = PublicDomain.from_mapping(
    {
        "age": {"kind": "integer", "min": 17, "max": 90},
        "children": {"kind": "integer", "min": 0, "max": 9, "missing": True},
        "income": {"kind": "continuous", "min": 0.0, "max": 1000.0},
        "city": {"kind": "categorical", "categories": ["a", "b", "c"], "missing": True},
    }
)
FRAME = pd.DataFrame(
    {
        "age": [17, 40, 90, 55],
        "children": [0.0, 3.0, np.nan, 9.0],
        "income": [0.0, 999.9, 500.0, 1000.0],
        "city": ["a", None, "c", "b"],
    }
)


def _discretizer(bins: int = 8) -> Discretizer:
    return Discretizer.from_domain(DOMAIN, infer_schema(FRAME), bins)


def test_sizes_come_from_the_domain_alone() -> None:
    # age has 74 integers: 8 bins; children has 10 integers: binned too at 8 bins, plus
    # the missing code; city: 3 categories and the missing code.
    assert _discretizer(8).sizes == {"age": 8, "children": 9, "income": 8, "city": 4}
    # With 16 bins children keeps one code per integer.
    assert _discretizer(16).sizes == {"age": 16, "children": 11, "income": 16, "city": 4}


def test_exact_integers_and_categories_round_trip() -> None:
    disc = _discretizer(16)
    codes = disc.encode(FRAME)
    assert codes["children"].tolist() == [0, 3, 10, 9]
    assert codes["city"].tolist() == [0, 3, 2, 1]
    back = disc.decode(codes, np.random.default_rng(0))
    assert back["children"].tolist()[:2] == [0.0, 3.0] and np.isnan(back["children"][2])
    assert back["city"][[0, 2, 3]].tolist() == ["a", "c", "b"] and pd.isna(back["city"][1])


def test_binned_values_decode_inside_their_bin() -> None:
    disc = _discretizer(8)
    codes = disc.encode(FRAME)
    assert codes["income"].tolist() == [0, 7, 4, 7]  # the upper bound joins the last bin
    back = disc.decode(codes, np.random.default_rng(1), dtypes=FRAME.dtypes.to_dict())
    again = disc.encode(back)
    for name in ("age", "income"):
        assert again[name].tolist() == codes[name].tolist()
    assert back["age"].dtype.kind == "i" and back["age"].between(17, 90).all()


@settings(max_examples=60, deadline=None)
@given(
    low=st.integers(-50, 50),
    width=st.integers(1, 300),
    bins=st.integers(2, 40),
    seed=st.integers(0, 2**16),
)
def test_every_code_of_an_integer_column_decodes_to_an_integer_of_that_code(
    low: int, width: int, bins: int, seed: int
) -> None:
    domain = PublicDomain.from_mapping({"x": {"kind": "integer", "min": low, "max": low + width}})
    schema = Schema.from_dict({"columns": [{"name": "x", "kind": "integer"}]})
    disc = Discretizer.from_domain(domain, schema, bins)
    size = disc.sizes["x"]
    codes = {"x": np.repeat(np.arange(size), 20)}
    values = disc.decode(codes, np.random.default_rng(seed))["x"].to_numpy()
    assert np.all(values == np.round(values))
    assert values.min() >= low and values.max() <= low + width
    assert disc.encode(pd.DataFrame({"x": values}))["x"].tolist() == codes["x"].tolist()


def test_values_outside_the_bounds_are_clipped_to_the_extreme_codes() -> None:
    disc = _discretizer(8)
    codes = disc.encode(FRAME.assign(age=[5, 200, 40, 40], income=[-3.0, 5e6, 1.0, 1.0]))
    assert codes["age"].tolist()[:2] == [0, 7]
    assert codes["income"].tolist()[:2] == [0, 7]


def test_what_the_domain_does_not_allow_is_named() -> None:
    disc = _discretizer(8)
    with pytest.raises(
        ValueError, match=r"column 'city' holds values its domain does not list: \['z'\]"
    ):
        disc.encode(FRAME.assign(city=["a", "z", "b", "c"]))
    with pytest.raises(ValueError, match="column 'age' has 1 missing values"):
        disc.encode(FRAME.assign(age=[17.0, np.nan, 30.0, 40.0]))
    with pytest.raises(ValueError, match=r"no entry for columns \['extra'\]"):
        Discretizer.from_domain(DOMAIN, infer_schema(FRAME.assign(extra=1.5)), 8)
    with pytest.raises(ValueError, match="at least 2 bins"):
        Discretizer.from_domain(DOMAIN, infer_schema(FRAME), 1)


def test_adult_codes_from_its_bundled_domain() -> None:
    adult = load_dataset("adult")
    domain = bundled_domain("adult")
    assert domain is not None
    disc = Discretizer.from_domain(domain, adult.schema, 32)
    codes = disc.encode(adult.frame)
    assert disc.sizes["education-num"] == 16  # exact: 1..16
    assert disc.sizes["workclass"] == 9  # 8 categories and missing
    for name, size in disc.sizes.items():
        assert codes[name].min() >= 0 and codes[name].max() < size
