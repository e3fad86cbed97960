"""An empirical lower bound on epsilon from one training run (Steinke, Nasr and Jagielski,
NeurIPS 2023, "Privacy auditing with one (1) training run").

The auditor draws ``m`` canary rows and flips a fair coin for each: heads, the canary
joins the training table; tails, it stays out. After one run, every canary gets a
membership score from what the run published (here the synthetic table), the auditor
guesses "in" for the ``k`` highest scores and "out" for the ``k`` lowest, and counts
``v`` correct guesses of ``r = 2k``. Under ``(epsilon, delta)``-DP, the chance of ``v``
or more correct guesses is at most the p-value of :func:`audit_p_value` (the paper's
Theorem 3.3 with its Appendix D algorithm); the largest epsilon that this p-value
rejects at the chosen confidence is a lower bound on the epsilon the run really has
(:func:`epsilon_lower_bound`). A mechanism that keeps its claim gives a bound below it
with probability at least the confidence; a bound above the claim refutes the claim.

Canaries (:func:`draw_canaries`) are drawn uniformly from each column's range (numbers
between the public bounds, categories among the table's): records unlike the table and
unlike each other, the most exposed kind (a generator that memorises one shows it). The score (:func:`membership_scores`) is black-box on the
published table: the log-ratio of a canary's distance to its nearest row of the rest of
the training table, which the auditor knows, to its distance to its nearest synthetic row
(a calibrated distance to the closest record, as in GAN-Leaks CAL).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.stats
from sklearn.neighbors import NearestNeighbors

from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.schema import ColumnKind, Schema
from flwr_vflgan.metrics.tables import FeatureEncoder

__all__ = [
    "AuditResult",
    "audit_p_value",
    "draw_canaries",
    "epsilon_lower_bound",
    "membership_scores",
    "one_run_audit",
]

_EPSILON_CEILING = 100.0
"""The bisection's upper end: a bound this high says "no meaningful privacy"."""


def _check_counts(m: int, r: int, v: int) -> None:
    if not 0 <= v <= r <= m:
        raise ValueError(f"the audit needs 0 <= correct <= guesses <= canaries, got {v}, {r}, {m}")


def audit_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The chance of ``v`` or more correct guesses of ``r`` among ``m`` canaries under
    ``(epsilon, delta)``-DP (Steinke et al. 2023, Theorem 3.3, computed as in their
    Appendix D).

    With ``delta = 0`` it is the tail ``P[Binomial(r, e^eps / (1 + e^eps)) >= v]``; a
    positive ``delta`` adds ``2 m delta`` times the largest average of the binomial's
    mass just below ``v``.
    """
    _check_counts(m, r, v)
    if epsilon < 0 or not 0 <= delta <= 1:
        raise ValueError(f"need epsilon >= 0 and delta in [0, 1], got {epsilon}, {delta}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(scipy.stats.binom.sf(v - 1, r, q))
    below = scipy.stats.binom.pmf(v - np.arange(1, v + 1), r, q)
    alpha = float(np.max(np.cumsum(below) / np.arange(1, v + 1))) if v else 0.0
    return min(tail + alpha * delta * 2 * m, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon for which ``v`` correct of ``r`` guesses has p-value below
    ``1 - confidence``: the run is not ``(epsilon, delta)``-DP for any smaller epsilon,
    with that confidence. 0 when even epsilon 0 explains the guesses."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    level = 1.0 - confidence
    if audit_p_value(m, r, v, 0.0, delta) >= level:
        return 0.0
    low, high = 0.0, 1.0
    while audit_p_value(m, r, v, high, delta) < level:
        if high >= _EPSILON_CEILING:
            return _EPSILON_CEILING
        low, high = high, min(2 * high, _EPSILON_CEILING)
    for _ in range(50):
        middle = (low + high) / 2
        if audit_p_value(m, r, v, middle, delta) < level:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class AuditResult:
    """One audit: the best of its guess counts, the Bonferroni-corrected bound.

    ``epsilon`` is the lower bound at ``confidence`` (corrected for trying
    ``len(tried)`` guess counts); ``guesses`` and ``correct`` are those of the count that
    gave it; ``tried`` maps every guess count ``k`` (k "in" and k "out" guesses) to its
    correct guesses.
    """

    canaries: int
    included: int
    guesses: int
    correct: int
    epsilon: float
    delta: float
    confidence: float
    tried: dict[int, int]

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-able form."""
        return {
            "canaries": self.canaries,
            "included": self.included,
            "guesses": self.guesses,
            "correct": self.correct,
            "epsilon_lower_bound": self.epsilon,
            "delta": self.delta,
            "confidence": self.confidence,
            "correct_by_guesses": {str(2 * k): v for k, v in self.tried.items()},
        }


