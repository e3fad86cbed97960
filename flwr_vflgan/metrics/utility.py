"""Machine-learning utility of synthetic tables: paper 000's TRTR/TSTS/TRTS/TSTR and
paper 001's ML efficacy.

Both metrics train classifiers that predict the label column from all other columns
and compare how they score when trained (or tested) on synthetic rows instead of
real ones. Labels are compared as strings (:func:`~flwr_vflgan.metrics.tables.
category_strings`), so ``1`` and ``"1"`` are one class. Every random choice (splits,
forests, networks) comes from an explicit ``random_state`` derived from ``seed``: the
same inputs and seed give the same dictionary.

F1 is the macro average over classes (the unweighted mean of the per-class F1 scores)
in every setting of both metrics. Paper 000's Table 1 implies it: the multi-class wine
tables have F1 0.26 at accuracy 0.59, and on Adult (24 % positive) a binary F1 of 0.72
at accuracy 0.82 would need a recall of about 0.96 for the positive class; the authors'
public evaluation script scores with ``"f1_macro"``. CTAB-GAN's evaluation, which
paper 001 follows, also averages the two per-class F1 scores of a binary label.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin, clone
from sklearn.ensemble import AdaBoostClassifier, RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics import KNOWN_CLASSIFIERS, ML_EFFICACY_CLASSIFIERS, MULTICLASS_AUC
from flwr_vflgan.metrics.tables import FeatureEncoder, category_strings, check_pair

__all__ = [
    "HOLDOUT_FRACTION",
    "ML_EFFICACY_CLASSIFIERS",
    "ai_training_utility",
    "ml_efficacy",
    "split_holdout",
    "total_difference",
]

logger = logging.getLogger(__name__)

HOLDOUT_FRACTION = 0.2
"""Share of rows held out for testing: :func:`split_holdout` and ``folds=0``."""


_SETTINGS = ("tsts", "trts", "tstr")
_SCORES = ("accuracy", "f1")
_MLP_VALIDATION = 0.1


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def _random_states(seed: int, count: int) -> list[int]:
    """``count`` independent ``random_state`` ints for scikit-learn, derived from ``seed``."""
    return [int(word) for word in np.random.SeedSequence(int(seed)).generate_state(count)]


def _macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(f1_score(y_true, y_pred, average="macro", zero_division=0))


def _accuracy_f1(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    predicted = model.predict(x)
    return float(accuracy_score(y, predicted)), _macro_f1(y, predicted)


def _majority_baseline(
    tstr_predictions: np.ndarray, y_real: np.ndarray, label: str
) -> dict[str, float]:
    """What TSTR is worth: the scores of always predicting the real table's most frequent
    class, and how many classes the forest trained on the synthetic table predicts for
    the real rows (``tstr_predictions``; one: its TSTR scores are that constant guess,
    logged as a warning)."""
    classes, counts = np.unique(y_real, return_counts=True)
    majority = classes[int(np.argmax(counts))]
    constant = np.full(y_real.shape, majority, dtype=y_real.dtype)
    predicted = np.unique(tstr_predictions)
    if len(predicted) == 1:
        logger.warning(
            "TSTR: the forest trained on the synthetic table predicts %r for every real row "
            "(label %r); its scores are those of a constant guess, not of a learned relation",
            str(predicted[0]),
            label,
        )
    return {
        "majority_accuracy": float(accuracy_score(y_real, constant)),
        "majority_f1": _macro_f1(y_real, constant),
        "tstr_predicted_classes": float(len(predicted)),
    }


def _class_counts(labels: np.ndarray) -> dict[str, int]:
    classes, counts = np.unique(labels, return_counts=True)
    return {str(c): int(n) for c, n in zip(classes, counts, strict=True)}


def split_holdout(
    real: pd.DataFrame,
    label: str,
    *,
    fraction: float = HOLDOUT_FRACTION,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split a real table into a training part and a held-out test part, stratified.

    Paper 001 (Section 4.2.1) splits the original data once: the GAN learns from the
    training part and :func:`ml_efficacy` tests every classifier on the held-out part.

    Parameters
    ----------
    real
        The real table.
    label
        The label column; the split keeps its class proportions (classes compared as
        strings).
    fraction
        Share of rows in the test part, in (0, 1).
    seed
        Seed of the split (a non-negative int).

    Returns
    -------
    tuple of DataFrame
        ``(train, test)``, each with a fresh ``RangeIndex``.

    Raises
    ------
    TypeError
        If ``real`` is not a DataFrame or ``seed`` is not an int.
    ValueError
        If ``fraction`` is not in (0, 1), ``label`` is not a column, a label class has a
        single row (it cannot be on both sides), or a part would hold fewer rows than
        there are classes.
    """
    if not isinstance(real, pd.DataFrame):
        raise TypeError(f"real must be a pandas DataFrame, got {type(real).__name__}")
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise TypeError(f"fraction must be a float, got {type(fraction).__name__}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    _check_seed(seed)
    if label not in real.columns:
        raise ValueError(f"label {label!r} is not a column of real; it has {list(real.columns)}")
    labels = category_strings(real[label])
    rare = {c: n for c, n in _class_counts(labels).items() if n < 2}
    if rare:
        raise ValueError(
            f"cannot split {label!r} stratified: classes {sorted(rare)} have a single row"
        )
    train, test = train_test_split(
        real, test_size=fraction, stratify=labels, random_state=_random_states(seed, 1)[0]
    )
    return train.reset_index(drop=True), test.reset_index(drop=True)


def total_difference(scores: Mapping[str, float]) -> float:
    """Paper 000's "Total Difference": the summed distance of TSTS, TRTS and TSTR from TRTR.

    Parameters
    ----------
    scores
        Holds ``"trtr_accuracy"``, ``"trtr_f1"`` and the same two scores for ``"tsts"``,
        ``"trts"`` and ``"tstr"`` (other keys are ignored).

    Returns
    -------
    float
        The sum of the six absolute differences ``|s_accuracy - trtr_accuracy|`` and
        ``|s_f1 - trtr_f1|`` over the settings ``s``; lower is better. NaN if a score is
        NaN.

    Raises
    ------
    ValueError
        If a needed key is missing.

    Notes
    -----
    Table 1 of paper 000 lists these six differences in brackets and their sum as
    "Total Difference"; for example WGAN_GP on Adult: TRTR 0.82/0.72, TSTS 0.82/0.74,
    TRTS 0.81/0.71, TSTR 0.72/0.69 give 0 + 0.02 + 0.01 + 0.01 + 0.10 + 0.03 = 0.17.
    """
    needed = [f"{s}_{m}" for s in ("trtr", *_SETTINGS) for m in _SCORES]
    missing = [key for key in needed if key not in scores]
    if missing:
        raise ValueError(f"scores is missing {missing}; it has {sorted(scores)}")
    return float(
        sum(abs(scores[f"{s}_{m}"] - scores[f"trtr_{m}"]) for s in _SETTINGS for m in _SCORES)
    )


def _check_folds(folds: int) -> None:
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer):
        raise TypeError(f"folds must be an int, got {type(folds).__name__}")
    if folds < 0 or folds == 1:
        raise ValueError(
            f"folds must be 0 (one stratified {1 - HOLDOUT_FRACTION:.0%}/{HOLDOUT_FRACTION:.0%} "
            f"split) or at least 2 (stratified cross-validation), got {folds}"
        )


