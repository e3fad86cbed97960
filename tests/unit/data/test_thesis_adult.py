"""Paper 004's discretised Adult (thesis Table 5.1: 14 attributes, 135 one-hot columns)
and ``dataset.rows``, the sample that runs the thesis's tables at a smaller scale."""

from __future__ import annotations

import itertools
import json
from importlib import resources

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data import ColumnKind, Schema, load_dataset
from flwr_vflgan.data import _papers as papers
from flwr_vflgan.data._builtin import ADULT
from flwr_vflgan.data.domain import bundled_domain, resolve_domain
from flwr_vflgan.data.registry import Dataset
from flwr_vflgan.runtime.party_data import DataSpec, load_full_table, sample_rows


@pytest.fixture(scope="module")
def thesis() -> Dataset:
    return load_dataset("adult_thesis")


def test_integer_bins_cover_the_bounds_in_equal_widths_without_gaps() -> None:
    assert papers.integer_bins(16, 90, 7) == [
        (16, 26), (27, 37), (38, 48), (49, 58), (59, 69), (70, 80), (81, 90),
    ]  # fmt: skip
    for low, high, bins in ((0, 99_999, 7), (1, 99, 7), (0, 6, 7), (0, 13, 7)):
        ranges = papers.integer_bins(low, high, bins)
        assert ranges[0][0] == low and ranges[-1][1] == high and len(ranges) == bins
        assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
        widths = [last - first + 1 for first, last in ranges]
        assert max(widths) - min(widths) <= 1


def test_binned_labels_each_number_by_its_bin() -> None:
    values = pd.Series([16, 26, 27, 58, 59, 90])
    assert papers.binned(values, 16, 90, 7).tolist() == [
        "16-26", "16-26", "27-37", "49-58", "59-69", "81-90",
    ]  # fmt: skip


def test_the_thesis_adult_has_table_5_1s_shape(thesis: Dataset) -> None:
    frame = thesis.frame
    assert frame.shape == (papers.THESIS_ROWS, 14)  # 10^5 training + 10^3 test rows
    assert "education-num" not in frame.columns and thesis.schema.label == "income"
    assert all(c.kind is ColumnKind.CATEGORICAL for c in thesis.schema.columns)
    assert not frame.isna().any().any()  # the rows with a missing value are gone
    # 135 one-hot columns counted as the thesis counts them: each categorical
    # attribute's values in the complete rows, and 7 bins for each of the five numbers.
    complete = load_dataset("adult").frame.dropna()
    categorical = [c for c in frame.columns if c not in papers.ADULT_THESIS_BOUNDS]
    width = sum(complete[c].nunique() for c in categorical)
    assert width + papers.ADULT_THESIS_BINS * len(papers.ADULT_THESIS_BOUNDS) == 135
    # Up-sampled with replacement from the 45,222 complete rows.
    assert len(complete) == 45_222 and frame.duplicated().any()
    age = frame["age"].value_counts()
    assert set(age.index) == {f"{a}-{b}" for a, b in papers.integer_bins(16, 90, 7)}


def test_the_thesis_adult_is_the_same_table_every_time(thesis: Dataset) -> None:
    pd.testing.assert_frame_equal(load_dataset("adult_thesis").frame, thesis.frame)


def test_its_bundled_domain_is_adults_codebook_and_the_bin_labels() -> None:
    """Rebuilt from adult.domain.json and integer_bins, never from the rows."""
    adult = json.loads(
        resources.files("flwr_vflgan.data").joinpath("bundled", "adult.domain.json").read_text()
    )
    expected = {}
    for column in papers.ADULT_THESIS_COLUMNS:
        if column in papers.ADULT_THESIS_BOUNDS:
            low, high = papers.ADULT_THESIS_BOUNDS[column]
            assert (adult[column]["min"], adult[column]["max"]) == (low, high)
            categories = [f"{a}-{b}" for a, b in papers.integer_bins(low, high, 7)]
        else:
            categories = adult[column]["categories"]
        expected[column] = {"kind": "categorical", "categories": categories, "missing": False}
    domain = bundled_domain("adult_thesis")
    assert domain is not None and domain == resolve_domain(expected)
    assert resolve_domain("adult_thesis") == domain


def test_every_value_of_the_thesis_adult_is_in_its_domain(thesis: Dataset) -> None:
    domain = bundled_domain("adult_thesis")
    assert domain is not None
    schema = domain.schema_for(thesis.schema)
    assert isinstance(schema, Schema)
    for column in thesis.frame.columns:
        listed = set(domain.columns[column].categories or ())
        assert set(thesis.frame[column].astype(str)) <= listed, column


def test_a_derived_table_checks_its_preprocessing_returns_its_columns() -> None:
    broken = papers.ADULT_THESIS.__class__(
        **{**papers.ADULT_THESIS.__dict__, "prepare": lambda frame: frame.iloc[:, :3]}
    )
    handle = resources.files("flwr_vflgan.data").joinpath("bundled", ADULT.bundled_file or "")
    with handle.open("rb") as source, pytest.raises(AssertionError, match="preprocessing returned"):
        broken.read(source, where="adult.csv.gz")


# --- dataset.rows ----------------------------------------------------------------------


def test_rows_sample_the_same_rows_in_table_order_with_their_ids() -> None:
    full, full_ids = load_full_table(DataSpec(source="adult"))
    small, ids = load_full_table(DataSpec(source="adult", rows=1_000))
    again, again_ids = load_full_table(DataSpec(source="adult", rows=1_000))
    assert len(small.frame) == 1_000 and ids.is_monotonic_increasing and ids.is_unique
    pd.testing.assert_frame_equal(small.frame, again.frame)
    pd.testing.assert_series_equal(ids, again_ids)
    # Each sampled row is the full table's row with that ID.
    expected = full.frame.iloc[ids.to_numpy()].reset_index(drop=True)
    pd.testing.assert_frame_equal(small.frame, expected)
    assert full_ids.iloc[ids.to_numpy()].tolist() == ids.tolist()


def test_rows_are_a_uniform_sample_not_the_first_rows() -> None:
    _, ids = load_full_table(DataSpec(source="adult", rows=2_000))
    # The first 2,000 would end at ID 1,999; a uniform sample spans the table.
    assert ids.max() > 40_000 and ids.min() < 100
    assert abs(float(np.median(ids)) - 48_842 / 2) < 3_000


def test_more_rows_than_the_table_has_is_refused_with_its_size() -> None:
    dataset, ids = load_full_table(DataSpec(source="adult"))
    with pytest.raises(
        ValueError, match=r"dataset.rows=50000 .* has 48842 rows: set dataset.rows to at most 48842"
    ):
        sample_rows(dataset, ids, 50_000)


@pytest.mark.parametrize("rows", [0, 1, -5, True, 2.5, "10"])
def test_rows_must_be_a_count_of_at_least_two(rows: object) -> None:
    with pytest.raises(ValueError, match=r"dataset\.rows must be an integer >= 2"):
        DataSpec(source="adult", rows=rows)  # type: ignore[arg-type]


def test_rows_are_left_out_of_the_spec_json_when_unset() -> None:
    assert "rows" not in json.loads(DataSpec(source="adult").to_json())
    spec = DataSpec(source="adult", rows=500)
    assert DataSpec.from_json(spec.to_json()) == spec


def test_a_file_of_series_cannot_be_sampled_by_row() -> None:
    with pytest.raises(ValueError, match="cannot be sampled by row"):
        DataSpec(source="x.csv", time_column="t", rows=10)
