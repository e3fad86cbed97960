"""The ``dp`` configuration and the privacy plan of one data holder."""

from __future__ import annotations

import pytest

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.privacy import (
    DPConfig,
    GaussianSteps,
    Mechanism,
    PrivacyPlan,
    epsilon,
    plan_privacy,
)
from flwr_vflgan.privacy.accounting import PrivacyLedger

ADULT = {"dataset_size": 42960, "batch_size": 64}


def test_default_is_off_and_needs_no_budget() -> None:
    config = DPConfig()
    assert config.mechanism is Mechanism.NONE and not config.enabled


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"mechanism": "laplace"},
            r"unknown dp.mechanism 'laplace'; valid: \['none', 'vflgan_gaussian', 'dpsgd', "
            r"'end_to_end', 'pate', 'gs_wgan'\]",
        ),
        ({"mechanism": "vflgan_gaussian"}, "needs dp.target_epsilon"),
        (
            {"mechanism": "dpsgd", "target_epsilon": 0.0},
            r"dp.target_epsilon must be finite and > 0, got 0.0",
        ),
        (
            {"mechanism": "dpsgd", "target_epsilon": 1.0, "delta": 1.0},
            r"dp.delta must be in \(0, 1\)",
        ),
        (
            {"mechanism": "dpsgd", "target_epsilon": 1.0, "clip": 0.1},
            "dp.clip bounds the first-layer",
        ),
        (
            {"mechanism": "vflgan_gaussian", "target_epsilon": 1.0, "clip": -1.0},
            "dp.clip must be finite and > 0",
        ),
        (
            {"mechanism": "dpsgd", "target_epsilon": 1.0, "max_grad_norm": 0},
            "dp.max_grad_norm must be",
        ),
        (
            {"mechanism": "dpsgd", "target_epsilon": 1.0, "noise_multiplier": "x"},
            "dp.noise_multiplier must be a number",
        ),
        (
            {"mechanism": "vflgan_gaussian", "target_epsilon": 1.0, "sampling": "poisson"},
            "dp.sampling=poisson needs dp=dpsgd",
        ),
        (
            {"mechanism": "dpsgd", "target_epsilon": 1.0, "conversion": "pld"},
            "unknown dp.conversion 'pld'",
        ),
        ({"select_by_fd": "yes"}, "dp.select_by_fd must be true or false"),
        ({"target_epsilon": -1.0}, r"dp.target_epsilon=-1.0 without a DP mechanism"),
        ({"noise_multiplier": 1.0, "clip": 0.5}, r"dp.noise_multiplier=1.0, dp.clip=0.5 without"),
    ],
)
def test_invalid_settings_are_rejected_with_the_reason(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DPConfig(**kwargs)


def test_unknown_keys_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown dp config keys \['epsilon'\]; valid: \["):
        DPConfig.from_dict({"epsilon": 3})


def test_round_trips_through_the_algorithm_config() -> None:
    dp = {"mechanism": "vflgan_gaussian", "target_epsilon": 5.0, "delta": 1e-6, "clip": 0.05}
    config = VFLGANConfig.from_dict({"dp": dp})
    assert config.dp == DPConfig(**dp)
    again = VFLGANConfig.from_dict(config.to_dict())
    assert again == config and again.to_dict()["dp"]["mechanism"] == "vflgan_gaussian"


def test_clip_defaults_to_the_reference_code_and_dpsgd_uses_max_grad_norm() -> None:
    gaussian = DPConfig(mechanism="vflgan_gaussian", target_epsilon=1.0)
    assert gaussian.clip_for(64) == pytest.approx(1.5 / 64)
    assert DPConfig(mechanism="vflgan_gaussian", target_epsilon=1.0, clip=0.3).clip_for(64) == 0.3
    assert DPConfig(mechanism="dpsgd", target_epsilon=1.0, max_grad_norm=2.0).clip_for(64) == 2.0


def test_given_noise_reproduces_the_papers_adult_budget() -> None:
    """Paper 000's Adult setting: sigma 0.6128 over 671 x 60 steps is (9.99, 1e-5)-DP."""
    config = DPConfig(mechanism="vflgan_gaussian", target_epsilon=10.0, noise_multiplier=0.6128)
    plan = plan_privacy(config, planned_steps=671 * 60, **ADULT)
    assert plan.accountant_multiplier == plan.noise_multiplier == 0.6128
    assert plan.allowed_steps >= 671 * 60
    assert plan.summary("p", 671 * 60)["epsilon"] == pytest.approx(9.992, abs=1e-3)


def test_calibration_meets_the_target_for_the_planned_steps() -> None:
    config = DPConfig(mechanism="vflgan_gaussian", target_epsilon=10.0)
    plan = plan_privacy(config, planned_steps=671 * 60, **ADULT)
    assert plan.noise_multiplier == pytest.approx(0.6128, abs=2e-3)
    spent = epsilon([GaussianSteps(42960, 64, plan.noise_multiplier, 671 * 60)], 1e-5)
    assert 9.95 < spent <= 10.0
    assert plan.allowed_steps >= plan.planned_steps


def test_dpsgd_accounts_half_its_multiplier_under_replace_one() -> None:
    """Per-sample clip C, noise sigma C on the sum: replacing a row moves the sum by 2C."""
    config = DPConfig(mechanism="dpsgd", target_epsilon=10.0, max_grad_norm=0.7)
    plan = plan_privacy(config, planned_steps=671 * 60, **ADULT)
    assert plan.accountant_multiplier == pytest.approx(0.6128, abs=2e-3)
    assert plan.noise_multiplier == pytest.approx(2 * plan.accountant_multiplier)
    assert plan.clip == 0.7
    assert plan.event(3) == GaussianSteps(42960, 64, plan.accountant_multiplier, 3)


def test_allowance_is_the_ledger_boundary() -> None:
    config = DPConfig(mechanism="vflgan_gaussian", target_epsilon=4.0, noise_multiplier=1.0)
    plan = plan_privacy(config, dataset_size=1000, batch_size=50, planned_steps=10_000)
    ledger = PrivacyLedger("x", 4.0, 1e-5)
    assert ledger.spent_after(GaussianSteps(1000, 50, 1.0, plan.allowed_steps)) <= 4.0
    assert ledger.spent_after(GaussianSteps(1000, 50, 1.0, plan.allowed_steps + 1)) > 4.0


def test_plan_errors_name_the_problem() -> None:
    on = DPConfig(mechanism="vflgan_gaussian", target_epsilon=1.0, delta=1e-3)
    with pytest.raises(
        ValueError, match=r"dp.delta=0.001 must be below 1/n = 0.001 for a dataset of 1000 rows"
    ):
        plan_privacy(on, dataset_size=1000, batch_size=10, planned_steps=5)
    small = DPConfig(mechanism="vflgan_gaussian", target_epsilon=0.1, noise_multiplier=0.5)
    with pytest.raises(
        ValueError, match=r"too small for even one discriminator step with noise_multiplier=0.5"
    ):
        plan_privacy(small, dataset_size=1000, batch_size=10, planned_steps=5)
    with pytest.raises(ValueError, match=r"needs an enabled dp\.mechanism"):
        plan_privacy(DPConfig(), dataset_size=1000, batch_size=10, planned_steps=5)
    with pytest.raises(ValueError, match="plans 0 discriminator steps"):
        plan_privacy(
            DPConfig(mechanism="dpsgd", target_epsilon=1.0),
            dataset_size=1000,
            batch_size=10,
            planned_steps=0,
        )


def test_plan_state_round_trip() -> None:
    config = DPConfig(mechanism="dpsgd", target_epsilon=8.0, noise_multiplier=2.0)
    plan = plan_privacy(config, dataset_size=5000, batch_size=64, planned_steps=100)
    assert PrivacyPlan.restore(config, plan.state()) == plan


def test_poisson_dp_sgd_is_accounted_like_opacus() -> None:
    """Poisson DP-SGD: add/remove neighbours, sensitivity C, so the accountant composes sigma;
    Opacus's own RDP accountant agrees on the spent epsilon of the calibrated noise."""
    from opacus.accountants import RDPAccountant

    config = DPConfig(
        mechanism="dpsgd", target_epsilon=3.0, sampling="poisson", conversion="improved"
    )
    plan = plan_privacy(config, dataset_size=60000, batch_size=256, planned_steps=2000)
    assert plan.accountant_multiplier == plan.noise_multiplier
    accountant = RDPAccountant()
    accountant.history = [(plan.noise_multiplier, 256 / 60000, 2000)]
    opacus_epsilon = accountant.get_epsilon(1e-5)
    assert 2.9 < opacus_epsilon <= 3.0 + 1e-6
    assert plan.summary("p", 2000)["epsilon"] == pytest.approx(opacus_epsilon, rel=1e-3)
    assert plan.summary("p", 2000)["accountant"] == "rdp-poisson"


def test_end_to_end_accounts_every_holder_of_a_step_as_one_mechanism() -> None:
    """M parties and the server each clip to C and add N(0, (sigma C)^2): one Gaussian
    mechanism of sensitivity 2C sqrt(M + 1) under replace-one, so the accountant composes
    sigma / (2 sqrt(M + 1)). Dropping the server (parts = M) would spend less; both the
    multiplier and the spent epsilon must say M + 1."""
    config = DPConfig(mechanism="end_to_end", target_epsilon=10.0, noise_multiplier=2.0)
    plan = plan_privacy(config, planned_steps=671 * 60, parts=3, **ADULT)
    assert plan.parts == 3 and plan.clip == config.max_grad_norm
    assert plan.accountant_multiplier == pytest.approx(2.0 / (2 * 3**0.5))
    joint = epsilon([GaussianSteps(42960, 64, 2.0 / (2 * 3**0.5), 500)], 1e-5)
    parties_only = epsilon([GaussianSteps(42960, 64, 2.0 / (2 * 2**0.5), 500)], 1e-5)
    summary = plan.summary("party 0", 500)
    assert summary["epsilon"] == pytest.approx(joint) and summary["epsilon"] > parties_only
    assert summary["parts"] == 3
    assert PrivacyPlan.restore(config, plan.state()) == plan


def test_end_to_end_calibration_raises_the_noise_by_sqrt_parts() -> None:
    config = DPConfig(mechanism="end_to_end", target_epsilon=10.0)
    alone = plan_privacy(config, planned_steps=671 * 60, **ADULT)
    joint = plan_privacy(config, planned_steps=671 * 60, parts=3, **ADULT)
    assert joint.accountant_multiplier == pytest.approx(alone.accountant_multiplier)
    assert joint.noise_multiplier == pytest.approx(alone.noise_multiplier * 3**0.5)
    spent = epsilon([GaussianSteps(42960, 64, joint.accountant_multiplier, 671 * 60)], 1e-5)
    assert 9.9 < spent <= 10.0


def test_a_series_partys_first_layers_are_accounted_jointly() -> None:
    """DPVFLGAN-TS: a party with 3 channels noises 4 first layers on one batch. Four
    Gaussian releases of sensitivity 2C and noise 2C sigma are one release of
    sensitivity 4C (2C sqrt 4): the accountant's multiplier is sigma / 2, so the same
    target needs twice the noise of one release."""
    config = DPConfig(mechanism="vflgan_gaussian", target_epsilon=1.0)
    alone = plan_privacy(config, planned_steps=500, **ADULT)
    joint = plan_privacy(config, parts=4, planned_steps=500, **ADULT)
    assert joint.parts == 4
    assert joint.accountant_multiplier == pytest.approx(alone.accountant_multiplier)
    assert joint.noise_multiplier == pytest.approx(2 * alone.noise_multiplier)
    spent = epsilon([GaussianSteps(42960, 64, joint.noise_multiplier / 2, 500)], 1e-5)
    assert 0.99 < spent <= 1.0


def test_only_the_per_row_mechanisms_are_accounted_over_several_holders() -> None:
    # VertiGAN's parties each run DP-SGD on the same batch: sqrt(3) times the noise.
    config = DPConfig(mechanism="dpsgd", target_epsilon=1.0)
    alone = plan_privacy(config, planned_steps=50, **ADULT)
    joint = plan_privacy(config, parts=3, planned_steps=50, **ADULT)
    assert joint.noise_multiplier == pytest.approx(alone.noise_multiplier * 3**0.5)
    with pytest.raises(ValueError, match="parts must be an integer >= 1, got 0"):
        plan_privacy(
            DPConfig(mechanism="end_to_end", target_epsilon=1.0), parts=0, planned_steps=5, **ADULT
        )
    with pytest.raises(ValueError, match=r"dp\.clip bounds the first-layer .* dp=end_to_end clips"):
        DPConfig(mechanism="end_to_end", target_epsilon=1.0, clip=0.1)
    assert DPConfig(mechanism="end_to_end", target_epsilon=1.0, sampling="poisson").poisson
