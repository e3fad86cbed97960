"""Feature importance for the label, and VT-GAN's importance splits between two parties.

VT-GAN (paper 001, Section 4.3.2) ranks the features of a table by their Shapley value
for predicting the label with an MLP with one hidden layer of 100 neurons, then gives
the most important 10 %, 50 % or 90 % of them to one client and the rest, with the
label, to the other ("1090", "5050", "9010"). :func:`feature_importance` estimates the
ranking without the ``shap`` package; :func:`importance_split` turns it into the two
parties' columns.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import ColumnKind, Schema

if TYPE_CHECKING:
    from sklearn.compose import ColumnTransformer
    from sklearn.neural_network import MLPClassifier

# scikit-learn and scipy are imported where they are used: every party process imports
# this module (for the split's settings) and most never rank features; the two
# libraries cost a party node about 90 MiB of its memory budget.

__all__ = [
    "IMPORTANCE_SPLITS",
    "ImportanceSplit",
    "feature_importance",
    "importance_split",
    "parse_importance_split",
]

logger = logging.getLogger(__name__)

ImportanceSplit = Literal["1090", "5050", "9010"]

IMPORTANCE_SPLITS: dict[str, int] = {"1090": 10, "5050": 50, "9010": 90}
"""Paper 001's divisions: name -> percentage of features (most important first) that
the first party holds."""

_HOLDOUT_FRACTION = 0.2
_HIDDEN_LAYER_SIZES = (100,)
_CHUNK_ELEMENTS = 1 << 22  # bounds the hidden activations held at once (32 MiB)


def feature_importance(
    frame: pd.DataFrame,
    schema: Schema,
    label: str,
    *,
    seed: int = 0,
    max_rows: int | None = 5000,
    n_explained: int = 500,
    n_background: int = 100,
    n_permutations: int = 10,
) -> dict[str, float]:
    """Mean absolute Shapley value of every feature for an MLP that predicts ``label``.

    Parameters
    ----------
    frame
        The table; it must hold every column of ``schema``.
    schema
        Column kinds: numeric columns are standardised (missing values imputed with the
        mean), categorical ones one-hot encoded (a missing value is a category).
    label
        The column to predict (a class: categorical or integer, at least two classes).
        Rows with a missing label are dropped.
    seed
        Seed (an int >= 0) of the subsample, the train/held-out split, the network's
        initialisation and the permutations; the same inputs and seed give the same
        dictionary.
    max_rows
        Rows drawn (without replacement) to train and explain on; ``None`` uses all.
    n_explained
        Held-out rows whose Shapley values are estimated (fewer if the held-out part
        is smaller).
    n_background
        Training rows whose values stand in for the features outside a coalition.
    n_permutations
        Feature orders sampled per explained row.

    Returns
    -------
    dict of str to float
        Every column of ``schema`` except ``label``, in schema order, mapped to its
        importance (>= 0; larger is more important).

    Raises
    ------
    TypeError
        If ``frame`` is not a DataFrame, ``schema`` not a Schema, or a count or the
        seed not an int.
    ValueError
        If ``label`` is not a column or is continuous, no feature is left, a column is
        missing from ``frame``, a count is out of range, or the label has fewer than
        two classes (or a class too rare to appear on both sides of the split).

    Notes
    -----
    The estimator is the sampling approximation of Strumbelj and Kononenko (2014) of
    the interventional Shapley values that SHAP's ``KernelExplainer`` targets (Lundberg
    and Lee, 2017, the paper VT-GAN cites). The payoff of a coalition ``S`` for row
    ``x`` is the network's predicted class probabilities with the features outside
    ``S`` taken from each background row, averaged over the background rows. For each
    sampled order the features join one by one and each is credited with the change it
    causes; orders come in antithetic pairs (an order and its reverse), which lowers
    the variance. A feature's importance is the mean over explained rows and classes of
    the absolute Shapley value, the ranking of SHAP's summary plot.

    The network is scikit-learn's ``MLPClassifier(hidden_layer_sizes=(100,))`` with its
    default solver and iteration cap (Adam, 200 epochs), trained on 80 % of the
    subsample; explained rows come from the other 20 %. Its payoffs are computed
    exactly, not approximated: the hidden layer's input is a sum of one term per
    feature, so a coalition's input is the background's plus the joined features'
    differences, and only the ReLU and the output layer run per coalition. Everything
    runs on one BLAS thread, so the result does not depend on how many threads a
    process has: every simulated party computes the same split. With the defaults,
    Adult (48,842 rows, 14 features) takes about 11 s on one core (docs/evaluation.md).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    _check_inputs(frame, schema, label)
    _check_counts(seed, n_explained, n_background, n_permutations, max_rows)
    features = [name for name in schema.names if name != label]
    rng = np.random.default_rng(seed)
    table = _labelled_rows(frame, schema, label, max_rows, rng)
    targets = _label_strings(table[label])
    _check_classes(targets, label)
    train, held_out, y_train, _ = train_test_split(
        table[features],
        targets,
        test_size=_HOLDOUT_FRACTION,
        stratify=targets,
        random_state=int(rng.integers(2**31)),
    )
    encoder = _feature_encoder(schema, features).fit(_as_model_input(train, schema))
    spans = [encoder.output_indices_[name] for name in features]
    x_train = encoder.transform(_as_model_input(train, schema))
    x_held_out = encoder.transform(_as_model_input(held_out, schema))
    network = MLPClassifier(
        hidden_layer_sizes=_HIDDEN_LAYER_SIZES, random_state=int(rng.integers(2**31))
    )
    with threadpool_limits(limits=1, user_api="blas"):
        with warnings.catch_warnings():
            # The default 200-epoch cap is part of the protocol, not a failure.
            warnings.filterwarnings("ignore", category=ConvergenceWarning)
            network.fit(x_train, y_train)
        explained = x_held_out[_pick(rng, len(x_held_out), n_explained)]
        background = x_train[_pick(rng, len(x_train), n_background)]
        shapley = _sampled_shapley(network, explained, background, spans, n_permutations, rng)
    importance = np.abs(shapley).mean(axis=(0, 2))
    result = {name: float(value) for name, value in zip(features, importance, strict=True)}
    logger.debug("feature importance for %r: %s", label, result)
    return result


