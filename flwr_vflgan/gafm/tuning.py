"""The hyperparameter helpers of paper 002, Appendix D.

* :func:`select_delta` (Appendix D.3): train GAFM on a random 10% subset of the rows
  (sampled without replacement, a fresh subset per repetition) for each candidate
  ``Delta``, five times, and pick the ``Delta`` with the smallest average
  ``leak AUC / train AUC`` ratio over the norm, mean and median attacks (the median
  attack as the paper's code computes it, :func:`~flwr_vflgan.gafm.attacks.median_split_attack`).
* :func:`balance_gamma` (Appendix D.2): train GAFM with ``gamma = 1`` and compare the
  average GAN and CE gradients at the cut layer (Table D.3); the suggested ``gamma`` is
  ``|mean CE gradient| / |mean GAN gradient|``, which makes the two comparable in
  magnitude (the paper's ISIC CE gradient was over 10 times the GAN's, and it chose
  ``gamma = 20``). The paper does not say which gradients it averages; we average the
  two normalised terms that ``gamma`` weighs (Algorithm A.1, step 3), each over its
  batch, over the last epoch. Both have unit norm, so their means differ only in how
  consistently their entries point one way: the part that survives summation over a
  class. The raw (unnormalised) averages are reported too; with the discriminator's
  weights clipped to 0.1 the raw GAN gradient is orders of magnitude below the CE one,
  which is why the normalisation exists (Section 3.3).

Both run the parties in this process (:class:`~flwr_vflgan.gafm.training.PlainLink`):
they are the experimenter's tools for choosing settings before a federated run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from flwr_vflgan.runtime.rng import Stream, numpy_generator

from .config import GAFMSettings, Method
from .training import PlainLink, train_repetition

RATIO_ATTACKS = ("norm", "mean", "median_split")
"""The attacks whose ratios Appendix D.3 averages: the paper's norm, mean and median
attacks, the last as its reference code computes it (the batch-median split)."""


def subset_rows(n_rows: int, fraction: float, seed: int) -> np.ndarray:
    """A sorted random subset of ``round(fraction * n_rows)`` rows, without replacement."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    size = round(fraction * n_rows)
    if size < 10:
        raise ValueError(
            f"a {fraction} subset of {n_rows} rows has {size} rows; it needs at least 10"
        )
    return np.sort(
        numpy_generator(seed, Stream.SPLIT, 0, 1).choice(n_rows, size=size, replace=False)
    )


@dataclass(frozen=True)
class DeltaSelection:
    """Appendix D.3's table: the average ratio of every candidate, and the chosen one."""

    ratios: dict[float, float]
    per_attack: dict[float, dict[str, float]]
    best: float
    runs: list[dict[str, Any]]


def select_delta(
    features: Sequence[torch.Tensor],
    labels: np.ndarray,
    settings: GAFMSettings,
    *,
    candidates: Sequence[float] = (0.05, 0.1, 0.2, 0.3, 0.5),
    fraction: float = 0.1,
    repeats: int = 5,
    seed: int = 0,
    fields: Sequence[Sequence[int]] | None = None,
) -> DeltaSelection:
    """Choose ``Delta`` by the minimum average ``leak AUC / train AUC`` ratio on subsets
    (``fields``: each party's column-block widths, as :class:`PlainLink` takes them)."""
    if not candidates:
        raise ValueError("select_delta needs at least one candidate Delta")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    labels = np.asarray(labels, dtype=np.int64)
    ratios: dict[float, float] = {}
    per_attack: dict[float, dict[str, float]] = {}
    runs: list[dict[str, Any]] = []
    for delta in candidates:
        trial = replace(settings, delta=float(delta), repetitions=1)
        sums = dict.fromkeys(RATIO_ATTACKS, 0.0)
        for r in range(repeats):
            rows = subset_rows(len(labels), fraction, seed + r)
            link = PlainLink([x[torch.from_numpy(rows)] for x in features], trial, fields)
            result = train_repetition(Method.GAFM, trial, labels[rows], link, seed + r)
            for attack in RATIO_ATTACKS:
                sums[attack] += result.leak_auc[attack] / result.train_auc
            runs.append(
                {
                    "delta": float(delta),
                    "seed": seed + r,
                    "train_auc": result.train_auc,
                    "leak_auc": result.leak_auc,
                }
            )
        per_attack[float(delta)] = {a: sums[a] / repeats for a in RATIO_ATTACKS}
        ratios[float(delta)] = float(np.mean(list(per_attack[float(delta)].values())))
    best = min(ratios, key=lambda d: (ratios[d], d))
    return DeltaSelection(ratios=ratios, per_attack=per_attack, best=best, runs=runs)


def smallest(ratios: Mapping[float, float], k: int = 3) -> list[float]:
    """The ``k`` candidates with the smallest ratios (ties to the smaller ``Delta``)."""
    return sorted(ratios, key=lambda d: (ratios[d], d))[:k]


@dataclass(frozen=True)
class GammaBalance:
    """Table D.3's diagnostic: average GAN and CE gradients at ``gamma = 1``."""

    gan_gradient: float
    ce_gradient: float
    suggested_gamma: float
    gan_gradient_raw: float
    ce_gradient_raw: float


def balance_gamma(
    features: Sequence[torch.Tensor],
    labels: np.ndarray,
    settings: GAFMSettings,
    *,
    seed: int = 0,
    fields: Sequence[Sequence[int]] | None = None,
) -> GammaBalance:
    """Train GAFM once with ``gamma = 1`` and compare the average gradients of its last epoch.

    The averages are of the normalised GAN and CE gradients with respect to ``f(X)``
    (summed over the cut's columns), the terms ``gamma`` weighs; ``*_raw`` are the
    per-example gradients before normalisation.
    """
    trial = replace(settings, gamma=1.0, repetitions=1, eval_every=0)
    link = PlainLink(list(features), trial, fields)
    result = train_repetition(Method.GAFM, trial, np.asarray(labels, dtype=np.int64), link, seed)
    last = result.history[-1]
    gan, ce = float(last["gan_grad_mean"]), float(last["ce_grad_mean"])
    if gan == 0:
        raise ValueError("the GAN gradient averaged exactly 0; gamma cannot be balanced against it")
    return GammaBalance(
        gan_gradient=gan,
        ce_gradient=ce,
        suggested_gamma=abs(ce) / abs(gan),
        gan_gradient_raw=float(last["gan_grad_mean_raw"]),
        ce_gradient_raw=float(last["ce_grad_mean_raw"]),
    )
