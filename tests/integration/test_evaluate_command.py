"""``python -m simulations.evaluate`` and ``python -m simulations.reproduce`` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# Its tests share a module fixture: one worker runs them all (pyproject: loadgroup).
pytestmark = pytest.mark.xdist_group("test_evaluate_command")

REPO = Path(__file__).resolve().parents[2]
FAST = [
    "evaluation.classifiers=[decision_tree,logistic_regression]",
    "evaluation.dcr_max_rows=300",
    "evaluation.avd_combinations=5",
]


def run_module(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def pair(adult_small: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Adult rows as 'real' and, as 'synthetic', the same rows with every column permuted."""
    real = pd.read_csv(adult_small)
    rng = np.random.default_rng(0)
    shuffled = pd.DataFrame({c: real[c].to_numpy()[rng.permutation(len(real))] for c in real})
    path = tmp_path_factory.mktemp("pair") / "synthetic.csv"
    shuffled.to_csv(path, index=False)
    return adult_small, path


def test_evaluate_writes_metrics_report_and_plots(pair: tuple[Path, Path], tmp_path: Path) -> None:
    real, synthetic = pair
    out = tmp_path / "eval"
    done = run_module(
        "simulations.evaluate",
        f"real={real}",
        f"synthetic={synthetic}",
        "label=income",
        "n_parties=2",
        *FAST,
        f"hydra.run.dir={out}",
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "total_difference" in done.stdout and "report.md" in done.stdout
    metrics = json.loads((out / "metrics.json").read_text())["evaluation"]
    assert metrics["settings"]["label"] == "income"
    assert metrics["settings"]["parties"] is not None
    # Permuting every column keeps the marginals and destroys every dependence.
    assert metrics["statistics"]["avg_jsd"] < 0.05
    assert metrics["statistics"]["diff_corr"] > 1.0
    assert metrics["ai_utility"]["tstr_accuracy"] < metrics["ai_utility"]["trtr_accuracy"]
    for name in ("report.md", "marginals.png", "associations.png"):
        assert (out / name).stat().st_size > 0, name
    assert "## AI-training utility" in (out / "report.md").read_text()


def test_evaluate_rejects_a_synthetic_table_without_the_label(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    real, synthetic = pair
    broken = tmp_path / "nolabel.csv"
    pd.read_csv(synthetic).drop(columns="income").to_csv(broken, index=False)
    out = tmp_path / "eval"
    done = run_module(
        "simulations.evaluate",
        f"real={real}",
        f"synthetic={broken}",
        "label=income",
        f"hydra.run.dir={out}",
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("simulations.evaluate: error: ")
    assert "label column 'income' is missing from the synthetic table" in done.stderr
    assert not (out / "metrics.json").exists() and not (out / "report.md").exists()


def test_reproduce_trains_evaluates_tabulates_and_reuses_finished_runs(
    adult_small: Path, tmp_path: Path
) -> None:
    args = [
        f"reproduce.datasets=[{adult_small}]",
        "dataset.label=income",
        "reproduce.algorithms=[wgan_gp,vflgan]",
        "reproduce.seeds=[0,1]",
        "reproduce.epochs={}",
        f"reproduce.out_dir={tmp_path / 'repro'}",
        "train.epochs=2",
        "train.eval_rows=300",
        "evaluation.cv_folds=2",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    first = run_module("simulations.reproduce", *args, cwd=REPO)
    assert first.returncode == 0, first.stderr[-3000:]
    table = json.loads((tmp_path / "repro" / "table1.json").read_text())
    cells = table[adult_small.stem]
    assert set(cells) == {"wgan_gp", "vflgan"}
    for method in cells.values():
        assert method["seeds"] == [0, 1]
        mean, spread = method["total_difference"]
        assert 0.0 <= mean <= 6.0 and spread >= 0.0
        assert method["trtr_accuracy"][1] == 0.0  # the real table's score is seed-independent
    text = (tmp_path / "repro" / "table1.md").read_text()
    assert "| WGAN-GP |" in text and "| VFLGAN |" in text and "2-fold cross-validation" in text
    synthetic = tmp_path / "repro" / adult_small.stem / "vflgan" / "seed0" / "synthetic.csv"
    assert (synthetic.parent / "report.md").exists()
    stamp = synthetic.stat().st_mtime_ns
    second = run_module("simulations.reproduce", *args, cwd=REPO)
    assert second.returncode == 0, second.stderr[-3000:]
    assert synthetic.stat().st_mtime_ns == stamp, "a finished run was trained again"


def test_evaluation_benchmark_reports_every_group_and_the_target(adult_small: Path) -> None:
    from flwr_vflgan.simulations.bench_evaluate import main

    result = main([f"real={adult_small}", "label=income", *FAST])
    assert set(result["seconds"]) == {
        "fidelity", "statistics", "avd", "ai_utility", "ml_efficacy", "privacy",
    }  # fmt: skip
    assert result["rows"] == 640 and result["cv_folds"] == 0
    assert result["within_target"] is (result["total_seconds"] < result["target_seconds"])


def test_a_run_on_a_table_with_a_continuous_label_trains_and_evaluates(tmp_path: Path) -> None:
    """California housing's label is a price: the run's evaluation regresses (R²) where
    it used to stop after training with a message listing every price as a class."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 4, size=300)
    table = pd.DataFrame(
        {"x": x, "c": rng.choice(["a", "b"], size=300), "price": 2 * x + rng.normal(0, 0.2, 300)}
    )
    source = tmp_path / "prices.csv"
    table.to_csv(source, index=False)
    out = tmp_path / "run"
    tiny = "latent.ae_epochs=1 latent.ae_min_steps=1 latent.diffusion_epochs=1"
    tiny += " latent.diffusion_min_steps=1 latent.diffusion_steps=5 latent.denoiser_hidden=[16]"
    done = run_module(
        "simulations.run",
        "algorithm=latent_diffusion",
        "dataset=csv",
        f"dataset.source={source}",
        "dataset.label=price",
        *tiny.split(),
        *FAST,
        f"hydra.run.dir={out}",
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    evaluation = json.loads((out / "metrics.json").read_text())["evaluation"]
    assert evaluation["settings"]["label"] == "price"
    utility = evaluation["ai_utility"]
    assert utility["trtr_r2"] > 0.8  # the real rows' forest learns the price
    assert set(utility) >= {"tsts_r2", "trts_r2", "tstr_r2", "total_difference"}
    assert "is continuous" in evaluation["skipped"]["ml_efficacy"]
    assert "TRTR R²" in (out / "report.md").read_text()
    assert (out / "synthetic.csv").exists()
