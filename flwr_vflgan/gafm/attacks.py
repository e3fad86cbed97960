"""Gradient-based label-stealing attacks and the leak AUC (paper 002, Section 3.5, eqs. 8-10).

A non-label party receives, at every training step, the per-example gradients ``g``
(shape ``(n, d)``) of the loss with respect to its cut-layer output. The attacks below
try to recover each example's binary label from ``g``:

* **norm** (Li et al. 2022): the score is ``||g_i||_2``; with an unbalanced data set the
  positives (the minority class) tend to receive larger gradients.
* **cosine** (Li et al. 2022, the direction attack): the attacker knows the gradient of
  one positive example (the *hint*) and scores every example by its cosine similarity
  with it; gradients of the same class point the same way.
* **mean** (eq. 8): the attacker knows the class centres ``mu_1``, ``mu_0`` (the mean
  gradients of the batch's positives and negatives) and predicts 1 when
  ``||g_i - mu_1|| <= ||g_i - mu_0||``, else 0.
* **median** (eq. 9): the same with the coordinate-wise class medians ``m_1``, ``m_0``.
* **median_split** (the paper's reference code, whose "median attack" it is): predict 1
  when ``sum_d g_i`` exceeds the batch's median of those sums. It needs no label at
  all, and it is what the paper's tables report as "Median Attack": on perfectly
  separated gradients it scores ``(1 + 1 - FPR) / 2`` with ``FPR = (0.5 - p) / (1 - p)``
  for a positive rate ``p``, which is 0.91 on Spambase (``p = 0.394``), the Vanilla
  and Max Norm entries of Table 2.

The leak AUC (eq. 10) is the ROC AUC of an attack's scores against the true labels,
flipped so that an attack predicting the labels backwards counts as a leak too:
``leak = max(auc, 1 - auc)``. It lies in ``[0.5, 1]``; 0.5 means nothing leaks.

The mean and median attacks give hard 0/1 predictions, which are scored directly by
the ROC AUC, as the paper's reference code does; over an epoch the per-batch scores
and predictions are concatenated before one AUC is computed (:class:`LeakAccumulator`).
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

__all__ = [
    "ATTACKS",
    "LeakAccumulator",
    "attack_scores",
    "cosine_scores",
    "leak_auc",
    "mean_attack",
    "median_attack",
    "median_split_attack",
    "norm_scores",
]

ATTACKS: tuple[str, ...] = ("norm", "cosine", "mean", "median", "median_split")
"""Names of the attacks, in the order :func:`attack_scores` returns them."""


# --- validation -------------------------------------------------------------------------


def _as_grads(grads: np.ndarray) -> np.ndarray:
    """Return ``grads`` as a finite 2-D float64 array with at least one row and column."""
    g = np.asarray(grads, dtype=np.float64)
    if g.ndim != 2:
        raise ValueError(f"grads must be a 2-D array of shape (n, d); got shape {g.shape}")
    if g.shape[0] == 0 or g.shape[1] == 0:
        raise ValueError(f"grads must have at least one row and one column; got shape {g.shape}")
    if not np.all(np.isfinite(g)):
        raise ValueError("grads contain non-finite values (NaN or inf)")
    return g


def _as_labels(labels: np.ndarray, n: int | None = None) -> np.ndarray:
    """Return ``labels`` as a 1-D int64 array of 0/1 (of length ``n`` when given)."""
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be a 1-D array; got shape {y.shape}")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"labels have length {y.shape[0]} but grads have {n} rows")
    if y.dtype == np.bool_:
        return y.astype(np.int64)
    if not np.issubdtype(y.dtype, np.number):
        raise ValueError(f"labels must be numeric 0/1; got dtype {y.dtype}")
    if not np.all(np.isin(y, (0, 1))):
        bad = np.unique(y[~np.isin(y, (0, 1))])[:5]
        raise ValueError(f"labels must be 0 or 1; found other values, e.g. {bad.tolist()}")
    return y.astype(np.int64)


# --- leak AUC (eq. 10) ------------------------------------------------------------------


def leak_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Leak AUC of eq. 10: ``max(auc, 1 - auc)`` with ``auc`` the ROC AUC of ``scores``.

    Parameters
    ----------
    labels : np.ndarray
        True binary labels, shape ``(n,)``, values in ``{0, 1}``; both classes must occur.
    scores : np.ndarray
        The attack's scores or hard 0/1 predictions, shape ``(n,)``, all finite.

    Returns
    -------
    float
        The flipped ROC AUC, in ``[0.5, 1]``.

    Raises
    ------
    ValueError
        If the lengths differ, a label is not 0 or 1, only one class is present (the AUC
        is undefined) or a score is not finite.
    """
    y = _as_labels(labels)
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"scores must be a 1-D array; got shape {s.shape}")
    if s.shape[0] != y.shape[0]:
        raise ValueError(f"labels and scores differ in length: {y.shape[0]} vs {s.shape[0]}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain non-finite values (NaN or inf)")
    classes = np.unique(y)
    if classes.size < 2:
        which = f"only class {int(classes[0])}" if classes.size else "no labels"
        raise ValueError(
            f"the ROC AUC is undefined: labels contain {which}; both 0 and 1 are needed"
        )
    auc = float(roc_auc_score(y, s))
    return max(auc, 1.0 - auc)


