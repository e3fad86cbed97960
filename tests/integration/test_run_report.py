"""A training run evaluates its published table and leaves report.md and plots."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.evaluation import EvaluationConfig
from flwr_vflgan.runtime.party_data import DataSpec

SHARED_DATASETS = Path(
    os.environ.get("FLWR_VFLGAN_DATA_DIR")
    or Path(__file__).resolve().parents[3] / "shared" / "datasets"
)
FAST = EvaluationConfig(
    classifiers=("decision_tree", "logistic_regression"), dcr_max_rows=300, avd_combinations=5
)


def _spec(
    tmp_path: Path,
    data: DataSpec,
    train: dict,
    evaluation: EvaluationConfig,
    rows: int,
    variant: str = "vflgan",
):
    from flwr_vflgan.simulations.config import OutputConfig, RunSpec, RuntimeConfig

    return RunSpec(
        algorithm=VFLGANConfig.from_dict({"variant": variant, "train": train}),
        data=data,
        runtime=RuntimeConfig(),
        output=OutputConfig(publish_rows=rows, checkpoint=False),
        seed=0,
        run_dir=tmp_path / "run",
        evaluation=evaluation,
    )


def test_a_vflgan_run_writes_its_evaluation_report(adult_small: Path, tmp_path: Path) -> None:
    from flwr_vflgan.simulations.families import run_experiment

    data = DataSpec(source=str(adult_small), n_parties=2, label="income")
    spec = _spec(tmp_path, data, {"epochs": 3, "eval_rows": 300}, FAST, rows=640)
    returned = run_experiment(spec)
    run = tmp_path / "run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["evaluation"] == json.loads(json.dumps(returned["evaluation"]))
    evaluation = metrics["evaluation"]
    assert set(evaluation["skipped"]) == {"images"}
    # The suite re-encodes the published table on its own; the FD must agree with the
    # one training computed with the parties' encoders (float32 there, float64 here).
    assert evaluation["fidelity"]["fd"] == pytest.approx(metrics["fd"], rel=1e-3)
    assert evaluation["settings"]["parties"] == [list(p) for p in _even_halves(adult_small)]
    assert evaluation["statistics"]["diff_corr_across_client"] is not None
    assert 0.5 < evaluation["ai_utility"]["trtr_accuracy"] <= 1.0
    assert evaluation["privacy"]["exact_match_fraction"] < 0.05, "the generator copied rows"
    for name in ("report.md", "fd_history.png", "marginals.png", "associations.png"):
        assert (run / name).stat().st_size > 0, name
    report = (run / "report.md").read_text()
    assert report.startswith("# vflgan on ") and "![Frechet distance over training]" in report
    assert json.loads((run / "config.json").read_text())["evaluation"] == FAST.to_dict()


def _even_halves(path: Path) -> list[list[str]]:
    import pandas as pd

    columns = list(pd.read_csv(path, nrows=1).columns)
    return [columns[:8], columns[8:]]


@pytest.mark.slow
def test_an_mnist_run_is_evaluated_with_the_image_metrics(tmp_path: Path) -> None:
    from flwr_vflgan.simulations.families import run_experiment

    assert SHARED_DATASETS.is_dir(), f"the shared datasets folder is missing: {SHARED_DATASETS}"
    data = DataSpec(
        source="mnist_5k", n_parties=2, numeric_scaling="minmax", data_dir=str(SHARED_DATASETS)
    )
    evaluation = EvaluationConfig(dcr_max_rows=300)
    train = {"epochs": 1, "max_steps": 10, "eval_rows": 300}
    metrics = run_experiment(_spec(tmp_path, data, train, evaluation, rows=500))["evaluation"]
    assert metrics["settings"]["config"]["image_shape"] == [28, 28]  # the run knows MNIST
    images = metrics["images"]
    # Ten steps of training are far from real digits: a real ceiling near 10, a low score here.
    assert images["real_inception_score"] > 8.0
    assert images["inception_score"] < images["real_inception_score"]
    assert images["image_fd"] > 0.0 and images["classifier_accuracy"] > 0.9
    assert metrics["skipped"]["statistics"].startswith("image table")
    assert (tmp_path / "run" / "samples.png").stat().st_size > 0
    assert not (tmp_path / "run" / "marginals.png").exists()


@pytest.mark.parametrize(
    ("variant", "train"),
    [
        ("vflgan", {"epochs": 3, "eval_rows": 300}),
        ("vtgan", {"epochs": 2, "batch_size": 64}),
        ("ctgan", {"epochs": 2, "batch_size": 64}),
    ],
)
def test_a_table_with_numeric_gaps_and_numbers_as_text_trains_and_publishes_gaps(
    tmp_path: Path, variant: str, train: dict
) -> None:
    """Numbers stored as text with blank cells, and a numeric column with missing values:
    both are modelled (a missingness indicator per column: VFLGAN's encoder and VT-GAN's
    mode-specific one alike), the published table has gaps in both, and the evaluation
    measures them."""
    import numpy as np
    import pandas as pd

    from flwr_vflgan.data import load_dataset
    from flwr_vflgan.simulations.families import run_experiment

    frame = load_dataset("adult").frame.iloc[:640].copy()
    rng = np.random.default_rng(0)
    age = frame["age"].astype(str)
    age[rng.random(640) < 0.15] = " "
    hours = frame["hours-per-week"].astype(float)
    hours[rng.random(640) < 0.25] = np.nan
    path = tmp_path / "messy.csv"
    frame.assign(age=age, **{"hours-per-week": hours}).to_csv(path, index=False)
    data = DataSpec(source=str(path), n_parties=2, label="income")
    metrics = run_experiment(_spec(tmp_path, data, train, FAST, 640, variant))
    synthetic = pd.read_csv(tmp_path / "run" / "synthetic.csv")
    for column in ("age", "hours-per-week"):
        assert 0 < synthetic[column].isna().mean() < 1, column
    assert metrics["evaluation"]["settings"]["numeric_gaps"] == ["age", "hours-per-week"]
    assert metrics["evaluation"]["ai_utility"]["total_difference"] is not None


@pytest.mark.parametrize("variant", ["vtgan", "ctgan"])
def test_vtgan_and_ctgan_train_on_a_table_without_categorical_columns(
    tmp_path: Path, variant: str
) -> None:
    """No categorical column anywhere: CTGAN's unconditional training (empty conditional
    vectors, the real batch drawn uniformly by the chosen client)."""
    import pandas as pd

    from flwr_vflgan.data import load_dataset
    from flwr_vflgan.simulations.families import run_experiment

    columns = ["age", "fnlwgt", "education-num", "hours-per-week"]
    real = load_dataset("adult").frame[columns].iloc[:600]
    path = tmp_path / "numeric.csv"
    real.to_csv(path, index=False)
    data = DataSpec(source=str(path), n_parties=2)
    train = {"epochs": 2, "batch_size": 64}
    metrics = run_experiment(_spec(tmp_path, data, train, FAST, 300, variant))
    synthetic = pd.read_csv(tmp_path / "run" / "synthetic.csv")
    assert list(synthetic.columns) == columns and len(synthetic) == 300
    assert not synthetic.isna().any().any()
    for column in columns:
        assert real[column].min() <= synthetic[column].min() <= synthetic[column].max()
        assert synthetic[column].max() <= real[column].max()
    assert metrics["evaluation"]["statistics"]["avg_wd"] is not None
