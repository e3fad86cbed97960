"""Tests for Rényi-DP accounting and the per-party privacy ledger.

Expected epsilons are VFLGAN's published (sigma, epsilon) pairs, which autodp's
Theorem 27 accountant reproduces independently (shared notes, section 2.3), and
Opacus's RDP accountant for Poisson sampling.
"""

from __future__ import annotations

import itertools
import json
import math
import pickle

import numpy as np
import pytest
from dp_accounting import (
    ComposedDpEvent,
    GaussianDpEvent,
    NeighboringRelation,
    SampledWithoutReplacementDpEvent,
    SelfComposedDpEvent,
)
from dp_accounting.rdp import rdp_privacy_accountant
from opacus.accountants import RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp

from flwr_vflgan.privacy import (
    LEDGER_SCHEMA_VERSION,
    RDP_ORDERS,
    BudgetExceededError,
    Conversion,
    GaussianSteps,
    PrivacyLedger,
    Sampling,
    calibrate_noise,
    composed_rdp,
    epsilon,
)

DELTA = 1e-5
ADULT_N, ADULT_M, ADULT_T = 42_960, 64, 671 * 60
MNIST_N, MNIST_M, MNIST_T = 60_000, 64, 937 * 300


def adult(noise_multiplier: float, steps: int = ADULT_T) -> GaussianSteps:
    return GaussianSteps(ADULT_N, ADULT_M, noise_multiplier, steps)


@pytest.fixture(scope="module")
def published() -> dict[str, float]:
    """Each regression epsilon, evaluated once (one WOR evaluation costs 0.2-0.8 s)."""
    return {
        "adult_eps10": epsilon([adult(0.6128)], DELTA),
        "adult_eps10_improved": epsilon([adult(0.6128)], DELTA, Conversion.IMPROVED),
        "adult_eps5": epsilon([adult(0.8)], DELTA),
        "mnist_eps10": epsilon([GaussianSteps(MNIST_N, MNIST_M, 0.802, MNIST_T)], DELTA),
    }


@pytest.fixture(scope="module")
def calibrated_adult_sigma() -> float:
    return calibrate_noise(10.0, DELTA, dataset_size=ADULT_N, batch_size=ADULT_M, steps=ADULT_T)


# --- regression against published numbers -------------------------------------------------


def test_orders_are_dp_accounting_defaults() -> None:
    assert tuple(float(a) for a in rdp_privacy_accountant.DEFAULT_RDP_ORDERS) == RDP_ORDERS


def test_vflgan_adult_epsilon_10(published: dict[str, float]) -> None:
    assert published["adult_eps10"] == pytest.approx(9.992, abs=0.01)


def test_vflgan_adult_epsilon_5(published: dict[str, float]) -> None:
    assert published["adult_eps5"] == pytest.approx(4.996, abs=0.01)


def test_vflgan_mnist_epsilon_10(published: dict[str, float]) -> None:
    assert published["mnist_eps10"] == pytest.approx(9.993, abs=0.01)


def test_improved_conversion_is_tighter(published: dict[str, float]) -> None:
    assert published["adult_eps10_improved"] == pytest.approx(9.037, abs=0.01)
    assert published["adult_eps10_improved"] < published["adult_eps10"]


def test_composition_matches_dp_accounting_composed_event() -> None:
    """Summing cached per-step curves is what the accountant does with the composed event."""
    events = [adult(0.6128, steps=300), adult(0.8, steps=120), adult(0.6128, steps=7)]
    accountant = rdp_privacy_accountant.RdpAccountant(
        list(RDP_ORDERS), NeighboringRelation.REPLACE_ONE
    )
    accountant.compose(
        ComposedDpEvent(
            [
                SelfComposedDpEvent(
                    SampledWithoutReplacementDpEvent(
                        e.dataset_size, e.batch_size, GaussianDpEvent(e.noise_multiplier)
                    ),
                    e.steps,
                )
                for e in events
            ]
        )
    )
    np.testing.assert_allclose(composed_rdp(events), accountant.rdp, rtol=1e-12)
    assert epsilon(events, DELTA, Conversion.IMPROVED) == pytest.approx(
        accountant.get_epsilon(DELTA), rel=1e-12
    )