def one_run_audit(
    scores: np.ndarray,
    included: np.ndarray,
    guess_counts: Sequence[int],
    delta: float,
    confidence: float = 0.95,
) -> AuditResult:
    """Guess "in" for the ``k`` highest scores and "out" for the ``k`` lowest, for each
    ``k`` of ``guess_counts``; return the highest bound, Bonferroni-corrected over the
    counts tried (so choosing the best ``k`` after the fact keeps the confidence).

    Ties are broken by canary order, which the coin flips do not depend on.
    """
    scores, included = np.asarray(scores, dtype=np.float64), np.asarray(included, dtype=bool)
    m = len(scores)
    if scores.shape != (m,) or included.shape != (m,):
        raise ValueError(
            f"scores and included must be two vectors of the same length, got "
            f"{scores.shape} and {included.shape}"
        )
    if not np.isfinite(scores).all():
        raise ValueError("membership scores must be finite")
    counts = sorted({int(k) for k in guess_counts})
    if not counts or counts[0] < 1 or 2 * counts[-1] > m:
        raise ValueError(
            f"guess counts must be between 1 and half the {m} canaries, got {list(guess_counts)}"
        )
    order = np.argsort(-scores, kind="stable")
    tried = {k: int(included[order[:k]].sum() + (~included[order[m - k :]]).sum()) for k in counts}
    level = 1.0 - (1.0 - confidence) / len(counts)
    bounds = {k: epsilon_lower_bound(m, 2 * k, v, delta, level) for k, v in tried.items()}
    best = max(counts, key=lambda k: (bounds[k], -k))
    return AuditResult(
        canaries=m,
        included=int(included.sum()),
        guesses=2 * best,
        correct=tried[best],
        epsilon=bounds[best],
        delta=delta,
        confidence=confidence,
        tried=tried,
    )


def draw_canaries(
    schema: Schema, frame: pd.DataFrame, n: int, seed: int, domain: PublicDomain | None = None
) -> pd.DataFrame:
    """``n`` rows drawn uniformly from every column's range: a number between the
    column's bounds in ``domain``, else its smallest and largest value in ``frame``; a
    category among those ``frame`` holds (so every encoder fitted on a table that
    contains ``frame`` knows it, and the canaries stand out by their combinations).
    ``frame`` is the auditor's knowledge; the run under audit never sees the draw.

    Integer columns get integers; a categorical value keeps the column's dtype.
    """
    if n < 2:
        raise ValueError(f"an audit needs at least 2 canaries, got {n}")
    rng = np.random.default_rng(seed)
    columns: dict[str, object] = {}
    for spec in schema.columns:
        name, known = spec.name, domain.columns.get(spec.name) if domain is not None else None
        values = frame[name].dropna()
        if spec.kind is ColumnKind.CATEGORICAL:
            choices = np.array(pd.unique(values), dtype=object)
            drawn = choices[rng.integers(len(choices), size=n)]
            columns[name] = pd.Series(drawn, dtype=frame[name].dtype).to_numpy()
            continue
        low, high = (
            (known.minimum, known.maximum) if known is not None else (values.min(), values.max())
        )
        numbers = rng.uniform(float(low), float(high), size=n)
        if spec.kind is ColumnKind.INTEGER:
            numbers = np.rint(numbers)
        columns[name] = numbers.astype(frame[name].dtype)
    return pd.DataFrame(columns, columns=schema.names)


def membership_scores(
    canaries: pd.DataFrame, synthetic: pd.DataFrame, reference: pd.DataFrame, schema: Schema
) -> np.ndarray:
    """Each canary's ``log(d_ref / d_syn)``: ``d_syn`` its distance to the nearest
    ``synthetic`` row, ``d_ref`` to the nearest ``reference`` row (min-max scaled numbers,
    one-hot categories, fitted on all three tables). High when the published table holds
    something nearer the canary than the rest of the data explains; a copied canary
    scores highest.

    ``reference`` is the training table without the canaries, which the auditor knows.
    """
    missing = [c for c in schema.names if c not in synthetic.columns]
    if missing:
        raise ValueError(f"the synthetic table lacks columns {missing} of the audited table")
    encoder = FeatureEncoder(schema).fit(pd.concat([reference, canaries, synthetic[schema.names]]))
    return nearest_ratio_scores(
        encoder.transform(canaries),
        encoder.transform(synthetic[schema.names]),
        encoder.transform(reference),
    )


def nearest_ratio_scores(
    points: np.ndarray, synthetic: np.ndarray, reference: np.ndarray
) -> np.ndarray:
    """Each point's ``log(d_ref / d_syn)``, the distances Euclidean to its nearest row of
    ``synthetic`` and of ``reference`` (rows already encoded: :func:`membership_scores`
    for tables, :func:`~flwr_vflgan.simulations.series_audit.series_membership_scores`
    for series)."""

    def nearest(rows: np.ndarray) -> np.ndarray:
        search = NearestNeighbors(n_neighbors=1).fit(rows)
        return search.kneighbors(points)[0][:, 0]

    tiny = 1e-9  # a copy is at distance 0: its score is large and finite
    return np.log((nearest(reference) + tiny) / (nearest(synthetic) + tiny))
