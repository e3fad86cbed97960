"""simulations.reproduce: the Table-1 summary, its markdown, and which runs are reused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from flwr_vflgan.simulations.config import ReproduceConfig, RunSpec, register_configs, to_run_spec
from flwr_vflgan.simulations.reproduce import (
    PAPER_TABLE1,
    _mean_spread,
    dataset_name,
    finished_metrics,
    render_table,
    summarise,
)
from hydra import compose, initialize_config_module


def _spec(tmp_path: Path, algorithm: str, seed: int, dataset: str = "german_credit") -> RunSpec:
    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        cfg = compose(
            "config",
            overrides=[f"algorithm={algorithm}", f"seed={seed}", f"dataset.source={dataset}"],
        )
    return to_run_spec(cfg, tmp_path / algorithm / f"seed{seed}")


def _metrics(seed: int, total: float) -> dict:
    utility = {
        f"{s}_{m}": 0.7 for s in ("trtr", "tsts", "trts", "tstr") for m in ("accuracy", "f1")
    }
    utility["total_difference"] = total
    return {"seed": seed, "fd": 1.0 + seed, "best_epoch": 3, "evaluation": {"ai_utility": utility}}


def test_mean_and_sample_standard_deviation_by_hand() -> None:
    mean, spread = _mean_spread([0.2, 0.4, 0.9])
    assert mean == pytest.approx(0.5)
    assert spread == pytest.approx(math.sqrt(((0.3**2) + (0.1**2) + (0.4**2)) / 2))
    assert _mean_spread([0.3]) == (0.3, 0.0)
    assert all(math.isnan(v) for v in _mean_spread([math.nan]))
    assert _mean_spread([0.2, math.nan, 0.4]) == pytest.approx((0.3, math.sqrt(0.02)))


def test_summary_groups_runs_by_dataset_and_method_and_renders_the_paper_row(
    tmp_path: Path,
) -> None:
    results = [
        (_spec(tmp_path, "vflgan", 0), _metrics(0, 0.8)),
        (_spec(tmp_path, "vflgan", 1), _metrics(1, 1.0)),
        (_spec(tmp_path, "wgan_gp", 0), _metrics(0, 0.3)),
    ]
    table = summarise(results)
    assert set(table["german_credit"]) == {"vflgan", "wgan_gp"}
    cell = table["german_credit"]["vflgan"]
    assert cell["seeds"] == [0, 1]
    assert cell["total_difference"] == pytest.approx((0.9, math.sqrt(0.02)))
    assert cell["fd"] == pytest.approx((1.5, math.sqrt(0.5)))
    text = render_table(table, ReproduceConfig(datasets=("german_credit",), seeds=(0, 1)), 10)
    paper = PAPER_TABLE1["german_credit"]["vflgan"]
    assert "| VFLGAN | 0.70 ± 0.00 |" in text and "| 0.90 ± 0.14 |" in text
    assert f"| *paper* | {paper['trtr'][0]:.2f} |" in text and "10-fold cross-validation" in text
    assert text.index("WGAN-GP") < text.index("| VFLGAN |")  # the configured method order


def test_only_a_finished_run_of_the_same_configuration_is_reused(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "vflgan", 0)
    assert finished_metrics(spec) is None
    spec.run_dir.mkdir(parents=True)
    config = {
        "algorithm": spec.algorithm.to_dict(),
        "data": {**json.loads(spec.data.to_json()), "data_dir": "/elsewhere"},
        "seed": 0,
    }
    (spec.run_dir / "config.json").write_text(json.dumps(config))
    (spec.run_dir / "synthetic.csv").write_text("a\n1\n")
    assert finished_metrics(spec) is None  # no metrics.json: the run did not finish
    (spec.run_dir / "metrics.json").write_text(json.dumps({"seed": 0}))
    assert finished_metrics(spec) == {"seed": 0}  # data_dir is where, not what
    other = _spec(tmp_path, "vflgan", 1)
    other.run_dir.parent.mkdir(parents=True, exist_ok=True)
    other.run_dir.symlink_to(spec.run_dir)
    assert finished_metrics(other) is None  # seed 1 is not the run that is there


def test_dataset_names_and_bad_grids() -> None:
    assert dataset_name("adult") == "adult"
    assert dataset_name("/data/loans.csv.gz") == "loans"
    with pytest.raises(ValueError, match=r"unknown reproduce.algorithms \[.gafm.\]"):
        ReproduceConfig(algorithms=("gafm",))
    with pytest.raises(ValueError, match=r"reproduce\.seeds must not be empty"):
        ReproduceConfig(seeds=())
    with pytest.raises(ValueError, match=r"reproduce\.jobs must be >= 1, got 0"):
        ReproduceConfig(jobs=0)
