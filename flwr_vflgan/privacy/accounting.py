"""Rényi-DP accounting for subsampled Gaussian mechanisms, and a per-party budget ledger.

A *Gaussian step* releases one noisy quantity computed on a batch of ``batch_size`` rows
drawn from a party's ``dataset_size`` rows, with Gaussian noise whose standard deviation
is ``noise_multiplier`` times the quantity's L2 sensitivity. Two sampling schemes are
supported, each with its own neighbouring relation and amplification theorem:

* ``Sampling.WITHOUT_REPLACEMENT``: fixed-size batches drawn uniformly without
  replacement (VFLGAN's ``random.sample``), *replace-one* neighbours; the RDP of one step
  is Wang, Balle and Kasiviswanathan (AISTATS 2019), Theorem 27, as implemented by
  ``dp_accounting``'s ``RdpAccountant`` with ``SampledWithoutReplacementDpEvent``.
* ``Sampling.POISSON``: every row joins a batch independently with probability
  ``batch_size / dataset_size``, *add/remove-one* neighbours; the RDP of one step is the
  sampled Gaussian mechanism of Mironov, Talwar and Zhang (2019), via ``dp_accounting``'s
  ``PoissonSampledDpEvent`` (the same numbers as Opacus's RDP accountant).

RDP composes additively (Mironov 2017, Proposition 1), which is also how ``RdpAccountant``
composes a ``SelfComposedDpEvent``: the RDP vector of one step is computed once per
mechanism (cached, since one evaluation takes 0.2-0.8 s) and scaled by the step count.
The vector is converted to (epsilon, delta)-DP either with the classic bound
``min_a rdp(a) + log(1/delta)/(a-1)`` (Mironov 2017, Proposition 3), which the VFLGAN
paper uses and which is the default here so that numbers compare with published ones,
or with the tighter conversion of Balle et al. (AISTATS 2020), ``dp_accounting``'s
``get_epsilon``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from dp_accounting import NeighboringRelation

# dp_accounting (and the scipy.stats it loads) is imported by the functions that account:
# every process of a run imports this module, and a party of a run without DP would
# otherwise carry about 65 MiB of libraries it never calls.

LEDGER_SCHEMA_VERSION = 1
RDP_ORDERS: tuple[float, ...] = (
    *(1 + x / 10.0 for x in range(1, 100)),
    *(float(a) for a in range(11, 64)),
    128.0,
    256.0,
    512.0,
    1024.0,
)
"""Rényi orders of every evaluation: ``dp_accounting``'s ``DEFAULT_RDP_ORDERS`` (a test
checks they are equal)."""

# Noise multipliers outside this range are not a sane DP-SGD or VFLGAN configuration.
_MIN_NOISE_MULTIPLIER = 1e-3
_MAX_NOISE_MULTIPLIER = 1e4
# max_steps stops doubling here: float64 still counts steps exactly.
_MAX_STEPS = 2**53

_E = TypeVar("_E", bound=StrEnum)


class Conversion(StrEnum):
    """How an RDP curve becomes an (epsilon, delta) guarantee."""

    CLASSIC = "classic"
    """``min_a rdp(a) + log(1/delta)/(a-1)`` (Mironov 2017, Prop. 3); the VFLGAN paper's."""
    IMPROVED = "improved"
    """Balle et al. (2020), as in ``dp_accounting``'s ``get_epsilon``: about 1 epsilon tighter."""


class Sampling(StrEnum):
    """How batches are drawn; fixes the neighbouring relation of the guarantee."""

    WITHOUT_REPLACEMENT = "without_replacement"
    """Fixed-size batches without replacement, replace-one neighbours (WBK19, Thm. 27)."""
    POISSON = "poisson"
    """Poisson subsampling with rate ``batch_size / dataset_size``, add/remove-one neighbours."""

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        """The ``dp_accounting`` neighbouring relation this scheme's theorem assumes."""
        from dp_accounting import NeighboringRelation

        if self is Sampling.WITHOUT_REPLACEMENT:
            return NeighboringRelation.REPLACE_ONE
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def relation_name(self) -> str:
        """Human-readable neighbouring relation, for error messages."""
        if self is Sampling.WITHOUT_REPLACEMENT:
            return "replace-one neighbours"
        return "add/remove-one neighbours"


