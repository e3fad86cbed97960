"""What a user chooses about differential privacy, validated, and the plan derived from it.

:class:`DPConfig` is the ``dp`` node of the configuration (Hydra group ``dp``: ``none``,
``vflgan_gaussian``, ``dpsgd``). :func:`plan_privacy` turns it into a
:class:`PrivacyPlan` for one data holder once the dataset size and the number of
discriminator steps are known: the noise multiplier (calibrated to the target unless
given), how the accountant sees each step, and how many steps the budget allows.

Only discriminator steps read real rows, so only they are accounted; generator steps
are post-processing of the discriminators (paper 000, Section 3.5; paper 001, Section 3.2).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from flwr_vflgan.checked import build_checked
from flwr_vflgan.privacy.accounting import (
    Conversion,
    GaussianSteps,
    PrivacyLedger,
    Sampling,
    calibrate_noise,
)


class Mechanism(StrEnum):
    """Which mechanism protects the discriminators' updates."""

    NONE = "none"
    """No differential privacy."""
    VFLGAN_GAUSSIAN = "vflgan_gaussian"
    """Paper 000, eqs. 20-21: clip the first-layer batch gradient to C, add N(0, (2 C sigma)^2)."""
    DPSGD = "dpsgd"
    """Per-sample clipping of every discriminator gradient and Gaussian noise (Abadi et al. 2016)."""
    END_TO_END = "end_to_end"
    """DP-SGD on every discriminator that reads real rows, the server's ``D_s`` included,
    accounted as one mechanism per step; encoders from public metadata only."""
    PATE = "pate"
    """VDGAN-PATE (paper 004, Algorithm 4): teacher critics on disjoint shards, their
    top-K gradient signs voted with Gaussian noise; only the votes leave a client."""
    GS_WGAN = "gs_wgan"
    """GS-WGAN (Chen et al. 2020): discriminators on disjoint shards, un-noised and never
    released; each synthetic sample's gradient from the one chosen per generator step is
    clipped to C and noised with N(0, (2 C sigma)^2) before it reaches the generator."""

    @property
    def per_sample(self) -> bool:
        """Whether rows are clipped one by one (``dpsgd``, ``end_to_end``)."""
        return self in (Mechanism.DPSGD, Mechanism.END_TO_END)


REFERENCE_CLIP_NUMERATOR = 1.5
"""The reference code clips the first-layer gradient to ``1.5 / batch_size``."""


