"""Paper 004's membership attack as its Figures 5.7-5.10 run it (Section 5.2.2): ``m``
training records and ``m`` unseen ones are the targets, each scored by the share of
synthetic rows within Hamming distance ``t`` of it
(:func:`~flwr_vflgan.privacy.baselines.hamming_monte_carlo`), and the attack's accuracy
is the members' share of the ``m`` best scores
(:func:`~flwr_vflgan.privacy.baselines.mia_accuracy`; 0.5 is a coin). The training
targets hold a chosen share of outliers (the thesis: 0 %, 50 % and 100 %), and the test
runs several times on fresh targets ("because of the severe randomness").

Decisions where the thesis is silent (docs/privacy.md, "Paper 004's attack"):

* **Outliers.** A record is an outlier when at least one of its numeric attributes is
  outlying by Stadler et al.'s rule, the one paper 000's Appendix A.7 uses
  (:func:`~flwr_vflgan.privacy.vulnerable.outlier_counts`), with the quartiles of the
  training table. A table without numbers (the thesis's discretised Adult,
  ``dataset=adult_thesis``) has no quartiles: there a record is an outlier when it holds
  a value fewer than 1 % of the training rows hold (:func:`rare_value_rows`). The
  thesis does not say how it finds them.
* **Attribute codes.** The thesis discretises every dataset before training, so its
  Hamming distance compares codes. Here a categorical attribute's code is its value;
  a numeric one's is its bin among :data:`CODE_BINS` equal-frequency bins whose edges
  are the synthetic table's quantiles, which the attacker holds (a missing number is
  a code of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import ColumnKind, Schema
from flwr_vflgan.metrics.tables import category_strings
from flwr_vflgan.privacy.baselines import hamming_monte_carlo, mia_accuracy
from flwr_vflgan.privacy.vulnerable import outlier_counts

__all__ = [
    "CODE_BINS",
    "ThesisMIAResult",
    "attribute_codes",
    "draw_targets",
    "outlier_rows",
    "rare_value_rows",
    "thesis_mia",
    "thesis_outliers",
]

CODE_BINS = 10
"""Equal-frequency bins of a numeric attribute's codes."""


def attribute_codes(
    frames: Sequence[pd.DataFrame], schema: Schema, synthetic: pd.DataFrame, bins: int = CODE_BINS
) -> list[np.ndarray]:
    """Each table of ``frames`` as attribute codes, one int64 column per attribute of
    ``schema``: a category's code is its value (the same value, the same code, in every
    table), a number's its bin among ``bins`` equal-frequency bins of ``synthetic``'s
    values (repeated edges merge bins; a missing number gets code -1)."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    sizes = np.cumsum([len(frame) for frame in frames])[:-1]
    columns = []
    for spec in schema.columns:
        if spec.kind is ColumnKind.CATEGORICAL:
            strings = np.concatenate([category_strings(frame[spec.name]) for frame in frames])
            codes = pd.factorize(strings)[0].astype(np.int64)
        else:
            fitted = synthetic[spec.name].to_numpy(dtype=np.float64)
            fitted = fitted[~np.isnan(fitted)]
            quantiles = np.linspace(0, 1, bins + 1)[1:-1]
            edges = np.unique(np.quantile(fitted, quantiles)) if len(fitted) else np.array([])
            values = np.concatenate(
                [frame[spec.name].to_numpy(dtype=np.float64) for frame in frames]
            )
            codes = np.searchsorted(edges, values, side="right").astype(np.int64)
            codes[np.isnan(values)] = -1
        columns.append(codes)
    table = np.stack(columns, axis=1) if columns else np.zeros((int(sum(map(len, frames))), 0))
    return np.split(table.astype(np.int64), sizes)


def outlier_rows(
    frame: pd.DataFrame, schema: Schema, quartiles_of: pd.DataFrame | None = None
) -> np.ndarray:
    """True for each row with at least one outlying numeric attribute (Stadler et al.'s
    rule with ``frame``'s quartiles, or ``quartiles_of``'s)."""
    return outlier_counts(frame, schema, quartiles_of) > 0


RARE_SHARE = 0.01
"""A categorical table's outliers: rows holding a value rarer than this share."""


def rare_value_rows(
    frame: pd.DataFrame, schema: Schema, shares_of: pd.DataFrame | None = None
) -> np.ndarray:
    """True for each row holding a value that fewer than :data:`RARE_SHARE` of
    ``frame``'s rows (or ``shares_of``'s) hold, in any attribute: the outliers of a
    table without numbers, the tail of its categories."""
    fitted = frame if shares_of is None else shares_of
    rare = np.zeros(len(frame), dtype=bool)
    for spec in schema.columns:
        shares = pd.Series(category_strings(fitted[spec.name])).value_counts(normalize=True)
        values = pd.Series(category_strings(frame[spec.name]))
        rare |= values.map(shares).fillna(0.0).to_numpy() < RARE_SHARE
    return rare


