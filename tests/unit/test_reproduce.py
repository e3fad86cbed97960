"""simulations.reproduce: the Table-1 summary, its markdown, and which runs are reused;
paper 001's VT-GAN grid and table."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from flwr_vflgan.evaluation import EvaluationConfig
from flwr_vflgan.metrics.similarity import association_difference
from flwr_vflgan.simulations import reproduce_vtgan
from flwr_vflgan.simulations.config import ReproduceConfig, RunSpec, register_configs, to_run_spec
from flwr_vflgan.simulations.families import family_of
from flwr_vflgan.simulations.reproduce import compose_per_algorithm, run_specs, table_groups
from flwr_vflgan.simulations.reproduce_vflgan import (
    PAPER_TABLE1,
    _mean_spread,
    dataset_name,
    finished_metrics,
    render_table,
    summarise,
)


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


@pytest.mark.parametrize(("algorithm", "reused"), [("vflgan", True), ("vtgan", False)])
def test_another_familys_new_default_does_not_discard_a_finished_run(
    tmp_path: Path, algorithm: str, reused: bool
) -> None:
    """A run finished before VT-GAN's point-mass share was saved (no key) is still this
    VFLGAN run; a VT-GAN run of then encoded otherwise and trains again."""
    spec = _spec(tmp_path, algorithm, 0)
    spec.run_dir.mkdir(parents=True)
    saved = spec.algorithm.to_dict()
    del saved["vtgan"]["point_mass_share"]
    config = {"algorithm": saved, "data": json.loads(spec.data.to_json()), "seed": 0}
    (spec.run_dir / "config.json").write_text(json.dumps(config))
    (spec.run_dir / "synthetic.csv").write_text("a\n1\n")
    (spec.run_dir / "metrics.json").write_text(json.dumps({"seed": 0}))
    assert (finished_metrics(spec) is not None) is reused


def test_dataset_names_and_bad_grids() -> None:
    assert dataset_name("adult") == "adult"
    assert dataset_name("/data/loans.csv.gz") == "loans"
    with pytest.raises(ValueError, match=r"unknown reproduce.algorithms \[.gafx.\]"):
        ReproduceConfig(algorithms=("gafx",))
    with pytest.raises(ValueError, match=r"reproduce\.gafm_parties must be distinct"):
        ReproduceConfig(gafm_parties=(1, 1))
    with pytest.raises(ValueError, match="papers 001 and 002 train without DP"):
        ReproduceConfig(algorithms=("gafm",), non_dp=False, dp_epsilons=(10.0,))
    with pytest.raises(ValueError, match=r"reproduce\.seeds must not be empty"):
        ReproduceConfig(seeds=())
    with pytest.raises(ValueError, match=r"reproduce\.jobs must be >= 1, got 0"):
        ReproduceConfig(jobs=0)


# Paper 001's rows: VT-GAN per client count next to the centralized CTGAN baseline.


def _grid(rc: ReproduceConfig, overrides: tuple[str, ...] = ()) -> list[RunSpec]:
    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        return run_specs(compose_per_algorithm(rc, list(overrides)), rc)


def test_vtgan_grid_trains_ctgan_once_per_seed_and_vtgan_per_client_count() -> None:
    rc = ReproduceConfig(
        datasets=("adult",),
        algorithms=("ctgan", "vtgan"),
        seeds=(0, 1),
        n_parties=(3, 2),
        out_dir="out",
    )
    specs = _grid(rc)
    runs = [(s.algorithm.variant.value, s.data.n_parties, s.seed, s.run_dir) for s in specs]
    assert runs == [
        ("ctgan", 2, 0, Path("out/adult/ctgan/seed0")),
        ("ctgan", 2, 1, Path("out/adult/ctgan/seed1")),
        ("vtgan", 3, 0, Path("out/adult/vtgan-D2_0-G0_2-3parties/seed0")),
        ("vtgan", 3, 1, Path("out/adult/vtgan-D2_0-G0_2-3parties/seed1")),
        ("vtgan", 2, 0, Path("out/adult/vtgan-D2_0-G0_2-2parties/seed0")),
        ("vtgan", 2, 1, Path("out/adult/vtgan-D2_0-G0_2-2parties/seed1")),
    ]
    for spec in specs:
        train = spec.algorithm.train
        # conf/algorithm/{ctgan,vtgan}.yaml's CTGAN settings, reproduce.vtgan_epochs' 100.
        assert (train.batch_size, train.lr, train.betas, train.gp_weight) == (
            500, 2e-4, (0.5, 0.9), 10.0,
        )  # fmt: skip
        assert train.epochs == 100
        assert spec.evaluation.statistics and spec.evaluation.ml_efficacy
        assert not spec.evaluation.ai_utility


def test_vtgan_grid_follows_the_command_line_and_the_vtgan_settings() -> None:
    rc = ReproduceConfig(
        datasets=("german_credit",), algorithms=("ctgan", "vtgan"), seeds=(4,), n_parties=(3,)
    )
    overrides = ("train.batch_size=100", "vtgan.g_server_blocks=2", "vtgan.g_client_blocks=0")
    central, vertical = _grid(rc, overrides)
    assert central.algorithm.train.batch_size == vertical.algorithm.train.batch_size == 100
    assert vertical.algorithm.train.epochs == 100  # not in vtgan_epochs: vtgan.yaml's epochs
    assert vertical.run_dir == Path("runs/reproduce/german_credit/vtgan-D2_0-G2_0-3parties/seed4")
    # CTGAN's own run keeps partition.n_parties whatever the counts, so it is never retrained.
    assert central.data.n_parties == 2 and vertical.data.n_parties == 3
    assert central.run_dir == Path("runs/reproduce/german_credit/ctgan/seed4")


def test_paper000_runs_are_configured_as_before_beside_vtgan_rows() -> None:
    """The Table 1 grid keeps its recipe: the reproduce tree with the variant swapped."""
    rc = ReproduceConfig(
        datasets=("german_credit",),
        algorithms=("wgan_gp", "vtgan", "vflgan"),
        seeds=(1,),
        n_parties=(3,),
        out_dir="out",
    )
    specs = _grid(rc, ("train.lr=0.001",))
    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        cfg = compose("reproduce", overrides=["train.lr=0.001"])
    base = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "reproduce"])
    for algorithm, spec in (("wgan_gp", specs[0]), ("vflgan", specs[2])):
        override = {
            "seed": 1,
            "algorithm": {"variant": algorithm},
            "dataset": {"source": "german_credit"},
            "train": {"epochs": 300},
        }
        # The one model setting of an algorithm group (vflgan.yaml's local head; the base
        # tree, composed with the default algorithm=vflgan, carries it for wgan_gp too).
        override["model"] = {"local_head_hidden": [128] if algorithm == "vflgan" else []}
        run_dir = Path("out/german_credit") / algorithm / "seed1"
        assert spec == to_run_spec(OmegaConf.merge(base, override), run_dir)
        assert spec.data.n_parties == 2 and spec.evaluation.cv_folds == 10
    assert specs[1].data.n_parties == 3 and specs[1].algorithm.train.lr == 0.001


def _paper001_metrics(seed: int, avg_client: float, f1: float, wall: float) -> dict:
    statistics = {
        "avg_jsd": 0.1,
        "avg_wd": 0.02,
        "diff_corr": 3.0,
        "diff_corr_avg_client": avg_client,
        "diff_corr_across_client": 2.0,
    }
    utility = {"accuracy_difference": 0.1, "f1_difference": f1, "auc_difference": None}
    return {
        "seed": seed,
        "wall_seconds": wall,
        "history": [{"cond_loss": 2.4}, {"cond_loss": 2.0 + seed}],
        "evaluation": {
            "statistics": statistics,
            "ml_efficacy": utility,
            "seconds": {"statistics": 1.0, "ml_efficacy": 29.0},
        },
    }


def test_vtgan_table_lists_ctgan_under_every_client_count_with_the_f1_gap() -> None:
    rc = ReproduceConfig(
        datasets=("adult",), algorithms=("ctgan", "vtgan"), seeds=(0, 1), n_parties=(2, 3)
    )
    specs = _grid(rc)
    ctgan, vtgan2, vtgan3 = specs[:2], specs[2:4], specs[4:]
    results = []
    for spec in ctgan:  # what centralized_rows hands on: one spec per client count
        for count, avg_client in ((2, 1.0), (3, 0.5)):
            data = replace(spec.data, n_parties=count)
            metrics = _paper001_metrics(spec.seed, avg_client, 0.10 + 0.02 * spec.seed, 600.0)
            results.append((replace(spec, data=data), metrics))
    results += [(s, _paper001_metrics(s.seed, 1.5, 0.15, 900.0 + 60 * s.seed)) for s in vtgan2]
    results += [(s, _paper001_metrics(s.seed, 0.8, 0.20, 1200.0)) for s in vtgan3]
    table = reproduce_vtgan.summarise(results)
    assert list(table["adult"]) == ["2", "3"]
    central, vertical = table["adult"]["2"]["ctgan"], table["adult"]["2"]["vtgan"]
    assert central["seeds"] == [0, 1] and central["epochs"] == 100
    assert central["f1_difference"] == pytest.approx((0.11, math.sqrt(0.0002)))
    assert table["adult"]["3"]["ctgan"]["diff_corr_avg_client"] == (0.5, 0.0)
    assert central["auc_difference"][0] != central["auc_difference"][0]  # None -> NaN
    assert vertical["train_seconds"] == pytest.approx((930.0, math.sqrt(1800.0)))
    assert vertical["evaluation_seconds"] == (30.0, 0.0)
    assert vertical["final_cond_loss"] == pytest.approx((2.5, math.sqrt(0.5)))
    assert vertical["partition"] == "D^2_0 G^0_2" and central["partition"] is None
    text = reproduce_vtgan.render(table, rc, EvaluationConfig(classifiers=("decision_tree",)))
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[1:] == [
        "| CTGAN (centralized) | 2 | 0.100 ± 0.000 | 0.020 ± 0.000 | 3.000 ± 0.000 | 1.000 ± 0.000 "
        "| 2.000 ± 0.000 | 0.100 ± 0.000 | 0.110 ± 0.014 | - | 10.0 ± 0.0 |",
        "| VT-GAN D^2_0 G^0_2 | 2 | 0.100 ± 0.000 | 0.020 ± 0.000 | 3.000 ± 0.000 | 1.500 ± 0.000 "
        "| 2.000 ± 0.000 | 0.100 ± 0.000 | 0.150 ± 0.000 | - | 15.5 ± 0.7 |",
        "| CTGAN (centralized) | 3 | 0.100 ± 0.000 | 0.020 ± 0.000 | 3.000 ± 0.000 | 0.500 ± 0.000 "
        "| 2.000 ± 0.000 | 0.100 ± 0.000 | 0.110 ± 0.014 | - | 10.0 ± 0.0 |",
        "| VT-GAN D^2_0 G^0_2 | 3 | 0.100 ± 0.000 | 0.020 ± 0.000 | 3.000 ± 0.000 | 0.800 ± 0.000 "
        "| 2.000 ± 0.000 | 0.100 ± 0.000 | 0.200 ± 0.000 | - | 20.0 ± 0.0 |",
    ]
    assert "## adult (100 epochs)" in text and "seeds [0, 1]" in text
    assert "2 clients +0.040, 3 clients +0.090" in text  # 0.15 - 0.11, 0.20 - 0.11
    assert "D^2_0 G^2_0 reaches an F1-score only 2.7% lower" in text
    assert "(decision tree)" in text and "stratified 20%" in text


def test_ctgan_association_is_measured_on_each_client_counts_split(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    real = pd.DataFrame(
        {
            "a": rng.normal(size=200),
            "b": rng.normal(size=200),
            "c": rng.choice(["x", "y"], size=200),
            "d": rng.normal(size=200),
            "e": rng.choice(["u", "v", "w"], size=200),
            "f": rng.normal(size=200),
        }
    )
    real["b"] += real["a"]
    synthetic = real.sample(frac=1.0, random_state=1).reset_index(drop=True)
    synthetic["b"] = rng.normal(size=200)  # breaks a-b, which the 2-party split keeps within
    source = tmp_path / "table.csv"
    real.to_csv(source, index=False)
    rc = ReproduceConfig(
        datasets=(str(source),),
        algorithms=("ctgan",),
        seeds=(0,),
        n_parties=(2, 3),
        out_dir=str(tmp_path / "out"),
    )
    (spec,) = _grid(rc)
    spec.run_dir.mkdir(parents=True)
    synthetic.to_csv(spec.run_dir / "synthetic.csv", index=False)
    stored = {"seed": 0, "evaluation": {"statistics": {"diff_corr_avg_client": 9.0}}}
    rows = reproduce_vtgan.centralized_rows(spec, stored, rc.n_parties)
    assert [s.data.n_parties for s, _ in rows] == [2, 3]
    assert rows[0][1] is stored  # the run's own split: its stored numbers
    # The even split into three parties: contiguous pairs of columns in table order.
    expected = association_difference(
        real,
        pd.read_csv(spec.run_dir / "synthetic.csv"),
        parties=[["a", "b"], ["c", "d"], ["e", "f"]],
    )
    statistics = rows[1][1]["evaluation"]["statistics"]
    assert statistics["diff_corr_avg_client"] == pytest.approx(expected["avg_client"])
    assert statistics["diff_corr_across_client"] == pytest.approx(expected["across_client"])
    assert stored["evaluation"]["statistics"] == {"diff_corr_avg_client": 9.0}  # not mutated


def test_bad_vtgan_grids() -> None:
    assert ReproduceConfig(n_parties=[2, 3]).n_parties == (2, 3)
    for bad in ([], [1, 2], [2, 2], [2.5]):
        with pytest.raises(
            ValueError, match=r"reproduce\.n_parties must be distinct client counts >= 2"
        ):
            ReproduceConfig(n_parties=bad)
    with pytest.raises(ValueError, match=r"reproduce\.vtgan_epochs\.adult must be >= 1, got 0"):
        ReproduceConfig(vtgan_epochs={"adult": 0})
    with pytest.raises(ValueError, match=r"reproduce\.algorithms \['vtgan'\] have no DP rows"):
        ReproduceConfig(algorithms=("vtgan",), non_dp=False, dp_epsilons=(10.0,))


_WORKER = """
import os, time
from flwr_vflgan.simulations.reproduce import follow_parent
follow_parent(os.getppid(), poll=0.05)
print("ready", flush=True)
time.sleep(120)
"""
_PARENT = """
import subprocess, sys
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(worker.pid, flush=True)
worker.wait()
"""


def test_a_worker_ends_once_the_process_that_started_it_is_killed() -> None:
    """reproduce.jobs > 1: SIGKILL (or SIGTERM) of the reproduce process used to leave its
    workers training into the run directories; a worker now follows its parent out."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from flwr_vflgan.simulations.flower_processes import process_table

    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, _WORKER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "ready"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            info = process_table().get(worker)
            if info is None or info.state.startswith("Z"):
                break
            time.sleep(0.1)
        else:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the worker outlived its parent by 10 s")
    finally:
        parent.kill()