def _check_real_label(labels: np.ndarray, label: str, folds: int) -> None:
    counts = _class_counts(labels)
    if len(counts) < 2:
        raise ValueError(
            f"label {label!r} of the real table has a single class {next(iter(counts))!r}; "
            "a classifier needs at least two"
        )
    needed = max(folds, 2)
    rare = {c: n for c, n in counts.items() if n < needed}
    if rare:
        hint = "use fewer folds or folds=0 (one split)" if folds else "it needs 2 rows per class"
        shown = dict(list(rare.items())[:5])
        more = f" and {len(rare) - len(shown)} more" if len(rare) > len(shown) else ""
        raise ValueError(
            f"label {label!r} of the real table has {len(rare)} classes with fewer than "
            f"{needed} rows ({shown}{more}) but folds={folds}: {hint}"
        )


def _splits(labels: np.ndarray, folds: int, random_state: int) -> Iterator[tuple[Any, Any]]:
    """Stratified train/test index pairs: ``folds`` folds, or the first of five for 0."""
    n_splits = folds if folds else round(1 / HOLDOUT_FRACTION)
    splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    with warnings.catch_warnings():
        # Rare synthetic classes are allowed; their rows spread over fewer folds.
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        pairs = list(splitter.split(np.zeros(len(labels)), labels))
    return iter(pairs[:1] if folds == 0 else pairs)


