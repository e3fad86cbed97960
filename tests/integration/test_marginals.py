"""AIM and MST end to end: ``python -m simulations.run algorithm=aim|mst dp=end_to_end``.

The run reads the whole table in one process (centralized, like ``wgan_gp``), codes it
from Adult's bundled public domain, and publishes a table whose epsilon covers every
release (``privacy.guarantee = end_to_end``, zCDP converted to ``(epsilon, delta)``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.registry import load_dataset

REPO = Path(__file__).resolve().parents[2]
QUICK_AIM = [
    "marginals.rounds=15",
    "marginals.iterations=30",
    "marginals.final_iterations=60",
]
LIGHT_EVALUATION = [
    "evaluation.ai_utility=false",
    "evaluation.ml_efficacy=false",
    "evaluation.privacy=false",
    "evaluation.plots=false",
]


def _run(*args: str, hash_seed: str = "random") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "simulations.run", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
    )


def test_mst_publishes_a_table_whose_epsilon_covers_it(tmp_path: Path) -> None:
    out = tmp_path / "mst"
    done = _run(
        "algorithm=mst",
        "dp=end_to_end",
        "dp.target_epsilon=3",
        "output.evaluate=false",
        f"hydra.run.dir={out}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    real = load_dataset("adult").frame
    synthetic = pd.read_csv(out / "synthetic.csv")
    assert list(synthetic.columns) == list(real.columns) and len(synthetic) == len(real)
    metrics = json.loads((out / "metrics.json").read_text())
    privacy = metrics["privacy"]
    assert privacy["guarantee"] == "end_to_end" and privacy["conversion"] == "zcdp-cks20"
    assert 0.999 * 3 <= privacy["epsilon"] <= 3 + 1e-9
    (holder,) = privacy["parties"]
    assert holder["neighbours"] == "add/remove one row" and holder["selections"] == 14
    assert "the number of rows" in privacy["not_covered"][0]
    # What MST measures exactly enough at epsilon 3: every one-way marginal.
    for column in ("sex", "race", "income", "relationship"):
        gap = real[column].value_counts(normalize=True) - synthetic[column].value_counts(
            normalize=True
        )
        assert gap.abs().max() < 0.02, column
    assert synthetic["age"].between(16, 90).all() and synthetic["age"].dtype.kind == "i"
    # Published rows are draws from a model, not the training rows.
    keys = ["age", "fnlwgt", "education", "occupation", "hours-per-week"]
    copied = synthetic[keys].merge(real[keys].drop_duplicates(), how="inner")
    assert len(copied) / len(synthetic) < 0.01
    assert "privacy      centralized: epsilon" in done.stdout
    assert "noisy marginals" in done.stdout and "marginals selected" in done.stdout


def test_aim_run_reports_its_guarantee_in_words(tmp_path: Path) -> None:
    out = tmp_path / "aim"
    done = _run(
        "algorithm=aim",
        "dp=end_to_end",
        "dp.target_epsilon=1",
        *QUICK_AIM,
        *LIGHT_EVALUATION,
        "output.publish_rows=2000",
        f"hydra.run.dir={out}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["synthetic_rows"] == 2000 and metrics["algorithm"] == "aim"
    assert metrics["privacy"]["epsilon"] <= 1 + 1e-9
    assert metrics["evaluation"]["fidelity"]["fd"] > 0
    report = (out / "report.md").read_text()
    assert "end_to_end: every release that reads real rows" in report
    assert "-zCDP:" in report and "Canonne-Kamath-Steinke conversion" in report
    assert "aim: round 1 measured" in done.stdout


def test_the_same_seed_publishes_the_same_table(tmp_path: Path) -> None:
    # Two processes with different string hashing: mbi iterates over sets of column
    # names, which must not decide the table.
    tables = []
    for name, hash_seed in (("first", "1"), ("second", "2")):
        out = tmp_path / name
        done = _run(
            "algorithm=aim",
            "dp=end_to_end",
            "dp.target_epsilon=2",
            *QUICK_AIM,
            "output.evaluate=false",
            "output.publish_rows=1000",
            f"hydra.run.dir={out}",
            hash_seed=hash_seed,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        tables.append(pd.read_csv(out / "synthetic.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert not np.all(tables[0]["age"].to_numpy() == tables[0]["age"].iloc[0])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algorithm=aim"], "algorithm=aim is differentially private by construction"),
        (["algorithm=mst", "dp=dpsgd"], "add dp=end_to_end dp.target_epsilon=<epsilon>"),
        (["algorithm=mst", "dp=end_to_end", "marginals.bins=1"], "marginals.bins must be"),
        (["algorithm=aim", "dp=end_to_end", "marginals.nosuch=1"], "marginals.nosuch"),
        (
            ["algorithm=aim", "dp=end_to_end", "dp.noise_multiplier=2"],
            "remove dp.noise_multiplier and dp.select_by_fd",
        ),
        (
            ["algorithm=mst", "dp=end_to_end", "runtime=simulation"],
            "is centralized and runs only with runtime=inprocess",
        ),
        (
            ["algorithm=mst", "dp=end_to_end", "dataset=spambase"],
            "dp=end_to_end builds every encoder from public metadata",
        ),
    ],
)
def test_bad_settings_get_one_line(tmp_path: Path, overrides: list[str], message: str) -> None:
    done = _run(*overrides, f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr[-2000:]
    assert not (tmp_path / "run" / "synthetic.csv").exists()


def test_the_benchmark_times_one_synthesis(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simulations.bench", "algorithm=mst", "dp=end_to_end",
         f"hydra.run.dir={tmp_path}"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["algorithm"] == "mst" and record["rows"] == 48842
    assert record["selections"] == 14 and record["measurements"] == 29
    assert record["seconds"] > 0 and record["seconds_per_selection"] > 0
