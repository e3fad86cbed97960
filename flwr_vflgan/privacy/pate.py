"""VDGAN-PATE's private gradient voting (paper 004, Algorithm 4) and its account
(Algorithm 5, as corrected in ``shared/notes/seed-errata.md``).

A client holds ``E`` teacher discriminators, each trained on its own disjoint shard of the
client's rows. For each synthetic row of a batch, every teacher's gradient of the
generator loss with respect to that row is *compressed* (:func:`compress`): its ``K``
largest entries in magnitude are kept, clipped to ``[-c, c]``, divided by the vector's
largest magnitude, and replaced by a random sign that is ``+1`` with probability
``(1 + g) / 2``; every other entry is 0. The teachers' sign vectors are then *voted*
(:func:`vote`): summed, Gaussian noise ``N(0, sigma^2)`` added to every entry, and each
entry becomes ``+1`` or ``-1`` where the noisy sum reaches ``beta E`` in that direction,
else 0. Only the voted signs leave the client.

Privacy. Changing one row changes one teacher, hence its sign vector for each synthetic
row. Two sign vectors with ``K`` non-zero entries differ by at most ``2 sqrt(K)`` in L2
norm (the same ``K`` entries, every sign flipped; eq. 4.16 prints ``sqrt(2) K``, its
derivation gives ``2 sqrt(K)``): :func:`vote_sensitivity`. A batch of ``m`` rows is ``m``
such Gaussian releases, an iteration one batch, and the teachers see their whole shard,
so there is no amplification by sampling: ``T`` iterations are ``T m`` compositions of a
Gaussian mechanism of noise multiplier ``sigma / (2 sqrt(K))``, whose Renyi DP at order
``alpha`` is ``alpha s^2 / (2 sigma^2)`` each (Mironov 2017). The conversion to
``(epsilon, delta)`` takes the **minimum** over the orders of
``rdp(alpha) + log(1/delta) / (alpha - 1)``, for orders above 1 (Algorithm 5 prints a
maximum and starts at ``alpha = 1``, where the formula is undefined: seed-errata).

Across clients. The thesis (eq. 4.17) reports the maximum of the clients' epsilons,
treating their data as disjoint. In vertical FL one person's record has attributes at
every client, and a teacher shard taken by row index holds the same people at every
client, so one person moves ``N`` releases per synthetic row, one per client: this
module's account composes them (``parties = N``), and :meth:`PateAccount.epsilon` with
``parties=1`` is the thesis's per-client number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from flwr_vflgan.privacy.accounting import RDP_ORDERS
from flwr_vflgan.privacy.config import DPConfig

__all__ = [
    "PateAccount",
    "PatePlan",
    "calibrate_sigma",
    "compress",
    "vote",
    "vote_sensitivity",
]


def vote_sensitivity(top_k: int) -> float:
    """L2 distance between two teachers' compressed gradients at most: ``2 sqrt(K)``."""
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    return 2.0 * math.sqrt(top_k)