# --- Poisson sampling against Opacus ----------------------------------------------------


def test_poisson_equals_opacus_rdp_accountant() -> None:
    """dp-accounting's Poisson RDP is Opacus's: exactly at integer orders, to 1e-6 in epsilon.

    At fractional orders dp-accounting adds the absolute values of the series terms whose
    binomial coefficients are negative (an upper bound) where Opacus subtracts them, so
    the curves differ there in the seventh digit for this case.
    """
    sigma, sample_rate, steps = 1.0, 0.01, 1000
    event = GaussianSteps(10_000, 100, sigma, steps, Sampling.POISSON)
    orders = np.asarray(RDP_ORDERS)
    opacus_rdp = compute_rdp(q=sample_rate, noise_multiplier=sigma, steps=steps, orders=orders)
    integer = orders == np.round(orders)
    np.testing.assert_allclose(composed_rdp([event])[integer], opacus_rdp[integer], rtol=1e-9)

    opacus = RDPAccountant()
    opacus.history = [(sigma, sample_rate, steps)]
    expected_improved = opacus.get_epsilon(DELTA, alphas=list(RDP_ORDERS))
    assert epsilon([event], DELTA, Conversion.IMPROVED) == pytest.approx(
        expected_improved, rel=1e-6
    )
    expected_classic = float(np.min(opacus_rdp + math.log(1 / DELTA) / (orders - 1)))
    assert epsilon([event], DELTA, Conversion.CLASSIC) == pytest.approx(expected_classic, rel=1e-6)


# --- calibration -----------------------------------------------------------------------


def test_calibration_recovers_published_sigma(calibrated_adult_sigma: float) -> None:
    assert calibrated_adult_sigma == pytest.approx(0.6128, abs=0.01)
    assert epsilon([adult(calibrated_adult_sigma)], DELTA) <= 10.0
    # Smallest to tolerance (1e-3): a little less noise must overshoot the target.
    assert epsilon([adult(calibrated_adult_sigma - 1e-3)], DELTA) > 10.0


def test_calibration_with_improved_conversion_and_full_batches() -> None:
    # q = 1: plain Gaussian composition, where the improved conversion reaches 0 at large sigma.
    sigma = calibrate_noise(
        1.0, DELTA, dataset_size=10, batch_size=10, steps=10, conversion=Conversion.IMPROVED
    )

    def spent(noise_multiplier: float) -> float:
        event = GaussianSteps(10, 10, noise_multiplier, 10)
        return epsilon([event], DELTA, Conversion.IMPROVED)

    assert spent(sigma) <= 1.0 < spent(sigma - 1e-3)


def test_calibration_rejects_zero_steps() -> None:
    with pytest.raises(ValueError, match=r"steps must be >= 1 to calibrate noise.*got steps=0"):
        calibrate_noise(10.0, DELTA, dataset_size=ADULT_N, batch_size=ADULT_M, steps=0)


def test_calibration_rejects_unreachable_target() -> None:
    # Full batches (q = 1) are cheap to evaluate; 1000 steps at sigma 1e4 still spend ~0.015.
    with pytest.raises(
        ValueError, match=r"target_epsilon=0\.001 is unreachable: even noise_multiplier=10000"
    ):
        calibrate_noise(1e-3, DELTA, dataset_size=10, batch_size=10, steps=1000)