def _coerce_choice(enum_type: type[_E], value: str, name: str) -> _E:
    try:
        return enum_type(value)
    except ValueError:
        choices = [member.value for member in enum_type]
        raise ValueError(f"{name} must be one of {choices}, got {value!r}") from None


def _as_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return number


def _as_positive_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return number


def _check_delta(delta: object) -> float:
    if isinstance(delta, bool) or not isinstance(delta, Real):
        raise TypeError(f"delta must be a real number, got {delta!r}")
    number = float(delta)
    if not 0 < number < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return number


@dataclass(frozen=True)
class GaussianSteps:
    """``steps`` releases of one subsampled Gaussian mechanism.

    Parameters
    ----------
    dataset_size
        Number of rows ``n`` the batches are drawn from (public under replace-one).
    batch_size
        Rows per batch ``m`` (the expected batch size under Poisson sampling), ``1 <= m <= n``.
    noise_multiplier
        Noise standard deviation divided by the L2 sensitivity of the released quantity
        under ``sampling``'s neighbouring relation; finite and > 0.
    steps
        Number of releases ``T`` (>= 0).
    sampling
        Batch sampling scheme, which also fixes the neighbouring relation.

    Raises
    ------
    TypeError
        If a count is not an integer or ``noise_multiplier`` not a real number.
    ValueError
        If a field is out of range or ``sampling`` is not a known scheme.

    Notes
    -----
    VFLGAN's mechanism clips the batch gradient of a local discriminator's first layer to
    ``C`` and adds N(0, (2 C sigma)^2) noise. Replacing one row moves the clipped
    gradient by at most ``2 C``, so the multiplier is ``sigma`` itself under
    ``WITHOUT_REPLACEMENT``. Per-sample-clipped DP-SGD (each row clipped to ``C``, noise
    N(0, (sigma C)^2) on the sum) has replace-one sensitivity ``2 C``, so its multiplier
    under ``WITHOUT_REPLACEMENT`` is ``sigma / 2``; under ``POISSON`` with add/remove-one
    neighbours its sensitivity is ``C`` and the multiplier is ``sigma`` (Opacus's
    convention).
    """

    dataset_size: int
    batch_size: int
    noise_multiplier: float
    steps: int
    sampling: Sampling = Sampling.WITHOUT_REPLACEMENT

    def __post_init__(self) -> None:
        dataset_size = _as_int("dataset_size", self.dataset_size, 1)
        batch_size = _as_int("batch_size", self.batch_size, 1)
        if batch_size > dataset_size:
            raise ValueError(
                f"batch_size must be <= dataset_size, got batch_size={batch_size} "
                f"and dataset_size={dataset_size}"
            )
        # Frozen: normalised values (numpy scalars, enum strings) are written through object.
        object.__setattr__(self, "dataset_size", dataset_size)
        object.__setattr__(self, "batch_size", batch_size)
        object.__setattr__(
            self, "noise_multiplier", _as_positive_float("noise_multiplier", self.noise_multiplier)
        )
        object.__setattr__(self, "steps", _as_int("steps", self.steps, 0))
        object.__setattr__(self, "sampling", _coerce_choice(Sampling, self.sampling, "sampling"))

    @property
    def sampling_rate(self) -> float:
        """``batch_size / dataset_size``."""
        return self.batch_size / self.dataset_size

    def same_mechanism(self, other: GaussianSteps) -> bool:
        """Whether ``other`` differs from this event in its step count only."""
        return (
            self.dataset_size == other.dataset_size
            and self.batch_size == other.batch_size
            and self.noise_multiplier == other.noise_multiplier
            and self.sampling == other.sampling
        )


