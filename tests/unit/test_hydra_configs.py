"""The Hydra trees of simulations.run / evaluate / reproduce compose as users write them."""

from __future__ import annotations

import pytest
from flwr_vflgan.simulations.config import (
    register_configs,
    to_evaluate_spec,
    to_run_spec,
)
from hydra import compose, initialize_config_module
from omegaconf.errors import MissingMandatoryValue

from flwr_vflgan.evaluation import EvaluationConfig


def _compose(name: str, overrides: list[str]):
    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        return compose(name, overrides=overrides)


def test_declared_kinds_can_be_given_on_the_command_line() -> None:
    """README: dataset.declared='{age: integer, zip: categorical}' (a mapping added whole)."""
    cfg = _compose(
        "config",
        [
            "dataset=csv",
            "dataset.source=t.csv",
            "dataset.declared={zip: categorical, age: integer}",
        ],
    )
    spec = to_run_spec(cfg, "out")
    assert spec.data.declared == {"zip": "categorical", "age": "integer"}
    assert to_run_spec(_compose("config", []), "out").data.declared == {}


def test_run_config_carries_the_evaluation_node() -> None:
    spec = to_run_spec(
        _compose("config", ["evaluation.cv_folds=10", "evaluation.privacy=false"]), "out"
    )
    assert spec.evaluation == EvaluationConfig(cv_folds=10, privacy=False)
    with pytest.raises(ValueError, match="cv_folds must be 0 or >= 2, got 1"):
        to_run_spec(_compose("config", ["evaluation.cv_folds=1"]), "out")


def test_evaluate_command_config() -> None:
    spec, config = to_evaluate_spec(
        _compose(
            "evaluate",
            ["real=a.csv", "synthetic=b.parquet", "declared={zip: categorical}", "n_parties=3"],
        )
    )
    assert (spec.real, spec.synthetic, spec.n_parties) == ("a.csv", "b.parquet", 3)
    assert spec.declared == {"zip": "categorical"} and config == EvaluationConfig()
    with pytest.raises(MissingMandatoryValue, match="real"):
        to_evaluate_spec(_compose("evaluate", ["synthetic=b.csv"]))
    with pytest.raises(ValueError, match=r"give parties=\[\[...\], ...\] or n_parties=N, not both"):
        to_evaluate_spec(
            _compose("evaluate", ["real=a.csv", "synthetic=b.csv", "n_parties=2", "parties=[[x]]"])
        )


def test_reproduce_config_defaults_use_the_papers_cross_validation() -> None:
    cfg = _compose("reproduce", [])
    assert list(cfg.reproduce.datasets) == ["adult", "german_credit"]
    assert list(cfg.reproduce.algorithms) == ["wgan_gp", "vflgan_base", "vflgan"]
    assert to_run_spec(cfg, "out").evaluation.cv_folds == 10


def test_dp_groups_compose_as_the_readme_writes_them() -> None:
    from flwr_vflgan.privacy import DPConfig

    assert not to_run_spec(_compose("config", []), "out").algorithm.dp.enabled
    spec = to_run_spec(
        _compose("config", ["algorithm=vflgan", "dp=vflgan_gaussian", "dp.target_epsilon=5"]), "out"
    )
    assert spec.algorithm.dp == DPConfig(
        mechanism="vflgan_gaussian", target_epsilon=5.0, delta=1e-5
    )
    spec = to_run_spec(_compose("config", ["dp=dpsgd", "dp.max_grad_norm=0.5"]), "out")
    assert spec.algorithm.dp.mechanism.value == "dpsgd" and spec.algorithm.dp.max_grad_norm == 0.5
    spec = to_run_spec(_compose("config", ["dp=dpsgd", "dp.sampling=poisson"]), "out")
    assert spec.algorithm.dp.poisson
    with pytest.raises(ValueError, match=r"dp\.sampling=poisson needs dp=dpsgd"):
        to_run_spec(_compose("config", ["dp=vflgan_gaussian", "dp.sampling=poisson"]), "out")
    with pytest.raises(ValueError, match=r"dp\.clip bounds the first-layer"):
        to_run_spec(_compose("config", ["dp=dpsgd", "dp.clip=0.1"]), "out")
