"""Shadow-model membership inference on a published table: paper 000's ASSD (Section 4.1,
Algorithms 2-3, Appendix A.7), after Stadler, Oprisanu and Troncoso (USENIX Security 2022).

The auditor knows the training table ``X`` and picks a target record ``x_t`` in it, the
most exposed one (:func:`vulnerable_records`). It trains ``M`` generators on
``X \\ {x_t}`` and ``M`` on ``X``, each with a fresh seed, reduces each one's synthetic
table to a feature vector (:class:`TableFeatures`: Stadler et al.'s naive, correlation
or histogram features) and trains a random forest to tell the two worlds apart on a
share of the tables; the forest's accuracy and AUC on the rest (:func:`shadow_attack`,
repeated on fresh splits) measure how much one synthetic table says about whether
``x_t`` was trained on: 0.5 is nothing, 1 is everything.

This module holds the math on tables; training the shadow generators is the caller's
(``python -m simulations.audit audit.scheme=assd`` trains them through the same
strategy code as a normal run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics.tables import (
    FeatureEncoder,
    categorical_columns,
    category_strings,
    numeric_columns,
)

__all__ = [
    "FEATURE_MAPS",
    "VULNERABILITY",
    "AttackResult",
    "TableFeatures",
    "nearest_neighbour_distances",
    "outlier_counts",
    "shadow_attack",
    "shadow_game",
    "vulnerable_records",
]

FeatureMap = Literal["naive", "correlation", "histogram"]
FEATURE_MAPS: tuple[FeatureMap, ...] = ("naive", "correlation", "histogram")
"""Stadler et al.'s feature sets; paper 000 reports ``naive`` and ``correlation``."""

Vulnerability = Literal["distance", "outliers"]
VULNERABILITY: tuple[Vulnerability, ...] = ("distance", "outliers")
"""Appendix A.7's two rankings: Meeus et al.'s nearest-neighbour distance (the paper's
Record 1) and Stadler et al.'s count of outlying attributes (Record 2)."""


def outlier_counts(frame: pd.DataFrame, schema: Schema) -> np.ndarray:
    """How many of each row's numeric attributes are outliers (Appendix A.7, eqs. 30-31).

    With ``Q1`` and ``Q3`` a column's first and third quartiles and ``T = Q3 - Q1``, a
    value ``a`` is an outlier when ``Q1 - a > T`` or ``a - Q3 > T``. Categorical
    attributes have no quartiles and never count; a missing value is no outlier.
    """
    counts = np.zeros(len(frame), dtype=np.int64)
    for name in numeric_columns(schema):
        values = frame[name].to_numpy(dtype=np.float64)
        if np.isnan(values).all():
            continue
        q1, q3 = np.nanpercentile(values, [25, 75])
        spread = q3 - q1
        with np.errstate(invalid="ignore"):
            counts += ((q1 - values > spread) | (values - q3 > spread)).astype(np.int64)
    return counts


def nearest_neighbour_distances(
    frame: pd.DataFrame, schema: Schema, chunk: int = 2048
) -> np.ndarray:
    """Each row's distance to its nearest other row (Appendix A.7, eq. 32, Meeus et al.).

    ``d(x_i, x_j) = 1 - |F_cat|/F cos(h_i, h_j) - |F_cont|/F cos(c_i, c_j)``, with ``h``
    the one-hot categories and ``c`` the numbers, min-max scaled to [0, 1] over
    ``frame`` (the paper does not say how it scales them; unscaled, the widest column
    would decide alone). A missing number counts as the column's minimum. Two zero
    vectors have cosine 1 (they are equal); a zero vector and another, 0. A row with an
    exact copy in ``frame`` is at distance 0.

    Parameters
    ----------
    frame
        The table, at least two rows.
    schema
        Its column kinds.
    chunk
        Rows compared at once (memory ``chunk * len(frame)`` floats).
    """
    if len(frame) < 2:
        raise ValueError(f"nearest-neighbour distances need at least 2 rows, got {len(frame)}")
    numeric, categorical = numeric_columns(schema), categorical_columns(schema)
    filled = frame.fillna({name: frame[name].min() for name in numeric})
    design = np.nan_to_num(FeatureEncoder(schema).fit_transform(filled))
    parts = [
        (design[:, : len(numeric)], len(numeric)),
        (design[:, len(numeric) :], len(categorical)),
    ]
    total = len(numeric) + len(categorical)
    distances = np.full(len(frame), np.inf)
    for start in range(0, len(frame), chunk):
        rows = slice(start, min(start + chunk, len(frame)))
        similarity = np.zeros((rows.stop - start, len(frame)))
        for block, weight in parts:
            if weight:
                similarity += weight / total * _cosine(block[rows], block)
        distance = 1.0 - similarity
        distance[np.arange(rows.stop - start), np.arange(start, rows.stop)] = np.inf
        distances[rows] = distance.min(axis=1)
    return np.maximum(distances, 0.0)


