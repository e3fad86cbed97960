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