@functools.lru_cache(maxsize=4096)
def _rdp_per_step(
    dataset_size: int, batch_size: int, noise_multiplier: float, sampling: Sampling
) -> tuple[float, ...]:
    """RDP of one step at every order of ``RDP_ORDERS``, from ``dp_accounting``'s accountant."""
    from dp_accounting import (
        GaussianDpEvent,
        PoissonSampledDpEvent,
        SampledWithoutReplacementDpEvent,
    )
    from dp_accounting.rdp import rdp_privacy_accountant

    gaussian = GaussianDpEvent(noise_multiplier)
    if sampling is Sampling.WITHOUT_REPLACEMENT:
        event = SampledWithoutReplacementDpEvent(dataset_size, batch_size, gaussian)
    else:
        event = PoissonSampledDpEvent(batch_size / dataset_size, gaussian)
    accountant = rdp_privacy_accountant.RdpAccountant(
        list(RDP_ORDERS), sampling.neighbouring_relation
    )
    accountant.compose(event)
    # ``RdpAccountant.rdp`` (public since dp-accounting 0.4) returns a copy of the curve.
    return tuple(float(value) for value in accountant.rdp)


def _common_sampling(events: Sequence[GaussianSteps]) -> Sampling | None:
    for index, event in enumerate(events):
        if not isinstance(event, GaussianSteps):
            raise TypeError(f"events[{index}] must be a GaussianSteps, got {event!r}")
    if not events:
        return None
    first = events[0].sampling
    for index, event in enumerate(events):
        if event.sampling is not first:
            raise ValueError(
                f"cannot compose events with different neighbouring relations: events[0] "
                f"uses sampling {first.value!r} ({first.relation_name}) but events[{index}] "
                f"uses {event.sampling.value!r} ({event.sampling.relation_name})"
            )
    return first


def composed_rdp(events: Sequence[GaussianSteps]) -> np.ndarray:
    """RDP curve of the composition of ``events`` at every order of ``RDP_ORDERS``.

    Parameters
    ----------
    events
        Events sharing one sampling scheme.

    Returns
    -------
    numpy.ndarray
        Sum over events of ``steps`` times the RDP of one step (Mironov 2017, Prop. 1).

    Raises
    ------
    ValueError
        If the events mix sampling schemes (their neighbouring relations differ).
    """
    _common_sampling(events)
    total = np.zeros(len(RDP_ORDERS), dtype=np.float64)
    for event in events:
        if event.steps > 0:  # 0 * inf would be nan
            per_step = _rdp_per_step(
                event.dataset_size, event.batch_size, event.noise_multiplier, event.sampling
            )
            total += event.steps * np.asarray(per_step)
    return total


def _convert(rdp: np.ndarray, delta: float, conversion: Conversion) -> float:
    if conversion is Conversion.CLASSIC:
        orders = np.asarray(RDP_ORDERS)
        return float(np.min(rdp + math.log(1 / delta) / (orders - 1)))
    from dp_accounting.rdp import rdp_privacy_accountant

    value, _ = rdp_privacy_accountant.compute_epsilon(list(RDP_ORDERS), rdp, delta)
    return float(value)


def epsilon_from_rdp(
    rdp: np.ndarray, delta: float, conversion: Conversion | str = Conversion.CLASSIC
) -> float:
    """Epsilon at ``delta`` of an RDP curve over ``RDP_ORDERS`` (e.g. a per-order minimum
    of two valid bounds, which is itself a valid bound)."""
    delta = _check_delta(delta)
    conversion = _coerce_choice(Conversion, conversion, "conversion")
    rdp = np.asarray(rdp, dtype=np.float64)
    if rdp.shape != (len(RDP_ORDERS),):
        raise ValueError(f"an RDP curve needs {len(RDP_ORDERS)} orders, got shape {rdp.shape}")
    return _convert(rdp, delta, conversion)


def epsilon(
    events: Sequence[GaussianSteps],
    delta: float,
    conversion: Conversion | str = Conversion.CLASSIC,
) -> float:
    """Epsilon of the composition of ``events`` at ``delta``.

    Parameters
    ----------
    events
        Gaussian steps, possibly with different sizes or noise, all under one sampling
        scheme (so one neighbouring relation).
    delta
        Target delta, in (0, 1).
    conversion
        RDP to (epsilon, delta) conversion; ``CLASSIC`` reproduces the VFLGAN paper.

    Returns
    -------
    float
        The (epsilon, delta)-DP guarantee; ``0.0`` when no step was taken, ``inf`` when
        the RDP curve is infinite.

    Raises
    ------
    ValueError
        If ``delta`` is outside (0, 1), ``conversion`` is unknown, or the events mix
        sampling schemes.

    Notes
    -----
    See the module docstring for the theorems. Zero steps release nothing, so they spend
    nothing, although the classic formula at a zero RDP curve would give
    ``log(1/delta)/1023``.
    """
    delta = _check_delta(delta)
    conversion = _coerce_choice(Conversion, conversion, "conversion")
    rdp = composed_rdp(events)
    if all(event.steps == 0 for event in events):
        return 0.0
    return epsilon_from_rdp(rdp, delta, conversion)


