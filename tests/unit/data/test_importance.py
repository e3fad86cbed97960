"""Tests for flwr_vflgan.data.importance (VT-GAN's importance splits, paper 001 Section 4.3.2)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

from flwr_vflgan.data.importance import (
    _hidden_parts,
    _shapley_over_orders,
    feature_importance,
    importance_split,
    parse_importance_split,
)
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

FAST = {"max_rows": 400, "n_explained": 40, "n_background": 20, "n_permutations": 4}


def _signal_table(n_rows: int = 400, seed: int = 7) -> tuple[pd.DataFrame, Schema]:
    """``label`` is ``"high"`` exactly when ``signal`` > 0; the other features are noise."""
    rng = np.random.default_rng(seed)
    signal = rng.normal(size=n_rows)
    frame = pd.DataFrame(
        {
            "noise_a": rng.normal(size=n_rows),
            "colour": rng.choice(["red", "green", "blue"], size=n_rows),
            "signal": signal,
            "count": rng.integers(0, 10, size=n_rows),
            "label": np.where(signal > 0, "high", "low"),
            "noise_b": rng.normal(size=n_rows),
        }
    )
    schema = Schema(
        (
            ColumnSpec("noise_a", ColumnKind.CONTINUOUS),
            ColumnSpec("colour", ColumnKind.CATEGORICAL),
            ColumnSpec("signal", ColumnKind.CONTINUOUS),
            ColumnSpec("count", ColumnKind.INTEGER),
            ColumnSpec("label", ColumnKind.CATEGORICAL),
            ColumnSpec("noise_b", ColumnKind.CONTINUOUS),
        ),
        label="label",
    )
    return frame, schema


class TestFeatureImportance:
    def test_the_column_that_decides_the_label_ranks_first(self) -> None:
        frame, schema = _signal_table()
        importance = feature_importance(frame, schema, "label", seed=0, **FAST)
        assert list(importance) == ["noise_a", "colour", "signal", "count", "noise_b"]
        assert max(importance, key=importance.__getitem__) == "signal"
        others = [value for name, value in importance.items() if name != "signal"]
        assert importance["signal"] > 3 * max(others)
        assert all(value >= 0 for value in importance.values())

    def test_same_seed_same_result(self) -> None:
        frame, schema = _signal_table()
        first = feature_importance(frame, schema, "label", seed=3, **FAST)
        assert feature_importance(frame, schema, "label", seed=3, **FAST) == first

    def test_rows_with_a_missing_label_are_dropped(self) -> None:
        frame, schema = _signal_table()
        frame.loc[:9, "label"] = None
        importance = feature_importance(frame, schema, "label", seed=0, **FAST)
        assert max(importance, key=importance.__getitem__) == "signal"

    @pytest.mark.parametrize(
        ("changes", "error", "message"),
        [
            ({"label": "nope"}, ValueError, r"label 'nope' is not a column; columns: \["),
            ({"label": "noise_a"}, ValueError, "label 'noise_a' is continuous"),
            ({"seed": -1}, ValueError, "seed must be >= 0, got -1"),
            ({"seed": 1.5}, TypeError, "seed must be an int, got float"),
            ({"n_permutations": 0}, ValueError, "n_permutations must be >= 1, got 0"),
            ({"n_explained": 0}, ValueError, "n_explained must be >= 1, got 0"),
            ({"n_background": True}, TypeError, "n_background must be an int, got bool"),
            ({"max_rows": 5}, ValueError, "max_rows must be >= 10, got 5"),
        ],
    )
    def test_rejects_bad_arguments(
        self, changes: dict[str, object], error: type[Exception], message: str
    ) -> None:
        frame, schema = _signal_table(40)
        arguments: dict[str, object] = {"label": "label", **FAST, **changes}
        with pytest.raises(error, match=message):
            feature_importance(frame, schema, **arguments)  # type: ignore[arg-type]

    def test_rejects_bad_tables(self) -> None:
        frame, schema = _signal_table(40)
        with pytest.raises(TypeError, match="frame must be a pandas DataFrame, got dict"):
            feature_importance({"a": [1]}, schema, "label")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="schema must be a Schema, got list"):
            feature_importance(frame, ["label"], "label")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"frame lacks the schema's columns \['noise_b'\]"):
            feature_importance(frame.drop(columns="noise_b"), schema, "label")
        only_label = Schema((ColumnSpec("label", ColumnKind.CATEGORICAL),), label="label")
        with pytest.raises(ValueError, match="no feature columns besides the label 'label'"):
            feature_importance(frame, only_label, "label")

    def test_rejects_labels_without_two_usable_classes(self) -> None:
        frame, schema = _signal_table(40)
        with pytest.raises(ValueError, match=r"at least two classes .*, got \['high'\]"):
            feature_importance(frame.assign(label="high"), schema, "label")
        single = frame.assign(label=["odd"] + ["even"] * 39)
        with pytest.raises(ValueError, match=r"classes \['odd'\] have a single row"):
            feature_importance(single, schema, "label")
        # 10 rows, 20 % held out: 2 held-out rows cannot hold 3 classes.
        three = frame.head(10).assign(label=["a", "a", "a", "b", "b", "b", "c", "c", "c", "c"])
        with pytest.raises(ValueError, match="has 3 classes but only 10 rows"):
            feature_importance(three, schema, "label", max_rows=10)


class TestShapleyOverOrders:
    """Over every order of the features the estimate is the exact Shapley value."""

    @pytest.mark.parametrize("n_classes", [2, 3])
    def test_all_orders_give_the_exact_interventional_shapley_value(self, n_classes: int) -> None:
        rng = np.random.default_rng(0)
        spans = [slice(0, 1), slice(1, 4), slice(4, 6)]  # one numeric, two one-hot-like blocks
        x = rng.normal(size=(60, 6))
        y = np.arange(60) % n_classes
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=ConvergenceWarning)
            network = MLPClassifier(hidden_layer_sizes=(100,), max_iter=50, random_state=0)
            network.fit(x, y)
        row, background = x[0], x[1:9]

        def payoff(coalition: tuple[int, ...]) -> np.ndarray:
            inputs = background.copy()
            for feature in coalition:
                inputs[:, spans[feature]] = row[spans[feature]]
            return network.predict_proba(inputs).mean(axis=0)

        exact = np.zeros((3, n_classes))
        for feature in range(3):
            others = [f for f in range(3) if f != feature]
            for size in range(3):
                weight = math.factorial(size) * math.factorial(2 - size) / math.factorial(3)
                for coalition in itertools.combinations(others, size):
                    exact[feature] += weight * (payoff((*coalition, feature)) - payoff(coalition))

        orders = np.array(list(itertools.permutations(range(3))))
        estimate = _shapley_over_orders(
            network,
            _hidden_parts(network, row[None, :], spans)[0],
            _hidden_parts(network, background, spans),
            orders,
        )
        np.testing.assert_allclose(estimate, exact, atol=1e-12)
        # Efficiency: the values add up to f(row) minus the background's mean prediction.
        np.testing.assert_allclose(
            estimate.sum(axis=0),
            network.predict_proba(row[None, :])[0] - network.predict_proba(background).mean(0),
            atol=1e-12,
        )


FEATURES = [f"f{i}" for i in range(10)]
# Table order: the label sits between features, which are not in importance order.
ORDER = ["f3", "f7", "label", "f0", "f9", "f1", "f5", "f2", "f8", "f4", "f6"]
# Importance: f0 > f1 > ... > f9.
IMPORTANCE = {name: 10.0 - i for i, name in enumerate(FEATURES)}


class TestImportanceSplit:
    @pytest.mark.parametrize(
        ("split", "first", "second"),
        [
            ("1090", ["f0"], ["f3", "f7", "label", "f9", "f1", "f5", "f2", "f8", "f4", "f6"]),
            ("5050", ["f3", "f0", "f1", "f2", "f4"], ["f7", "label", "f9", "f5", "f8", "f6"]),
            ("9010", ["f3", "f7", "f0", "f1", "f5", "f2", "f8", "f4", "f6"], ["label", "f9"]),
        ],
    )
    def test_ten_features(self, split: str, first: list[str], second: list[str]) -> None:
        assert importance_split(IMPORTANCE, "label", split, ORDER) == [first, second]

    def test_split_may_be_an_int(self) -> None:
        assert importance_split(IMPORTANCE, "label", 1090, ORDER)[0] == ["f0"]
        assert parse_importance_split(9010) == "9010"

    def test_ties_go_to_the_name_that_sorts_first(self) -> None:
        tied = dict.fromkeys(["b", "d", "a", "c"], 1.0)
        assert importance_split(tied, "y", "5050", ["y", "d", "c", "b", "a"]) == [
            ["b", "a"],
            ["y", "d", "c"],
        ]

    @pytest.mark.parametrize(
        ("n_features", "split", "n_first"),
        [
            (14, "1090", 1),  # Adult: 1.4 -> 1
            (14, "5050", 7),
            (14, "9010", 13),  # 12.6 -> 13
            (13, "5050", 7),  # 6.5 rounds half up (not to even)
            (5, "1090", 1),  # 0.5 -> 1
            (5, "9010", 4),  # 4.5 -> 5, but party 1 keeps one feature
            (3, "1090", 1),  # 0.3 -> 0, but party 0 gets one
            (2, "5050", 1),
        ],
    )
    def test_party_sizes(self, n_features: int, split: str, n_first: int) -> None:
        names = [f"c{i:02d}" for i in range(n_features)]
        importance = {name: float(n_features - i) for i, name in enumerate(names)}
        first, second = importance_split(importance, "y", split, [*names, "y"])
        assert first == names[:n_first]
        assert second == [*names[n_first:], "y"]

    @pytest.mark.parametrize(
        ("importance", "label", "split", "order", "error", "message"),
        [
            (
                IMPORTANCE,
                "label",
                "2080",
                ORDER,
                ValueError,
                r"unknown importance split split='2080'; valid: \['1090', '5050', '9010'\]",
            ),
            (
                {**IMPORTANCE, "label": 1.0},
                "label",
                "5050",
                ORDER,
                ValueError,
                "label 'label' must not have an importance",
            ),
            (
                {"f0": 1.0},
                "label",
                "5050",
                ["f0", "label"],
                ValueError,
                r"at least two features, got 1: \['f0'\]",
            ),
            (
                {**IMPORTANCE, "f4": math.nan},
                "label",
                "5050",
                ORDER,
                ValueError,
                "importance of 'f4' must be finite, got nan",
            ),
            (
                {**IMPORTANCE, "f4": "high"},
                "label",
                "5050",
                ORDER,
                TypeError,
                "importance of 'f4' must be a number, got 'high'",
            ),
            (
                IMPORTANCE,
                "label",
                "5050",
                ORDER[1:],
                ValueError,
                r"order must list the features and the label, each once: expected \[",
            ),
            (
                IMPORTANCE,
                "label",
                "5050",
                [*ORDER, "f0"],
                ValueError,
                "order must list the features and the label, each once",
            ),
            (
                {"a": 1.0, "b": 2.0},
                "y",
                "5050",
                "aby",
                TypeError,
                "order must be a sequence of column names, got the string 'aby'",
            ),
        ],
    )
    def test_rejects(
        self,
        importance: dict[str, object],
        label: str,
        split: str,
        order: list[str],
        error: type[Exception],
        message: str,
    ) -> None:
        with pytest.raises(error, match=message):
            importance_split(importance, label, split, order)  # type: ignore[arg-type]

    def test_parse_names_the_parameter(self) -> None:
        with pytest.raises(ValueError, match=r"unknown importance split partition.split=True"):
            parse_importance_split(True, name="partition.split")