def _number(name: str, value: object, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"dp.{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or (number <= 0 if positive else number < 0):
        raise ValueError(
            f"dp.{name} must be finite and {'> 0' if positive else '>= 0'}, got {value!r}"
        )
    return number


@dataclass(frozen=True)
class DPConfig:
    """Differential-privacy settings of a run (the ``dp`` node).

    Parameters
    ----------
    mechanism
        ``none``, ``vflgan_gaussian``, ``dpsgd``, ``end_to_end``, ``pate`` or ``gs_wgan``.
    target_epsilon
        Each data holder's budget. With ``noise_multiplier`` unset the noise is calibrated
        so that the planned discriminator steps spend at most this much; with it set, the
        run stops before any holder would exceed it.
    delta
        The delta of the guarantee; must be below ``1 / n`` for a dataset of ``n`` rows.
    clip
        ``C`` of ``vflgan_gaussian``, the L2 bound of the whole first-layer batch gradient;
        ``None`` uses the reference code's ``1.5 / batch_size``.
    max_grad_norm
        ``C`` of ``dpsgd`` and ``end_to_end``, the per-sample L2 bound over all of a
        holder's discriminator parameters (the server's ``D_s`` too under ``end_to_end``);
        under ``gs_wgan`` the L2 bound of each synthetic sample's gradient.
    noise_multiplier
        ``sigma``: noise standard deviation over ``2 C`` (``vflgan_gaussian``,
        ``gs_wgan``) or over ``C`` (``dpsgd``, Opacus's convention); ``None`` calibrates it
        to the target.
    sampling
        How discriminator batches are drawn, which fixes the neighbouring relation of the
        guarantee: ``without_replacement`` (fixed-size batches, replace-one neighbours,
        the paper's scheme) or, for ``dpsgd`` only, ``poisson`` (every row joins a batch
        independently with probability ``batch_size / n``; add/remove-one neighbours).
    conversion
        RDP to (epsilon, delta): ``classic`` (paper 000's eq. 1, the default, so numbers
        compare with published ones) or ``improved`` (Balle et al. 2020, tighter).
    select_by_fd
        Publish the generator of the epoch with the lowest Frechet distance against the
        real table, as paper 000's experiments do. That choice reads the real data outside
        the accounted mechanism, so it is off by default under DP and the last generator
        is published.
    masked_batch_size
        ``B_hat``, paper 000's batch masking (Section 3.5, end; :mod:`flwr_vflgan.privacy.masking`):
        each discriminator step draws ``B_hat`` rows, and each party's update keeps the
        gradients of ``train.batch_size`` of them, chosen with its secret noise seed, so no
        party knows which rows another used. ``None`` (the default): no masking. VFLGAN and
        VFLGAN-base under ``vflgan_gaussian`` or ``dpsgd`` only; must exceed
        ``train.batch_size``.
    pate_teachers, pate_top_k, pate_clip, pate_threshold
        ``pate`` only (:mod:`flwr_vflgan.privacy.pate`): teachers per client ``E``, signs
        each teacher votes on per synthetic row ``K``, the per-entry clip ``c`` before
        normalisation, and the voting threshold ``beta`` (a direction needs a noisy sum of
        at least ``beta E``). With ``pate``, ``noise_multiplier`` is the votes' noise
        standard deviation itself.

    Raises
    ------
    ValueError
        On an unknown mechanism, sampling or conversion, a missing or out-of-range
        number, or settings that belong to the other mechanism.
    """

    mechanism: Mechanism = Mechanism.NONE
    target_epsilon: float | None = None
    delta: float = 1e-5
    clip: float | None = None
    max_grad_norm: float = 1.0
    noise_multiplier: float | None = None
    sampling: Sampling = Sampling.WITHOUT_REPLACEMENT
    conversion: Conversion = Conversion.CLASSIC
    select_by_fd: bool = False
    masked_batch_size: int | None = None
    pate_teachers: int = 10
    pate_top_k: int = 5
    pate_clip: float = 1.0
    pate_threshold: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "mechanism", _choice(Mechanism, self.mechanism, "mechanism"))
        object.__setattr__(self, "sampling", _choice(Sampling, self.sampling, "sampling"))
        object.__setattr__(self, "conversion", _choice(Conversion, self.conversion, "conversion"))
        if not isinstance(self.select_by_fd, bool):
            raise ValueError(f"dp.select_by_fd must be true or false, got {self.select_by_fd!r}")
        if self.mechanism is Mechanism.NONE:
            # A budget or noise given without a mechanism would silently train without DP.
            given = [
                f"dp.{name}={getattr(self, name)!r}"
                for name in ("target_epsilon", "noise_multiplier", "clip", "masked_batch_size")
                if getattr(self, name) is not None
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)} without a DP mechanism would train without differential "
                    "privacy: choose dp=vflgan_gaussian, dp=dpsgd or dp=end_to_end, or drop the "
                    "setting"
                )
            return
        if self.target_epsilon is None:
            raise ValueError(
                f"dp.mechanism={self.mechanism.value} needs dp.target_epsilon (the budget "
                "every data holder may spend)"
            )
        _number("target_epsilon", self.target_epsilon)
        delta = _number("delta", self.delta)
        if delta >= 1:
            raise ValueError(f"dp.delta must be in (0, 1), got {self.delta!r}")
        if self.clip is not None:
            if self.mechanism is not Mechanism.VFLGAN_GAUSSIAN:
                raise ValueError(
                    "dp.clip bounds the first-layer batch gradient of dp=vflgan_gaussian; "
                    f"dp={self.mechanism.value} clips per sample with dp.max_grad_norm"
                )
            _number("clip", self.clip)
        _number("max_grad_norm", self.max_grad_norm)
        if self.noise_multiplier is not None:
            _number("noise_multiplier", self.noise_multiplier)
        if self.mechanism is Mechanism.PATE:
            self._check_pate()
        self._check_masking()
        if self.sampling is Sampling.POISSON and not self.mechanism.per_sample:
            raise ValueError(
                "dp.sampling=poisson needs dp=dpsgd or dp=end_to_end: the first-layer "
                "mechanism's sensitivity "
                "2C is proven for fixed-size batches without replacement (paper 000, Prop. 4)"
            )

    def _check_masking(self) -> None:
        size = self.masked_batch_size
        if size is None:
            return
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise ValueError(f"dp.masked_batch_size must be an integer >= 2, got {size!r}")
        if self.mechanism not in (Mechanism.VFLGAN_GAUSSIAN, Mechanism.DPSGD):
            raise ValueError(
                f"dp.masked_batch_size masks the parties' discriminator updates under "
                f"dp=vflgan_gaussian or dp=dpsgd; dp={self.mechanism.value} does not take it: "
                "remove it"
            )
        if self.sampling is Sampling.POISSON:
            raise ValueError(
                "dp.masked_batch_size draws fixed-size batches of B_hat rows: remove "
                "dp.sampling=poisson"
            )

    @property
    def masked(self) -> bool:
        """Whether discriminator batches are masked (``masked_batch_size`` is set)."""
        return self.enabled and self.masked_batch_size is not None

    def drawn_rows(self, batch_size: int) -> int:
        """Rows a discriminator step draws: ``masked_batch_size``, or ``batch_size``."""
        return self.masked_batch_size if self.masked_batch_size is not None else batch_size

    def _check_pate(self) -> None:
        for name in ("pate_teachers", "pate_top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"dp.{name} must be an integer >= 1, got {value!r}")
        _number("pate_clip", self.pate_clip)
        threshold = _number("pate_threshold", self.pate_threshold, positive=False)
        if threshold > 1:
            raise ValueError(f"dp.pate_threshold must be in [0, 1], got {self.pate_threshold!r}")

    @property
    def enabled(self) -> bool:
        """Whether a mechanism is on."""
        return self.mechanism is not Mechanism.NONE

    @property
    def poisson(self) -> bool:
        """Whether discriminator batches are Poisson-sampled (variable size)."""
        return self.enabled and self.sampling is Sampling.POISSON

    def clip_for(self, batch_size: int) -> float:
        """The clip bound ``C`` of the mechanism at this batch size."""
        if self.mechanism.per_sample or self.mechanism is Mechanism.GS_WGAN:
            return float(self.max_grad_norm)
        if self.clip is not None:
            return float(self.clip)
        return REFERENCE_CLIP_NUMERATOR / batch_size

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (enums as their values)."""
        out = asdict(self)
        for key in ("mechanism", "sampling", "conversion"):
            out[key] = getattr(self, key).value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DPConfig:
        """Build from a mapping; unknown keys are errors that list the valid ones."""
        return build_checked(cls, data, "dp")


def _choice(enum_type: type[StrEnum], value: object, name: str) -> Any:
    try:
        return enum_type(value)  # type: ignore[arg-type]  # a member or its value
    except ValueError:
        valid = [member.value for member in enum_type]
        raise ValueError(f"unknown dp.{name} {value!r}; valid: {valid}") from None


@dataclass(frozen=True)
class PrivacyPlan:
    """How one data holder's discriminator steps are noised and accounted.

    Attributes
    ----------
    noise_multiplier
        ``sigma`` as the mechanism applies it.
    clip
        ``C`` as the mechanism applies it.
    accountant_multiplier
        Noise standard deviation over the sensitivity under the sampling's neighbouring
        relation, which is what the accountant composes: ``sigma`` for
        ``vflgan_gaussian`` (std ``2 C sigma``, replace-one sensitivity ``2 C``);
        ``sigma / 2`` for ``dpsgd`` with fixed-size batches (std ``sigma C`` on a sum of
        per-sample-clipped gradients, sensitivity ``2 C`` when one row is replaced) and
        ``sigma`` for ``dpsgd`` with Poisson sampling (add/remove-one sensitivity ``C``,
        Opacus's convention).
    allowed_steps
        Discriminator steps the budget allows with this noise.
    planned_steps
        Discriminator steps the schedule asks for.
    parts
        Holders that each apply the mechanism to the same batch in one step (``end_to_end``:
        the ``M`` parties and the server; ``dpsgd`` on VertiGAN: the ``M`` parties; a
        VFLGAN-TS party: its ``C_i`` attribute discriminators and its feature extractor;
        otherwise 1). Their ``parts`` Gaussian releases
        of sensitivity ``Delta`` and noise ``sigma Delta`` together are one Gaussian
        mechanism of sensitivity ``Delta sqrt(parts)`` (concatenate the noised sums), so
        ``accountant_multiplier`` is divided by ``sqrt(parts)`` and every holder's
        epsilon is that of the joint release.
    """

    config: DPConfig
    dataset_size: int
    batch_size: int
    noise_multiplier: float
    clip: float
    accountant_multiplier: float
    allowed_steps: int
    planned_steps: int
    parts: int = 1

    def state(self) -> dict[str, Any]:
        """JSON-able numbers of the plan (the config travels separately)."""
        return {k: v for k, v in asdict(self).items() if k != "config"}

    @classmethod
    def restore(cls, config: DPConfig, state: dict[str, Any]) -> PrivacyPlan:
        """Inverse of :meth:`state`, without calibrating again."""
        return cls(config=config, **state)

    def event(self, steps: int) -> GaussianSteps:
        """``steps`` discriminator steps as the accountant sees them."""
        return GaussianSteps(
            self.dataset_size,
            self.batch_size,
            self.accountant_multiplier,
            steps,
            self.config.sampling,
        )

    def ledger(self, party: str, steps: int) -> PrivacyLedger:
        """A ledger of ``party`` that has recorded ``steps`` discriminator steps."""
        assert self.config.target_epsilon is not None  # DPConfig checks it when enabled
        ledger = PrivacyLedger(
            party, self.config.target_epsilon, self.config.delta, self.config.conversion
        )
        ledger.record(self.event(steps))
        return ledger

    def summary(self, party: str, steps: int) -> dict[str, Any]:
        """The ledger summary after ``steps`` steps, with the mechanism's parameters."""
        return {
            **self.ledger(party, steps).summary(),
            "mechanism": self.config.mechanism.value,
            "noise_multiplier": self.noise_multiplier,
            "clip": self.clip,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
            "parts": self.parts,
        }


def check_delta(delta: float, dataset_size: int) -> None:
    """``delta`` below ``1 / n``, which every data holder's guarantee needs (the GANs'
    parties and clients, AIM and MST).

    Raises
    ------
    ValueError
        It is not; the message names the value and the rule.
    """
    if delta >= 1 / dataset_size:
        raise ValueError(
            f"dp.delta={delta:g} must be below 1/n = {1 / dataset_size:.3g} for a "
            f"dataset of {dataset_size} rows (a larger delta allows releasing a whole row)"
        )


def check_holder(config: DPConfig, dataset_size: int, planned_steps: int) -> None:
    """What every data holder's plan needs (VFLGAN's parties and VT-GAN's clients alike):
    ``delta`` below ``1 / n`` and at least one planned discriminator step.

    Raises
    ------
    ValueError
        Either does not hold; the message names the value and the rule.
    """
    check_delta(config.delta, dataset_size)
    if planned_steps < 1:
        raise ValueError(f"the schedule plans {planned_steps} discriminator steps; need >= 1")


def plan_privacy(
    config: DPConfig, *, dataset_size: int, batch_size: int, planned_steps: int, parts: int = 1
) -> PrivacyPlan:
    """The noise and the step allowance of one data holder.

    Parameters
    ----------
    config
        An enabled :class:`DPConfig`.
    dataset_size
        Rows ``n`` the holder's batches are drawn from.
    batch_size
        Rows per batch.
    planned_steps
        Discriminator steps of the training schedule (>= 1).
    parts
        Holders applying the mechanism to each batch, accounted jointly
        (:attr:`PrivacyPlan.parts`); more than 1 only for ``gs_wgan`` (the batch's
        sanitized sample gradients), for the per-row mechanisms
        (``end_to_end``; ``dpsgd`` on VertiGAN, whose parties noise the same batch) and
        for a VFLGAN-TS party under ``vflgan_gaussian``, whose attribute discriminators
        and feature extractor each noise their first layer on the same batch.

    Returns
    -------
    PrivacyPlan

    Raises
    ------
    ValueError
        If DP is off, ``delta >= 1 / n``, the target cannot be met by any noise the
        calibration searches, or a given noise multiplier cannot pay for one step.
    """
    if not config.enabled:
        raise ValueError("plan_privacy needs an enabled dp.mechanism, got dp.mechanism=none")
    assert config.target_epsilon is not None
    check_holder(config, dataset_size, planned_steps)
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ValueError(f"parts must be an integer >= 1, got {parts!r}")
    joint = config.mechanism.per_sample or config.mechanism in (
        Mechanism.VFLGAN_GAUSSIAN,
        Mechanism.GS_WGAN,
    )
    if parts > 1 and not joint:
        raise ValueError(f"dp={config.mechanism.value} is accounted per holder (parts=1)")
    # Only per-sample clipping under replace-one has sensitivity 2C against noise sigma C;
    # parts holders noising the same batch compose to sqrt(parts) times the sensitivity.
    halve = config.mechanism.per_sample and config.sampling is Sampling.WITHOUT_REPLACEMENT
    scale = (2.0 if halve else 1.0) * math.sqrt(parts)
    sigma, accountant = _noise(config, dataset_size, batch_size, planned_steps, scale)
    ledger = PrivacyLedger("plan", config.target_epsilon, config.delta, config.conversion)
    allowed = ledger.max_steps(dataset_size, batch_size, accountant, config.sampling)
    if allowed == 0:
        one = ledger.spent_after(
            GaussianSteps(dataset_size, batch_size, accountant, 1, config.sampling)
        )
        raise ValueError(
            f"dp.target_epsilon={config.target_epsilon:g} is too small for even one "
            f"{'generator' if config.mechanism is Mechanism.GS_WGAN else 'discriminator'} step with noise_multiplier={sigma:g} (one step spends "
            f"epsilon {one:.4g} at delta={config.delta:g}); raise the target or the noise"
        )
    return PrivacyPlan(
        config=config,
        dataset_size=dataset_size,
        batch_size=batch_size,
        noise_multiplier=sigma,
        clip=config.clip_for(batch_size),
        accountant_multiplier=accountant,
        allowed_steps=allowed,
        planned_steps=planned_steps,
        parts=parts,
    )


def _noise(
    config: DPConfig, dataset_size: int, batch_size: int, planned_steps: int, scale: float
) -> tuple[float, float]:
    """``(sigma, sigma / scale)``: the given noise multiplier, or the one whose accountant
    multiplier ``sigma / scale`` spends the target over the planned steps."""
    if config.noise_multiplier is not None:
        sigma = float(config.noise_multiplier)
        return sigma, sigma / scale
    assert config.target_epsilon is not None  # DPConfig checks it when enabled
    accountant = calibrate_noise(
        config.target_epsilon,
        config.delta,
        dataset_size=dataset_size,
        batch_size=batch_size,
        steps=planned_steps,
        sampling=config.sampling,
        conversion=config.conversion,
    )
    return accountant * scale, accountant