def _noise_bracket(
    eps_at: Callable[[float], float], target_epsilon: float, describe: str
) -> tuple[float, float]:
    """``(low, high)`` with ``eps_at(low) > target_epsilon >= eps_at(high)``, a decade apart."""
    high = 1.0
    while eps_at(high) > target_epsilon:
        if high >= _MAX_NOISE_MULTIPLIER:
            raise ValueError(
                f"target_epsilon={target_epsilon:g} is unreachable: even "
                f"noise_multiplier={high:g} gives epsilon {eps_at(high):.6g} ({describe}); "
                f"calibration searches noise multipliers up to {_MAX_NOISE_MULTIPLIER:g}"
            )
        high = min(10 * high, _MAX_NOISE_MULTIPLIER)
    low = high / 10
    while eps_at(low) <= target_epsilon:
        if low <= _MIN_NOISE_MULTIPLIER:
            raise ValueError(
                f"target_epsilon={target_epsilon:g} is met by noise_multiplier={low:g} "
                f"(epsilon {eps_at(low):.6g}, {describe}); calibration searches noise "
                f"multipliers down to {_MIN_NOISE_MULTIPLIER:g}"
            )
        high, low = low, max(low / 10, _MIN_NOISE_MULTIPLIER)
    return low, high


def calibrate_noise(
    target_epsilon: float,
    delta: float,
    *,
    dataset_size: int,
    batch_size: int,
    steps: int,
    sampling: Sampling | str = Sampling.WITHOUT_REPLACEMENT,
    conversion: Conversion | str = Conversion.CLASSIC,
    tolerance: float = 1e-3,
) -> float:
    """Smallest noise multiplier whose ``steps`` releases stay within ``target_epsilon``.

    Parameters
    ----------
    target_epsilon
        Budget to meet, finite and > 0.
    delta
        Target delta, in (0, 1).
    dataset_size, batch_size, steps, sampling
        The mechanism, as in `GaussianSteps`; ``steps`` must be >= 1.
    conversion
        RDP to (epsilon, delta) conversion.
    tolerance
        Absolute accuracy of the returned multiplier.

    Returns
    -------
    float
        ``sigma`` with ``epsilon(sigma) <= target_epsilon`` and within ``tolerance`` of the
        smallest such value.

    Raises
    ------
    ValueError
        If ``steps`` is 0, an argument is out of range, or the target needs a multiplier
        outside [1e-3, 1e4].

    Notes
    -----
    Epsilon decreases in the noise multiplier. The search brackets the answer within a
    decade, then runs Brent's method on ``log epsilon`` against ``log sigma`` (nearly
    linear), and finally steps up until the guarantee holds.
    """
    target_epsilon = _as_positive_float("target_epsilon", target_epsilon)
    tolerance = _as_positive_float("tolerance", tolerance)
    delta = _check_delta(delta)
    conversion = _coerce_choice(Conversion, conversion, "conversion")
    if _as_int("steps", steps, 0) == 0:
        raise ValueError(
            "steps must be >= 1 to calibrate noise: zero steps spend epsilon 0 at any "
            "noise_multiplier, got steps=0"
        )
    sampling = _coerce_choice(Sampling, sampling, "sampling")
    template = GaussianSteps(dataset_size, batch_size, 1.0, steps, sampling)

    def eps_at(noise_multiplier: float) -> float:
        return epsilon([replace(template, noise_multiplier=noise_multiplier)], delta, conversion)

    describe = (
        f"delta={delta:g}, {steps} steps, batch {batch_size} of {dataset_size}, "
        f"{template.sampling.value} sampling, {conversion.value} conversion"
    )
    from scipy.optimize import brentq

    low, high = _noise_bracket(eps_at, target_epsilon, describe)
    log_target = math.log(target_epsilon)

    def log_excess(log_sigma: float) -> float:
        # Clamped: the improved conversion reports 0 and a diverging curve inf.
        value = min(max(eps_at(math.exp(log_sigma)), 1e-300), 1e300)
        return math.log(value) - log_target

    # d(log sigma) = d sigma / sigma and sigma <= high: this xtol resolves sigma to tolerance/2.
    root = math.exp(brentq(log_excess, math.log(low), math.log(high), xtol=tolerance / (2 * high)))
    noise_multiplier = min(root, high)
    while eps_at(noise_multiplier) > target_epsilon:
        noise_multiplier = min(noise_multiplier + tolerance / 2, high)
    return noise_multiplier


