"""``python -m simulations.audit audit.scheme=assd|asif``: paper 000's shadow-model games
with real shadow runs through the strategy and client code, resumed after a lost shadow,
ASIF on the same shadows, on Ray with the same result as one after another, and bad
settings refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from audit_command import run_audit, run_refused_audits

from flwr_vflgan.data.registry import load_dataset
from flwr_vflgan.privacy.vulnerable import vulnerable_records

SMALL = (
    "audit.scheme=assd",
    "train.epochs=2",
    "train.batch_size=8",
    "audit.train_rows=60",
    "audit.shadows=3",
    "audit.train_fraction=0.67",
    "audit.repetitions=3",
)


def _audit(out: Path, *args: str) -> subprocess.CompletedProcess:
    return run_audit(out, *SMALL, *args, timeout=400)


def test_shadows_train_on_the_two_worlds_and_a_lost_shadow_is_trained_again(tmp_path: Path):
    done = _audit(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "assd.json").read_text())
    train = pd.read_parquet(tmp_path / "train.parquet")
    without = pd.read_parquet(tmp_path / "train-without-target.parquet")
    # The target is the row farthest from its nearest neighbour, computed here on the
    # table the audit wrote, and the other world's table lacks exactly that row.
    schema = load_dataset("adult").schema
    target = summary["target"]["row"]
    assert target == vulnerable_records(train, schema, "distance")[0]
    assert len(train) == 60 and without.equals(train.drop(index=target).reset_index(drop=True))
    assert summary["target"]["record"]["age"] == train.loc[target, "age"]
    for world, rows in (("without", 59), ("with", 60)):
        for k in range(3):
            run = tmp_path / "shadows" / f"{world}-{k:03d}"
            config = json.loads((run / "config.json").read_text())
            assert config["data"]["source"].endswith(
                "train.parquet" if world == "with" else "train-without-target.parquet"
            )
            assert len(pd.read_csv(run / "synthetic.csv")) == rows
    seeds = {
        json.loads((p / "config.json").read_text())["seed"]
        for p in (tmp_path / "shadows").iterdir()
    }
    assert len(seeds) == 6  # a fresh seed per shadow
    for kind in ("naive", "correlation"):
        attack = summary["attacks"][kind]
        assert len(attack["aucs"]) == 3 and 0 <= attack["auc_mean"] <= 1
        assert (attack["train_tables_per_world"], attack["test_tables_per_world"]) == (2, 1)
    assert "assd: 6/6 shadows trained" in done.stdout and "naive AUC" in done.stdout
    assert "| naive |" in (tmp_path / "assd.md").read_text()
    assert (tmp_path / "assd-roc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    kept = (tmp_path / "shadows" / "with-000" / "synthetic.csv").stat().st_mtime_ns
    lost = tmp_path / "shadows" / "without-001"
    lost_table = (lost / "synthetic.csv").read_bytes()
    for path in sorted(lost.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    again = _audit(tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "5 of 6 shadows already trained" in again.stdout
    assert "assd: 1/1 shadows trained" in again.stdout
    assert (tmp_path / "shadows" / "with-000" / "synthetic.csv").stat().st_mtime_ns == kept
    assert (lost / "synthetic.csv").read_bytes() == lost_table  # the same seed, the same table
    assert json.loads((tmp_path / "assd.json").read_text())["attacks"] == summary["attacks"]

    # ASIF reads the same shadows' discriminators: nothing trains again.
    features = _audit(tmp_path, "audit.scheme=asif")
    assert features.returncode == 0, features.stderr[-3000:]
    assert "asif: 6 of 6 shadows already trained" in features.stdout
    asif = json.loads((tmp_path / "asif.json").read_text())
    assert asif["target"] == summary["target"] and asif["scheme"] == "asif"
    assert set(asif["attacks"]) == {
        f"party {p} {kind}" for p in (0, 1) for kind in ("naive", "correlation")
    }
    assert all(0 <= r["auc_mean"] <= 1 for r in asif["attacks"].values())
    assert (tmp_path / "assd.json").exists() and "| party 1 naive |" in (
        tmp_path / "asif.md"
    ).read_text()

    other = _audit(tmp_path, "audit.target=outliers", "audit.train_rows=50")
    assert other.returncode == 2
    assert "holds an audit of another training table" in other.stderr


def test_ray_trains_the_same_shadows_as_one_process(tmp_path: Path):
    plain = _audit(tmp_path / "plain", "audit.shadows=2", "audit.train_fraction=0.5")
    assert plain.returncode == 0, plain.stderr[-3000:]
    ray = _audit(
        tmp_path / "ray",
        "audit.shadows=2",
        "audit.train_fraction=0.5",
        "audit.executor=ray",
        "audit.jobs=2",
    )
    assert ray.returncode == 0, ray.stderr[-3000:]
    assert "assd: 4/4 shadows trained" in ray.stdout
    for world in ("without", "with"):
        for k in range(2):
            name = Path("shadows") / f"{world}-{k:03d}" / "synthetic.csv"
            assert (tmp_path / "plain" / name).read_bytes() == (
                tmp_path / "ray" / name
            ).read_bytes()
    results = [json.loads((tmp_path / d / "assd.json").read_text()) for d in ("plain", "ray")]
    assert results[0]["attacks"] == results[1]["attacks"]


def test_bad_shadow_settings_get_one_line_and_status_2(tmp_path: Path):
    done = _audit(tmp_path / "bad", "audit.shadows=1")  # the real command line
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "audit.shadows must be an integer >= 2" in lines[0], lines
    baselines = ("audit.scheme=baselines",)
    refused = {
        (): [
            ("audit.target=far", "audit.target must be one of ['distance', 'outliers']"),
            ("audit.feature_maps=[pca]", "audit.feature_maps must list some of"),
            ("audit.executor=dask", "unknown audit.executor 'dask'"),
            ("audit.target=60", "audit.target=60 is not a row of the 60-row table"),
            ("audit.train_fraction=0.9", "leaves 3 tables per world to train the adversary and 0"),
        ],
        baselines: [
            ("audit.train_rows=null", "audit.scheme=baselines trains on audit.train_rows rows"),
            ("audit.reference_rows=100000", "and the dataset has 48842"),
            ("audit.attacks=[logan_9]", "audit.attacks must list some of"),
        ],
        ("audit.scheme=asif",): [("output.checkpoint=false", "keep output.checkpoint=true")],
        ("algorithm=wgan_gp",): [
            ("audit.scheme=asif", "algorithm=wgan_gp has none: use audit.scheme=assd")
        ],
    }
    cases = [
        (lead, override, message) for lead, rows in refused.items() for override, message in rows
    ]
    commands = [[*SMALL, *lead, override] for lead, override, _ in cases]
    results = run_refused_audits(tmp_path / "bad", commands)
    for (_, override, message), (status, stderr) in zip(cases, results, strict=True):
        lines = stderr.strip().splitlines()
        assert status == 2 and len(lines) == 1 and message in lines[0], (override, stderr[-2000:])


def test_the_baseline_attacks_judge_the_members_of_one_real_run(tmp_path: Path):
    done = _audit(tmp_path, "audit.scheme=baselines", "audit.reference_rows=300")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "baselines.json").read_text())
    assert list(summary["attacks"]) == [
        "logan_0", "logan_d1", "mc", "gan_leaks_0", "gan_leaks_cal", "domias",
    ]  # fmt: skip
    assert summary["members"] == 60 and summary["reference_rows"] == 300
    for result in summary["attacks"].values():
        assert 0 <= result["auc"] <= 1 and 0 <= result["accuracy"] <= 1
    # The run trained on exactly the members (train.parquet) and published its table.
    run = json.loads((tmp_path / "run" / "config.json").read_text())
    assert run["data"]["source"].endswith("train.parquet")
    assert len(pd.read_parquet(tmp_path / "train.parquet")) == 60
    assert "| this run |" in (tmp_path / "baselines.md").read_text()
    assert (tmp_path / "baselines-roc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "baselines: AUC LOGAN 0" in done.stdout


def test_the_audit_tables_set_every_cell_beside_the_paper(tmp_path: Path):
    done = subprocess.run(
        [
            sys.executable, "-m", "simulations.audit_tables", f"tables.out_dir={tmp_path}",
            f"hydra.run.dir={tmp_path / 'hydra'}", "tables.epsilons=[10]", "tables.adult_rows=60",
            "tables.housing_rows=[60]", "tables.housing_epochs=2", "tables.housing_batch_size=8",
            "train.epochs=2", "train.batch_size=8", "audit.shadows=3",
            "audit.train_fraction=0.67", "audit.repetitions=2", "audit.reference_rows=300",
        ],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "tables.md").read_text()
    for heading in ("## Table 2 (ASSD", "## Table 4 (ASIF", "## Table 3 (Housing"):
        assert heading in text
    assert "| DP, epsilon 10 | " in text and "| no DP party 1 | " in text
    assert "| 60 / 300 | " in text and "| paper 000 | 0.65 (0.09)" in text
    tables = json.loads((tmp_path / "tables.json").read_text())
    assert set(tables["adult"]) == {"assd", "asif"} and set(tables["adult"]["assd"]) == {
        "none",
        "10",
    }
    # ASIF read the shadows ASSD trained: each cell's directory holds one set.
    cell = tmp_path / "adult" / "dp-10" / "outliers"
    assert len(list((cell / "shadows").iterdir())) == 6
    assert (cell / "assd.json").exists() and (cell / "asif.json").exists()
