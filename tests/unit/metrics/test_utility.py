"""ML utility metrics: paper 000's TRTR/TSTS/TRTS/TSTR and paper 001's ML efficacy."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from flwr_vflgan.metrics.tables import FeatureEncoder, MetricInputError, check_pair
from flwr_vflgan.metrics.utility import (
    HOLDOUT_FRACTION,
    ML_EFFICACY_CLASSIFIERS,
    ai_training_utility,
    ml_efficacy,
    split_holdout,
    total_difference,
)

FAST = {"folds": 5, "n_estimators": 20}


def _signal_table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """``label`` is ``x1 > 0``; ``noise`` and ``colour`` carry no information."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x1": x1,
            "noise": rng.normal(size=n),
            "colour": rng.choice(["red", "green", "blue"], size=n),
            "label": np.where(x1 > 0, "yes", "no"),
        }
    )


def _inverted(frame: pd.DataFrame) -> pd.DataFrame:
    flipped = frame.copy()
    flipped["label"] = np.where(frame["label"] == "yes", "no", "yes")
    return flipped


# --- total_difference -------------------------------------------------------------------


def _table_1_row(trtr, tsts, trts, tstr) -> dict[str, float]:
    row = {}
    for setting, (accuracy, f1) in zip(
        ("trtr", "tsts", "trts", "tstr"), (trtr, tsts, trts, tstr), strict=True
    ):
        row[f"{setting}_accuracy"], row[f"{setting}_f1"] = accuracy, f1
    return row


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # Paper 000, Table 1, Adult: WGAN_GP, VertiGAN, VFLGAN; Red-Wine-Quality: VertiGAN.
        (_table_1_row((0.82, 0.72), (0.82, 0.74), (0.81, 0.71), (0.72, 0.69)), 0.17),
        (_table_1_row((0.82, 0.72), (0.59, 0.37), (0.53, 0.48), (0.75, 0.43)), 1.47),
        (_table_1_row((0.82, 0.72), (0.82, 0.65), (0.79, 0.65), (0.79, 0.54)), 0.38),
        (_table_1_row((0.59, 0.26), (0.53, 0.21), (0.51, 0.19), (0.39, 0.14)), 0.58),
    ],
)
def test_total_difference_reproduces_paper_000_table_1(row, expected):
    assert total_difference(row) == pytest.approx(expected, abs=1e-9)


def test_total_difference_names_missing_scores():
    row = _table_1_row((0.82, 0.72), (0.82, 0.74), (0.81, 0.71), (0.72, 0.69))
    del row["tstr_f1"]
    with pytest.raises(ValueError, match=r"missing \['tstr_f1'\]"):
        total_difference(row)


# --- ai_training_utility ----------------------------------------------------------------


def test_known_signal_gives_high_trtr_accuracy():
    scores = ai_training_utility(_signal_table(), _signal_table(seed=1), label="label", **FAST)
    assert scores["trtr_accuracy"] > 0.95
    assert scores["trtr_f1"] > 0.95
    # An independent draw of the same distribution is just as learnable.
    assert scores["tstr_accuracy"] > 0.95
    assert scores["total_difference"] < 0.3


def test_label_independent_of_features_scores_near_the_majority_rate():
    real = _signal_table(seed=2)
    real["label"] = np.random.default_rng(3).permutation(np.repeat(["yes", "no"], 200))
    scores = ai_training_utility(real, real, label="label", **FAST)
    # Balanced classes: the majority rate is 0.5; CV accuracy over 400 rows has sd ~0.025.
    assert abs(scores["trtr_accuracy"] - 0.5) < 0.1


def test_identical_synthetic_table_reproduces_trtr_exactly():
    real = _signal_table()
    scores = ai_training_utility(real, real.copy(), label="label", **FAST)
    # Same rows, same splits, same forests.
    assert scores["tsts_accuracy"] == scores["trtr_accuracy"]
    assert scores["tsts_f1"] == scores["trtr_f1"]
    assert scores["tsts_accuracy_difference"] == 0.0
    assert scores["tsts_f1_difference"] == 0.0
    # TRTS and TSTR both train on all real rows and test on them: training accuracy.
    assert scores["trts_accuracy"] == scores["tstr_accuracy"]
    assert scores["trts_f1"] == scores["tstr_f1"]
    assert scores["trts_accuracy"] >= 0.99
    expected_total = 2 * (scores["trts_accuracy_difference"] + scores["trts_f1_difference"])
    assert scores["total_difference"] == pytest.approx(expected_total, abs=1e-12)
    assert scores["folds"] == 5.0