class BudgetExceededError(RuntimeError):
    """A party's next release would spend more than its privacy budget.

    Parameters
    ----------
    party
        The party whose budget would be exceeded.
    epsilon
        The epsilon the party would reach.
    target_epsilon
        The party's budget.
    """

    def __init__(self, party: str, epsilon: float, target_epsilon: float) -> None:
        self.party = party
        self.epsilon = epsilon
        self.target_epsilon = target_epsilon
        super().__init__(
            f"party {party!r} would reach epsilon {epsilon:.6g}, over its target "
            f"epsilon {target_epsilon:.6g}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild from the fields, not from the message, so the error survives pickling.
        return (type(self), (self.party, self.epsilon, self.target_epsilon))


_EVENT_KEYS = tuple(field.name for field in fields(GaussianSteps))
_STATE_KEYS = ("schema_version", "party", "target_epsilon", "delta", "conversion", "events")


class PrivacyLedger:
    """One party's privacy budget: records its Gaussian releases and answers what is spent.

    Parameters
    ----------
    party
        Name of the party, used in errors and summaries.
    target_epsilon
        The party's budget, finite and > 0.
    delta
        Target delta, in (0, 1).
    conversion
        RDP to (epsilon, delta) conversion used by every answer.

    Raises
    ------
    ValueError
        If an argument is out of range or ``conversion`` is unknown.

    Notes
    -----
    All recorded events must share one sampling scheme (one neighbouring relation); see
    `epsilon` for the accounting. Recording never checks the budget: call `check` (or
    `would_exceed`) before releasing, then `record` what was released.
    """

    def __init__(
        self,
        party: str,
        target_epsilon: float,
        delta: float,
        conversion: Conversion | str = Conversion.CLASSIC,
    ) -> None:
        if not isinstance(party, str) or not party:
            raise ValueError(f"party must be a non-empty string, got {party!r}")
        self.party = party
        self.target_epsilon = _as_positive_float("target_epsilon", target_epsilon)
        self.delta = _check_delta(delta)
        self.conversion = _coerce_choice(Conversion, conversion, "conversion")
        self._events: list[GaussianSteps] = []

    @property
    def events(self) -> tuple[GaussianSteps, ...]:
        """The recorded events, consecutive runs of one mechanism merged."""
        return tuple(self._events)

    @property
    def steps(self) -> int:
        """Total number of recorded steps."""
        return sum(event.steps for event in self._events)

    def record(self, event: GaussianSteps) -> None:
        """Record released steps, merging them into the last event if only ``steps`` differ.

        Raises
        ------
        ValueError
            If ``event`` uses another sampling scheme than the recorded events.
        """
        _common_sampling([*self._events, event])
        if event.steps == 0:
            return
        if self._events and self._events[-1].same_mechanism(event):
            last = self._events[-1]
            self._events[-1] = replace(last, steps=last.steps + event.steps)
        else:
            self._events.append(event)

    def spent(self) -> float:
        """Epsilon spent so far at ``delta`` (0.0 before any step)."""
        return epsilon(self._events, self.delta, self.conversion)

    def spent_after(self, event: GaussianSteps) -> float:
        """Epsilon the party would have spent after also releasing ``event``."""
        return epsilon([*self._events, event], self.delta, self.conversion)

    def would_exceed(self, event: GaussianSteps) -> bool:
        """Whether releasing ``event`` would take the spent epsilon over the target."""
        return self.spent_after(event) > self.target_epsilon

    def check(self, event: GaussianSteps) -> float:
        """Return the epsilon after ``event``, or raise if it is over the target.

        Raises
        ------
        BudgetExceededError
            If releasing ``event`` would spend more than ``target_epsilon``.
        """
        after = self.spent_after(event)
        if after > self.target_epsilon:
            raise BudgetExceededError(self.party, after, self.target_epsilon)
        return after

    def max_steps(
        self,
        dataset_size: int,
        batch_size: int,
        noise_multiplier: float,
        sampling: Sampling | str = Sampling.WITHOUT_REPLACEMENT,
    ) -> int:
        """Largest number of further steps of one mechanism that stays within the target.

        Parameters
        ----------
        dataset_size, batch_size, noise_multiplier, sampling
            The mechanism, as in `GaussianSteps`.

        Returns
        -------
        int
            ``T`` such that the recorded events plus ``T`` steps fit the budget and
            ``T + 1`` steps do not; 0 if even one step exceeds it.

        Notes
        -----
        Epsilon grows with ``T``; the RDP of one step is cached, so the doubling and
        bisection over ``T`` cost one accountant evaluation in all.
        """
        sampling = _coerce_choice(Sampling, sampling, "sampling")
        template = GaussianSteps(dataset_size, batch_size, noise_multiplier, 1, sampling)

        def fits(steps: int) -> bool:
            return not self.would_exceed(replace(template, steps=steps))

        if not fits(1):
            return 0
        fitting, exceeding = 1, 2
        while fits(exceeding):
            if exceeding >= _MAX_STEPS:
                return _MAX_STEPS
            fitting, exceeding = exceeding, 2 * exceeding
        while exceeding - fitting > 1:
            middle = (fitting + exceeding) // 2
            if fits(middle):
                fitting = middle
            else:
                exceeding = middle
        return fitting

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: configuration (checked on load) and the recorded events."""
        return {
            "schema_version": LEDGER_SCHEMA_VERSION,
            "party": self.party,
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "conversion": self.conversion.value,
            "events": [
                {**asdict(event), "sampling": event.sampling.value} for event in self._events
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the recorded events with those of ``state``.

        Raises
        ------
        ValueError
            If the schema version is unknown, keys are missing or unexpected, the
            configuration differs from this ledger's, or an event is invalid.
        """
        _check_keys("ledger state", state, _STATE_KEYS)
        if state["schema_version"] != LEDGER_SCHEMA_VERSION:
            raise ValueError(
                f"ledger state has schema_version {state['schema_version']!r}, "
                f"this version reads {LEDGER_SCHEMA_VERSION}"
            )
        mine = self.state_dict()
        for key in ("party", "target_epsilon", "delta", "conversion"):
            if state[key] != mine[key]:
                raise ValueError(
                    f"ledger state has {key}={state[key]!r}, this ledger has {key}={mine[key]!r}"
                )
        if not isinstance(state["events"], list | tuple):
            raise ValueError(
                f"ledger state events must be a list, got {type(state['events']).__name__}"
            )
        events = []
        for index, item in enumerate(state["events"]):
            _check_keys(f"ledger state events[{index}]", item, _EVENT_KEYS)
            events.append(GaussianSteps(**item))
        _common_sampling(events)
        self._events = events

    def summary(self) -> dict[str, Any]:
        """Epsilon spent and how it was accounted, for run results and logs.

        The ``accountant`` is ``"rdp-<sampling>"``, or ``"rdp"`` before any event.
        """
        sampling = _common_sampling(self._events)
        accountant = "rdp" if sampling is None else f"rdp-{sampling.value.replace('_', '-')}"
        return {
            "party": self.party,
            "epsilon": self.spent(),
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "accountant": accountant,
            "conversion": self.conversion.value,
            "steps": self.steps,
        }


def _check_keys(what: str, mapping: object, expected: Sequence[str]) -> None:
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{what} must be a mapping, got {type(mapping).__name__}")
    missing = [key for key in expected if key not in mapping]
    unknown = sorted(str(key) for key in mapping if key not in expected)
    if missing or unknown:
        raise ValueError(f"{what} has missing keys {missing} and unknown keys {unknown}")
