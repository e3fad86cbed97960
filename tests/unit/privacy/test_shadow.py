"""ASSD's pieces (paper 000, Section 4.1 and Appendix A.7): the vulnerable-record rankings
on tables with a hand-computed answer, Stadler et al.'s feature maps, the random-forest
adversary, and the whole game on generators that copy their table or ignore it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.privacy.shadow import (
    shadow_attack,
    shadow_game,
    shadow_seeds,
    training_tables,
)
from flwr_vflgan.privacy.table_features import TableFeatures
from flwr_vflgan.privacy.vulnerable import (
    nearest_neighbour_distances,
    outlier_counts,
    vulnerable_records,
)

C, N = ColumnKind.CATEGORICAL, ColumnKind.CONTINUOUS


def schema_of(**kinds: ColumnKind) -> Schema:
    return Schema(tuple(ColumnSpec(name, kind) for name, kind in kinds.items()))


def test_outliers_are_beyond_one_interquartile_range_of_the_quartiles():
    frame = pd.DataFrame(
        {"a": [1.0, 2, 3, 4, 100], "b": [-50.0, 0, 0, 0, 0], "c": ["x", "y", "z", "z", "q"]}
    )
    # a: Q1 2, Q3 4, T 2: only 100 (100 - 4 > 2); 1 is 1 below Q1, not more than T.
    # b: Q1 = Q3 = 0, T 0: -50 is an outlier, the zeros are not. c has no quartiles.
    counts = outlier_counts(frame, schema_of(a=N, b=N, c=C))
    assert counts.tolist() == [1, 0, 0, 0, 1]


def test_a_missing_number_is_no_outlier():
    frame = pd.DataFrame({"a": [1.0, 2, 3, 4, np.nan, 100]})
    assert outlier_counts(frame, schema_of(a=N)).tolist() == [0, 0, 0, 0, 0, 1]


def test_nearest_neighbour_distance_is_equation_32_by_hand():
    frame = pd.DataFrame({"c": ["A", "A", "B"], "x": [0.0, 5, 5], "y": [3.0, 3, 1]})
    # Scaled: x (0, 1, 1), y (1, 1, 0). Weights: 1/3 categorical, 2/3 continuous.
    d01 = 1 - 1 / 3 - 2 / 3 * (1 / math.sqrt(2))
    d02 = 1.0
    d12 = 1 - 2 / 3 * (1 / math.sqrt(2))
    expected = [min(d01, d02), min(d01, d12), min(d02, d12)]
    got = nearest_neighbour_distances(frame, schema_of(c=C, x=N, y=N))
    assert got == pytest.approx(expected, abs=1e-12)
    assert vulnerable_records(frame, schema_of(c=C, x=N, y=N), "distance") == [2]


def test_chunks_do_not_change_the_distances():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"c": rng.choice(list("abc"), 50), "x": rng.normal(size=50)})
    schema = schema_of(c=C, x=N)
    whole = nearest_neighbour_distances(frame, schema)
    assert nearest_neighbour_distances(frame, schema, chunk=7) == pytest.approx(whole)


def test_a_copied_row_is_at_distance_zero_and_zero_vectors_are_equal():
    frame = pd.DataFrame({"x": [0.0, 0.0, 1.0], "y": [0.0, 0.0, 2.0]})
    # Rows 0 and 1 scale to the zero vector: cosine 1 by definition, distance 0.
    got = nearest_neighbour_distances(frame, schema_of(x=N, y=N))
    assert got.tolist() == pytest.approx([0.0, 0.0, 1.0])


def test_outlier_ranking_breaks_ties_by_distance_then_position():
    frame = pd.DataFrame(
        {"a": [0.0, 1, 1, 1, 1, 1, 1, 9], "b": [5.0, 5, 5, 5, 5, 5, 5, 5], "c": list("xxxxxxxy")}
    )
    schema = schema_of(a=N, b=N, c=C)
    # Rows 0 and 7 have one outlying attribute each. Scaled, row 0's numbers are the zero
    # vector (cosine 0 to every other row): its distance is 1 - 1/3 = 2/3 to the rows of
    # its category; row 7 points the way rows 1-6 do (cosine 1) in another category:
    # 1 - 2/3 = 1/3. Row 0 ranks first, then row 7, then the rest by position.
    assert outlier_counts(frame, schema).tolist() == [1, 0, 0, 0, 0, 0, 0, 1]
    assert nearest_neighbour_distances(frame, schema)[[0, 7]] == pytest.approx([2 / 3, 1 / 3])
    assert vulnerable_records(frame, schema, "outliers", count=3) == [0, 7, 1]
    with pytest.raises(ValueError, match="unknown vulnerability ranking 'far'"):
        vulnerable_records(frame, schema, "far")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="count must be between 1 and 8"):
        vulnerable_records(frame, schema, "distance", count=9)


def test_naive_features_by_hand():
    reference = pd.DataFrame({"x": [0.0, 10.0], "c": ["a", "b"]})
    features = TableFeatures("naive", reference, schema_of(x=N, c=C))
    table = pd.DataFrame({"x": [1.0, 2.0, 6.0], "c": ["b", "b", "z"]})
    # x: mean 3, median 2, variance 14/3; c: 2 distinct, most frequent b (code 1), least
    # frequent the unknown z (one past the reference's two categories: 2).
    assert features(table) == pytest.approx([3.0, 2.0, 14 / 3, 2.0, 1.0, 2.0])


def test_range_features_by_hand_see_what_the_histogram_folds_into_its_end_bin():
    """The oldest age is the whole difference between two tables: the range map reads
    it, the histogram (whose last bin takes everything past the reference) does not."""
    reference = pd.DataFrame({"x": [0.0, 10.0], "y": [5.0, 6.0], "c": ["a", "b"]})
    schema = schema_of(x=N, y=N, c=C)
    without = pd.DataFrame({"x": [1.0, 9.0, 10.0], "y": [5.0, np.nan, 6.0], "c": ["a"] * 3})
    with_outlier = without.assign(x=[1.0, 9.0, 14.0])
    ranges = TableFeatures("range", reference, schema)
    assert ranges(without).tolist() == [1.0, 10.0, 5.0, 6.0]  # x min, max; y min, max
    assert ranges(with_outlier).tolist() == [1.0, 14.0, 5.0, 6.0]
    histogram = TableFeatures("histogram", reference, schema, bins=2)
    np.testing.assert_array_equal(histogram(without), histogram(with_outlier))
    # A column with no value at all maps to 0 (as every map's NaN does), without a warning.
    empty = without.assign(y=np.nan)
    assert ranges(empty).tolist() == [1.0, 10.0, 0.0, 0.0]
    assert ranges(without.iloc[:0]).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_histogram_and_correlation_features_by_hand():
    reference = pd.DataFrame({"x": [0.0, 10.0], "c": ["a", "b"]})
    schema = schema_of(x=N, c=C)
    table = pd.DataFrame({"x": [1.0, 9.0, 12.0, -3.0], "c": ["a", "a", "b", "q"]})
    histogram = TableFeatures("histogram", reference, schema, bins=2)(table)
    # Bins [0, 5) and [5, 10]: 1 and -3 (clipped) low, 9 and 12 (clipped) high.
    assert histogram.tolist() == pytest.approx([0.5, 0.5, 0.5, 0.25, 0.25])
    correlation = TableFeatures("correlation", reference, schema)(table)
    # Columns x, c=a, c=b: three pairs; x against c=a is computed by numpy here as the
    # independent reference.
    design = np.array([[0.1, 1, 0], [0.9, 1, 0], [1.2, 0, 1], [-0.3, 0, 0]])
    expected = np.corrcoef(design, rowvar=False)[np.triu_indices(3, k=1)]
    assert correlation == pytest.approx(expected)


def test_a_constant_column_correlates_zero_not_nan():
    reference = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    table = pd.DataFrame({"x": [0.5, 0.5, 0.5], "y": [0.0, 0.5, 1.0]})
    assert TableFeatures("correlation", reference, schema_of(x=N, y=N))(table).tolist() == [0.0]


def test_feature_map_errors_name_the_problem():
    reference = pd.DataFrame({"x": [0.0, 1.0]})
    with pytest.raises(ValueError, match="unknown feature map 'pca'"):
        TableFeatures("pca", reference, schema_of(x=N))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"lacks columns \['x'\]"):
        TableFeatures("naive", reference, schema_of(x=N))(pd.DataFrame({"y": [1.0]}))


def test_the_forest_separates_separable_worlds_and_not_identical_ones():
    rng = np.random.default_rng(1)
    apart = shadow_attack(rng.normal(0, 1, (40, 3)), rng.normal(5, 1, (40, 3)), seed=2)
    assert apart.auc == (1.0, 0.0) and apart.accuracy == (1.0, 0.0)
    assert (apart.train_tables, apart.test_tables) == (28, 12)
    # The ROC's points: every repetition's 12 + 12 held-out tables, labelled by world.
    assert len(apart.labels) == len(apart.scores) == 5 * 24 and sum(apart.labels) == 5 * 12
    same = shadow_attack(rng.normal(size=(100, 3)), rng.normal(size=(100, 3)), seed=3)
    # 30 + 30 test tables: one AUC's standard error is about 0.075; the mean of five
    # overlapping splits stays within two of it.
    assert abs(same.auc[0] - 0.5) < 0.15
    assert len(same.aucs) == 5 and same.auc[1] > 0


def test_attack_input_errors():
    with pytest.raises(ValueError, match="same number of tables and features"):
        shadow_attack(np.zeros((4, 2)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="leaves 4 to train and 0 to test"):
        shadow_attack(np.zeros((4, 2)), np.zeros((4, 2)), train_fraction=0.95)
    with pytest.raises(ValueError, match="repetitions must be >= 1"):
        shadow_attack(np.zeros((4, 2)), np.zeros((4, 2)), repetitions=0)


def test_seeds_are_fresh_and_distinct_and_the_worlds_differ_by_the_target():
    out, into = shadow_seeds(0, 5)
    assert len(set(out) | set(into)) == 10
    assert set(shadow_seeds(1, 5)[0]).isdisjoint(out)
    table = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    without, whole = training_tables(table, 1)
    assert without["x"].tolist() == [1.0, 3.0] and whole is table
    with pytest.raises(ValueError, match="target row 3 is not a row of the 3-row table"):
        training_tables(table, 3)
    with pytest.raises(ValueError, match="at least 2 shadows per world"):
        shadow_seeds(0, 1)


def _table(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"x": rng.normal(size=rows), "y": rng.normal(size=rows), "c": rng.choice(list("ab"), rows)}
    )


def test_a_generator_that_copies_its_table_is_caught_and_one_that_ignores_it_is_not():
    table = _table(60, 0)
    table.loc[17] = [8.0, -8.0, "b"]  # an outlier, as Appendix A.7 would pick
    schema = schema_of(x=N, y=N, c=C)
    target = vulnerable_records(table, schema, "distance")[0]
    assert target == 17

    def copy(train: pd.DataFrame, seed: int) -> pd.DataFrame:
        order = np.random.default_rng(seed).permutation(len(train))
        return train.iloc[order].reset_index(drop=True)

    def ignore(train: pd.DataFrame, seed: int) -> pd.DataFrame:
        return _table(60, seed)

    copied = shadow_game(copy, table, schema, target, shadows=20, seed=0)
    ignored = shadow_game(ignore, table, schema, target, shadows=40, seed=0)
    for kind in ("naive", "correlation"):
        assert copied[kind].auc[0] >= 0.95
        assert abs(ignored[kind].auc[0] - 0.5) < 0.15
