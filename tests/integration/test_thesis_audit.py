"""``python -m simulations.audit audit.scheme=thesis_mia``: paper 004's attack (Figure
5.7) on one real VDGAN run through the strategy and client code, and bad settings
refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from audit_command import run_audit

from flwr_vflgan.data.registry import load_dataset
from flwr_vflgan.privacy.thesis_mia import outlier_rows

SMALL = (
    "audit.scheme=thesis_mia",
    "algorithm=vdgan",
    "train.epochs=2",
    "train.batch_size=32",
    "audit.train_rows=300",
    "audit.targets=40",
    "audit.repetitions=3",
    "output.publish_rows=600",
)


def test_the_attack_judges_outlier_and_ordinary_targets_of_one_real_run(tmp_path: Path):
    done = run_audit(tmp_path, *SMALL)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "thesis_mia.json").read_text())
    assert summary["algorithm"] == "vdgan" and summary["scheme"] == "thesis_mia"
    assert (summary["train_rows"], summary["targets"], summary["synthetic_rows"]) == (300, 40, 600)
    assert [r["outlier_share"] for r in summary["results"]] == [0.0, 0.5, 1.0]
    for result in summary["results"]:
        assert len(result["accuracies"]) == 3
        assert all(0 <= a <= 1 for a in result["accuracies"])
        assert np.isclose(result["accuracy_mean"], np.mean(result["accuracies"]))
    # The run trained on the 300 rows the audit wrote, and its outliers are the ones
    # the summary counts, found again here on that table.
    train = pd.read_parquet(tmp_path / "train.parquet")
    assert len(train) == 300
    assert summary["outliers"] == int(outlier_rows(train, load_dataset("adult").schema).sum())
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"]["source"].endswith("train.parquet")
    assert "| 100% | " in (tmp_path / "thesis_mia.md").read_text()
    assert (tmp_path / "thesis_mia.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "thesis_mia: accuracy 0% outliers" in done.stdout
    # A second call reuses the finished run and draws the same targets.
    published = (tmp_path / "run" / "synthetic.csv").stat().st_mtime_ns
    again = run_audit(tmp_path, *SMALL)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "thesis_mia.json").read_text())["results"] == summary["results"]
    # Matched unseen targets: the same run, judged again.
    matched = run_audit(tmp_path, *SMALL, "audit.unseen_outliers=true")
    assert matched.returncode == 0, matched.stderr[-3000:]
    assert (tmp_path / "run" / "synthetic.csv").stat().st_mtime_ns == published
    assert json.loads((tmp_path / "thesis_mia.json").read_text())["unseen_outliers"] is True
    assert "with the same share of outliers" in (tmp_path / "thesis_mia.md").read_text()


def test_bad_thesis_settings_get_one_line_and_status_2(tmp_path: Path):
    for override, message in (
        ("audit.train_rows=20", "give audit.train_rows=<n> of at least 40"),
        ("audit.outlier_shares=[2]", "audit.outlier_shares must list shares in [0, 1]"),
        ("audit.train_rows=48840", "needs audit.targets=40 unseen ones; the dataset has 48842"),
    ):
        done = run_audit(tmp_path / "bad", *SMALL, override)
        assert done.returncode == 2, (override, done.stderr[-2000:])
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], lines