def compress(
    grads: torch.Tensor, top_k: int, clip: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Algorithm 4, step 1: every teacher's gradient for every synthetic row as ``K``
    random signs.

    Parameters
    ----------
    grads
        ``(E, m, d)``: teacher ``j``'s gradient of the generator loss with respect to
        synthetic row ``i`` at ``grads[j, i]``.
    top_k
        ``K``, the entries each teacher votes on per row (``1 <= K <= d``).
    clip
        ``c``: each kept entry is clipped to ``[-c, c]`` before normalisation.
    generator
        Source of the random signs (private to the client).

    Returns
    -------
    torch.Tensor
        ``(E, m, d)`` float32 in ``{-1, 0, 1}``, exactly ``K`` non-zero entries per
        teacher and row.
    """
    if grads.ndim != 3:
        raise ValueError(f"grads must be (teachers, rows, dims), got shape {tuple(grads.shape)}")
    if not 1 <= top_k <= grads.shape[2]:
        raise ValueError(f"top_k must be in [1, {grads.shape[2]}], got {top_k}")
    if not clip > 0:
        raise ValueError(f"clip must be > 0, got {clip}")
    if not torch.isfinite(grads).all():
        raise ValueError("grads contain non-finite values")
    index = grads.abs().topk(top_k, dim=2).indices
    kept = grads.gather(2, index).clamp(-clip, clip)
    largest = kept.abs().amax(dim=2, keepdim=True)
    scaled = torch.where(largest > 0, kept / largest.clamp_min(1e-30), torch.zeros_like(kept))
    uniform = torch.rand(scaled.shape, generator=generator, dtype=torch.float32)
    signs = torch.where(uniform < (1 + scaled) / 2, 1.0, -1.0)
    return torch.zeros(grads.shape, dtype=torch.float32).scatter_(2, index, signs)


def vote(
    signs: torch.Tensor, sigma: float, threshold: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Algorithm 4, step 2: the teachers' signs summed, noised with ``N(0, sigma^2)``
    per entry, and kept as ``+1``/``-1`` where the noisy sum reaches ``beta E``.

    Parameters
    ----------
    signs
        ``(E, m, d)`` from :func:`compress`.
    sigma
        Standard deviation of the noise on each entry of the sum (> 0).
    threshold
        ``beta``: the fraction of the ``E`` teachers a direction needs (>= 0).

    Returns
    -------
    torch.Tensor
        ``(m, d)`` float32 in ``{-1, 0, 1}``: the only thing that leaves the client.
    """
    if signs.ndim != 3:
        raise ValueError(f"signs must be (teachers, rows, dims), got shape {tuple(signs.shape)}")
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    total = signs.sum(dim=0)
    noisy = total + sigma * torch.randn(total.shape, generator=generator, dtype=torch.float32)
    bar = threshold * signs.shape[0]
    out = torch.zeros_like(noisy)
    out[noisy >= bar] = 1.0
    out[noisy <= -bar] = -1.0
    return out


@dataclass(frozen=True)
class PateAccount:
    """The privacy of ``iterations`` rounds of voting on batches of ``batch_size``
    synthetic rows at ``parties`` clients, each vote with noise ``sigma`` on ``K`` signs.

    Parameters
    ----------
    sigma
        The votes' noise standard deviation.
    top_k
        ``K``.
    batch_size
        ``m``, synthetic rows voted on per iteration.
    parties
        Clients whose votes one person's record moves (``N`` for vertically partitioned
        rows; 1 for the thesis's per-client number).
    """

    sigma: float
    top_k: int
    batch_size: int
    parties: int = 1

    def __post_init__(self) -> None:
        if not self.sigma > 0:
            raise ValueError(f"sigma must be > 0, got {self.sigma}")
        for name in ("top_k", "batch_size", "parties"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def rdp(self, iterations: int) -> np.ndarray:
        """Renyi DP at every order of :data:`RDP_ORDERS` after ``iterations`` rounds:
        ``iterations m N alpha s^2 / (2 sigma^2)``."""
        if iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {iterations}")
        releases = iterations * self.batch_size * self.parties
        s = vote_sensitivity(self.top_k)
        return releases * np.asarray(RDP_ORDERS) * s**2 / (2 * self.sigma**2)

    def epsilon(self, iterations: int, delta: float) -> float:
        """``min_alpha rdp(alpha) + log(1/delta) / (alpha - 1)`` over the orders (> 1)."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        orders = np.asarray(RDP_ORDERS)
        return float(np.min(self.rdp(iterations) + math.log(1 / delta) / (orders - 1)))

    def allowed_iterations(self, target_epsilon: float, delta: float) -> int:
        """The most iterations whose epsilon stays within ``target_epsilon`` (the budget
        stop: a client refuses the next one)."""
        if self.epsilon(1, delta) > target_epsilon:
            return 0
        low, high = 1, 2
        while self.epsilon(high, delta) <= target_epsilon:
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            if self.epsilon(middle, delta) <= target_epsilon:
                low = middle
            else:
                high = middle
        return low


def calibrate_sigma(
    target_epsilon: float,
    delta: float,
    *,
    iterations: int,
    batch_size: int,
    top_k: int,
    parties: int = 1,
) -> float:
    """The smallest noise (to 0.1 %) whose account of ``iterations`` rounds stays within
    ``target_epsilon``."""
    if not target_epsilon > 0:
        raise ValueError(f"target_epsilon must be > 0, got {target_epsilon}")

    def spent(sigma: float) -> float:
        return PateAccount(sigma, top_k, batch_size, parties).epsilon(iterations, delta)

    low, high = 1e-3, 1.0
    while spent(high) > target_epsilon:
        low, high = high, high * 2
        if high > 1e9:
            raise ValueError(f"no noise reaches epsilon {target_epsilon} in {iterations} rounds")
    while high / low > 1.001:
        middle = math.sqrt(low * high)
        if spent(middle) > target_epsilon:
            low = middle
        else:
            high = middle
    return high


@dataclass(frozen=True)
class PatePlan:
    """One VDGAN-PATE client's noise and allowance, and what it reports.

    Parameters
    ----------
    sigma
        The votes' noise standard deviation.
    top_k, batch_size, parties, teachers
        ``K``, the synthetic rows voted on per iteration, the clients accounted jointly,
        the teachers ``E``.
    target_epsilon, delta
        The budget.
    allowed_iterations
        The most iterations the budget allows (the client refuses the next).
    """

    sigma: float
    top_k: int
    batch_size: int
    parties: int
    teachers: int
    target_epsilon: float
    delta: float
    allowed_iterations: int

    @classmethod
    def calibrate(
        cls,
        dp: DPConfig,
        *,
        iterations: int,
        batch_size: int,
        parties: int,
    ) -> PatePlan:
        """The plan of a ``dp=pate`` configuration for ``iterations`` planned rounds: the
        noise calibrated to the target (or ``dp.noise_multiplier`` as the noise itself).

        Raises
        ------
        ValueError
            The budget allows no iteration with the given noise.
        """
        assert dp.target_epsilon is not None  # DPConfig checks it when enabled
        sigma = (
            float(dp.noise_multiplier)
            if dp.noise_multiplier is not None
            else calibrate_sigma(
                dp.target_epsilon,
                dp.delta,
                iterations=iterations,
                batch_size=batch_size,
                top_k=dp.pate_top_k,
                parties=parties,
            )
        )
        account = PateAccount(sigma, dp.pate_top_k, batch_size, parties)
        allowed = account.allowed_iterations(dp.target_epsilon, dp.delta)
        if allowed == 0:
            raise ValueError(
                f"dp.target_epsilon={dp.target_epsilon:g} is too small for one iteration of "
                f"votes with noise {sigma:g} (one spends epsilon "
                f"{account.epsilon(1, dp.delta):.4g}): raise the target or the noise"
            )
        return cls(
            sigma,
            dp.pate_top_k,
            batch_size,
            parties,
            dp.pate_teachers,
            float(dp.target_epsilon),
            float(dp.delta),
            allowed,
        )

    def state(self) -> dict[str, float | int]:
        """JSON-able fields (:meth:`restore` reads them back)."""
        return dict(vars(self))

    @classmethod
    def restore(cls, state: dict[str, float | int]) -> PatePlan:
        """Inverse of :meth:`state`."""
        return cls(**state)  # type: ignore[arg-type]

    def summary(self, holder: str, iterations: int) -> dict[str, object]:
        """What a client reports after ``iterations`` rounds of votes."""
        account = PateAccount(self.sigma, self.top_k, self.batch_size, self.parties)
        return {
            "party": holder,
            "epsilon": account.epsilon(iterations, self.delta),
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "accountant": "pate-votes",
            "conversion": "classic",
            "steps": iterations,
            "mechanism": "pate",
            "noise_multiplier": self.sigma,
            "teachers": self.teachers,
            "top_k": self.top_k,
            "batch_size": self.batch_size,
            "parts": self.parties,
        }
