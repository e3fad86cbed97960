"""DP-SGD for VT-GAN's discriminators (paper 001, Section 4.3.4) with its accounting.

Paper 001 trains "the discriminator (both client and server side)" with DP-SGD. Each part
of the split critic is updated by its holder: the server's ``D^t`` and ``D^cv``, every
client's ``D^b_i``. Each holder clips the per-row gradient of its own parameters to
``C`` (``dp.max_grad_norm``) and adds N(0, (sigma C)^2) noise to the sum with its own
private noise seed. A row is one real row paired with the fake row at the same position
of the batch (and their interpolate for the gradient penalty).

Three choices make the guarantee hold, and this module documents them:

* **Uniform batches.** CTGAN picks real rows that match a conditional vector, so a row
  of a rare category is sampled far more often than ``B / n``, and no subsampling
  amplification applies. Under DP the real rows are a uniform batch (fixed-size without
  replacement, or Poisson) drawn from the clients' shared seed in the original row
  order; the chosen client reads each row's condition from its own columns (one of its
  categorical columns, chosen uniformly per row). Every client can draw the batch, so
  every client sends the features of the batch rows only; no row index crosses the wire.
* **Private category frequencies.** The fake rows' conditions (in training and at
  publication) are drawn from category frequencies; exact counts are data. Under DP each
  client releases its category counts once with Gaussian noise (multiplier
  ``vtgan.dp_count_noise`` over the L2 sensitivity of its histogram: ``sqrt(k)`` under
  add/remove-one, ``sqrt(2k)`` under replace-one, ``k`` its categorical columns), and
  that release is accounted.
* **Joint accounting.** One row influences every part's update in the same step. The
  M + 1 parts (M clients and the server), each clipping to ``C`` with noise ``sigma C``,
  are together one Gaussian mechanism with sensitivity ``C sqrt(M + 1)``, i.e. noise
  multiplier ``sigma / sqrt(M + 1)`` (RDP composition, Mironov 2017, Prop. 1). The
  target epsilon is that of the whole release, histograms included: the per-part sigma
  is calibrated so that ``M`` histogram releases plus the planned discriminator steps at
  ``sigma / sqrt(M + 1)`` spend at most ``dp.target_epsilon``. Each part also reports
  what its own releases spent alone.

Not covered, as in the paper: what the server observes during training besides the
critic's updates (the chosen client's conditions for the real rows are values of its
columns for the sampled rows, sent in the clear as in the non-DP protocol).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from flwr_vflgan.privacy.accounting import Conversion, GaussianSteps, Sampling, epsilon
from flwr_vflgan.privacy.config import DPConfig, Mechanism, check_holder


@dataclass(frozen=True)
class VTGANPrivacy:
    """The noise of every part and the accounting of a DP VT-GAN run.

    Parameters
    ----------
    config
        The run's enabled ``dp=dpsgd`` settings.
    n_clients
        ``M``.
    dataset_size, batch_size
        ``n`` and the (expected) batch size ``B``.
    planned_steps
        Discriminator steps of the schedule.
    noise_multiplier
        ``sigma`` of every part's DP-SGD (noise std over the clip bound ``C``).
    count_noise
        Noise multiplier of the category-count release (std over its sensitivity).
    count_columns
        Categorical columns of each client (for the count sensitivities).
    """

    config: DPConfig
    n_clients: int
    dataset_size: int
    batch_size: int
    planned_steps: int
    noise_multiplier: float
    count_noise: float
    count_columns: tuple[int, ...]

    @property
    def clip(self) -> float:
        """Per-row clip bound ``C``."""
        return float(self.config.max_grad_norm)

    @property
    def sampling(self) -> Sampling:
        """Batch sampling (and with it the neighbouring relation)."""
        return self.config.sampling

    def _step_multiplier(self, parts: int) -> float:
        # Fixed-size batches, replace-one: a row's replacement moves the clipped sum by 2C.
        halve = 2.0 if self.sampling is Sampling.WITHOUT_REPLACEMENT else 1.0
        return self.noise_multiplier / math.sqrt(parts) / halve

    def count_event(self) -> GaussianSteps:
        """One client's count release (sensitivity already in the multiplier)."""
        return GaussianSteps(
            self.dataset_size, self.dataset_size, self.count_noise, 1, self.sampling
        )

    def step_events(self, steps: int, parts: int) -> GaussianSteps:
        """``steps`` DP-SGD steps of ``parts`` parts released together."""
        return GaussianSteps(
            self.dataset_size, self.batch_size, self._step_multiplier(parts), steps, self.sampling
        )

    def joint_epsilon(self, steps: int) -> float:
        """Epsilon of everything the run releases after ``steps`` discriminator steps."""
        counts = [self.count_event()] * sum(1 for k in self.count_columns if k > 0)
        return epsilon(
            [*counts, self.step_events(steps, self.n_clients + 1)],
            self.config.delta,
            self.config.conversion,
        )

    def part_epsilon(self, steps: int, counts_released: bool) -> float:
        """Epsilon of one part's own releases (a client's counts and its updates)."""
        counts = [self.count_event()] if counts_released else []
        return epsilon(
            [*counts, self.step_events(steps, 1)], self.config.delta, self.config.conversion
        )

    def summary(self, party: str, steps: int, client: int | None) -> dict[str, Any]:
        """What one part spent and the joint guarantee, for metrics.json."""
        released = client is not None and self.count_columns[client] > 0
        return {
            "party": party,
            "epsilon": self.part_epsilon(steps, released),
            "joint_epsilon": self.joint_epsilon(steps),
            "target_epsilon": self.config.target_epsilon,
            "delta": self.config.delta,
            "steps": steps,
            "noise_multiplier": self.noise_multiplier,
            "count_noise": self.count_noise if released else None,
            "clip": self.clip,
            "accountant": f"rdp-{self.sampling.value.replace('_', '-')}",
            "conversion": self.config.conversion.value,
            "mechanism": self.config.mechanism.value,
        }

    def state(self) -> dict[str, Any]:
        """JSON-able form (the config travels separately)."""
        return {
            "n_clients": self.n_clients,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
            "planned_steps": self.planned_steps,
            "noise_multiplier": self.noise_multiplier,
            "count_noise": self.count_noise,
            "count_columns": list(self.count_columns),
        }

    @classmethod
    def restore(cls, config: DPConfig, state: dict[str, Any]) -> VTGANPrivacy:
        """Inverse of :meth:`state`."""
        return cls(config=config, **{**state, "count_columns": tuple(state["count_columns"])})


