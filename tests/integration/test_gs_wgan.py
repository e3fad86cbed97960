"""GS-WGAN through the run command's path: its accounting, budget stop and configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.config import GSWGANSettings
from flwr_vflgan.gan.gs_wgan import gs_wgan_plan
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import (
    OutputConfig,
    RunSpec,
    RuntimeConfig,
    compose_run_config,
    to_run_spec,
)
from flwr_vflgan.simulations.families import run_experiment

ROWS, BATCH, N_CRITIC, K = 640, 32, 5, 8  # adult_small: 20 critic and 4 generator steps an epoch


def _config(**dp: object) -> VFLGANConfig:
    return VFLGANConfig.from_dict(
        {
            "variant": "gs_wgan",
            "train": {"epochs": 2, "eval_rows": 300, "batch_size": BATCH, "n_critic": N_CRITIC},
            "gs_wgan": {"discriminators": K},
            "dp": {"mechanism": "gs_wgan", "target_epsilon": 5.0, "delta": 1e-4, **dp},
        }
    )


def _run(config: VFLGANConfig, data: Path, run_dir: Path) -> dict:
    spec = RunSpec(
        algorithm=config,
        data=DataSpec(source=str(data), n_parties=2),
        runtime=RuntimeConfig(),
        output=OutputConfig(publish_rows=100, checkpoint=False, evaluate=False),
        seed=0,
        run_dir=run_dir,
    )
    return run_experiment(spec)


def test_a_gs_wgan_run_accounts_its_generator_steps(adult_small: Path, tmp_path: Path) -> None:
    metrics = _run(_config(), adult_small, tmp_path / "run")
    privacy = metrics["privacy"]
    assert privacy["mechanism"] == "gs_wgan" and privacy["guarantee"] == "sanitized_gradients"
    assert any("discriminators themselves" in item for item in privacy["not_covered"])
    (holder,) = privacy["parties"]
    planned = Schedule(ROWS, BATCH, N_CRITIC, epochs=2)
    g_steps = planned.steps_before(planned.total_steps, StepKind.GENERATOR)
    assert g_steps == 8
    assert holder["steps"] == g_steps and metrics["steps"] == planned.total_steps
    assert (holder["dataset_size"], holder["batch_size"], holder["parts"]) == (K, 1, BATCH)
    assert 4.8 < privacy["epsilon"] == holder["epsilon"] <= 5.0
    assert privacy["budget_stop"] is None and metrics["published_generator"] == "last"
    # The training loop's own time, as the federated runs report it.
    assert 0 < metrics["train_seconds"] <= metrics["wall_seconds"]
    table = pd.read_csv(tmp_path / "run" / "synthetic.csv")
    # Adult's categories include missing values; its numbers are never missing.
    assert len(table) == 100 and table.select_dtypes("number").notna().all().all()
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["algorithm"]["gs_wgan"] == {
        "discriminators": K,
        "drift_weight": 0.001,
        "warmup_iterations": 0,
    }


def test_a_fixed_noise_stops_at_the_generator_steps_its_budget_allows(
    adult_small: Path, tmp_path: Path
) -> None:
    config = _config(noise_multiplier=4.0)
    plan = gs_wgan_plan(config, GSWGANSettings(K), ROWS, generator_steps=8)
    assert 0 < plan.allowed_steps < 8
    metrics = _run(config, adult_small, tmp_path / "run")
    planned = Schedule(ROWS, BATCH, N_CRITIC, epochs=2)
    stop = planned.last_step_within(plan.allowed_steps, StepKind.GENERATOR)
    assert metrics["steps"] == stop < planned.total_steps
    privacy = metrics["privacy"]
    assert f"allows {plan.allowed_steps} generator steps of the 8 planned" in privacy["budget_stop"]
    assert privacy["parties"][0]["steps"] == plan.allowed_steps
    assert privacy["epsilon"] <= 5.0


def test_the_algorithm_file_sets_the_authors_settings_and_stays_in_process(
    tmp_path: Path,
) -> None:
    spec = to_run_spec(compose_run_config("algorithm=gs_wgan dp=gs_wgan"), tmp_path / "a")
    train = spec.algorithm.train
    assert (train.batch_size, train.gp_weight, train.lr, train.betas) == (
        32,
        10.0,
        1e-4,
        (0.5, 0.9),
    )
    assert spec.algorithm.gs_wgan == GSWGANSettings(100, 0.001)
    assert spec.algorithm.dp.mechanism.value == "gs_wgan" and spec.algorithm.dp.target_epsilon == 10
    config = compose_run_config("algorithm=gs_wgan runtime=simulation")
    with pytest.raises(ValueError, match=r"algorithm=gs_wgan is centralized and runs only"):
        _run_on(config, tmp_path / "b")


def _run_on(config, run_dir: Path) -> None:
    spec = to_run_spec(config, run_dir)
    run_experiment(spec)


@pytest.mark.parametrize("variant", ["gs_wgan", "wgan_gp"])
def test_the_federated_strategy_refuses_the_centralized_algorithms(variant: str) -> None:
    from flwr_vflgan.strategies import VFLGANStrategy

    with pytest.raises(ValueError, match=rf"{variant} is centralized: train it with"):
        VFLGANStrategy(VFLGANConfig.from_dict({"variant": variant}), n_parties=2)
