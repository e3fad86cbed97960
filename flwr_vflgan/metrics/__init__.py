"""Metrics of synthetic tables (papers 000, 001 and 004): pure functions over DataFrames."""

ML_EFFICACY_CLASSIFIERS = (
    "decision_tree",
    "linear_svm",
    "random_forest",
    "logistic_regression",
    "mlp",
)
"""The five classifiers of paper 001, Section 4.2.1, by the names
:func:`~flwr_vflgan.metrics.utility.ml_efficacy` takes (defined here so that
configuration can name them without importing scikit-learn)."""

KNOWN_CLASSIFIERS = (*ML_EFFICACY_CLASSIFIERS, "adaboost")
"""Every classifier ``ml_efficacy`` can train: paper 001's five, and paper 004's AdaBoost
(50 boosting steps; its MLP, one hidden layer of 100, is ``mlp``)."""

MULTICLASS_AUC = ("ovr", "ovo")
"""How a multi-class AUC is averaged: one class against the rest (macro), or every pair of
classes (paper 004, Section 5.2: Hand and Till's mean over pairs)."""