def _can_split(labels: np.ndarray, folds: int) -> bool:
    counts = _class_counts(labels).values()
    n_splits = folds if folds else round(1 / HOLDOUT_FRACTION)
    return len(counts) >= 2 and max(counts) >= n_splits


def _within(
    x: np.ndarray, y: np.ndarray, folds: int, forest: RandomForestClassifier, split_state: int
) -> tuple[float, float]:
    """Mean accuracy and macro F1 of ``forest`` over the stratified splits of one table."""
    results = []
    for train, test in _splits(y, folds, split_state):
        model = _fitted(forest, x[train], y[train])
        results.append(_accuracy_f1(model, x[test], y[test]))
    accuracy, f1 = np.mean(results, axis=0)
    return float(accuracy), float(f1)


def _fitted(template: Any, x: np.ndarray, y: np.ndarray) -> Any:
    return clone(template).fit(x, y)


def ai_training_utility(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    label: str,
    folds: int = 10,
    seed: int = 0,
    n_estimators: int = 100,
    n_jobs: int | None = None,
) -> dict[str, float]:
    """Paper 000's AI-training utility: random forests under TRTR, TSTS, TRTS and TSTR.

    Parameters
    ----------
    real, synthetic
        The two tables (same columns).
    schema
        Column kinds; inferred from ``real`` when omitted.
    label
        The column to predict from all others.
    folds
        Folds of the stratified cross-validation of TRTR and TSTS (paper 000 uses 10).
        ``0`` is the fast mode: one stratified split, 80 % training and 20 % testing
        (:data:`HOLDOUT_FRACTION`), for each of the two tables.
    seed
        Seed of the splits and the forests.
    n_estimators
        Trees per random forest.
    n_jobs
        Parallel jobs of each forest (scikit-learn's meaning).

    Returns
    -------
    dict of str to float
        ``"trtr_accuracy"``, ``"trtr_f1"``, the same for ``"tsts"``, ``"trts"`` and
        ``"tstr"``; ``"<setting>_accuracy_difference"`` and ``"<setting>_f1_difference"``,
        the absolute differences from TRTR, for the three settings; their sum
        ``"total_difference"`` (:func:`total_difference`, lower is better); and
        ``"folds"``. Beside them, what TSTR is worth: ``"majority_accuracy"`` and
        ``"majority_f1"``, the scores on the real table of always predicting its most
        frequent class, and ``"tstr_predicted_classes"``, how many classes the forest
        trained on the synthetic table predicts for the real rows (1: TSTR is that
        constant guess, and a warning says so).

    Raises
    ------
    MetricInputError
        If a table is empty, the columns differ, ``label`` is missing from a table, or a
        numeric column holds unusable values (:func:`~flwr_vflgan.metrics.tables.
        check_pair`).
    ValueError
        If ``folds`` is negative or 1, ``n_estimators`` < 1, ``seed`` < 0, the real label
        has a single class, or a real class has fewer than ``max(folds, 2)`` rows.

    Notes
    -----
    Features are the other columns one-hot encoded and min-max scaled with the real
    table's categories and ranges (:class:`~flwr_vflgan.metrics.tables.FeatureEncoder`).
    TRTR and TSTS are the mean accuracy and macro F1 over the held-out folds of the real
    resp. synthetic table (paper 000, Section 5.2.2); both tables are split with the
    same splitter seed and every forest gets the same ``random_state``, so a synthetic
    table identical to the real one gives TSTS equal to TRTR. TRTS trains on the whole
    real table and tests on the whole synthetic table; TSTR the other way round.

    If the synthetic label has a single class (or no synthetic class has as many rows as
    there are splits: ``folds``, or five in the fast mode), TSTS is undefined: ``tsts_*`` and ``total_difference`` are NaN.
    TRTS and TSTR still run; a forest trained on one class predicts it everywhere. Rare
    synthetic classes are otherwise allowed (their rows fall into fewer folds).

    The authors' public evaluation script differs in ways this function does not copy:
    forests of depth at most 3 (hence TRTR accuracy 0.82 on Adult in Table 1, where
    full-depth forests reach about 0.85) and ten random 70/30 splits instead of folds.
    """
    _check_folds(folds)
    _check_seed(seed)
    if isinstance(n_estimators, bool) or not isinstance(n_estimators, int | np.integer):
        raise TypeError(f"n_estimators must be an int, got {type(n_estimators).__name__}")
    if n_estimators < 1:
        raise ValueError(f"n_estimators must be >= 1, got {n_estimators}")
    schema = check_pair(real, synthetic, schema, label=label)
    y_real, y_synthetic = category_strings(real[label]), category_strings(synthetic[label])
    _check_real_label(y_real, label, folds)
    encoder = FeatureEncoder(schema, exclude=[label], scaling="minmax").fit(real)
    x_real, x_synthetic = encoder.transform(real), encoder.transform(synthetic)
    forest_state, split_state = _random_states(seed, 2)
    forest = RandomForestClassifier(
        n_estimators=int(n_estimators), random_state=forest_state, n_jobs=n_jobs
    )

    scores: dict[str, float] = {}
    scores["trtr_accuracy"], scores["trtr_f1"] = _within(x_real, y_real, folds, forest, split_state)
    if _can_split(y_synthetic, folds):
        tsts = _within(x_synthetic, y_synthetic, folds, forest, split_state)
    else:
        logger.warning(
            "TSTS is undefined: synthetic label %r has classes %s; reporting NaN",
            label,
            _class_counts(y_synthetic),
        )
        tsts = (float("nan"), float("nan"))
    scores["tsts_accuracy"], scores["tsts_f1"] = tsts
    on_real = _fitted(forest, x_real, y_real)
    scores["trts_accuracy"], scores["trts_f1"] = _accuracy_f1(on_real, x_synthetic, y_synthetic)
    on_synthetic = _fitted(forest, x_synthetic, y_synthetic)
    tstr_predictions = on_synthetic.predict(x_real)
    scores["tstr_accuracy"] = float(accuracy_score(y_real, tstr_predictions))
    scores["tstr_f1"] = _macro_f1(y_real, tstr_predictions)
    scores.update(_majority_baseline(tstr_predictions, y_real, label))

    for setting in _SETTINGS:
        for score in _SCORES:
            difference = abs(scores[f"{setting}_{score}"] - scores[f"trtr_{score}"])
            scores[f"{setting}_{score}_difference"] = float(difference)
    scores["total_difference"] = total_difference(scores)
    scores["folds"] = float(folds)
    return scores