def _cosine(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``left`` with every row of ``right``; 1 for two
    zero rows, 0 for a zero row and another."""
    left_norm = np.linalg.norm(left, axis=1)
    right_norm = np.linalg.norm(right, axis=1)
    denominator = np.outer(left_norm, right_norm)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.where(denominator > 0, (left @ right.T) / denominator, 0.0)
    both_zero = np.outer(left_norm == 0, right_norm == 0)
    return np.where(both_zero, 1.0, cosine)


def vulnerable_records(
    frame: pd.DataFrame, schema: Schema, method: Vulnerability, count: int = 1
) -> list[int]:
    """The positions of the ``count`` most exposed rows of ``frame``, most exposed first.

    ``distance``: the largest nearest-neighbour distance (:func:`nearest_neighbour_distances`).
    ``outliers``: the most outlying attributes (:func:`outlier_counts`); the paper notes
    that several rows often tie, so ties go to the larger nearest-neighbour distance, then
    to the earlier row (a decision of this implementation).
    """
    if method not in VULNERABILITY:
        raise ValueError(f"unknown vulnerability ranking {method!r}; valid: {list(VULNERABILITY)}")
    if not 1 <= count <= len(frame):
        raise ValueError(f"count must be between 1 and {len(frame)} rows, got {count}")
    distance = nearest_neighbour_distances(frame, schema)
    keys: list[np.ndarray] = [np.arange(len(frame)), -distance]
    if method == "outliers":
        keys.append(-outlier_counts(frame, schema))
    return [int(i) for i in np.lexsort(keys)[:count]]


class TableFeatures:
    """Stadler et al.'s feature map of a synthetic table: one vector per table.

    ``naive``: per numeric column its mean, median and variance; per categorical column
    the number of distinct categories, and the most and the least frequent category (as
    its position among the reference table's categories, one past them for a category
    the reference lacks). ``correlation``: the Pearson correlations of every pair of
    columns of the one-hot, min-max scaled design matrix (upper triangle; a constant
    column correlates 0). ``histogram``: per numeric column the share of rows in each of
    ``bins`` equal bins over the reference's range (values outside fall in the end
    bins), per categorical column the share of each reference category and of any other.

    Parameters
    ----------
    kind
        The feature map.
    reference
        The table the categories, scales and bin edges come from (the auditor's training
        table), so that every synthetic table maps to the same coordinates.
    schema
        Column kinds.
    bins
        Histogram bins per numeric column.
    """

    def __init__(
        self, kind: FeatureMap, reference: pd.DataFrame, schema: Schema, bins: int = 10
    ) -> None:
        if kind not in FEATURE_MAPS:
            raise ValueError(f"unknown feature map {kind!r}; valid: {list(FEATURE_MAPS)}")
        if bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        self.kind = kind
        self.schema = schema
        self.bins = bins
        self.numeric = numeric_columns(schema)
        self.categorical = categorical_columns(schema)
        self.encoder = FeatureEncoder(schema).fit(reference)
        self.categories = {
            c: pd.Index(np.unique(category_strings(reference[c]))) for c in self.categorical
        }
        values = reference[self.numeric].to_numpy(dtype=np.float64)
        self.low = np.nanmin(values, axis=0) if len(self.numeric) else np.zeros(0)
        self.high = np.nanmax(values, axis=0) if len(self.numeric) else np.zeros(0)

    def __call__(self, table: pd.DataFrame) -> np.ndarray:
        """The feature vector of ``table`` (float64; NaN-free)."""
        missing = [c for c in self.schema.names if c not in table.columns]
        if missing:
            raise ValueError(f"the synthetic table lacks columns {missing}")
        features = {"naive": self._naive, "correlation": self._correlation}.get(
            self.kind, self._histogram
        )(table)
        return np.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0)

    def _naive(self, table: pd.DataFrame) -> np.ndarray:
        out: list[float] = []
        for name in self.numeric:
            values = table[name].to_numpy(dtype=np.float64)
            out += [np.nanmean(values), np.nanmedian(values), np.nanvar(values)]
        for name in self.categorical:
            counts = pd.Series(category_strings(table[name])).value_counts(sort=False)
            codes = self.categories[name].get_indexer(counts.index)
            codes = np.where(codes < 0, len(self.categories[name]), codes)
            order = np.lexsort([codes, -counts.to_numpy()])  # most frequent, then first code
            rare = np.lexsort([codes, counts.to_numpy()])
            out += [float(len(counts)), float(codes[order[0]]), float(codes[rare[0]])]
        return np.asarray(out, dtype=np.float64)

    def _correlation(self, table: pd.DataFrame) -> np.ndarray:
        design = np.nan_to_num(self.encoder.transform(table[self.schema.names]))
        with np.errstate(invalid="ignore", divide="ignore"):
            matrix = np.corrcoef(design, rowvar=False)
        matrix = np.atleast_2d(matrix)
        return matrix[np.triu_indices(matrix.shape[0], k=1)]

    def _histogram(self, table: pd.DataFrame) -> np.ndarray:
        out: list[np.ndarray] = []
        rows = max(len(table), 1)
        for position, name in enumerate(self.numeric):
            values = table[name].to_numpy(dtype=np.float64)
            values = values[~np.isnan(values)]
            low, high = self.low[position], self.high[position]
            width = (high - low) / self.bins if high > low else 1.0
            index = np.clip(np.floor((values - low) / width), 0, self.bins - 1).astype(int)
            out.append(np.bincount(index, minlength=self.bins) / rows)
        for name in self.categorical:
            codes = self.categories[name].get_indexer(category_strings(table[name]))
            codes = np.where(codes < 0, len(self.categories[name]), codes)
            out.append(np.bincount(codes, minlength=len(self.categories[name]) + 1) / rows)
        return np.concatenate(out) if out else np.zeros(0)


@dataclass(frozen=True)
class AttackResult:
    """The adversary's accuracy and AUC on the held-out shadow tables, per repetition.

    Attributes
    ----------
    accuracies, aucs
        One value per repetition (a fresh split of the tables each time).
    train_tables, test_tables
        Tables per world the forest trained on and was tested on, each repetition.
    labels, scores
        Every repetition's test tables, pooled: 1 for a table trained with the target, and
        the forest's probability of that (for an ROC curve).
    """

    accuracies: tuple[float, ...]
    aucs: tuple[float, ...]
    train_tables: int
    test_tables: int
    labels: tuple[int, ...] = ()
    scores: tuple[float, ...] = ()

    @property
    def accuracy(self) -> tuple[float, float]:
        """Mean and sample standard deviation of the accuracy over repetitions."""
        return _mean_std(self.accuracies)

    @property
    def auc(self) -> tuple[float, float]:
        """Mean and sample standard deviation of the AUC over repetitions."""
        return _mean_std(self.aucs)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "accuracy_mean": self.accuracy[0],
            "accuracy_std": self.accuracy[1],
            "auc_mean": self.auc[0],
            "auc_std": self.auc[1],
            "accuracies": list(self.accuracies),
            "aucs": list(self.aucs),
            "train_tables_per_world": self.train_tables,
            "test_tables_per_world": self.test_tables,
        }


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def shadow_attack(
    without: np.ndarray,
    with_target: np.ndarray,
    repetitions: int = 5,
    train_fraction: float = 0.7,
    seed: int = 0,
    trees: int = 100,
) -> AttackResult:
    """Train a random forest on the features of a share of the shadow tables and test it
    on the rest (Algorithm 3, then Algorithm 2's game on the held-out tables).

    Each repetition draws a fresh split: ``round(train_fraction * M)`` tables of each
    world train the forest (paper 000: 70 of 100), the others test it. Accuracy
    thresholds the forest's probability at 0.5; AUC ranks it.

    Parameters
    ----------
    without, with_target
        Feature vectors of the tables of the generators trained without and with the
        target, shape ``(M, d)`` each (the same ``M`` and ``d``).
    repetitions
        Splits tried (paper 000: 5).
    train_fraction
        Share of each world's tables that trains the forest.
    seed
        Seed of the splits and the forests.
    trees
        Trees per forest.
    """
    without, with_target = np.atleast_2d(without), np.atleast_2d(with_target)
    if without.shape != with_target.shape:
        raise ValueError(
            f"both worlds need the same number of tables and features, got "
            f"{without.shape} and {with_target.shape}"
        )
    shadows = without.shape[0]
    train = round(train_fraction * shadows)
    if not 1 <= train < shadows:
        raise ValueError(
            f"train_fraction {train_fraction} of {shadows} tables per world leaves "
            f"{train} to train and {shadows - train} to test; both need at least one"
        )
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    rng = np.random.default_rng(seed)
    accuracies, aucs, labels, scores = [], [], [], []
    for repetition in range(repetitions):
        picks = [rng.permutation(shadows) for _ in range(2)]
        x_train = np.concatenate([without[picks[0][:train]], with_target[picks[1][:train]]])
        x_test = np.concatenate([without[picks[0][train:]], with_target[picks[1][train:]]])
        y_train = np.repeat([0, 1], train)
        y_test = np.repeat([0, 1], shadows - train)
        forest = RandomForestClassifier(n_estimators=trees, random_state=seed + repetition)
        score = forest.fit(x_train, y_train).predict_proba(x_test)[:, 1]
        accuracies.append(float(np.mean((score > 0.5) == (y_test == 1))))
        aucs.append(float(roc_auc_score(y_test, score)))
        labels += y_test.tolist()
        scores += score.tolist()
    return AttackResult(
        tuple(accuracies), tuple(aucs), train, shadows - train, tuple(labels), tuple(scores)
    )


Generate = Callable[[pd.DataFrame, int], pd.DataFrame]
"""A training algorithm as the game sees it: (training table, seed) -> synthetic table."""


def shadow_game(
    generate: Generate,
    table: pd.DataFrame,
    schema: Schema,
    target: int,
    shadows: int,
    maps: Sequence[FeatureMap] = ("naive", "correlation"),
    seed: int = 0,
    repetitions: int = 5,
    train_fraction: float = 0.7,
) -> dict[str, AttackResult]:
    """ASSD in one process: ``shadows`` generators per world from ``generate`` (seeds
    :func:`shadow_seeds`), each map's features, :func:`shadow_attack` per map.

    The command line trains its shadows through the federated strategy, in parallel and
    resumably; this is the same game for any ``generate`` (the tests audit generators
    that copy their table and ones that ignore it).
    """
    worlds = training_tables(table, target)
    seeds = shadow_seeds(seed, shadows)
    tables = [[generate(worlds[w], s) for s in seeds[w]] for w in range(2)]
    return attack_tables(tables, table, schema, maps, seed, repetitions, train_fraction)


def training_tables(table: pd.DataFrame, target: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(X without x_t, X)``: the two worlds' training tables."""
    if not 0 <= target < len(table):
        raise ValueError(f"target row {target} is not a row of the {len(table)}-row table")
    return table.drop(index=table.index[target]).reset_index(drop=True), table


def shadow_seeds(seed: int, shadows: int) -> tuple[list[int], list[int]]:
    """Fresh, distinct seeds of the ``shadows`` generators of each world (without the
    target: even offsets, with it: odd)."""
    if shadows < 2:
        raise ValueError(f"the game needs at least 2 shadows per world, got {shadows}")
    base = 1_000_003 * (seed + 1)
    return [base + 2 * k for k in range(shadows)], [base + 2 * k + 1 for k in range(shadows)]


def attack_tables(
    tables: Sequence[Sequence[pd.DataFrame]],
    reference: pd.DataFrame,
    schema: Schema,
    maps: Sequence[FeatureMap],
    seed: int,
    repetitions: int,
    train_fraction: float,
) -> dict[str, AttackResult]:
    """:func:`shadow_attack` per feature map on the synthetic ``tables`` of the two
    worlds (without the target first)."""
    results: dict[str, AttackResult] = {}
    for kind in maps:
        features = TableFeatures(kind, reference, schema)
        vectors = [np.stack([features(t) for t in world]) for world in tables]
        results[kind] = shadow_attack(
            vectors[0], vectors[1], repetitions, train_fraction, seed=seed
        )
    return results