def test_calibration_rejects_target_met_without_noise() -> None:
    with pytest.raises(
        ValueError, match=r"target_epsilon=1e\+09 is met by noise_multiplier=0\.001"
    ):
        calibrate_noise(1e9, DELTA, dataset_size=10, batch_size=10, steps=1)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"target_epsilon": 0.0}, ValueError, r"target_epsilon must be finite and > 0, got 0\.0"),
        ({"target_epsilon": math.inf}, ValueError, r"target_epsilon must be finite and > 0"),
        ({"tolerance": -1.0}, ValueError, r"tolerance must be finite and > 0, got -1\.0"),
        ({"delta": 1.0}, ValueError, r"delta must be in \(0, 1\), got 1\.0"),
        (
            {"conversion": "rough"},
            ValueError,
            r"conversion must be one of \['classic', 'improved'\]",
        ),
        ({"sampling": "shuffle"}, ValueError, r"sampling must be one of .*got 'shuffle'"),
        ({"batch_size": 11}, ValueError, r"batch_size must be <= dataset_size"),
        ({"steps": -1}, ValueError, r"steps must be >= 0, got -1"),
    ],
)
def test_calibration_validates_arguments(kwargs: dict, error: type, match: str) -> None:
    arguments = {
        "target_epsilon": 1.0,
        "delta": DELTA,
        "dataset_size": 10,
        "batch_size": 10,
        "steps": 1,
    } | kwargs
    target, delta = arguments.pop("target_epsilon"), arguments.pop("delta")
    with pytest.raises(error, match=match):
        calibrate_noise(target, delta, **arguments)


# --- composition ------------------------------------------------------------------------