def test_inverted_label_relation_is_penalised():
    real = _signal_table()
    scores = ai_training_utility(real, _inverted(real), label="label", **FAST)
    assert scores["tsts_accuracy"] > 0.95  # the inverted table is consistent in itself
    assert scores["tstr_accuracy"] < 0.1
    assert scores["trts_accuracy"] < 0.1
    # Four differences near 1 (TRTS, TSTR accuracy and F1), TSTS near 0.
    assert scores["total_difference"] > 3.0


def test_fast_mode_uses_one_split():
    scores = ai_training_utility(
        _signal_table(), _signal_table(seed=1), label="label", folds=0, n_estimators=20
    )
    assert scores["folds"] == 0.0
    assert scores["trtr_accuracy"] > 0.95


def test_single_class_synthetic_label_gives_nan_tsts_but_trts_and_tstr():
    real = _signal_table()
    synthetic = real.copy()
    synthetic["label"] = "no"
    scores = ai_training_utility(real, synthetic, label="label", **FAST)
    assert math.isnan(scores["tsts_accuracy"]) and math.isnan(scores["tsts_f1"])
    assert math.isnan(scores["total_difference"])
    # A forest trained on "no" only predicts "no": accuracy is the share p of "no";
    # F1("no") = 2p / (1 + p) (precision p, recall 1), F1("yes") = 0, macro = p / (1 + p).
    share = float((real["label"] == "no").mean())
    assert scores["tstr_accuracy"] == pytest.approx(share, abs=1e-12)
    assert scores["tstr_f1"] == pytest.approx(share / (1 + share), abs=1e-12)
    assert math.isfinite(scores["trts_accuracy"]) and math.isfinite(scores["trts_f1"])


def test_majority_baseline_is_the_constant_guess_on_the_real_table(caplog):
    real = _signal_table(n=500)
    real["label"] = np.where(real["x1"] > 0.5244, "yes", "no")  # about 70 % "no"
    share = float((real["label"] == "no").mean())
    assert share > 0.6
    synthetic = real.copy()
    synthetic["label"] = "no"
    with caplog.at_level(logging.WARNING, logger="flwr_vflgan.metrics.utility"):
        scores = ai_training_utility(real, synthetic, label="label", **FAST)
    # Always "no": accuracy p; F1("no") = 2p / (1 + p), F1("yes") = 0, macro p / (1 + p).
    assert scores["majority_accuracy"] == pytest.approx(share, abs=1e-12)
    assert scores["majority_f1"] == pytest.approx(share / (1 + share), abs=1e-12)
    assert scores["tstr_predicted_classes"] == 1.0
    assert scores["tstr_accuracy"] == scores["majority_accuracy"]
    assert "predicts 'no' for every real row (label 'label')" in caplog.text


def test_majority_baseline_comes_from_the_real_table_not_the_synthetic_one(caplog):
    real = _signal_table(n=500)
    real["label"] = np.where(real["x1"] > 0.5244, "yes", "no")
    synthetic = real.copy()
    synthetic["label"] = _inverted(real)["label"]  # "yes" is the synthetic majority
    with caplog.at_level(logging.WARNING, logger="flwr_vflgan.metrics.utility"):
        scores = ai_training_utility(real, synthetic, label="label", **FAST)
    assert scores["majority_accuracy"] == pytest.approx(
        float((real["label"] == "no").mean()), abs=1e-12
    )
    # The inverted relation is still a relation: the forest predicts both classes.
    assert scores["tstr_predicted_classes"] == 2.0
    assert "constant guess" not in caplog.text


def test_labels_compare_as_strings():
    real = _signal_table()
    real["label"] = (real["label"] == "yes").astype(int)
    synthetic = real.copy()
    synthetic["label"] = synthetic["label"].astype(str)  # a CSV round trip
    scores = ai_training_utility(real, synthetic, label="label", **FAST)
    assert scores["tsts_accuracy"] == scores["trtr_accuracy"]


