"""The Hydra trees of simulations.run / evaluate / reproduce compose as users write them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_module
from omegaconf.errors import MissingMandatoryValue

from flwr_vflgan.data.domain import PublicDomain, bundled_domain
from flwr_vflgan.evaluation import EvaluationConfig
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.simulations.config import (
    compose_run_config,
    register_configs,
    to_evaluate_spec,
    to_run_spec,
)


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
    assert list(cfg.reproduce.algorithms) == ["wgan_gp", "vertigan", "vflgan_base", "vflgan"]
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


def test_end_to_end_takes_a_public_domain_and_refuses_to_run_without_one(tmp_path: Path) -> None:
    spec = to_run_spec(_compose("config", ["dp=end_to_end", "dp.target_epsilon=1"]), "out")
    assert spec.algorithm.dp.mechanism.value == "end_to_end"
    assert spec.data.public_domain == bundled_domain("adult")  # Adult's bundled codebook
    # Without DP nothing changes unless a domain is asked for.
    assert to_run_spec(_compose("config", []), "out").data.domain is None
    domain = tmp_path / "german.yaml"
    domain.write_text("age: {kind: integer, min: 18, max: 80}\n", encoding="utf-8")
    given = to_run_spec(
        _compose("config", ["dataset=german_credit", "dp=end_to_end", f"dataset.domain={domain}"]),
        "out",
    )
    assert given.data.public_domain == PublicDomain.load(domain)
    assert to_run_spec(
        _compose("config", ["dataset=german_credit", "dp=end_to_end"]), "out"
    ).data.public_domain == bundled_domain("german_credit")
    with pytest.raises(ValueError, match=r"'spambase' has none bundled: give dataset\.domain="):
        to_run_spec(_compose("config", ["dataset=spambase", "dp=end_to_end"]), "out")
    with pytest.raises(
        ValueError, match="dp=end_to_end is for vflgan, vflgan_base, wgan_gp, aim, mst and dplt"
    ):
        to_run_spec(_compose("config", ["algorithm=vtgan", "dp=end_to_end"]), "out")


def _importance_table(path: Path) -> Path:
    """``outcome`` is ``yes`` exactly when ``signal`` > 0; the other columns are noise."""
    rng = np.random.default_rng(0)
    signal = rng.normal(size=300)
    table = pd.DataFrame(
        {
            "noise_a": rng.normal(size=300),
            "signal": signal,
            "outcome": np.where(signal > 0, "yes", "no"),
            "noise_b": rng.normal(size=300),
            "noise_c": rng.integers(0, 5, size=300),
        }
    )
    table.to_csv(path, index=False)
    return path


def test_importance_partition_composes_and_splits_a_table(tmp_path: Path) -> None:
    """Paper 001 Section 4.3.2: partition=importance partition.split=1090."""
    from flwr_vflgan.runtime.party_data import load_full_table, split_columns

    path = _importance_table(tmp_path / "table.csv")
    table = [f"dataset.source='{path}'", "dataset=csv", "dataset.label=outcome"]
    spec = to_run_spec(
        _compose("config", [*table, "partition=importance", "partition.split=1090", "seed=4"]),
        "out",
    )
    assert spec.data.partition == "importance" and spec.data.importance_split == "1090"
    assert spec.data.partition_seed == 0  # not the run seed: every run shares one split
    dataset, _ = load_full_table(spec.data)
    # Four features: 10 % of 4 rounds to 0, raised to the one most important feature;
    # the label stays with the other party, in table order.
    expected = [["signal"], ["noise_a", "outcome", "noise_b", "noise_c"]]
    assert split_columns(spec.data, dataset.schema) == expected
    assert split_columns(spec.data, dataset.schema) == expected
    spec = to_run_spec(_compose("config", [*table, "partition=importance"]), "out")
    assert spec.data.importance_split == "5050"  # PartitionConfig's default
    # 50 % of 4 features is 2: signal and one noise column; both parties keep table order.
    first, second = split_columns(spec.data, dataset.schema)
    assert len(first) == 2 and "signal" in first
    assert second == [name for name in dataset.schema.names if name not in first]


def test_importance_partition_errors(tmp_path: Path) -> None:
    from flwr_vflgan.runtime.party_data import load_full_table, split_columns

    with pytest.raises(ValueError, match=r"splits the columns between two parties .*n_parties=3"):
        to_run_spec(_compose("config", ["partition=importance", "partition.n_parties=3"]), "out")
    with pytest.raises(
        ValueError,
        match=r"unknown importance split partition\.split=1234; valid: \['1090', '5050', '9010'\]",
    ):
        to_run_spec(_compose("config", ["partition=importance", "partition.split=1234"]), "out")
    path = _importance_table(tmp_path / "unlabelled.csv")
    spec = to_run_spec(
        _compose("config", ["dataset=csv", f"dataset.source='{path}'", "partition=importance"]),
        "out",
    )
    dataset, _ = load_full_table(spec.data)
    with pytest.raises(ValueError, match=r"has none: name it with dataset\.label=COLUMN"):
        split_columns(spec.data, dataset.schema)


def test_partition_seed_defaults() -> None:
    assert to_run_spec(_compose("config", ["seed=4"]), "out").data.partition_seed == 4
    spec = to_run_spec(_compose("config", ["seed=4", "partition=random"]), "out")
    assert spec.data.partition_seed == 4 and spec.data.importance_split is None
    spec = to_run_spec(_compose("config", ["partition=importance", "partition.seed=3"]), "out")
    assert spec.data.partition_seed == 3


@pytest.mark.parametrize("algorithm", ["gafm", "splitnn", "maxnorm", "marvell"])
def test_split_classifier_groups_compose_as_the_docs_write_them(algorithm: str) -> None:
    """docs/gafm.md: `algorithm=<name> dataset=spambase` is the two-party setting."""
    spec = to_run_spec(_compose("config", [f"algorithm={algorithm}", "dataset=spambase"]), "out")
    assert spec.algorithm.is_gafm and spec.algorithm.variant.value == algorithm
    assert spec.data.n_parties == 1 and spec.data.source == "spambase"
    g = spec.algorithm.gafm
    assert (g.sigma, g.delta, g.gamma, g.clip, g.batch_size, g.epochs) == (
        0.01,
        0.05,
        1.0,
        0.1,
        1028,
        300,
    )
    three = to_run_spec(
        _compose(
            "config", [f"algorithm={algorithm}", "partition.n_parties=3", "gafm.marvell=true"]
        ),
        "out",
    )
    assert three.data.n_parties == 3 and three.algorithm.gafm.combine(3) == "average"
    assert three.algorithm.gafm.marvell


def test_split_classifier_config_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="has no differential privacy"):
        to_run_spec(_compose("config", ["algorithm=gafm", "dp=dpsgd"]), "out")
    with pytest.raises(ValueError, match=r"gafm\.delta"):
        to_run_spec(_compose("config", ["algorithm=gafm", "gafm.delta=0.9"]), "out")
    with pytest.raises(ValueError, match=r"partition\.n_parties must be >= 2"):
        to_run_spec(_compose("config", ["algorithm=vflgan", "partition.n_parties=1"]), "out")
    tune = _compose("gafm_tune", [])
    assert list(tune.tune.deltas) == [0.05, 0.1, 0.2, 0.3, 0.5] and tune.tune.fraction == 0.1


@pytest.mark.parametrize(
    ("overrides", "train_k", "gafm_k"),
    [
        ([], 1, 1),
        (["runtime=simulation"], 4, 4),
        (["runtime=deployment"], 4, 4),
        (["runtime=simulation", "train.steps_per_exchange=1"], 1, 4),
        (["runtime=inprocess", "train.steps_per_exchange=16"], 16, 1),
        (["runtime=simulation", "runtime.steps_per_exchange=2"], 2, 2),
        # VT-GAN takes the runtime's K (critic steps per exchange); its centralized
        # baseline exchanges nothing.
        (["runtime=simulation", "algorithm=vtgan"], 4, 4),
        (["runtime=inprocess", "algorithm=vtgan"], 1, 1),
        (["runtime=deployment", "algorithm=ctgan"], 1, 4),
        # Split classification takes the runtime's K in gafm.*, never in train.*.
        (["runtime=deployment", "algorithm=gafm", "dataset=spambase"], 1, 4),
        (["runtime=deployment", "algorithm=gafm", "gafm.steps_per_exchange=1"], 1, 1),
    ],
)
def test_steps_per_exchange_follow_the_runtime_unless_set(
    overrides: list[str], train_k: int, gafm_k: int
) -> None:
    spec = to_run_spec(_compose("config", overrides), "out")
    assert spec.algorithm.train.steps_per_exchange == train_k
    assert spec.algorithm.gafm.steps_per_exchange == gafm_k


def test_runtime_steps_per_exchange_is_checked() -> None:
    with pytest.raises(ValueError, match=r"runtime\.steps_per_exchange must be a positive integer"):
        to_run_spec(_compose("config", ["runtime.steps_per_exchange=0"]), "out")


@pytest.mark.parametrize("scaling", ["mode", "quantile"])
def test_fitted_scalings_are_the_vflgan_familys_and_need_no_public_domain(
    tmp_path: Path, scaling: str
) -> None:
    option = f"dataset.numeric_scaling={scaling}"
    spec = to_run_spec(_compose("config", [option]), tmp_path / "a")
    assert spec.data.numeric_scaling == scaling
    base = _compose("config", [option, "algorithm=vflgan_base"])
    assert to_run_spec(base, tmp_path / "b").data.numeric_scaling == scaling
    for algorithm in ("vtgan", "ctgan", "gafm"):
        config = _compose("config", [f"algorithm={algorithm}", option])
        with pytest.raises(ValueError, match=rf"algorithm={algorithm} encodes its own columns"):
            to_run_spec(config, tmp_path / algorithm)
    config = _compose("config", [option, "dp=end_to_end"])
    with pytest.raises(ValueError, match=r"cannot be built from public metadata"):
        to_run_spec(config, tmp_path / "e2e")


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("imdb", {"local_model": "mlp", "local_hidden": (256, 128), "local_dropout": 0.5}),
        ("criteo", {"local_model": "wide_deep", "local_hidden": (16, 16), "embed_dim": 16}),
        ("isic", {"local_model": "cnn", "local_hidden": (120, 84), "cut_dim": 40}),
    ],
)
def test_a_gafm_model_preset_sets_the_papers_model_and_the_command_line_still_wins(
    preset: str, expected: dict[str, object]
) -> None:
    """docs/gafm.md: +gafm_model=<dataset> is paper 002's model for that dataset."""
    spec = to_run_spec(_compose("config", ["algorithm=gafm", f"+gafm_model={preset}"]), "out")
    gafm = spec.algorithm.gafm
    assert {key: getattr(gafm, key) for key in expected} == expected
    again = _compose(
        "config", ["algorithm=gafm", f"+gafm_model={preset}", "gafm.local_dropout=0.1"]
    )
    assert to_run_spec(again, "out").algorithm.gafm.local_dropout == 0.1


