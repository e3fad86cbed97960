"""``python -m simulations.audit``: canaries in or out on a coin, one real training run
through the strategy and client code, and the claimed epsilon beside the audited bound."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
from audit_command import run_audit

SMALL = (
    "train.epochs=2",
    "train.batch_size=16",
    "audit.train_rows=100",
    "audit.canaries=60",
    "audit.guesses=[5,10]",
)


def _audit(out: Path, *args: str) -> subprocess.CompletedProcess:
    return run_audit(out, *SMALL, *args, timeout=300)


def test_an_audit_trains_on_the_included_canaries_and_bounds_every_score(tmp_path: Path):
    done = _audit(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "audit.json").read_text())
    assert set(summary["audits"]) == {"table", "critic"}
    assert summary["claimed_epsilon"] is None and summary["guarantee"] is None
    canaries = pd.read_parquet(tmp_path / "canaries.parquet")
    included = canaries.pop("_included").to_numpy()
    assert len(canaries) == 60 and 0 < included.sum() < 60
    train = pd.read_parquet(tmp_path / "train.parquet")
    assert len(train) == 100 + included.sum() == summary["train_rows"]
    # Exactly the included canaries are in the training table.
    merged = canaries.merge(train.drop_duplicates(), how="left", indicator=True)
    assert ((merged["_merge"] == "both").to_numpy() == included).all()
    for result in summary["audits"].values():
        assert result["canaries"] == 60 and result["included"] == included.sum()
        assert result["guesses"] in (10, 20) and 0 <= result["correct"] <= result["guesses"]
        assert result["epsilon_lower_bound"] >= 0
    assert "critic epsilon >= " in done.stdout and "claimed none" in done.stdout
    # A second invocation reuses the finished training run and scores it again.
    trained = (tmp_path / "run" / "metrics.json").stat().st_mtime_ns
    again = _audit(tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "run" / "metrics.json").stat().st_mtime_ns == trained
    assert json.loads((tmp_path / "audit.json").read_text())["audits"] == summary["audits"]


def test_a_dp_audit_sets_the_claim_and_its_guarantee_beside_the_bound(tmp_path: Path):
    done = _audit(tmp_path, "dp=end_to_end", "dp.target_epsilon=10", "audit.scores=[table]")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "audit.json").read_text())
    assert summary["guarantee"] == "end_to_end" and 0 < summary["claimed_epsilon"] <= 10
    assert set(summary["audits"]) == {"table"}
    assert "| table |" in (tmp_path / "audit.md").read_text()


def test_bad_audit_settings_get_one_line_and_status_2(tmp_path: Path):
    for override, message in (
        ("audit.guesses=[900]", "audit.guesses must list counts between 1 and"),
        ("audit.scores=[nosuch]", "audit.scores must list some of ['table', 'critic']"),
    ):
        done = _audit(tmp_path / "bad", override)
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], lines
    wrong = _audit(tmp_path / "wgan", "algorithm=wgan_gp", "audit.scores=[critic]")
    assert wrong.returncode == 2 and "use audit.scores=[table]" in wrong.stderr
    assert not (tmp_path / "wgan" / "train.parquet").exists()


def test_an_audit_directory_of_another_table_is_refused(tmp_path: Path):
    assert _audit(tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.parquet")}
    other = _audit(tmp_path, "audit.seed=7")
    assert other.returncode == 2, other.stderr[-2000:]
    assert "holds an audit of another training table" in other.stderr
    # The first audit's tables are left as they were.
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.parquet")} == before


SERIES = (
    "algorithm=vflgan_ts",
    "dataset=sine2",
    "train.epochs=2",
    "audit.train_rows=100",
    "audit.canaries=40",
    "audit.guesses=[5,10]",
    "series.model.generator_hidden=16",
    "series.model.attribute_hidden=[8,4]",
    "series.model.extractor_hidden=[4]",
    "series.model.shared_hidden=[8,4]",
    "model.feature_dim=8",
)


def test_a_series_audit_trains_on_the_included_real_series_and_bounds_both_scores(
    tmp_path: Path,
):
    from flwr_vflgan.data.series import load_series
    from flwr_vflgan.data.series_files import read_series_file

    done = run_audit(tmp_path, *SERIES, "dp=vflgan_gaussian", "dp.target_epsilon=10")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "audit.json").read_text())
    assert summary["algorithm"] == "vflgan_ts" and set(summary["audits"]) == {"table", "critic"}
    assert summary["guarantee"] == "first_layer" and 0 < summary["claimed_epsilon"] <= 10
    canaries = pd.read_parquet(tmp_path / "canaries.parquet")
    included = canaries.groupby("series", sort=False)["_included"].first().to_numpy()
    assert len(included) == 40 and 0 < included.sum() < 40
    train, channels, _ = read_series_file(
        tmp_path / "train.parquet", id_column="series", time_column="t"
    )
    assert len(train) == 100 + included.sum() == summary["train_rows"]
    # The canaries are series of the dataset, and exactly the included ones trained.
    real = load_series("sine2", 2).values.reshape(2048, -1)
    flat = canaries.drop(columns=["series", "t", "_included"]).to_numpy(np.float32)
    canary_series = flat.reshape(40, 800, 2).transpose(0, 2, 1).reshape(40, -1)
    trained = {row.tobytes() for row in train.reshape(len(train), -1)}
    assert all((real == row).all(axis=1).any() for row in canary_series)
    assert [row.tobytes() in trained for row in canary_series] == included.tolist()
    for name in ("table", "critic"):
        result = summary["audits"][name]
        assert result["canaries"] == 40 and result["epsilon_lower_bound"] >= 0
        assert f"{name} epsilon >= " in done.stdout
    assert channels == ("x11", "x21")
    # The critic read the run's discriminators from its checkpoints.
    assert list((tmp_path / "run" / "checkpoints").glob("server-*.npz"))
    many = run_audit(tmp_path / "many", *SERIES[:-6], "audit.canaries=2048", "audit.guesses=[5]")
    assert many.returncode == 2 and "choose at most 2047" in many.stderr