# --- the attacks ------------------------------------------------------------------------


def norm_scores(grads: np.ndarray) -> np.ndarray:
    """Norm attack (Li et al. 2022): the per-example L2 norm ``||g_i||_2``.

    Parameters
    ----------
    grads : np.ndarray
        Per-example gradients, shape ``(n, d)``.

    Returns
    -------
    np.ndarray
        Scores of shape ``(n,)``.
    """
    g = _as_grads(grads)
    return np.asarray(np.linalg.norm(g, axis=1))


def cosine_scores(grads: np.ndarray, hint: np.ndarray) -> np.ndarray:
    """Direction attack (Li et al. 2022): cosine similarity of each ``g_i`` with ``hint``.

    Parameters
    ----------
    grads : np.ndarray
        Per-example gradients, shape ``(n, d)``.
    hint : np.ndarray
        The gradient of one example the attacker knows to be positive, shape ``(d,)``.

    Returns
    -------
    np.ndarray
        Scores of shape ``(n,)`` in ``[-1, 1]``; a row with zero norm scores 0, and every
        row scores 0 when ``hint`` has zero norm.
    """
    g = _as_grads(grads)
    h = np.asarray(hint, dtype=np.float64)
    if h.shape != (g.shape[1],):
        raise ValueError(f"hint must have shape ({g.shape[1]},) to match grads; got {h.shape}")
    if not np.all(np.isfinite(h)):
        raise ValueError("hint contains non-finite values (NaN or inf)")
    h_norm = float(np.linalg.norm(h))
    if h_norm == 0.0:
        return np.zeros(g.shape[0])
    row_norms = np.linalg.norm(g, axis=1)
    dots = g @ h
    out = np.zeros(g.shape[0])
    nonzero = row_norms > 0
    out[nonzero] = dots[nonzero] / (row_norms[nonzero] * h_norm)
    return np.clip(out, -1.0, 1.0)


def _centre_attack(grads: np.ndarray, labels: np.ndarray, median: bool) -> np.ndarray:
    """Nearest-class-centre prediction shared by the mean (eq. 8) and median (eq. 9) attacks."""
    g = _as_grads(grads)
    y = _as_labels(labels, g.shape[0])
    pos, neg = g[y == 1], g[y == 0]
    if pos.shape[0] == 0 or neg.shape[0] == 0:
        # One class only: the other centre does not exist, so every example gets the
        # class that is present.
        return np.full(g.shape[0], int(y[0]), dtype=np.int64)
    reduce = np.median if median else np.mean
    c1, c0 = reduce(pos, axis=0), reduce(neg, axis=0)
    d1 = np.linalg.norm(g - c1, axis=1)
    d0 = np.linalg.norm(g - c0, axis=1)
    return (d1 <= d0).astype(np.int64)