def test_ai_training_utility_is_deterministic_under_seed():
    real, synthetic = _signal_table(), _signal_table(seed=4)
    synthetic["label"] = np.where(synthetic["noise"] > 0, "yes", "no")
    first = ai_training_utility(real, synthetic, label="label", seed=7, **FAST)
    second = ai_training_utility(real, synthetic, label="label", seed=7, **FAST)
    assert first == second


@pytest.mark.parametrize("folds", [1, -1])
def test_bad_folds_are_rejected(folds):
    with pytest.raises(ValueError, match=rf"folds must be 0 .* got {folds}"):
        ai_training_utility(_signal_table(), _signal_table(), label="label", folds=folds)


def test_boolean_folds_are_rejected():
    with pytest.raises(TypeError, match="folds must be an int"):
        ai_training_utility(_signal_table(), _signal_table(), label="label", folds=True)


def test_rare_real_class_suggests_fewer_folds():
    real = _signal_table()
    real["label"] = "no"
    real.loc[:2, "label"] = "yes"  # three rows
    with pytest.raises(
        ValueError, match=r"1 classes with fewer than 5 rows \(\{'yes': 3\}\).*folds=0"
    ):
        ai_training_utility(real, _signal_table(), label="label", folds=5)


def test_many_rare_classes_are_counted_not_listed() -> None:
    """A price-like label (a class per row) must give a short message, not every class."""
    real = _signal_table()
    real["label"] = np.arange(len(real)) * 0.5
    synthetic = _signal_table()
    synthetic["label"] = 1.0
    with pytest.raises(ValueError) as caught:
        ai_training_utility(real, synthetic, label="label", folds=0)
    message = str(caught.value)
    assert f"{len(real)} classes with fewer than 2 rows" in message
    assert f"and {len(real) - 5} more" in message
    assert len(message) < 300


def test_single_class_real_label_is_rejected():
    real = _signal_table()
    real["label"] = "no"
    with pytest.raises(ValueError, match="single class 'no'"):
        ai_training_utility(real, _signal_table(), label="label", **FAST)


def test_label_missing_from_synthetic_is_rejected():
    synthetic = _signal_table().drop(columns="label")
    with pytest.raises(MetricInputError, match="'label' is missing from the synthetic table"):
        ai_training_utility(_signal_table(), synthetic, label="label", **FAST)


def test_mismatched_columns_are_rejected():
    synthetic = _signal_table().rename(columns={"noise": "other"})
    with pytest.raises(MetricInputError, match="different columns"):
        ai_training_utility(_signal_table(), synthetic, label="label", **FAST)


def test_empty_synthetic_table_is_rejected():
    with pytest.raises(MetricInputError, match="synthetic table is empty"):
        ai_training_utility(_signal_table(), _signal_table().iloc[:0], label="label", **FAST)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_estimators": 0}, ValueError, "n_estimators must be >= 1, got 0"),
        ({"seed": -1}, ValueError, "seed must be >= 0, got -1"),
        ({"seed": 1.5}, TypeError, "seed must be an int"),
    ],
)
def test_bad_parameters_are_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        ai_training_utility(_signal_table(), _signal_table(), label="label", **kwargs)


# --- split_holdout -----------------------------------------------------------------------


def test_split_holdout_is_stratified_and_complete():
    real = _signal_table()
    real["label"] = np.repeat(["a", "b", "c", "d"], [200, 100, 60, 40])
    train, test = split_holdout(real, "label")
    assert len(test) == 80 and len(train) == 320  # 20 % of 400
    # Stratified: each class keeps its 20 % share in the test part.
    assert test["label"].value_counts().to_dict() == {"a": 40, "b": 20, "c": 12, "d": 8}
    assert isinstance(train.index, pd.RangeIndex) and isinstance(test.index, pd.RangeIndex)
    together = pd.concat([train, test]).sort_values("x1").reset_index(drop=True)
    pd.testing.assert_frame_equal(together, real.sort_values("x1").reset_index(drop=True))


def test_split_holdout_is_deterministic_under_seed():
    real = _signal_table()
    first, second = split_holdout(real, "label", seed=3), split_holdout(real, "label", seed=3)
    pd.testing.assert_frame_equal(first[1], second[1])
    other = split_holdout(real, "label", seed=4)
    assert not first[1]["x1"].equals(other[1]["x1"])


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_split_holdout_rejects_fraction_outside_unit_interval(fraction):
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        split_holdout(_signal_table(), "label", fraction=fraction)