def test_marginal_baselines_have_dp_rows_only_and_join_table1() -> None:
    rc = ReproduceConfig(
        datasets=("adult",),
        algorithms=("vflgan", "aim", "mst"),
        seeds=(0,),
        dp_epsilons=(1.0,),
        out_dir="out",
    )
    specs = _grid(rc)
    runs = [(s.algorithm.variant.value, s.algorithm.dp.mechanism.value, s.run_dir) for s in specs]
    assert runs == [
        ("vflgan", "none", Path("out/adult/vflgan/seed0")),
        ("vflgan", "vflgan_gaussian", Path("out/adult/vflgan-dp1/seed0")),
        ("aim", "end_to_end", Path("out/adult/aim-dp1/seed0")),
        ("mst", "end_to_end", Path("out/adult/mst-dp1/seed0")),
    ]
    marginal = [s for s in specs if s.algorithm.is_marginal]
    assert all(s.data.public_domain is not None for s in marginal)
    utility = {"total_difference": 0.05, "trtr_accuracy": 0.85}
    rows = [
        (
            s,
            {
                "seed": 0,
                "fd": 0.1,
                "evaluation": {"ai_utility": utility},
                "privacy": {"epsilon": 1.0},
            },
        )
        for s in specs
    ]
    text, table = family_of("aim").reproduction().write(rows, rc)
    assert set(table["adult"]) == {"vflgan", "vflgan@dp1", "aim@dp1", "mst@dp1"}
    assert "| AIM (ε=1, δ=1e-05; spent ≤ 1.00) |" in text
    assert "| DP-VFLGAN (ε=1, δ=1e-05; spent ≤ 1.00) |" in text


