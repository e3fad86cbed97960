"""Paper 004's membership attack as Figure 5.7 runs it: attribute codes, targets with a
chosen share of outliers, and the attack's accuracy on tables whose leak is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.privacy import baselines
from flwr_vflgan.privacy.baselines import hamming_monte_carlo
from flwr_vflgan.privacy.thesis_mia import (
    ThesisMIAResult,
    attribute_codes,
    draw_targets,
    outlier_rows,
    rare_value_rows,
    thesis_mia,
    thesis_outliers,
)

SCHEMA = Schema(
    (ColumnSpec("colour", ColumnKind.CATEGORICAL), ColumnSpec("size", ColumnKind.CONTINUOUS))
)


def test_codes_share_categories_across_tables_and_bin_numbers_by_the_synthetic_quantiles():
    real = pd.DataFrame({"colour": ["red", "blue", None], "size": [0.5, 9.0, np.nan]})
    synthetic = pd.DataFrame({"colour": ["blue", "green"], "size": [1.0, 2.0]})
    real_codes, synthetic_codes = attribute_codes([real, synthetic], SCHEMA, synthetic, bins=2)
    # Categories: the same value has the same code in both tables; a missing one its own.
    assert real_codes[1, 0] == synthetic_codes[0, 0]
    assert len({*real_codes[:, 0], *synthetic_codes[:, 0]}) == 4
    # Numbers: two bins split at the synthetic median 1.5; a missing number is -1.
    assert real_codes[:, 1].tolist() == [0, 1, -1]
    assert synthetic_codes[:, 1].tolist() == [0, 1]


def test_outliers_are_rows_with_an_outlying_number():
    frame = pd.DataFrame({"colour": ["a"] * 8, "size": [1.0, 2, 2, 3, 3, 4, 4, 40]})
    assert outlier_rows(frame, SCHEMA).tolist() == [False] * 7 + [True]


def test_targets_hold_exactly_the_share_of_outliers_asked():
    is_outlier = np.arange(100) % 4 == 0  # 25 outliers
    for share, expected in ((0.0, 0), (0.5, 10), (1.0, 20)):
        chosen = draw_targets(is_outlier, 20, share, np.random.default_rng(0))
        assert len(set(chosen)) == 20 and list(chosen) == sorted(chosen)
        assert is_outlier[chosen].sum() == expected
    again = draw_targets(is_outlier, 20, 0.5, np.random.default_rng(0))
    assert again.tolist() == draw_targets(is_outlier, 20, 0.5, np.random.default_rng(0)).tolist()
    with pytest.raises(
        ValueError, match=r"need 30 outliers .* the training rows hold 25 and 75: lower audit"
    ):
        draw_targets(is_outlier, 30, 1.0, np.random.default_rng(0))


def _population(rows: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 4, size=(rows, 12))


def test_a_table_that_copies_the_training_rows_gives_them_all_away():
    rng = np.random.default_rng(1)
    members, unseen = _population(400, rng), _population(400, rng)
    is_outlier = np.arange(400) < 100
    results = thesis_mia(
        members, unseen, members.copy(), is_outlier,
        targets=50, shares=(0.0, 1.0), repetitions=3, seed=0,
    )  # fmt: skip
    assert [r.outlier_share for r in results] == [0.0, 1.0]
    assert all(r.accuracies == (1.0, 1.0, 1.0) for r in results)


def test_a_table_that_never_saw_the_training_rows_is_a_coin():
    rng = np.random.default_rng(2)
    members, unseen, synthetic = (_population(400, rng) for _ in range(3))
    results = thesis_mia(
        members, unseen, synthetic, np.arange(400) < 100,
        targets=50, shares=(0.0, 0.5, 1.0), repetitions=20, seed=0,
    )  # fmt: skip
    for result in results:
        assert abs(result.mean - 0.5) < 0.06, result


def test_the_share_decides_which_training_rows_are_judged():
    # The table copies only the outliers: with every target an outlier the attack is
    # perfect; with none, it knows nothing. A draw that ignored the share fails here.
    rng = np.random.default_rng(3)
    members, unseen = _population(400, rng), _population(400, rng)
    is_outlier = np.arange(400) < 100
    synthetic = np.concatenate([members[is_outlier], _population(300, rng)])
    results = thesis_mia(
        members, unseen, synthetic, is_outlier,
        targets=50, shares=(0.0, 1.0), repetitions=10, seed=0,
    )  # fmt: skip
    assert results[1].mean == 1.0
    assert results[0].mean < 0.65


def test_the_targets_need_as_many_unseen_rows():
    codes = np.zeros((10, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="11 targets need as many unseen rows; there are 10"):
        thesis_mia(codes, codes, codes, np.zeros(10, bool), targets=11, shares=(0,),
                   repetitions=1, seed=0)  # fmt: skip


def test_the_chunked_distances_are_the_whole_matrix(monkeypatch: pytest.MonkeyPatch):
    rng = np.random.default_rng(4)
    records, synthetic = rng.integers(0, 3, (30, 5)), rng.integers(0, 3, (101, 5))
    whole = (records[:, None, :] != synthetic[None, :, :]).sum(axis=2)
    expected = (whole <= np.median(whole.min(axis=1))).mean(axis=1)
    monkeypatch.setattr(baselines, "HAMMING_CHUNK", 7 * records.size)  # chunks of 7 rows
    np.testing.assert_array_equal(hamming_monte_carlo(records, synthetic), expected)


def test_a_result_reports_its_mean_and_spread():
    result = ThesisMIAResult(0.5, (0.4, 0.6))
    assert result.to_dict() == {
        "outlier_share": 0.5, "accuracy_mean": pytest.approx(0.5),
        "accuracy_std": pytest.approx(0.1), "accuracies": [0.4, 0.6],
    }  # fmt: skip


def test_matched_unseen_targets_hold_the_same_share_of_outliers():
    # The table copies the unseen outliers: when every unseen target is one of them
    # (matched, share 1), each outranks every training target; drawn uniformly, only
    # about a quarter are.
    rng = np.random.default_rng(5)
    members, unseen = _population(400, rng), _population(400, rng)
    unseen_outlier = np.arange(400) % 4 == 0
    synthetic = np.concatenate([unseen[unseen_outlier], _population(300, rng)])
    common = {"targets": 50, "shares": (1.0,), "repetitions": 5, "seed": 0}
    is_outlier = np.arange(400) < 100
    matched = thesis_mia(members, unseen, synthetic, is_outlier, **common,
                         unseen_outlier=unseen_outlier)  # fmt: skip
    uniform = thesis_mia(members, unseen, synthetic, is_outlier, **common)
    assert matched[0].mean == 0.0
    assert uniform[0].mean > 0.3
    with pytest.raises(ValueError, match="unseen_outlier has 3 rows, non_members 400"):
        thesis_mia(
            members, unseen, synthetic, is_outlier, **common, unseen_outlier=np.ones(3, bool)
        )
    with pytest.raises(ValueError, match="the unseen rows hold 5 and 395"):
        thesis_mia(members, unseen, synthetic, is_outlier, **common,
                   unseen_outlier=np.arange(400) < 5)  # fmt: skip


def test_unseen_rows_are_judged_by_the_training_quartiles():
    train = pd.DataFrame({"colour": ["a"] * 8, "size": [1.0, 2, 2, 3, 3, 4, 4, 5]})
    unseen = pd.DataFrame({"colour": ["a"] * 5, "size": [3.0, 3, 3, 9, 100]})
    assert outlier_rows(unseen, SCHEMA, train).tolist() == [False] * 3 + [True, True]
    assert outlier_rows(unseen, SCHEMA).tolist() == [False] * 4 + [True]


def test_a_categorical_tables_outliers_hold_a_value_rarer_than_one_percent() -> None:
    schema = Schema(
        (ColumnSpec("a", ColumnKind.CATEGORICAL), ColumnSpec("b", ColumnKind.CATEGORICAL))
    )
    # 'z' in a is 1 row of 200 (0.5 %), 'y' in b 3 rows (1.5 %): only the 'z' row is rare.
    frame = pd.DataFrame({"a": ["x"] * 199 + ["z"], "b": ["u"] * 197 + ["y"] * 3})
    rare = rare_value_rows(frame, schema)
    assert rare.tolist() == [False] * 199 + [True]
    assert thesis_outliers(frame, schema).tolist() == rare.tolist()
    # Shares from another table: 'y' is rare there, and a value it lacks is rare too.
    reference = pd.DataFrame({"a": ["x"] * 100 + ["z"] * 100, "b": ["u"] * 200})
    assert rare_value_rows(frame, schema, reference).tolist() == [False] * 197 + [True] * 3


def test_a_table_with_numbers_keeps_stadlers_rule() -> None:
    schema = Schema((ColumnSpec("n", ColumnKind.INTEGER), ColumnSpec("c", ColumnKind.CATEGORICAL)))
    frame = pd.DataFrame({"n": [*list(range(1, 100)), 1000], "c": ["x"] * 99 + ["rare"]})
    # Stadler's rule on n flags the 1,000; the rare category alone does not count here.
    assert thesis_outliers(frame, schema).tolist() == [False] * 99 + [True]
    frame.loc[0, "c"] = "rare"
    assert thesis_outliers(frame, schema)[0] == np.False_