def test_split_holdout_rejects_missing_label_and_single_row_class():
    with pytest.raises(ValueError, match="label 'target' is not a column"):
        split_holdout(_signal_table(), "target")
    real = _signal_table()
    real.loc[0, "label"] = "lonely"
    with pytest.raises(ValueError, match=r"classes \['lonely'\] have a single row"):
        split_holdout(real, "label")


def test_holdout_fraction_is_one_fifth():
    assert HOLDOUT_FRACTION == 0.2


# --- ml_efficacy -------------------------------------------------------------------------


def _expected_keys(classifiers) -> set[str]:
    keys = {"accuracy_difference", "f1_difference", "auc_difference"}
    for c in classifiers:
        for metric in ("accuracy", "f1", "auc"):
            keys |= {f"{c}_real_{metric}", f"{c}_synthetic_{metric}", f"{c}_{metric}_difference"}
    return keys


def test_ml_efficacy_known_signal_and_destroyed_signal():
    train, test = split_holdout(_signal_table(n=500), "label")
    synthetic = train.copy()
    synthetic["label"] = np.random.default_rng(5).permutation(synthetic["label"].to_numpy())
    scores = ml_efficacy(train, test, synthetic, label="label")
    assert set(scores) == _expected_keys(ML_EFFICACY_CLASSIFIERS)
    for c in ML_EFFICACY_CLASSIFIERS:
        assert scores[f"{c}_real_accuracy"] > 0.9, c
        assert scores[f"{c}_real_auc"] > 0.9, c
    assert scores["accuracy_difference"] > 0.2
    assert scores["auc_difference"] > 0.2


def test_ml_efficacy_identical_synthetic_has_zero_differences():
    train, test = split_holdout(_signal_table(), "label")
    scores = ml_efficacy(train, test, train.copy(), label="label")
    for metric in ("accuracy", "f1", "auc"):
        assert scores[f"{metric}_difference"] == 0.0


def test_ml_efficacy_auc_matches_an_independent_logistic_regression():
    # Three classes: the AUC is the macro mean of the one-vs-rest AUCs, which
    # scikit-learn's roc_auc_score computes from probabilities on its own.
    real = _signal_table(n=450)
    real["label"] = np.select([real["x1"] < -0.4, real["x1"] < 0.4], ["low", "mid"], "high")
    train, test = split_holdout(real, "label")
    scores = ml_efficacy(train, test, train, label="label", classifiers=("logistic_regression",))
    schema = check_pair(train, test, label="label")
    encoder = FeatureEncoder(schema, exclude=["label"], scaling="standard").fit(train)
    model = LogisticRegression(solver="lbfgs", max_iter=500)
    model.fit(encoder.transform(train), train["label"].to_numpy())
    expected = roc_auc_score(
        test["label"].to_numpy(),
        model.predict_proba(encoder.transform(test)),
        multi_class="ovr",
        average="macro",
        labels=model.classes_,
    )
    assert scores["logistic_regression_real_auc"] == pytest.approx(expected, abs=1e-9)


def test_ml_efficacy_single_class_synthetic_gets_auc_one_half():
    train, test = split_holdout(_signal_table(), "label")
    synthetic = train.copy()
    synthetic["label"] = "no"
    classifiers = ("decision_tree", "linear_svm", "logistic_regression")
    scores = ml_efficacy(train, test, synthetic, label="label", classifiers=classifiers)
    share = float((test["label"] == "no").mean())
    for c in classifiers:
        assert scores[f"{c}_synthetic_auc"] == 0.5
        assert scores[f"{c}_synthetic_accuracy"] == pytest.approx(share, abs=1e-12)
    assert set(scores) == _expected_keys(classifiers)


def test_ml_efficacy_survives_a_synthetic_class_with_one_row():
    train, test = split_holdout(_signal_table(), "label")
    synthetic = train.copy()
    synthetic["label"] = "no"
    synthetic.loc[0, "label"] = "yes"
    scores = ml_efficacy(train, test, synthetic, label="label", classifiers=("mlp",))
    assert all(math.isfinite(v) for v in scores.values())


def test_ml_efficacy_is_deterministic_under_seed():
    train, test = split_holdout(_signal_table(), "label")
    synthetic = _signal_table(n=300, seed=6)
    synthetic["label"] = np.where(synthetic["noise"] > 0, "yes", "no")
    kwargs = {"label": "label", "classifiers": ("random_forest", "mlp"), "seed": 11}
    assert ml_efficacy(train, test, synthetic, **kwargs) == ml_efficacy(
        train, test, synthetic, **kwargs
    )