def test_families_that_share_a_reproduction_module_write_one_table() -> None:
    rc = ReproduceConfig(
        datasets=("adult",), algorithms=("wgan_gp", "mst"), seeds=(0,), dp_epsilons=(3.0,)
    )
    specs = _grid(rc)
    results = [(s, {"seed": 0}) for s in specs]
    ((reproduction, rows),) = table_groups(results, rc)
    assert reproduction.TABLE == "table1"
    assert [s.algorithm.variant.value for s, _ in rows] == ["wgan_gp", "wgan_gp", "mst"]


def test_dp_rows_take_the_chosen_mechanism_and_say_so() -> None:
    rc = ReproduceConfig(
        datasets=("german_credit",),
        algorithms=("vflgan", "mst"),
        seeds=(0,),
        dp_epsilons=(10.0,),
        non_dp=False,
        dp_mechanism="end_to_end",
        out_dir="out",
    )
    specs = _grid(rc)
    runs = [(s.algorithm.dp.mechanism.value, s.run_dir) for s in specs]
    assert runs == [
        ("end_to_end", Path("out/german_credit/vflgan-dp10-end_to_end/seed0")),
        ("end_to_end", Path("out/german_credit/mst-dp10/seed0")),
    ]
    utility = {"total_difference": 0.4}
    rows = [(s, {"seed": 0, "fd": 1.0, "evaluation": {"ai_utility": utility}}) for s in specs]
    text, table = family_of("vflgan").reproduction().write(rows, rc)
    assert set(table["german_credit"]) == {"vflgan@dp10-end_to_end", "mst@dp10"}
    assert "| DP-VFLGAN [end_to_end] (ε=10, δ=0.0001) |" in text
    assert "| MST (ε=10, δ=0.0001) |" in text
    assert "DP rows: `dp=end_to_end`" in text and "| *paper* |" not in text
    with pytest.raises(ValueError, match=r"reproduce\.dp_mechanism must be one of"):
        ReproduceConfig(dp_mechanism="gaussian")