def test_two_halves_compose_to_the_whole(published: dict[str, float]) -> None:
    halves = [adult(0.6128, ADULT_T // 2), adult(0.6128, ADULT_T - ADULT_T // 2)]
    assert epsilon(halves, DELTA) == pytest.approx(published["adult_eps10"], abs=1e-9)


def test_heterogeneous_composition_lies_between_its_parts(published: dict[str, float]) -> None:
    mixed = [adult(0.6128, ADULT_T // 2), adult(0.8, ADULT_T - ADULT_T // 2)]
    assert published["adult_eps5"] < epsilon(mixed, DELTA) < published["adult_eps10"]


def test_mixing_sampling_schemes_raises() -> None:
    events = [adult(1.0, 10), GaussianSteps(ADULT_N, ADULT_M, 1.0, 10, Sampling.POISSON)]
    with pytest.raises(
        ValueError,
        match=r"events\[0\] uses sampling 'without_replacement' \(replace-one neighbours\) "
        r"but events\[1\] uses 'poisson' \(add/remove-one neighbours\)",
    ):
        epsilon(events, DELTA)


def test_no_steps_spend_nothing() -> None:
    assert epsilon([], DELTA) == 0.0
    assert epsilon([adult(0.6128, 0)], DELTA) == 0.0


def test_epsilon_validates_delta_and_conversion() -> None:
    for bad in (0.0, 1.0, -0.5, math.nan):
        with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
            epsilon([], bad)
    with pytest.raises(TypeError, match=r"delta must be a real number, got '1e-5'"):
        epsilon([], "1e-5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"conversion must be one of \['classic', 'improved'\]"):
        epsilon([], DELTA, "tight")
    with pytest.raises(TypeError, match=r"events\[0\] must be a GaussianSteps"):
        epsilon([(ADULT_N, ADULT_M, 1.0, 10)], DELTA)  # type: ignore[list-item]


# --- GaussianSteps validation -----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "error", "match"),
    [
        ("dataset_size", 0, ValueError, r"dataset_size must be >= 1, got 0"),
        ("dataset_size", 10.0, TypeError, r"dataset_size must be an integer, got 10\.0"),
        ("batch_size", 0, ValueError, r"batch_size must be >= 1, got 0"),
        ("batch_size", True, TypeError, r"batch_size must be an integer, got True"),
        ("batch_size", 101, ValueError, r"batch_size=101 and dataset_size=100"),
        ("noise_multiplier", 0.0, ValueError, r"noise_multiplier must be finite and > 0, got 0\.0"),
        ("noise_multiplier", -1.0, ValueError, r"noise_multiplier must be finite and > 0"),
        (
            "noise_multiplier",
            math.inf,
            ValueError,
            r"noise_multiplier must be finite and > 0, got inf",
        ),
        (
            "noise_multiplier",
            math.nan,
            ValueError,
            r"noise_multiplier must be finite and > 0, got nan",
        ),
        ("noise_multiplier", "1.0", TypeError, r"noise_multiplier must be a real number"),
        ("steps", -1, ValueError, r"steps must be >= 0, got -1"),
        ("steps", 1.5, TypeError, r"steps must be an integer, got 1\.5"),
        (
            "sampling",
            "bootstrap",
            ValueError,
            r"sampling must be one of \['without_replacement', 'poisson'\], got 'bootstrap'",
        ),
    ],
)
def test_gaussian_steps_validates_fields(
    field: str, value: object, error: type, match: str
) -> None:
    arguments: dict[str, object] = {
        "dataset_size": 100,
        "batch_size": 10,
        "noise_multiplier": 1.0,
        "steps": 5,
    }
    arguments[field] = value
    with pytest.raises(error, match=match):
        GaussianSteps(**arguments)  # type: ignore[arg-type]


def test_gaussian_steps_normalises_inputs() -> None:
    event = GaussianSteps(np.int64(100), 10, np.float32(0.5), 0, "poisson")  # type: ignore[arg-type]
    assert event == GaussianSteps(100, 10, 0.5, 0, Sampling.POISSON)
    assert type(event.dataset_size) is int and type(event.noise_multiplier) is float
    assert event.sampling is Sampling.POISSON
    assert event.sampling_rate == 0.1
    assert Sampling.WITHOUT_REPLACEMENT.neighbouring_relation is NeighboringRelation.REPLACE_ONE
    assert Sampling.POISSON.neighbouring_relation is NeighboringRelation.ADD_OR_REMOVE_ONE


# --- ledger -----------------------------------------------------------------------------


def full_adult_ledger() -> PrivacyLedger:
    """A party that trained VFLGAN on Adult at sigma 0.6128: 671 batches x 60 epochs."""
    ledger = PrivacyLedger("alice", target_epsilon=10.0, delta=DELTA)
    for _ in range(60):
        ledger.record(adult(0.6128, 671))
    return ledger


def test_ledger_merges_consecutive_records(published: dict[str, float]) -> None:
    ledger = full_adult_ledger()
    assert ledger.events == (adult(0.6128),)
    assert ledger.steps == ADULT_T
    assert ledger.spent() == pytest.approx(published["adult_eps10"], abs=1e-9)
    ledger.record(adult(0.8, 10))
    ledger.record(adult(0.6128, 0))  # nothing released, nothing recorded
    ledger.record(adult(0.6128, 5))
    assert ledger.events == (adult(0.6128), adult(0.8, 10), adult(0.6128, 5))


def test_ledger_spent_starts_at_zero_and_grows() -> None:
    ledger = PrivacyLedger("bob", target_epsilon=10.0, delta=DELTA)
    assert ledger.spent() == 0.0
    spent = [ledger.spent()]
    for steps in (1, 100, 10_000, 30_000):
        ledger.record(adult(0.6128, steps))
        spent.append(ledger.spent())
    assert all(before < after for before, after in itertools.pairwise(spent))


def test_ledger_would_exceed_and_check(published: dict[str, float]) -> None:
    ledger = full_adult_ledger()
    small, large = adult(0.6128, 10), adult(0.6128, 2_000)
    assert not ledger.would_exceed(small)
    assert published["adult_eps10"] < ledger.check(small) <= 10.0
    assert ledger.would_exceed(large)
    after = ledger.spent_after(large)
    with pytest.raises(
        BudgetExceededError,
        match=rf"party 'alice' would reach epsilon {after:.6g}, over its target epsilon 10",
    ) as caught:
        ledger.check(large)
    assert (caught.value.party, caught.value.target_epsilon) == ("alice", 10.0)
    assert caught.value.epsilon == after > 10.0
    assert ledger.steps == ADULT_T  # checking records nothing


def test_budget_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(BudgetExceededError("carol", 12.5, 10.0)))
    assert (error.party, error.epsilon, error.target_epsilon) == ("carol", 12.5, 10.0)
    assert "party 'carol' would reach epsilon 12.5" in str(error)


def test_ledger_max_steps_is_the_boundary() -> None:
    ledger = PrivacyLedger("alice", target_epsilon=10.0, delta=DELTA)
    steps = ledger.max_steps(ADULT_N, ADULT_M, 0.6128)
    # The published run (epsilon 9.99 after 40,260 steps) fits in a budget of 10.
    assert steps >= ADULT_T
    assert not ledger.would_exceed(adult(0.6128, steps))
    assert ledger.would_exceed(adult(0.6128, steps + 1))
    ledger.record(adult(0.6128, steps))
    assert ledger.max_steps(ADULT_N, ADULT_M, 0.6128) == 0


def test_ledger_rejects_mixed_sampling() -> None:
    ledger = full_adult_ledger()
    with pytest.raises(ValueError, match=r"'without_replacement'.*'poisson'"):
        ledger.record(GaussianSteps(ADULT_N, ADULT_M, 1.0, 1, Sampling.POISSON))


def test_ledger_state_dict_round_trip() -> None:
    ledger = full_adult_ledger()
    ledger.record(adult(0.8, 10))
    state = json.loads(json.dumps(ledger.state_dict()))
    assert state["schema_version"] == LEDGER_SCHEMA_VERSION
    restored = PrivacyLedger("alice", target_epsilon=10.0, delta=DELTA)
    restored.load_state_dict(state)
    assert restored.events == ledger.events
    assert restored.spent() == ledger.spent()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"schema_version": 99}, r"ledger state has schema_version 99, this version reads 1"),
        ({"party": "bob"}, r"ledger state has party='bob', this ledger has party='alice'"),
        ({"delta": 1e-6}, r"ledger state has delta=1e-06, this ledger has delta=1e-05"),
        ({"extra": 1}, r"missing keys \[\] and unknown keys \['extra'\]"),
        (
            {"events": [{"dataset_size": 10, "batch_size": 1, "steps": 1}]},
            r"events\[0\] has missing keys \['noise_multiplier', 'sampling'\]",
        ),
        (
            {
                "events": [
                    {
                        "dataset_size": 10,
                        "batch_size": 1,
                        "noise_multiplier": 1.0,
                        "steps": -3,
                        "sampling": "poisson",
                    }
                ]
            },
            r"steps must be >= 0, got -3",
        ),
    ],
)
def test_ledger_load_state_dict_rejects_bad_state(change: dict, match: str) -> None:
    ledger = full_adult_ledger()
    state = ledger.state_dict() | change
    with pytest.raises(ValueError, match=match):
        PrivacyLedger("alice", target_epsilon=10.0, delta=DELTA).load_state_dict(state)


def test_ledger_summary(published: dict[str, float]) -> None:
    ledger = PrivacyLedger("alice", target_epsilon=10.0, delta=DELTA)
    assert ledger.summary()["accountant"] == "rdp"
    ledger.record(adult(0.6128))
    assert ledger.summary() == {
        "party": "alice",
        "epsilon": pytest.approx(published["adult_eps10"], abs=1e-9),
        "target_epsilon": 10.0,
        "delta": DELTA,
        "accountant": "rdp-without-replacement",
        "conversion": "classic",
        "steps": ADULT_T,
    }


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"party": ""}, r"party must be a non-empty string, got ''"),
        ({"target_epsilon": -1.0}, r"target_epsilon must be finite and > 0, got -1\.0"),
        ({"delta": 0.0}, r"delta must be in \(0, 1\), got 0\.0"),
        (
            {"conversion": "loose"},
            r"conversion must be one of \['classic', 'improved'\], got 'loose'",
        ),
    ],
)
def test_ledger_validates_configuration(kwargs: dict, match: str) -> None:
    arguments = {"party": "alice", "target_epsilon": 10.0, "delta": DELTA} | kwargs
    with pytest.raises(ValueError, match=match):
        PrivacyLedger(**arguments)
