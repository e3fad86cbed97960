"""EvaluationConfig: defaults, validation messages, JSON form."""

from __future__ import annotations

import pytest

from flwr_vflgan.evaluation import CLASSIFIERS, METRIC_GROUPS, EvaluationConfig


def test_defaults_switch_every_group_on_and_round_trip_through_to_dict() -> None:
    config = EvaluationConfig()
    assert config.enabled == METRIC_GROUPS
    assert EvaluationConfig(**config.to_dict()) == config
    assert config.to_dict()["classifiers"] == list(CLASSIFIERS)


def test_lists_from_yaml_become_tuples() -> None:
    config = EvaluationConfig(avd_k=[2], classifiers=["mlp"], image_shape=[28, 28])  # type: ignore[arg-type]
    assert config.avd_k == (2,) and config.classifiers == ("mlp",)
    assert config.image_shape == (28, 28)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cv_folds": 1}, r"cv_folds must be 0 or >= 2, got 1"),
        ({"avd_k": (0, 2)}, r"avd_k must hold orders >= 1"),
        ({"avd_combinations": 0}, r"avd_combinations must be >= 1, got 0"),
        ({"avd_bins": 1}, r"avd_bins must be >= 2, got 1"),
        ({"classifiers": ("svm",)}, r"classifiers must be a non-empty subset of .*'svm'"),
        ({"classifiers": ()}, r"classifiers must be a non-empty subset"),
        ({"holdout_fraction": 1.0}, r"holdout_fraction must lie in \(0, 1\), got 1.0"),
        ({"dcr_max_rows": 1}, r"dcr_max_rows must be null or >= 2, got 1"),
        ({"image_shape": (28,)}, r"image_shape must be null or \[height, width\]"),
        ({"fidelity": "yes"}, r"evaluation.fidelity must be true or false, got 'yes'"),
        ({"seed": -1}, r"seed must be >= 0, got -1"),
    ],
)
def test_invalid_values_are_named(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EvaluationConfig(**overrides)


def test_the_theses_classifier_and_pairwise_auc_are_settings() -> None:
    config = EvaluationConfig(classifiers=("mlp", "adaboost"), multiclass_auc="ovo")
    assert config.to_dict()["multiclass_auc"] == "ovo"
    assert "adaboost" not in CLASSIFIERS  # paper 001's five stay the default
    with pytest.raises(ValueError, match=r"multiclass_auc must be one of \['ovr', 'ovo'\]"):
        EvaluationConfig(multiclass_auc="pairs")