def _make_classifier(name: str, random_state: int, labels: np.ndarray) -> ClassifierMixin:
    """One of the five classifiers, as CTAB-GAN's evaluation configures them (see Notes)."""
    if name == "decision_tree":
        return DecisionTreeClassifier(random_state=random_state)
    if name == "linear_svm":
        return LinearSVC(dual="auto", random_state=random_state)
    if name == "random_forest":
        return RandomForestClassifier(random_state=random_state)
    if name == "logistic_regression":
        return LogisticRegression(solver="lbfgs", max_iter=500)
    if name == "adaboost":
        return AdaBoostClassifier(n_estimators=50, random_state=random_state)
    # Early stopping holds out a stratified 10 %: every class needs two rows and the
    # held-out part one row per class.
    counts = _class_counts(labels).values()
    can_validate = min(counts) >= 2 and _MLP_VALIDATION * len(labels) >= len(counts)
    return MLPClassifier(
        random_state=random_state,
        max_iter=100,
        early_stopping=can_validate,
        validation_fraction=_MLP_VALIDATION,
    )


def _check_classifiers(classifiers: Sequence[str]) -> tuple[str, ...]:
    if isinstance(classifiers, str) or not isinstance(classifiers, Sequence):
        raise TypeError(
            f"classifiers must be a sequence of names, got {type(classifiers).__name__} "
            f"{classifiers!r}"
        )
    names = tuple(classifiers)
    unknown = [name for name in names if name not in KNOWN_CLASSIFIERS]
    if unknown:
        raise ValueError(
            f"unknown classifiers {unknown}; valid names are {list(KNOWN_CLASSIFIERS)}"
        )
    if not names or len(set(names)) != len(names):
        raise ValueError(f"classifiers must be distinct names, at least one; got {list(names)}")
    return names


