"""Tests for flwr_vflgan.data.partition."""

from __future__ import annotations

import pandas as pd
import pytest

from flwr_vflgan.data.partition import partition_columns, split_frame

ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
]  # fmt: skip


class TestEven:
    def test_adult_over_two_parties(self) -> None:
        parts = partition_columns(ADULT_COLUMNS, 2)
        assert parts == [ADULT_COLUMNS[:8], ADULT_COLUMNS[8:]]
        assert [len(part) for part in parts] == [8, 7]

    def test_one_column_each(self) -> None:
        assert partition_columns(["a", "b", "c"], 3) == [["a"], ["b"], ["c"]]

    def test_earlier_parties_get_the_extra_columns(self) -> None:
        parts = partition_columns(list("abcdefg"), 3)
        assert parts == [["a", "b", "c"], ["d", "e"], ["f", "g"]]

    def test_seed_is_ignored(self) -> None:
        assert partition_columns(list("abcd"), 2, seed=3) == [["a", "b"], ["c", "d"]]


class TestRandom:
    def test_needs_a_seed(self) -> None:
        with pytest.raises(ValueError, match="strategy='random' needs an int seed, got seed=None"):
            partition_columns(ADULT_COLUMNS, 2, strategy="random")

    def test_seed_must_be_int(self) -> None:
        with pytest.raises(TypeError, match="seed must be an int, got str"):
            partition_columns(ADULT_COLUMNS, 2, strategy="random", seed="1")  # type: ignore[arg-type]

    def test_same_seed_same_split(self) -> None:
        first = partition_columns(ADULT_COLUMNS, 3, strategy="random", seed=11)
        assert partition_columns(ADULT_COLUMNS, 3, strategy="random", seed=11) == first

    def test_different_seeds_differ(self) -> None:
        splits = {
            str(partition_columns(ADULT_COLUMNS, 2, strategy="random", seed=seed))
            for seed in range(10)
        }
        assert len(splits) > 5

    @pytest.mark.parametrize("seed", [0, 1, 2, 3])
    def test_coverage_sizes_and_order(self, seed: int) -> None:
        parts = partition_columns(ADULT_COLUMNS, 2, strategy="random", seed=seed)
        assert sorted(name for part in parts for name in part) == sorted(ADULT_COLUMNS)
        assert [len(part) for part in parts] == [8, 7]
        for part in parts:
            assert part == sorted(part, key=ADULT_COLUMNS.index)

    def test_is_not_the_even_split(self) -> None:
        even = partition_columns(ADULT_COLUMNS, 2)
        randoms = [partition_columns(ADULT_COLUMNS, 2, strategy="random", seed=s) for s in range(5)]
        assert any(split != even for split in randoms)


class TestExplicit:
    COLUMNS = ("a", "b", "c", "d")

    def test_valid_assignment_is_returned_as_given(self) -> None:
        parts = partition_columns(
            self.COLUMNS, 2, strategy="explicit", explicit=[["c", "a"], ("b", "d")]
        )
        assert parts == [["c", "a"], ["b", "d"]]

    def test_needs_explicit(self) -> None:
        with pytest.raises(ValueError, match="strategy='explicit' needs explicit="):
            partition_columns(self.COLUMNS, 2, strategy="explicit")

    def test_explicit_without_strategy(self) -> None:
        with pytest.raises(ValueError, match="explicit is only used with strategy='explicit'"):
            partition_columns(self.COLUMNS, 2, explicit=[["a", "b"], ["c", "d"]])

    def test_party_count_must_match(self) -> None:
        with pytest.raises(ValueError, match="n_parties=3 but explicit lists 2 parties"):
            partition_columns(
                self.COLUMNS, 3, strategy="explicit", explicit=[["a", "b"], ["c", "d"]]
            )

    def test_unknown_column(self) -> None:
        with pytest.raises(
            ValueError, match=r"unknown column 'z' in party 1; valid columns: \['a'"
        ):
            partition_columns(self.COLUMNS, 2, strategy="explicit", explicit=[["a", "b"], ["z"]])

    def test_duplicate_names_both_parties(self) -> None:
        with pytest.raises(ValueError, match="column 'b' is assigned to both party 0 and party 1"):
            partition_columns(
                self.COLUMNS, 2, strategy="explicit", explicit=[["a", "b"], ["b", "c", "d"]]
            )

    def test_unassigned_columns(self) -> None:
        with pytest.raises(ValueError, match=r"columns \['c', 'd'\] are not assigned"):
            partition_columns(self.COLUMNS, 2, strategy="explicit", explicit=[["a"], ["b"]])

    def test_empty_party(self) -> None:
        with pytest.raises(ValueError, match="party 1 has no columns"):
            partition_columns(
                self.COLUMNS, 2, strategy="explicit", explicit=[["a", "b", "c", "d"], []]
            )

    def test_bare_strings_rejected(self) -> None:
        with pytest.raises(TypeError, match="explicit must be a list of column lists"):
            partition_columns(self.COLUMNS, 2, strategy="explicit", explicit=["ab", "cd"])


class TestArguments:
    def test_one_party(self) -> None:
        with pytest.raises(ValueError, match=r"n_parties must be >= 2 .*got 1"):
            partition_columns(ADULT_COLUMNS, 1)

    def test_more_parties_than_columns(self) -> None:
        message = "n_parties=5 but only 3 columns: every party needs at least one column"
        with pytest.raises(ValueError, match=message):
            partition_columns(["a", "b", "c"], 5)

    def test_n_parties_type(self) -> None:
        with pytest.raises(TypeError, match="n_parties must be an int, got float"):
            partition_columns(ADULT_COLUMNS, 2.0)  # type: ignore[arg-type]

    def test_unknown_strategy(self) -> None:
        with pytest.raises(ValueError, match=r"unknown partition strategy 'round_robin'.*'even'"):
            partition_columns(ADULT_COLUMNS, 2, strategy="round_robin")

    def test_repeated_columns(self) -> None:
        with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
            partition_columns(["a", "b", "a"], 2)

    def test_empty_columns(self) -> None:
        with pytest.raises(ValueError, match="columns must not be empty"):
            partition_columns([], 2)

    def test_columns_must_not_be_a_string(self) -> None:
        with pytest.raises(TypeError, match="got the string 'abc'"):
            partition_columns("abc", 2)


class TestSplitFrame:
    FRAME = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]}, index=[10, 20])

    def test_blocks(self) -> None:
        left, right = split_frame(self.FRAME, [["c", "a"], ["b"]])
        assert left.to_dict("list") == {"c": [0.5, 1.5], "a": [1, 2]}
        assert right.to_dict("list") == {"b": ["x", "y"]}
        assert left.index.tolist() == [10, 20]

    def test_returns_copies(self) -> None:
        (left,) = split_frame(self.FRAME, [["a"]])
        left.loc[10, "a"] = 99
        assert self.FRAME.loc[10, "a"] == 1

    def test_unknown_column(self) -> None:
        with pytest.raises(ValueError, match=r"party 1: columns \['d'\] are not in the frame"):
            split_frame(self.FRAME, [["a"], ["b", "d"]])

    def test_empty_party(self) -> None:
        with pytest.raises(ValueError, match="party 0 must have a non-empty list of columns"):
            split_frame(self.FRAME, [[], ["a"]])

    def test_needs_a_frame(self) -> None:
        with pytest.raises(TypeError, match="frame must be a pandas DataFrame, got dict"):
            split_frame({"a": [1]}, [["a"]])