def parse_importance_split(value: object, *, name: str = "split") -> ImportanceSplit:
    """Check a split name; an int such as ``1090`` (a YAML or command-line value) is accepted.

    Parameters
    ----------
    value
        ``"1090"``, ``"5050"`` or ``"9010"`` (or the same digits as an int).
    name
        The parameter's name, for the error message.

    Returns
    -------
    ImportanceSplit
        The name as a string.

    Raises
    ------
    ValueError
        If ``value`` names no split; the message lists the valid ones.
    """
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or text not in IMPORTANCE_SPLITS:
        raise ValueError(
            f"unknown importance split {name}={value!r}; valid: {list(IMPORTANCE_SPLITS)}"
        )
    return cast(ImportanceSplit, text)


def importance_split(
    importance: Mapping[str, float], label: str, split: str | int, order: Sequence[str]
) -> list[list[str]]:
    """Two parties' columns under one of VT-GAN's importance divisions.

    Parameters
    ----------
    importance
        Importance of every feature (every column but the label), larger is more
        important, for example from :func:`feature_importance`.
    label
        The label column; it goes to the second party, the one without the most
        important features.
    split
        ``"1090"``, ``"5050"`` or ``"9010"``: the first party holds the most important
        10 %, 50 % or 90 % of the features (the same digits as an int are accepted).
    order
        Every column (the features and the label) in table order; each party's columns
        keep this order.

    Returns
    -------
    list of list of str
        ``[party 0 columns, party 1 columns]``. Party 0 holds the ``k`` most important
        features, ``k`` = the percentage of the ``n`` features rounded half up and
        clipped to ``[1, n - 1]`` (Adult's 14: 1, 7 and 13); party 1 holds the other
        ``n - k`` features and the label. Ties in importance go to the column whose name
        sorts first.

    Raises
    ------
    TypeError
        If ``order`` is a string or an importance is not a real number.
    ValueError
        If ``split`` is unknown (the message lists the valid ones), ``label`` has an
        importance, there are fewer than two features, an importance is not finite, or
        ``order`` is not exactly the features and the label, each once.
    """
    split = parse_importance_split(split)
    if label in importance:
        raise ValueError(f"label {label!r} must not have an importance; it is not a feature")
    if len(importance) < 2:
        raise ValueError(
            f"an importance split needs at least two features, got {len(importance)}: "
            f"{list(importance)}"
        )
    for name, value in importance.items():
        if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
            raise TypeError(f"importance of {name!r} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"importance of {name!r} must be finite, got {value}")
    if isinstance(order, str):
        raise TypeError(f"order must be a sequence of column names, got the string {order!r}")
    expected = sorted([*importance, label])
    if sorted(order) != expected:
        raise ValueError(
            f"order must list the features and the label, each once: expected {expected}, "
            f"got {sorted(order)}"
        )
    ranked = sorted(importance, key=lambda name: (-float(importance[name]), name))
    n_features = len(ranked)
    # percent * n / 100 rounded half up, in integers so that 6.5 is not 6.4999...
    top = (IMPORTANCE_SPLITS[split] * n_features + 50) // 100
    first = set(ranked[: min(max(top, 1), n_features - 1)])
    return [
        [name for name in order if name in first],
        [name for name in order if name not in first],
    ]


def _check_inputs(frame: pd.DataFrame, schema: Schema, label: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a Schema, got {type(schema).__name__}")
    if label not in schema.names:
        raise ValueError(f"label {label!r} is not a column; columns: {schema.names}")
    if schema.kind_of(label) is ColumnKind.CONTINUOUS:
        raise ValueError(
            f"label {label!r} is continuous; feature importance needs a class label "
            f"(categorical or integer)"
        )
    if len(schema.names) < 2:
        raise ValueError(f"no feature columns besides the label {label!r}")
    missing = [name for name in schema.names if name not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks the schema's columns {missing}")


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def _check_counts(
    seed: object,
    n_explained: object,
    n_background: object,
    n_permutations: object,
    max_rows: object,
) -> None:
    """Check :func:`feature_importance`'s seed and counts are ints in range (``max_rows`` last)."""
    for name, value, minimum in (
        ("seed", seed, 0),
        ("n_explained", n_explained, 1),
        ("n_background", n_background, 1),
        ("n_permutations", n_permutations, 1),
    ):
        _check_int(name, value, minimum)
    if max_rows is not None:
        _check_int("max_rows", max_rows, 10)


def _labelled_rows(
    frame: pd.DataFrame, schema: Schema, label: str, max_rows: int | None, rng: np.random.Generator
) -> pd.DataFrame:
    """The schema's columns of the rows with a label, subsampled to ``max_rows`` with ``rng``."""
    table = frame.loc[frame[label].notna(), schema.names].reset_index(drop=True)
    if max_rows is not None and len(table) > max_rows:
        picked = np.sort(rng.choice(len(table), size=max_rows, replace=False))
        table = table.iloc[picked].reset_index(drop=True)
    return table


def _check_classes(targets: np.ndarray, label: str) -> None:
    """Check that every class can appear on both sides of the stratified held-out split."""
    classes, counts = np.unique(targets, return_counts=True)
    if len(classes) < 2:
        raise ValueError(
            f"label {label!r} must have at least two classes to rank features, got "
            f"{classes.tolist()}"
        )
    if counts.min() < 2:
        rare = classes[counts < 2].tolist()
        raise ValueError(
            f"label {label!r}: classes {rare} have a single row, too few to hold some out"
        )
    n_held_out = math.ceil(_HOLDOUT_FRACTION * len(targets))
    if min(n_held_out, len(targets) - n_held_out) < len(classes):
        raise ValueError(
            f"label {label!r} has {len(classes)} classes but only {len(targets)} rows: the "
            f"training and held-out parts ({len(targets) - n_held_out} and {n_held_out} rows) "
            f"must each hold one row of every class"
        )


def _label_strings(series: pd.Series) -> np.ndarray:
    # As strings, so 1 and "1" (a CSV round trip) are one class.
    return series.astype(object).astype(str).to_numpy()


def _as_model_input(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Categoricals as strings (a missing value is the category ``"nan"``), numbers as floats."""
    columns = {}
    for name in frame.columns:
        series = frame[name]
        if schema.kind_of(name) is ColumnKind.CATEGORICAL:
            columns[name] = series.astype(object).where(series.notna(), "nan").astype(str)
        else:
            columns[name] = series.astype(np.float64)
    return pd.DataFrame(columns, index=frame.index)


def _feature_encoder(schema: Schema, features: Sequence[str]) -> ColumnTransformer:
    """One transformer per feature, so ``output_indices_`` gives each feature's columns."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    steps = []
    for name in features:
        transformer: OneHotEncoder | Pipeline
        if schema.kind_of(name) is ColumnKind.CATEGORICAL:
            transformer = OneHotEncoder(handle_unknown="ignore", sparse_output=False)
        else:
            transformer = Pipeline(
                [("impute", SimpleImputer(strategy="mean")), ("scale", StandardScaler())]
            )
        steps.append((name, transformer, [name]))
    return ColumnTransformer(steps, sparse_threshold=0.0)


def _pick(rng: np.random.Generator, n_rows: int, count: int) -> np.ndarray:
    return np.sort(rng.choice(n_rows, size=min(count, n_rows), replace=False))


def _sampled_shapley(
    network: MLPClassifier,
    explained: np.ndarray,
    background: np.ndarray,
    spans: Sequence[slice],
    n_permutations: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Shapley values, shape (explained rows, features, classes), by sampled orders."""
    background_parts = _hidden_parts(network, background, spans)
    values = [
        _shapley_over_orders(
            network,
            _hidden_parts(network, row[None, :], spans)[0],
            background_parts,
            _antithetic_orders(rng, len(spans), n_permutations),
        )
        for row in explained
    ]
    return np.stack(values)


def _hidden_parts(network: MLPClassifier, rows: np.ndarray, spans: Sequence[slice]) -> np.ndarray:
    """Each feature's share of the hidden pre-activation, shape (rows, features, hidden).

    The hidden layer's input is linear in the encoded columns, so a row whose features
    come from different rows has the sum of their shares: coalitions cost a sum, not a
    pass of the whole row through the first layer.
    """
    weights = network.coefs_[0]
    return np.stack([rows[:, span] @ weights[span] for span in spans], axis=1)


def _shapley_over_orders(
    network: MLPClassifier, row_parts: np.ndarray, background_parts: np.ndarray, orders: np.ndarray
) -> np.ndarray:
    """One row's Shapley values, shape (features, classes), averaged over ``orders``.

    ``row_parts`` (features, hidden) and ``background_parts`` (background rows, features,
    hidden) come from :func:`_hidden_parts`. Along an order the features switch from the
    background rows' values to the row's one at a time; each is credited with the change
    of the predicted probabilities, averaged over the background rows.
    """
    n_background, n_features, n_hidden = background_parts.shape
    swap = row_parts[None, :, :] - background_parts  # a feature joining the coalition
    start = background_parts.sum(axis=1) + network.intercepts_[0]  # nobody has joined
    chunk = max(1, _CHUNK_ELEMENTS // (n_background * (n_features + 1) * n_hidden))
    phi = np.zeros((n_features, len(network.classes_)))
    for first in range(0, len(orders), chunk):
        block = orders[first : first + chunk]
        # hidden[b, p, k]: pre-activation once k features of order p have joined.
        hidden = np.empty((n_background, len(block), n_features + 1, n_hidden))
        hidden[:, :, 0, :] = start[:, None, :]
        np.cumsum(swap[:, block, :], axis=2, out=hidden[:, :, 1:, :])
        hidden[:, :, 1:, :] += start[:, None, None, :]
        np.maximum(hidden, 0.0, out=hidden)
        payoff = _output_proba(network, hidden).mean(axis=0)
        gains = np.diff(payoff, axis=1)  # gains[p, k]: credit of feature block[p, k]
        for order, gain in zip(block, gains, strict=True):
            phi[order] += gain
    return phi / len(orders)


def _output_proba(network: MLPClassifier, hidden: np.ndarray) -> np.ndarray:
    """Class probabilities from ReLU hidden activations, as ``predict_proba`` computes."""
    from scipy.special import expit, softmax

    scores = hidden @ network.coefs_[1] + network.intercepts_[1]
    if network.out_activation_ == "logistic":
        positive = expit(scores)
        return np.concatenate([1.0 - positive, positive], axis=-1)
    return softmax(scores, axis=-1)


def _antithetic_orders(rng: np.random.Generator, n_features: int, count: int) -> np.ndarray:
    """``count`` feature orders: random ones each followed by its reverse."""
    drawn = [rng.permutation(n_features) for _ in range((count + 1) // 2)]
    orders = [order for first in drawn for order in (first, first[::-1])]
    return np.stack(orders[:count])