_ALGORITHMS = sorted(
    p.stem for p in (Path(__file__).parents[2] / "conf" / "algorithm").glob("*.yaml")
)


@pytest.mark.parametrize("algorithm", _ALGORITHMS)
def test_every_family_section_composes_to_its_settings_defaults(algorithm: str) -> None:
    """No algorithm yaml sets a family section, so a run's family settings are the
    dataclasses' defaults: the Hydra tree must not carry a default of its own (it once set
    vtgan.point_mass_share to null, turning VT-GAN's mixed-type encoder off in every run
    while the docs and VTGANSettings said 0.1)."""
    from dataclasses import replace

    from flwr_vflgan.dplt.config import DPLTSettings
    from flwr_vflgan.gafm.config import GAFMSettings
    from flwr_vflgan.gan.config import GSWGANSettings
    from flwr_vflgan.latent.config import LatentSettings
    from flwr_vflgan.marginals.config import MarginalSettings
    from flwr_vflgan.series.config import SeriesSettings
    from flwr_vflgan.vtgan.config import VTGANSettings

    assert "vtgan" in _ALGORITHMS and len(_ALGORITHMS) >= 10
    # aim, mst and dplt are private by construction and refuse to compose without a
    # budget; vflgan_ts refuses a table.
    budget = ["dp=end_to_end", "dp.target_epsilon=1"] if algorithm in ("aim", "mst", "dplt") else []
    series = ["dataset=sine6"] if algorithm == "vflgan_ts" else []
    overrides = [f"algorithm={algorithm}", *budget, *series]
    settings = to_run_spec(_compose("config", overrides), "out").algorithm
    assert settings.vtgan == VTGANSettings()
    assert settings.vtgan.point_mass_share == 0.1
    assert settings.latent == LatentSettings()
    assert settings.gs_wgan == GSWGANSettings()
    assert settings.dplt == DPLTSettings()
    assert settings.marginals == MarginalSettings()
    assert settings.series == SeriesSettings()
    # gafm.steps_per_exchange is the runtime's when left null (tested above).
    assert settings.gafm == replace(
        GAFMSettings(), steps_per_exchange=settings.gafm.steps_per_exchange
    )