def test_a_run_whose_utility_is_undefined_is_announced_not_fatal() -> None:
    """A collapsed DP generator publishes one class: TSTS, and so the Total Difference,
    are undefined (null in metrics.json); the reproduction must go on."""
    rc = ReproduceConfig(datasets=("adult",), algorithms=("wgan_gp",), seeds=(0,))
    (spec,) = _grid(rc)
    metrics = {"fd": None, "evaluation": {"ai_utility": {"total_difference": None}}}
    line = family_of("wgan_gp").reproduction().announce(spec, metrics)
    assert line.endswith("FD undefined  Total Difference undefined")


def test_every_dp_row_of_table_1_has_its_papers_delta() -> None:
    """Paper 000, Section 5.3.2: the DP rows' delta per dataset, wine and HCV included."""
    from flwr_vflgan.simulations.config import ReproduceConfig
    from flwr_vflgan.simulations.reproduce_vflgan import PAPER_TABLE1_DP

    deltas = ReproduceConfig().dp_delta
    assert set(PAPER_TABLE1_DP) <= set(deltas)
    assert (deltas["wine_red"], deltas["wine_white"], deltas["hcv"]) == (5e-4, 2e-4, 8e-4)
    assert set(PAPER_TABLE1) == set(PAPER_TABLE1_DP)