@functools.lru_cache(maxsize=32)
def plan_vtgan_privacy(
    config: DPConfig,
    *,
    count_noise: float,
    count_columns: tuple[int, ...],
    dataset_size: int,
    batch_size: int,
    planned_steps: int,
) -> VTGANPrivacy:
    """Calibrate every part's noise to the joint target (or check a given noise).

    Every part runs this same computation on the same inputs (the server and each client
    calibrate for themselves); the result is cached per process.

    Raises
    ------
    ValueError
        If the mechanism is not ``dpsgd``, ``delta >= 1/n``, the count release alone
        spends the target, or a given ``dp.noise_multiplier`` overspends it.
    """
    target = _checked_target(
        config, count_noise=count_noise, dataset_size=dataset_size, planned_steps=planned_steps
    )

    def plan(sigma: float) -> VTGANPrivacy:
        return VTGANPrivacy(
            config,
            len(count_columns),
            dataset_size,
            batch_size,
            planned_steps,
            sigma,
            count_noise,
            tuple(count_columns),
        )

    if config.noise_multiplier is not None:
        fixed = plan(float(config.noise_multiplier))
        spent = fixed.joint_epsilon(planned_steps)
        if spent > target:
            raise ValueError(
                f"dp.noise_multiplier={config.noise_multiplier:g} spends epsilon {spent:.3f} "
                f"over the {planned_steps} planned discriminator steps, above dp.target_epsilon="
                f"{target:g}; raise the noise, lower the steps, or leave the noise unset"
            )
        return fixed
    floor = plan(1e6).joint_epsilon(planned_steps)
    if floor >= target:
        raise ValueError(
            f"the category-count release alone spends epsilon {floor:.3f} of dp.target_epsilon="
            f"{target:g}: raise vtgan.dp_count_noise or the target"
        )
    return plan(math.exp(_calibrated_log_sigma(plan, planned_steps, target)))


