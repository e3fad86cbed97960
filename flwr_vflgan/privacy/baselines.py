"""Membership-inference attacks that score every record against one synthetic table:
the baselines of paper 000's Table 3, in the setting of the DOMIAS benchmark (van Breugel
et al., AISTATS 2023), which the table follows.

The attacker holds the synthetic table ``S``, a reference table ``R`` from the same
population (none of its rows trained the generator) and the records to judge: the
generator's training rows (members) and as many rows it never saw (non-members). Each
attack gives every record a score, higher meaning "more likely a member"; the AUC of the
scores over members against non-members measures it, and its accuracy thresholds the
scores at their median (as the benchmark does). Every table is encoded the same way
first: numbers min-max scaled over ``R``, categories one-hot (``FeatureEncoder``).

* ``logan_0`` (Hayes et al. 2019, no auxiliary data): a GAN trained on ``S``; the score is
  its discriminator's.
* ``logan_d1`` (Hayes et al. 2019, with auxiliary data): a classifier trained to tell
  ``S`` from ``R``; the score is its probability of ``S``.
* ``mc`` (Hilprecht et al. 2019, Monte-Carlo): the share of ``S`` within ``eps`` of the
  record, ``eps`` the median over records of their nearest synthetic distance.
* ``gan_leaks_0`` (Chen et al. 2020, full black-box): minus the squared distance to the
  nearest synthetic row.
* ``gan_leaks_cal``: the same, calibrated by the squared distance to the nearest reference
  row (Chen et al. calibrate with a generator trained on reference data; its rows stand
  in for that generator's samples here, as the DOMIAS authors note is enough).
* ``domias`` (van Breugel et al. 2023): the density ratio ``p_S(x) / p_R(x)``, both
  densities Gaussian kernel estimates (the benchmark's ``kde`` estimator).

Paper 004's own attack, for its discretised tables, is here too but not in ``ATTACKS``
(it reads attribute codes, not the encoded tables above): :func:`hamming_monte_carlo`
(Monte-Carlo with the Hamming distance and ``<= t``) and its score, :func:`mia_accuracy`
(the members' share of the top half).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.special
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from flwr_vflgan.data.schema import Schema
from flwr_vflgan.metrics.tables import FeatureEncoder
from flwr_vflgan.nn.models import seeded_init

__all__ = [
    "ATTACKS",
    "AttackScore",
    "attack_scores",
    "hamming_monte_carlo",
    "mia_accuracy",
    "score_attacks",
]


@dataclass(frozen=True)
class AttackScore:
    """One attack's AUC and accuracy over members against non-members."""

    auc: float
    accuracy: float

    def to_dict(self) -> dict[str, float]:
        """JSON-ready."""
        return {"auc": self.auc, "accuracy": self.accuracy}