def _class_scores(model: Any, x: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Scores of ``model`` for each of ``classes`` (columns); 0 for a class it never saw."""
    if hasattr(model, "predict_proba"):
        raw = model.predict_proba(x)
    else:
        raw = model.decision_function(x)
        if raw.ndim == 1:  # binary: the score of model.classes_[1]
            raw = np.column_stack([-raw, raw])
    seen = {str(c): i for i, c in enumerate(model.classes_)}
    scores = np.zeros((len(x), len(classes)))
    for column, c in enumerate(classes):
        if c in seen:
            scores[:, column] = raw[:, seen[c]]
    return scores


def _auc(
    y_true: np.ndarray, scores: np.ndarray, classes: np.ndarray, multiclass: str = "ovr"
) -> float:
    """ROC AUC: of the positive (second) class if binary, else the one-vs-rest macro
    mean (``ovr``) or the mean over pairs of classes (``ovo``, :func:`pairwise_auc`)."""
    if len(classes) == 2:
        return float(roc_auc_score(y_true == classes[1], scores[:, 1]))
    if multiclass == "ovo":
        return pairwise_auc(y_true, scores, classes)
    per_class = [roc_auc_score(y_true == c, scores[:, i]) for i, c in enumerate(classes)]
    return float(np.mean(per_class))


def pairwise_auc(y_true: np.ndarray, scores: np.ndarray, classes: np.ndarray) -> float:
    """Hand and Till's multi-class AUC, paper 004's "averaging the AUC scores of all
    possible pairwise combinations of the classes".

    For classes ``i < j``, ``A(i|j)`` is the AUC of column ``i``'s score separating the
    rows of class ``i`` from those of class ``j`` (the other rows left out); the pair's
    AUC is ``(A(i|j) + A(j|i)) / 2`` and the result the mean over the pairs that both
    occur in ``y_true``. Scores need not be probabilities.
    """
    pairs = []
    for i, j in itertools.combinations(range(len(classes)), 2):
        rows = (y_true == classes[i]) | (y_true == classes[j])
        positive = y_true[rows] == classes[i]
        if positive.all() or not positive.any():
            continue
        a_ij = roc_auc_score(positive, scores[rows, i])
        a_ji = roc_auc_score(~positive, scores[rows, j])
        pairs.append((a_ij + a_ji) / 2)
    if not pairs:
        raise ValueError("a pairwise AUC needs two classes in y_true")
    return float(np.mean(pairs))


class _Constant:
    """Stands in for a classifier trained on a single class: predicts it everywhere."""

    def __init__(self, only: str) -> None:
        self.classes_ = np.array([only], dtype=object)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.full(len(x), self.classes_[0], dtype=object)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return np.ones((len(x), 1))


def _evaluate(
    name: str,
    random_state: int,
    x: np.ndarray,
    y: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    multiclass_auc: str = "ovr",
) -> tuple[float, float, float]:
    """Train ``name`` on ``(x, y)`` and return its accuracy, macro F1 and AUC on the test rows."""
    if len(np.unique(y)) < 2:
        model: Any = _Constant(str(y[0]))
    else:
        with warnings.catch_warnings():
            # The iteration caps are part of the protocol, not a failure.
            warnings.filterwarnings("ignore", category=ConvergenceWarning)
            model = _make_classifier(name, random_state, y).fit(x, y)
    accuracy, f1 = _accuracy_f1(model, x_test, y_test)
    classes = np.unique(y_test)
    scores = _class_scores(model, x_test, classes)
    return accuracy, f1, _auc(y_test, scores, classes, multiclass_auc)


def ml_efficacy(
    real_train: pd.DataFrame,
    real_test: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    label: str,
    classifiers: Sequence[str] = ML_EFFICACY_CLASSIFIERS,
    seed: int = 0,
    multiclass_auc: str = "ovr",
) -> dict[str, float]:
    """Paper 001's ML utility: classifiers trained on real or synthetic rows, tested on real.

    Parameters
    ----------
    real_train
        The real rows the generator learned from.
    real_test
        Held-out real rows (:func:`split_holdout`); every classifier is tested on them.
    synthetic
        The synthetic table (same columns).
    schema
        Column kinds; inferred from ``real_train`` when omitted.
    label
        The column to predict from all others.
    classifiers
        Names from :data:`KNOWN_CLASSIFIERS`, distinct (paper 001's five by default).
    seed
        Seed of the classifiers' ``random_state``.
    multiclass_auc
        ``ovr`` (one class against the rest, macro mean) or ``ovo`` (the mean over
        pairs of classes, paper 004: :func:`pairwise_auc`); binary labels are the same
        either way.

    Returns
    -------
    dict of str to float
        For each classifier ``c``: ``f"{c}_real_accuracy"``, ``f"{c}_synthetic_accuracy"``
        and ``f"{c}_accuracy_difference"`` (real minus synthetic, signed), the same for
        ``"f1"`` (macro) and ``"auc"``; and ``"accuracy_difference"``,
        ``"f1_difference"``, ``"auc_difference"``, the means of the differences over the
        classifiers (lower is better; negative when synthetic training wins).

    Raises
    ------
    MetricInputError
        If a table is empty, the columns differ, ``label`` is missing, or a numeric
        column holds unusable values.
    TypeError
        If ``classifiers`` is a string or not a sequence.
    ValueError
        If a classifier name is unknown or repeated, ``seed`` < 0, or the label of
        ``real_train`` or ``real_test`` has a single class.

    Notes
    -----
    Features are one-hot categories and standardised numbers, fitted on ``real_train``
    (linear models and the network need the scaling). Classifiers follow CTAB-GAN's
    evaluation (the protocol VT-GAN reports): ``DecisionTreeClassifier``,
    ``RandomForestClassifier`` (100 trees), ``LogisticRegression(solver="lbfgs",
    max_iter=500)`` and ``MLPClassifier(max_iter=100)``, with these deviations:

    - the linear SVM is ``LinearSVC(dual="auto")`` (paper 001 names a linear SVM;
      CTAB-GAN's kernel ``SVC(probability=True)`` takes minutes on Adult); its AUC uses
      ``decision_function``;
    - the MLP stops early (``early_stopping=True``: 10 % of the training rows validate,
      training stops after 10 epochs without improvement), which takes about 4 s
      instead of about 20 s per fit on Adult; without a validation split to draw (a
      class with a single training row) it trains the full 100 epochs;
    - F1 is macro and multi-class AUC is the one-vs-rest macro mean by default (CTAB-GAN
      weights both by class frequency for multi-class labels); ``multiclass_auc="ovo"``
      averages over pairs of classes as paper 004 does.

    ``adaboost`` (paper 004's second TSTR classifier) is ``AdaBoostClassifier`` with 50
    boosting steps.

    Binary AUC scores the second of the sorted class names (for probabilities the choice
    does not matter). A classifier whose training rows hold a single class predicts it
    everywhere with a constant score, so its AUC is 0.5; a test class a classifier never
    saw gets a constant score (AUC 0.5 for that class) and F1 0. BLAS runs on one thread
    during the fits: the network's small matrix products ran up to eight times slower
    with two threads on a shared two-core machine.
    """
    names = _check_classifiers(classifiers)
    _check_seed(seed)
    if multiclass_auc not in MULTICLASS_AUC:
        raise ValueError(
            f"multiclass_auc must be one of {list(MULTICLASS_AUC)}, got {multiclass_auc!r}"
        )
    schema = check_pair(
        real_train, real_test, schema, label=label, names=("real train", "real test")
    )
    schema = check_pair(
        real_train, synthetic, schema, label=label, names=("real train", "synthetic")
    )
    labels = {
        "real train": category_strings(real_train[label]),
        "real test": category_strings(real_test[label]),
        "synthetic": category_strings(synthetic[label]),
    }
    for table in ("real train", "real test"):
        counts = _class_counts(labels[table])
        if len(counts) < 2:
            raise ValueError(
                f"label {label!r} of the {table} table has a single class {counts}; "
                "accuracy, F1 and AUC need at least two"
            )
    encoder = FeatureEncoder(schema, exclude=[label], scaling="standard").fit(real_train)
    x_train, x_test = encoder.transform(real_train), encoder.transform(real_test)
    x_synthetic = encoder.transform(synthetic)
    random_state = _random_states(seed, 1)[0]

    scores: dict[str, float] = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for name in names:
            test = (x_test, labels["real test"], multiclass_auc)
            real = _evaluate(name, random_state, x_train, labels["real train"], *test)
            fake = _evaluate(name, random_state, x_synthetic, labels["synthetic"], *test)
            for metric, on_real, on_synthetic in zip(
                ("accuracy", "f1", "auc"), real, fake, strict=True
            ):
                scores[f"{name}_real_{metric}"] = on_real
                scores[f"{name}_synthetic_{metric}"] = on_synthetic
                scores[f"{name}_{metric}_difference"] = on_real - on_synthetic
    for metric in ("accuracy", "f1", "auc"):
        scores[f"{metric}_difference"] = float(
            np.mean([scores[f"{name}_{metric}_difference"] for name in names])
        )
    return scores
