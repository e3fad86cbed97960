"""Shadow-model membership inference on a published table: paper 000's ASSD (Section 4.1,
Algorithms 2-3, Appendix A.7), after Stadler, Oprisanu and Troncoso (USENIX Security 2022).

The auditor knows the training table ``X`` and picks a target record ``x_t`` in it, the
most exposed one (:mod:`~flwr_vflgan.privacy.vulnerable`). It trains ``M`` generators on
``X \\ {x_t}`` and ``M`` on ``X``, each with a fresh seed, reduces each one's synthetic
table to a feature vector (:mod:`~flwr_vflgan.privacy.table_features`: Stadler et al.'s
naive, correlation or histogram features) and trains a random forest to tell the two worlds apart on a
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

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.privacy.table_features import FeatureMap, TableFeatures

__all__ = [
    "AttackResult",
    "attack_tables",
    "shadow_attack",
    "shadow_game",
    "shadow_seeds",
    "training_tables",
]


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