def _squared_distances(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``||points_i - rows_j||^2`` for every pair, shape ``(len(points), len(rows))``."""
    norms = (points**2).sum(1)[:, None] + (rows**2).sum(1)[None, :]
    return np.maximum(norms - 2 * points @ rows.T, 0.0)


def gan_leaks_0(records: np.ndarray, synthetic: np.ndarray) -> np.ndarray:
    """Minus the squared distance to the nearest synthetic row."""
    return -_squared_distances(records, synthetic).min(axis=1)


def gan_leaks_cal(records: np.ndarray, synthetic: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """:func:`gan_leaks_0` plus the squared distance to the nearest reference row."""
    return gan_leaks_0(records, synthetic) + _squared_distances(records, reference).min(axis=1)


def monte_carlo(records: np.ndarray, synthetic: np.ndarray) -> np.ndarray:
    """Share of the synthetic rows closer than ``eps`` (Hilprecht et al.'s median
    heuristic: the median of the records' nearest synthetic distances)."""
    distances = _squared_distances(records, synthetic)
    eps = np.median(distances.min(axis=1))
    return (distances < eps).mean(axis=1)


HAMMING_CHUNK = 1 << 24
"""Booleans compared at once by :func:`hamming_monte_carlo` (16 MiB)."""


def hamming_monte_carlo(records: np.ndarray, synthetic: np.ndarray) -> np.ndarray:
    """Paper 004's membership attack (Section 5.2.2, eq. 5.3): for each record, the share
    of synthetic rows within Hamming distance ``t`` of it (``<= t``), ``t`` the median over
    the records of their nearest synthetic row's distance.

    Parameters
    ----------
    records, synthetic
        Attribute codes, one integer per attribute (the thesis discretises every column),
        shapes ``(r, a)`` and ``(n, a)``; the Hamming distance counts the attributes that
        differ.
    """
    if records.ndim != 2 or synthetic.ndim != 2 or records.shape[1] != synthetic.shape[1]:
        raise ValueError(
            f"records and synthetic must be (rows, attributes) with the same attributes, got "
            f"{records.shape} and {synthetic.shape}"
        )
    if len(records) == 0 or len(synthetic) == 0:
        raise ValueError("the attack needs at least one record and one synthetic row")
    # Distances per chunk of synthetic rows: (records x chunk x attributes) booleans at
    # most, so 10^5 synthetic rows (the thesis's n) fit beside 200 records.
    chunk = max(1, HAMMING_CHUNK // max(1, records.size))
    distances = np.concatenate(
        [
            (records[:, None, :] != synthetic[None, start : start + chunk, :]).sum(
                axis=2, dtype=np.int32
            )
            for start in range(0, len(synthetic), chunk)
        ],
        axis=1,
    )
    threshold = np.median(distances.min(axis=1))
    return (distances <= threshold).mean(axis=1)


def mia_accuracy(scores: np.ndarray, members: int) -> float:
    """Paper 004's MIA-Accuracy (eq. 5.4): of the ``members`` records with the highest
    scores, the share that are members (the first ``members`` entries of ``scores``; as
    many non-members follow). Records tied at the cut are picked at random: their
    expected share counts, so a constant score gives the members' share of all records."""
    scores = np.asarray(scores, dtype=np.float64)
    if not 0 < members < len(scores):
        raise ValueError(f"members must be in (0, {len(scores)}), got {members}")
    is_member = np.arange(len(scores)) < members
    cut = np.sort(scores)[::-1][members - 1]
    above, tied = scores > cut, scores == cut
    picked_members = is_member[above].sum()
    still = members - above.sum()
    picked_members += still * is_member[tied].sum() / tied.sum()
    return float(picked_members / members)


def domias(records: np.ndarray, synthetic: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``log p_S(x) - log p_R(x)``, both densities Gaussian kernel estimates with a
    diagonal bandwidth (Scott's rule per column) over the columns that vary in both
    tables. A full-covariance estimate (scipy's) is singular on one-hot columns, which sum
    to one; a constant column says nothing about membership."""
    varying = (synthetic.std(axis=0) > 0) & (reference.std(axis=0) > 0)
    if not varying.any():
        return np.zeros(len(records))
    columns = np.flatnonzero(varying)
    x, s, r = records[:, columns], synthetic[:, columns], reference[:, columns]
    return _log_kde(x, s) - _log_kde(x, r)


def _log_kde(points: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Log density at ``points`` of a product-Gaussian kernel estimate on ``sample``."""
    n, d = sample.shape
    bandwidth = sample.std(axis=0, ddof=1) * n ** (-1.0 / (d + 4))
    scaled_points, scaled_sample = points / bandwidth, sample / bandwidth
    log_kernel = -0.5 * _squared_distances(scaled_points, scaled_sample)
    normaliser = np.log(n) + np.log(bandwidth).sum() + 0.5 * d * np.log(2 * np.pi)
    return scipy.special.logsumexp(log_kernel, axis=1) - normaliser


def _mlp(width: int, hidden: int, out: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, out),
    )  # fmt: skip


def logan_d1(
    records: np.ndarray,
    synthetic: np.ndarray,
    reference: np.ndarray,
    seed: int,
    steps: int = 500,
    batch: int = 256,
) -> np.ndarray:
    """A two-layer classifier (256 units) trained on ``S`` (1) against ``R`` (0), as many
    rows of each; the record's logit of ``S``."""
    rows = min(len(synthetic), len(reference))
    x = torch.as_tensor(np.vstack([synthetic[:rows], reference[:rows]]), dtype=torch.float32)
    y = torch.cat([torch.ones(rows), torch.zeros(rows)])
    with seeded_init(seed):
        classifier = _mlp(x.shape[1], 256, 1)
    optimizer = torch.optim.Adam(classifier.parameters(), lr=1e-3)
    draws = torch.Generator().manual_seed(seed)
    loss = nn.BCEWithLogitsLoss()
    for _ in range(steps):
        pick = torch.randint(len(x), (batch,), generator=draws)
        optimizer.zero_grad()
        loss(classifier(x[pick]).squeeze(1), y[pick]).backward()
        optimizer.step()
    with torch.no_grad():
        return classifier(torch.as_tensor(records, dtype=torch.float32)).squeeze(1).numpy()


def logan_0(
    records: np.ndarray, synthetic: np.ndarray, seed: int, steps: int = 2000, batch: int = 64
) -> np.ndarray:
    """A GAN (two-layer generator and discriminator, 128 units, non-saturating loss)
    trained on ``S`` alone; the record's discriminator logit."""
    data = torch.as_tensor(synthetic, dtype=torch.float32)
    latent = 32
    with seeded_init(seed):
        generator, discriminator = _mlp(latent, 128, data.shape[1]), _mlp(data.shape[1], 128, 1)
    g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    draws = torch.Generator().manual_seed(seed)
    loss = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(batch), torch.zeros(batch)
    for _ in range(steps):
        real = data[torch.randint(len(data), (batch,), generator=draws)]
        fake = generator(torch.randn(batch, latent, generator=draws))
        d_opt.zero_grad()
        d_loss = loss(discriminator(real).squeeze(1), ones)
        d_loss = d_loss + loss(discriminator(fake.detach()).squeeze(1), zeros)
        d_loss.backward()
        d_opt.step()
        g_opt.zero_grad()
        loss(discriminator(fake).squeeze(1), ones).backward()
        g_opt.step()
    with torch.no_grad():
        return discriminator(torch.as_tensor(records, dtype=torch.float32)).squeeze(1).numpy()


Attack = Callable[[np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]
ATTACKS: Mapping[str, Attack] = {
    "logan_0": lambda x, s, r, seed: logan_0(x, s, seed),
    "logan_d1": logan_d1,
    "mc": lambda x, s, r, seed: monte_carlo(x, s),
    "gan_leaks_0": lambda x, s, r, seed: gan_leaks_0(x, s),
    "gan_leaks_cal": lambda x, s, r, seed: gan_leaks_cal(x, s, r),
    "domias": lambda x, s, r, seed: domias(x, s, r),
}
"""Paper 000's Table 3 baselines, in its column order: (records, synthetic, reference,
seed) -> scores."""


def attack_scores(
    members: pd.DataFrame,
    non_members: pd.DataFrame,
    synthetic: pd.DataFrame,
    reference: pd.DataFrame,
    schema: Schema,
    seed: int = 0,
    attacks: tuple[str, ...] = tuple(ATTACKS),
) -> dict[str, np.ndarray]:
    """Each attack's scores of ``members`` then ``non_members`` (one array each attack)."""
    unknown = [a for a in attacks if a not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attacks {unknown}; valid: {list(ATTACKS)}")
    if len(members) == 0 or len(non_members) == 0:
        raise ValueError("the attacks need at least one member and one non-member")
    encoder = FeatureEncoder(schema).fit(reference)
    records = encoder.transform(pd.concat([members, non_members])[schema.names])
    s, r = (encoder.transform(t[schema.names]) for t in (synthetic, reference))
    records, s, r = (np.nan_to_num(a) for a in (records, s, r))
    return {name: ATTACKS[name](records, s, r, seed) for name in attacks}


def score_attacks(scores: Mapping[str, np.ndarray], members: int) -> dict[str, AttackScore]:
    """AUC and median-threshold accuracy of each attack's scores, whose first ``members``
    entries are the members'."""
    result = {}
    for name, values in scores.items():
        truth = np.arange(len(values)) < members
        predicted = values > np.median(values)
        result[name] = AttackScore(
            auc=float(roc_auc_score(truth, values)),
            accuracy=float(np.mean(predicted == truth)),
        )
    return result