def _checked_target(
    config: DPConfig, *, count_noise: float, dataset_size: int, planned_steps: int
) -> float:
    """The target epsilon, once the plan's inputs are checked (the errors of the plan)."""
    if config.mechanism is not Mechanism.DPSGD:
        raise ValueError(
            f"VT-GAN trains its discriminators with dp=dpsgd (paper 001, Section 4.3.4), "
            f"got dp.mechanism={config.mechanism.value}"
        )
    assert config.target_epsilon is not None
    if config.sampling is Sampling.POISSON:
        raise ValueError(
            "VT-GAN's DP-SGD draws fixed-size batches (dp.sampling=without_replacement); "
            "dp.sampling=poisson is not supported for algorithm=vtgan"
        )
    check_holder(config, dataset_size, planned_steps)
    if not count_noise > 0:
        raise ValueError(f"vtgan.dp_count_noise must be > 0, got {count_noise!r}")
    return float(config.target_epsilon)


def _calibrated_log_sigma(
    plan: Callable[[float], VTGANPrivacy], planned_steps: int, target: float
) -> float:
    """Log of the smallest sigma (to 0.1%) whose plan spends at most ``target``."""
    # Epsilon falls as sigma grows. Bracket by decades, then bisect log sigma to 0.1%:
    # each evaluation recomputes the without-replacement RDP curve (about a second).
    sigma = 1.0
    if plan(sigma).joint_epsilon(planned_steps) <= target:
        while sigma > 1e-3 and plan(sigma / 10).joint_epsilon(planned_steps) <= target:
            sigma /= 10
        low, high = math.log(sigma / 10), math.log(sigma)
    else:
        while plan(sigma * 10).joint_epsilon(planned_steps) > target:
            sigma *= 10
            if sigma > 1e5:
                raise ValueError(f"no noise up to 1e6 meets dp.target_epsilon={target:g}")
        low, high = math.log(sigma), math.log(sigma * 10)
    while high - low > 1e-3:
        middle = (low + high) / 2
        if plan(math.exp(middle)).joint_epsilon(planned_steps) <= target:
            high = middle
        else:
            low = middle
    return high


def noisy_counts(
    counts: list[np.ndarray], privacy: VTGANPrivacy, rng: np.random.Generator
) -> list[np.ndarray]:
    """A client's category counts with the Gaussian noise of its one count release.

    The histogram of ``k`` columns has L2 sensitivity ``sqrt(k)`` (add/remove one row) or
    ``sqrt(2k)`` (replace one row); the noise std is ``count_noise`` times that. Noisy
    counts are clipped at 0 (post-processing); a column whose counts all clip to 0 falls
    back to uniform frequencies over its categories.
    """
    k = len(counts)
    if k == 0:
        return []
    sensitivity = math.sqrt(k if privacy.sampling is Sampling.POISSON else 2 * k)
    std = privacy.count_noise * sensitivity
    out = []
    for column in counts:
        noisy = np.clip(column + rng.normal(0.0, std, size=column.shape), 0.0, None)
        out.append(noisy if noisy.sum() > 0 else np.ones_like(noisy))
    return out


__all__ = ["Conversion", "VTGANPrivacy", "noisy_counts", "plan_vtgan_privacy"]
