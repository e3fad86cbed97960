"""What the evaluation suite computes: one frozen, self-validating dataclass."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from flwr_vflgan.metrics import KNOWN_CLASSIFIERS, ML_EFFICACY_CLASSIFIERS, MULTICLASS_AUC

__all__ = ["CLASSIFIERS", "METRIC_GROUPS", "EvaluationConfig"]

METRIC_GROUPS = ("fidelity", "statistics", "avd", "ai_utility", "ml_efficacy", "privacy", "images")
"""The metric groups, in report order (also the keys of ``metrics.json["evaluation"]``)."""

CLASSIFIERS = ML_EFFICACY_CLASSIFIERS
"""Paper 001's five classifiers."""


@dataclass(frozen=True)
class EvaluationConfig:
    """Which metrics to compute and how.

    Parameters
    ----------
    fidelity
        Frechet distance on the encoded table (paper 000, eq. 23).
    statistics
        Paper 001's statistical similarity: average Jensen-Shannon divergence, average
        Wasserstein distance, difference of association matrices (overall, and per
        client and across clients when the vertical partition is known).
    avd
        Paper 004's k-AVD for each ``avd_k`` and the correlation-matrix distance.
    ai_utility
        Paper 000's random-forest utility: TRTR, TSTS, TRTS, TSTR and the Total
        Difference. Needs a label.
    ml_efficacy
        Paper 001's five classifiers trained on real vs synthetic rows, tested on a real
        held-out split. Needs a label.
    privacy
        Distance to closest record and nearest-neighbour distance ratio against the
        real training rows.
    images
        Paper 000's MNIST metrics (autoencoder FD, MLP inception score); only for
        image tables (``image_shape`` set).
    cv_folds
        Folds of TRTR/TSTS cross-validation; paper 000 uses 10. ``0`` evaluates
        TRTR/TSTS on one stratified 80/20 split instead (about 10x faster).
    avd_k, avd_combinations, avd_bins
        k-AVD orders, attribute combinations drawn per order (paper 004: 100), and
        equal-frequency bins for numeric columns.
    classifiers
        For ``ml_efficacy``: by default paper 001's five (:data:`CLASSIFIERS`); any of
        those and ``adaboost`` (paper 004's TSTR uses ``mlp`` and ``adaboost``).
    multiclass_auc
        ``ovr`` (one class against the rest) or ``ovo`` (every pair of classes, paper
        004) for a label of more than two classes.
    holdout_fraction
        Share of the real table held out as the test split of ``ml_efficacy`` (and
        the DCR baseline) when no separate holdout table is given.
    dcr_max_rows
        Synthetic (and holdout) rows compared in the DCR/NNDR search; ``None`` = all.
    image_shape
        Height and width of image rows (MNIST: ``(28, 28)``); ``None`` for tables.
    plots
        Write PNG plots next to ``report.md``.
    n_jobs
        Parallel jobs of the random forests (``-1`` = every core, ``None`` = one).
    seed
        Seed of every random choice (splits, forests, combinations, subsamples).
    """

    fidelity: bool = True
    statistics: bool = True
    avd: bool = True
    ai_utility: bool = True
    ml_efficacy: bool = True
    privacy: bool = True
    images: bool = True
    cv_folds: int = 0
    avd_k: tuple[int, ...] = (2, 3)
    avd_combinations: int = 100
    avd_bins: int = 10
    classifiers: tuple[str, ...] = CLASSIFIERS
    multiclass_auc: str = "ovr"
    holdout_fraction: float = 0.2
    dcr_max_rows: int | None = 10_000
    image_shape: tuple[int, int] | None = None
    plots: bool = True
    n_jobs: int | None = -1
    seed: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.type == "bool" and not isinstance(getattr(self, f.name), bool):
                raise ValueError(
                    f"evaluation.{f.name} must be true or false, got {getattr(self, f.name)!r}"
                )
        object.__setattr__(self, "avd_k", tuple(int(k) for k in self.avd_k))
        object.__setattr__(self, "classifiers", tuple(self.classifiers))
        if self.image_shape is not None:
            object.__setattr__(self, "image_shape", tuple(int(v) for v in self.image_shape))
        _check(self.cv_folds == 0 or self.cv_folds >= 2, "cv_folds", "be 0 or >= 2", self.cv_folds)
        _check(all(k >= 1 for k in self.avd_k), "avd_k", "hold orders >= 1", self.avd_k)
        _check(self.avd_combinations >= 1, "avd_combinations", "be >= 1", self.avd_combinations)
        _check(self.avd_bins >= 2, "avd_bins", "be >= 2", self.avd_bins)
        unknown = [c for c in self.classifiers if c not in KNOWN_CLASSIFIERS]
        if unknown or not self.classifiers:
            raise ValueError(
                f"evaluation.classifiers must be a non-empty subset of "
                f"{list(KNOWN_CLASSIFIERS)}, got {list(self.classifiers)}"
            )
        _check(
            self.multiclass_auc in MULTICLASS_AUC,
            "multiclass_auc",
            f"be one of {list(MULTICLASS_AUC)}",
            self.multiclass_auc,
        )
        _check(
            0.0 < self.holdout_fraction < 1.0,
            "holdout_fraction",
            "lie in (0, 1)",
            self.holdout_fraction,
        )
        _check(
            self.dcr_max_rows is None or self.dcr_max_rows >= 2,
            "dcr_max_rows",
            "be null or >= 2",
            self.dcr_max_rows,
        )
        _check(
            self.image_shape is None or (len(self.image_shape) == 2 and min(self.image_shape) > 0),
            "image_shape",
            "be null or [height, width] with positive sides",
            self.image_shape,
        )
        _check(
            self.n_jobs is None or self.n_jobs != 0, "n_jobs", "be null or non-zero", self.n_jobs
        )
        _check(self.seed >= 0, "seed", "be >= 0", self.seed)

    @property
    def enabled(self) -> tuple[str, ...]:
        """The metric groups switched on, in report order."""
        return tuple(g for g in METRIC_GROUPS if getattr(self, g))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (tuples as lists), for ``config.json`` and Hydra's base node."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def _check(ok: bool, name: str, rule: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"evaluation.{name} must {rule}, got {value!r}")