@pytest.mark.parametrize(
    ("algorithm", "head"),
    [("vflgan", (128,)), ("vflgan_base", ()), ("vertigan", ()), ("vdgan", ()), ("wgan_gp", ())],
)
def test_only_vflgans_job_deepens_the_local_head(algorithm: str, head: tuple[int, ...]) -> None:
    """VFLGAN's command line job measured best with a hidden layer in D_i^2; the papers'
    baselines keep the reference code's linear head, and the override restores it."""
    spec = to_run_spec(_compose("config", [f"algorithm={algorithm}"]), "out")
    assert spec.algorithm.model.local_head_hidden == head
    paper = to_run_spec(
        _compose("config", [f"algorithm={algorithm}", "model.local_head_hidden=[]"]), "out"
    )
    assert paper.algorithm.model.local_head_hidden == ()


@pytest.mark.parametrize("algorithm", ["vflgan", "vflgan_base", "wgan_gp"])
def test_the_gan_jobs_are_30_epochs_of_adult_and_train_epochs_is_exact(algorithm: str) -> None:
    """The VFLGAN family's and the reference's jobs are 27,000 steps (Adult's 30 epochs of
    915 steps; 75 epochs measured better but train about 18 minutes on 2 cores, past the
    default job's 15, docs/evaluation.md), and train.epochs still overrides the length."""
    train = to_run_spec(_compose("config", [f"algorithm={algorithm}"]), "out").algorithm.train
    assert train.epochs is None and train.min_steps == 27000
    assert Schedule.of(48842, train).epochs == 30
    exact = _compose("config", [f"algorithm={algorithm}", "train.epochs=75"])
    assert Schedule.of(48842, to_run_spec(exact, "out").algorithm.train).epochs == 75


def test_a_run_config_composes_inside_a_running_hydra_app() -> None:
    """The benchmark (a Hydra app) deploys runs whose config it composes: that failed
    with "GlobalHydra is already initialized" before the app's Hydra was set aside."""
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        outer = GlobalHydra.instance().hydra
        assert compose_run_config("seed=7 algorithm=wgan_gp").seed == 7
        assert GlobalHydra.instance().hydra is outer  # the app's own Hydra is back
        assert compose("config", overrides=["seed=3"]).seed == 3
    assert compose_run_config("seed=5").seed == 5  # and outside any app
    assert not GlobalHydra.instance().is_initialized()
