"""Paper 004's measures over epsilon: which runs of an out dir count, as which method,
and the table and figure made of them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flwr_vflgan.runtime.party_data import DataSpec, load_full_table
from flwr_vflgan.simulations import reproduce_thesis as thesis


def _run(
    root: Path,
    name: str,
    variant: str,
    mechanism: str | None,
    epsilon: float | None,
    k4: float,
    auc: float,
    seed: int = 0,
    measured: bool = True,
    teachers: int = 10,
    epochs: int = 30,
) -> Path:
    run_dir = root / "adult_thesis" / name / f"seed{seed}"
    run_dir.mkdir(parents=True)
    dp: dict[str, Any] = {
        "mechanism": mechanism,
        "target_epsilon": epsilon,
        "pate_teachers": teachers,
    }
    algorithm = {"variant": variant, "dp": dp, "train": {"epochs": epochs}}
    config = {"algorithm": algorithm, "seed": seed, "data": {"source": "adult", "rows": 300}}
    (run_dir / "config.json").write_text(json.dumps(config))
    avd = {"k2_avd": k4 / 2, "k4_avd": k4, "k6_avd": k4 * 1.5, "dcm": k4 / 4}
    ml = {"mlp_synthetic_auc": auc, "mlp_real_auc": 0.9}
    evaluation = {"avd": avd, "ml_efficacy": ml} if measured else {"avd": {}}
    (run_dir / "metrics.json").write_text(json.dumps({"evaluation": evaluation}))
    return run_dir


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    _run(tmp_path, "wgan_gp", "wgan_gp", None, None, 0.30, 0.88)
    _run(tmp_path, "vdgan", "vdgan", "none", None, 0.40, 0.85)
    _run(tmp_path, "dplt-dp1", "dplt", "end_to_end", 1.0, 0.50, 0.70)
    _run(tmp_path, "dplt-dp1", "dplt", "end_to_end", 1.0, 0.60, 0.60, seed=1)
    _run(tmp_path, "dplt-dp8", "dplt", "end_to_end", 8.0, 0.45, 0.80)
    _run(tmp_path, "vdgan-dp1-dpsgd", "vdgan", "dpsgd", 1.0, 0.70, 0.65)
    _run(tmp_path, "vdgan-dp1-pate", "vdgan", "pate", 1.0, 0.80, 0.55)
    # Not the thesis's: paper 000's mechanism, and a run evaluated without the measures.
    _run(tmp_path, "vdgan-dp1-vflgan_gaussian", "vdgan", "vflgan_gaussian", 1.0, 0.1, 0.99)
    _run(tmp_path, "vdgan-dp8-dpsgd", "vdgan", "dpsgd", 8.0, 0.1, 0.99, measured=False)
    return tmp_path


def test_runs_are_grouped_by_the_thesiss_method_and_epsilon(out_dir: Path) -> None:
    found = thesis.collect(out_dir / "adult_thesis")
    assert list(found) == [
        ("Center-NoDP", None, 30),
        ("VD-NoDP", None, 30),
        ("DPLT", None, 30),
        ("VDGAN-DPSGD", None, 30),
        ("VDGAN-PATE", 10, 30),
    ]
    dplt, dpsgd = found[("DPLT", None, 30)], found[("VDGAN-DPSGD", None, 30)]
    assert set(dplt) == {1.0, 8.0} and len(dplt[1.0]) == 2
    assert set(dpsgd) == {1.0}  # the unmeasured epsilon 8 run is left out
    assert set(found[("Center-NoDP", None, 30)]) == {None}
    assert found[("VDGAN-PATE", 10, 30)][1.0][0]["mlp_auc"] == 0.55
    assert thesis.label(("VDGAN-PATE", 10, 30)) == "VDGAN-PATE, 10 teachers"


def test_a_run_without_its_files_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "x" / "seed0").mkdir(parents=True)
    assert thesis.run_measures(tmp_path / "x" / "seed0") is None
    (tmp_path / "x" / "seed0" / "config.json").write_text("{not json")
    (tmp_path / "x" / "seed0" / "metrics.json").write_text("{}")
    assert thesis.run_measures(tmp_path / "x" / "seed0") is None


def test_the_table_has_a_row_per_method_and_epsilon_with_the_seed_spread(out_dir: Path) -> None:
    text = thesis.render("adult_thesis", thesis.collect(out_dir / "adult_thesis"))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split(" | ")[:4] for r in rows[1:]] == [
        ["| Center-NoDP", "30", "no DP", "1"],
        ["| VD-NoDP", "30", "no DP", "1"],
        ["| DPLT", "30", "1", "2"],
        ["| DPLT", "30", "8", "1"],
        ["| VDGAN-DPSGD", "30", "1", "1"],
        ["| VDGAN-PATE, 10 teachers", "30", "1", "1"],
    ]
    dplt = rows[3].split(" | ")
    # 4-AVD of the two seeds 0.50 and 0.60: mean 0.55, sample deviation 0.0707.
    assert dplt[5] == "0.550 ± 0.071" and dplt[8].startswith("0.650 ± 0.071")
    assert "Fig. 5.2" in text and "TRTR): MLP AUC 0.900 ± 0.000, AdaBoost AUC -" in text


def _publish(run_dir: Path, copy: bool = False) -> None:
    """A synthetic.csv of the run's 300 training rows: each column shuffled apart (a
    table that keeps no record), or the rows themselves (``copy``)."""
    frame = load_full_table(DataSpec(source="adult", rows=300))[0].frame
    rng = np.random.default_rng(0)
    if not copy:
        frame = frame.apply(lambda column: column.to_numpy()[rng.permutation(len(column))])
    frame.to_csv(run_dir / "synthetic.csv", index=False)


def test_the_figures_and_table_are_written_beside_table_1(out_dir: Path) -> None:
    for name in ("dplt-dp1", "vdgan-dp1-dpsgd", "vdgan-dp1-pate"):
        _publish(out_dir / "adult_thesis" / name / "seed0")
    written = thesis.write_paper004(out_dir, ["adult_thesis", "german_credit"])
    names = ["paper004_adult_thesis.md", "paper004_adult_thesis.png"]
    figures = ["paper004_adult_thesis_maps.png", "paper004_adult_thesis_mia.png"]
    assert written == [out_dir / n for n in [*names, *figures]]
    assert all(p.stat().st_size > 0 for p in written)
    assert not list(out_dir.glob("*.tmp*"))


def test_the_maps_are_the_real_table_and_each_dp_method_at_epsilon_1(out_dir: Path) -> None:
    measured = thesis.measured_runs(out_dir / "adult_thesis")
    runs = thesis.correlation_runs(measured, 1.0)
    assert [name for name, _ in runs] == ["DPLT", "VDGAN-DPSGD", "VDGAN-PATE, 10 teachers"]
    assert thesis.plot_correlations(measured, out_dir / "x.png", 2.0) is None


def test_the_teacher_figure_needs_two_teacher_counts(out_dir: Path) -> None:
    found = thesis.collect(out_dir / "adult_thesis")
    assert thesis.plot_teachers("adult_thesis", found, out_dir / "t.png") is None
    for teachers in (25, 50):
        for epsilon in (1.0, 8.0):
            _run(
                out_dir,
                f"vdgan-dp{epsilon:g}-pate-t{teachers}-e5",
                "vdgan",
                "pate",
                epsilon,
                0.7,
                0.6,
                teachers=teachers,
                epochs=5,
            )
    found = thesis.collect(out_dir / "adult_thesis")
    assert ("VDGAN-PATE", 25, 5) in found and thesis.main_epochs(found) == 30
    path = thesis.plot_teachers("adult_thesis", found, out_dir / "t.png")
    assert path is not None and path.stat().st_size > 0


def test_missing_measures_of_one_seed_do_not_poison_the_mean(tmp_path: Path) -> None:
    _run(tmp_path, "dplt-dp1", "dplt", "end_to_end", 1.0, 0.5, 0.7)
    run = _run(tmp_path, "dplt-dp1", "dplt", "end_to_end", 1.0, 0.7, 0.7, seed=1)
    metrics = json.loads((run / "metrics.json").read_text())
    del metrics["evaluation"]["avd"]["k6_avd"]
    (run / "metrics.json").write_text(json.dumps(metrics))
    (runs,) = thesis.collect(tmp_path / "adult_thesis")[("DPLT", None, 30)].values()
    assert math.isnan(runs[1].get("k6_avd", math.nan))
    assert thesis._cell([r.get("k6_avd", math.nan) for r in runs]) == "0.750 ± 0.000"


def test_the_attack_finds_a_copied_training_table_and_not_a_shuffled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copied = _run(tmp_path, "wgan_gp", "wgan_gp", None, None, 0.3, 0.8)
    shuffled = _run(tmp_path, "vdgan", "vdgan", None, None, 0.3, 0.8)
    _publish(copied, copy=True)
    _publish(shuffled)
    config = json.loads((copied / "config.json").read_text())
    leaky = thesis.run_mia(copied, config)
    assert set(leaky) == {"mia_0", "mia_50", "mia_100", "mia_50_matched"}
    assert leaky["mia_0"] > 0.8 and leaky["mia_50_matched"] > 0.8
    blind = thesis.run_mia(shuffled, config)
    assert abs(blind["mia_0"] - 0.5) < 0.15 and abs(blind["mia_50_matched"] - 0.5) < 0.15
    # Cached: a second call reads thesis_mia.json and attacks nothing.
    with monkeypatch.context() as patched:
        patched.setattr(thesis, "thesis_mia", lambda *a, **k: pytest.fail("attacked again"))
        assert thesis.run_mia(copied, config) == leaky
    # A run trained again publishes another table: the cache no longer holds.
    _publish(copied)
    again = thesis.run_mia(copied, config)
    assert again["mia_0"] < 0.8
    # measured as the table's columns, with the run's other measures
    (group_runs,) = thesis.collect(tmp_path / "adult_thesis")[("Center-NoDP", None, 30)].values()
    assert group_runs[0]["mia_0"] == again["mia_0"]


def test_a_run_of_a_whole_table_is_not_attacked(tmp_path: Path) -> None:
    run = _run(tmp_path, "wgan_gp", "wgan_gp", None, None, 0.3, 0.8)
    _publish(run)
    assert thesis.run_mia(run, {"data": {"source": "adult"}}) == {}
    assert not (run / "thesis_mia.json").exists()


def test_adaboost_is_read_when_the_run_was_evaluated_with_it(tmp_path: Path) -> None:
    run = _run(tmp_path, "dplt-dp1", "dplt", "end_to_end", 1.0, 0.5, 0.7)
    metrics = json.loads((run / "metrics.json").read_text())
    ml = metrics["evaluation"]["ml_efficacy"]
    ml.update(adaboost_synthetic_auc=0.66, adaboost_real_auc=0.91)
    (run / "metrics.json").write_text(json.dumps(metrics))
    found = thesis.collect(tmp_path / "adult_thesis")
    assert found[("DPLT", None, 30)][1.0][0]["adaboost_auc"] == 0.66
    assert "AdaBoost AUC 0.910 ± 0.000" in thesis.render("adult_thesis", found)