def test_vdgan_pate_rows_are_a_dp_mechanism_of_their_own() -> None:
    rc = ReproduceConfig(
        datasets=("adult_thesis",),
        algorithms=("vdgan",),
        seeds=(0,),
        dp_epsilons=(1.0,),
        non_dp=False,
        dp_mechanism="pate",
        out_dir="out",
    )
    (spec,) = _grid(rc)
    assert spec.algorithm.dp.mechanism.value == "pate"
    assert spec.algorithm.dp.delta == 1e-5  # paper 004 states none: Adult's
    assert spec.run_dir == Path("out/adult_thesis/vdgan-dp1-pate/seed0")
    rows = [(spec, {"seed": 0, "fd": 1.0, "evaluation": {"ai_utility": {}}})]
    text, table = family_of("vflgan").reproduction().write(rows, rc)
    assert set(table["adult_thesis"]) == {"vdgan@dp1-pate"}
    assert "DP rows: VDGAN-PATE" in text and "`noisy_votes`" in text


@pytest.mark.parametrize(("saved_smoothing", "reused"), [("absent", True), (3.0, False)])
def test_a_run_finished_before_generator_smoothing_existed_is_reused(
    tmp_path: Path, saved_smoothing: object, reused: bool
) -> None:
    """A VFLGAN-TS run finished before ``series.model.generator_smoothing`` existed (no
    key) is this run without the filter; one saved with a filter is another run."""
    spec = _spec(tmp_path, "vflgan_ts", 0, dataset="sine6")
    assert spec.algorithm.series.model.generator_smoothing is None
    spec.run_dir.mkdir(parents=True)
    saved = json.loads(json.dumps(spec.algorithm.to_dict()))
    if saved_smoothing == "absent":
        del saved["series"]["model"]["generator_smoothing"]
    else:
        saved["series"]["model"]["generator_smoothing"] = saved_smoothing
    config = {"algorithm": saved, "data": json.loads(spec.data.to_json()), "seed": 0}
    (spec.run_dir / "config.json").write_text(json.dumps(config))
    (spec.run_dir / "synthetic.csv").write_text("a\n1\n")
    (spec.run_dir / "metrics.json").write_text(json.dumps({"seed": 0}))
    assert (finished_metrics(spec) is not None) is reused