def mean_attack(grads: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mean attack (eq. 8): assign each example to the nearer class-mean gradient.

    The class centres ``mu_1`` and ``mu_0`` are the mean gradients of the batch's
    positive and negative examples (the attacker is assumed to know them). An example
    is predicted positive when ``||g_i - mu_1|| <= ||g_i - mu_0||`` (ties go to 1).

    Parameters
    ----------
    grads : np.ndarray
        Per-example gradients, shape ``(n, d)``.
    labels : np.ndarray
        True labels, shape ``(n,)``, values in ``{0, 1}``, used only for the centres.

    Returns
    -------
    np.ndarray
        Hard predictions of shape ``(n,)``, dtype int64, values in ``{0, 1}``. If the
        batch holds one class only, every example is assigned that class.
    """
    return _centre_attack(grads, labels, median=False)


def median_attack(grads: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Median attack (eq. 9): as :func:`mean_attack` with coordinate-wise class medians.

    Parameters
    ----------
    grads : np.ndarray
        Per-example gradients, shape ``(n, d)``.
    labels : np.ndarray
        True labels, shape ``(n,)``, values in ``{0, 1}``, used only for the centres.

    Returns
    -------
    np.ndarray
        Hard predictions of shape ``(n,)``, dtype int64, values in ``{0, 1}``
        (predicted 1 when ``||g_i - m_1|| <= ||g_i - m_0||``). If the batch holds one
        class only, every example is assigned that class.
    """
    return _centre_attack(grads, labels, median=True)


def median_split_attack(grads: np.ndarray) -> np.ndarray:
    """The reference code's median attack: 1 where ``sum_d g_i`` exceeds the batch median.

    Parameters
    ----------
    grads : np.ndarray
        Per-example gradients, shape ``(n, d)``.

    Returns
    -------
    np.ndarray
        Hard 0/1 predictions of shape ``(n,)`` (int64).
    """
    g = _as_grads(grads)
    sums = g.sum(axis=1)
    return (sums > np.median(sums)).astype(np.int64)


def attack_scores(
    grads: np.ndarray, labels: np.ndarray, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Scores (norm, cosine) and predictions (mean, median, median_split) of every attack
    on one batch.

    Parameters
    ----------
    grads : np.ndarray
        Per-example gradients, shape ``(n, d)``.
    labels : np.ndarray
        True labels, shape ``(n,)``, values in ``{0, 1}``.
    rng : np.random.Generator
        Draws, uniformly among the batch's positives, the example whose gradient is the
        cosine attack's hint.

    Returns
    -------
    dict[str, np.ndarray]
        One array of shape ``(n,)`` per name in :data:`ATTACKS`. If the batch has no
        positive example, the cosine scores are all 0 (and ``rng`` is not used).
    """
    g = _as_grads(grads)
    y = _as_labels(labels, g.shape[0])
    positives = np.flatnonzero(y == 1)
    if positives.size:
        hint = g[positives[int(rng.integers(positives.size))]]
        cos = cosine_scores(g, hint)
    else:
        cos = np.zeros(g.shape[0])
    return {
        "norm": norm_scores(g),
        "cosine": cos,
        "mean": mean_attack(g, y),
        "median": median_attack(g, y),
        "median_split": median_split_attack(g),
    }


# --- accumulating over an epoch ---------------------------------------------------------


class LeakAccumulator:
    """Collects per-batch attack scores over an epoch and reports the leak AUC of each.

    Every batch passed to :meth:`add` is attacked on its own (:func:`attack_scores`, the
    cosine hints drawn with this accumulator's generator); :meth:`result` concatenates
    the per-batch scores and predictions and computes one leak AUC per attack.

    Parameters
    ----------
    seed : int
        Seed of the ``np.random.Generator`` that draws the cosine attack's hints.
    """

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._labels: list[np.ndarray] = []
        self._scores: dict[str, list[np.ndarray]] = {name: [] for name in ATTACKS}
        self._n_rows = 0

    @property
    def n_rows(self) -> int:
        """Number of examples added since construction or the last :meth:`reset`."""
        return self._n_rows

    def add(self, grads: np.ndarray, labels: np.ndarray) -> None:
        """Attack one batch and keep its scores.

        Parameters
        ----------
        grads : np.ndarray
            Per-example gradients, shape ``(n, d)``, finite, ``n >= 1``.
        labels : np.ndarray
            True labels, shape ``(n,)``, values in ``{0, 1}``.

        Raises
        ------
        ValueError
            If ``grads`` is not a finite non-empty 2-D array or ``labels`` is not a 0/1
            array of length ``n``.
        """
        g = _as_grads(grads)
        y = _as_labels(labels, g.shape[0])
        scores = attack_scores(g, y, self._rng)
        self._labels.append(y)
        for name in ATTACKS:
            self._scores[name].append(scores[name])
        self._n_rows += g.shape[0]

    def result(self) -> dict[str, float]:
        """Leak AUC (eq. 10) of each attack over every batch added.

        Returns
        -------
        dict[str, float]
            One value in ``[0.5, 1]`` per name in :data:`ATTACKS`.

        Raises
        ------
        ValueError
            If nothing was added, or the labels added hold one class only.
        """
        if not self._labels:
            raise ValueError("no batches were added; the leak AUC is undefined")
        y = np.concatenate(self._labels)
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(
                f"the labels added hold only class {int(classes[0])}; "
                "the leak AUC needs both 0 and 1"
            )
        return {name: leak_auc(y, np.concatenate(self._scores[name])) for name in ATTACKS}

    def reset(self) -> None:
        """Forget every batch added (the generator is not reseeded)."""
        self._labels.clear()
        for name in ATTACKS:
            self._scores[name].clear()
        self._n_rows = 0