def test_ml_efficacy_rejects_unknown_classifiers():
    train, test = split_holdout(_signal_table(), "label")
    with pytest.raises(ValueError, match=r"unknown classifiers \['xgboost'\].*decision_tree"):
        ml_efficacy(train, test, train, label="label", classifiers=("mlp", "xgboost"))
    with pytest.raises(TypeError, match="sequence of names"):
        ml_efficacy(train, test, train, label="label", classifiers="mlp")
    with pytest.raises(ValueError, match="distinct names"):
        ml_efficacy(train, test, train, label="label", classifiers=("mlp", "mlp"))


def test_ml_efficacy_rejects_bad_tables():
    train, test = split_holdout(_signal_table(), "label")
    with pytest.raises(MetricInputError, match="'label' is missing from the synthetic table"):
        ml_efficacy(train, test, train.drop(columns="label"), label="label")
    with pytest.raises(MetricInputError, match="real test table is empty"):
        ml_efficacy(train, test.iloc[:0], train, label="label")
    single = train.copy()
    single["label"] = "no"
    with pytest.raises(ValueError, match="real train table has a single class"):
        ml_efficacy(single, test, train, label="label")


def _three_class_table(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """``label`` is the tercile of ``x1`` plus noise (a, b, c), so no classifier is
    perfect; ``noise`` carries nothing."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    latent = x1 + 0.6 * rng.normal(size=n)
    label = np.where(latent < -0.5, "a", np.where(latent < 0.5, "b", "c"))
    return pd.DataFrame({"x1": x1, "noise": rng.normal(size=n), "label": label})


def test_pairwise_auc_is_hand_and_tills_as_sklearn_computes_it() -> None:
    from flwr_vflgan.metrics.utility import pairwise_auc

    rng = np.random.default_rng(1)
    y = rng.choice(np.array(["a", "b", "c"]), size=300)
    scores = rng.dirichlet(np.ones(3), size=300)
    scores[:, 0] += (y == "a") * 0.3
    scores /= scores.sum(axis=1, keepdims=True)
    expected = roc_auc_score(y, scores, multi_class="ovo", labels=["a", "b", "c"])
    assert pairwise_auc(y, scores, np.array(["a", "b", "c"])) == pytest.approx(expected)
    # Not the one-vs-rest mean, which differs on the same scores.
    ovr = roc_auc_score(y, scores, multi_class="ovr", labels=["a", "b", "c"])
    assert abs(expected - ovr) > 1e-4


def test_pairwise_auc_skips_pairs_absent_from_the_labels_and_takes_raw_scores() -> None:
    from flwr_vflgan.metrics.utility import pairwise_auc

    y = np.array(["a", "a", "b", "b"])
    # Decision-function scores (not probabilities); class c never occurs.
    scores = np.array([[2.0, -1.0, 0.0], [1.0, 0.0, 5.0], [-1.0, 3.0, 0.0], [0.0, 1.0, 9.0]])
    assert pairwise_auc(y, scores, np.array(["a", "b", "c"])) == 1.0
    with pytest.raises(ValueError, match="needs two classes"):
        pairwise_auc(np.array(["a", "a"]), scores[:2], np.array(["a", "b", "c"]))


def test_ml_efficacy_ovo_auc_and_adaboost_on_three_classes() -> None:
    real = _three_class_table()
    train, test = real.iloc[:400], real.iloc[400:]
    kwargs = {"label": "label", "classifiers": ("adaboost", "mlp")}
    ovo = ml_efficacy(train, test, train, multiclass_auc="ovo", **kwargs)
    ovr = ml_efficacy(train, test, train, **kwargs)
    assert 0.7 < ovo["adaboost_real_auc"] < 1 and 0.7 < ovr["adaboost_real_auc"] < 1
    assert ovo["adaboost_real_auc"] != ovr["adaboost_real_auc"]
    # Accuracy and F1 do not depend on how the AUC is averaged.
    assert ovo["mlp_real_accuracy"] == ovr["mlp_real_accuracy"]
    with pytest.raises(ValueError, match="multiclass_auc must be one of"):
        ml_efficacy(train, test, train, multiclass_auc="macro", **kwargs)