def thesis_outliers(
    frame: pd.DataFrame, schema: Schema, reference: pd.DataFrame | None = None
) -> np.ndarray:
    """The outliers the attack's targets are drawn from: :func:`outlier_rows` when the
    table has numeric attributes, else :func:`rare_value_rows` (paper 004 discretises
    every table and does not say how it finds outliers; docs/privacy.md)."""
    if any(spec.kind is not ColumnKind.CATEGORICAL for spec in schema.columns):
        return outlier_rows(frame, schema, reference)
    return rare_value_rows(frame, schema, reference)


def draw_targets(
    is_outlier: np.ndarray, m: int, share: float, rng: np.random.Generator, what: str = "training"
) -> np.ndarray:
    """Positions of ``m`` training targets, ``round(share * m)`` of them outliers and the
    rest not, each group drawn uniformly without replacement; sorted.

    Raises
    ------
    ValueError
        Too few outliers or too few other rows for the share asked.
    """
    wanted = round(share * m)
    outliers, others = np.flatnonzero(is_outlier), np.flatnonzero(~is_outlier)
    if wanted > len(outliers) or m - wanted > len(others):
        raise ValueError(
            f"{m} targets with {share:.0%} outliers need {wanted} outliers and {m - wanted} "
            f"other rows; the {what} rows hold {len(outliers)} and {len(others)}: lower "
            "audit.targets or change audit.train_rows"
        )
    chosen = [
        rng.choice(outliers, wanted, replace=False),
        rng.choice(others, m - wanted, replace=False),
    ]
    return np.sort(np.concatenate(chosen))


@dataclass(frozen=True)
class ThesisMIAResult:
    """The attack's accuracy on each repetition for one share of outlier targets."""

    outlier_share: float
    accuracies: tuple[float, ...]

    @property
    def mean(self) -> float:
        """Mean accuracy over the repetitions."""
        return float(np.mean(self.accuracies))

    @property
    def std(self) -> float:
        """Standard deviation over the repetitions (the population one, ``ddof=0``)."""
        return float(np.std(self.accuracies))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "outlier_share": self.outlier_share,
            "accuracy_mean": self.mean,
            "accuracy_std": self.std,
            "accuracies": list(self.accuracies),
        }


def thesis_mia(
    members: np.ndarray,
    non_members: np.ndarray,
    synthetic: np.ndarray,
    is_outlier: np.ndarray,
    *,
    targets: int,
    shares: Sequence[float],
    repetitions: int,
    seed: int,
    unseen_outlier: np.ndarray | None = None,
) -> list[ThesisMIAResult]:
    """The attack for each share of outlier targets, ``repetitions`` times each.

    Parameters
    ----------
    members, non_members, synthetic
        Attribute codes (:func:`attribute_codes`) of the training table, of the rows it
        never saw and of the published table.
    is_outlier
        :func:`outlier_rows` of the training table.
    targets
        ``m``: training targets and as many unseen ones per repetition.
    shares
        Shares of outliers among the training targets.
    repetitions
        Fresh draws of both target sets per share.
    seed
        Seed of the draws (repetition ``r`` of share ``i`` draws with ``[seed, i, r]``).
    unseen_outlier
        :func:`outlier_rows` of the unseen rows (the training table's quartiles): the
        unseen targets then hold the same share of outliers as the training targets.
        ``None`` (the thesis): they are drawn uniformly.
    """
    if len(is_outlier) != len(members):
        raise ValueError(f"is_outlier has {len(is_outlier)} rows, members {len(members)}")
    if unseen_outlier is not None and len(unseen_outlier) != len(non_members):
        raise ValueError(
            f"unseen_outlier has {len(unseen_outlier)} rows, non_members {len(non_members)}"
        )
    if not 0 < targets <= len(non_members):
        raise ValueError(
            f"{targets} targets need as many unseen rows; there are {len(non_members)}"
        )
    results = []
    for i, share in enumerate(shares):
        accuracies = []
        for r in range(repetitions):
            rng = np.random.default_rng([seed, i, r])
            chosen = draw_targets(is_outlier, targets, share, rng)
            if unseen_outlier is None:
                unseen = rng.choice(len(non_members), targets, replace=False)
            else:
                unseen = draw_targets(unseen_outlier, targets, share, rng, "unseen")
            records = np.concatenate([members[chosen], non_members[unseen]])
            accuracies.append(mia_accuracy(hamming_monte_carlo(records, synthetic), targets))
        results.append(ThesisMIAResult(float(share), tuple(accuracies)))
    return results
