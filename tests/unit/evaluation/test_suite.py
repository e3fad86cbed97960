"""The evaluation suite end to end on small tables with a known dependence structure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.evaluation import EvaluationConfig, evaluate_tables
from flwr_vflgan.evaluation.report import write_report
from flwr_vflgan.metrics.tables import MetricInputError

SCHEMA = Schema(
    (
        ColumnSpec("x", ColumnKind.CONTINUOUS),
        ColumnSpec("n", ColumnKind.INTEGER),
        ColumnSpec("c", ColumnKind.CATEGORICAL),
        ColumnSpec("d", ColumnKind.CATEGORICAL),
        ColumnSpec("y", ColumnKind.CATEGORICAL),
    ),
    label="y",
)
PARTIES = [["x", "n"], ["c", "d", "y"]]
FAST = EvaluationConfig(
    classifiers=("decision_tree", "logistic_regression"), dcr_max_rows=200, avd_combinations=5
)


def sample(rows: int, seed: int) -> pd.DataFrame:
    """x drives the label and the category c (across the two parties); n, d are noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=rows)
    return pd.DataFrame(
        {
            "x": x,
            "n": rng.integers(0, 5, size=rows),
            "c": np.where(x + 0.3 * rng.normal(size=rows) > 0, "hi", "lo"),
            "d": rng.choice(["a", "b", "c"], size=rows),
            "y": np.where(x > 0, "pos", "neg"),
        }
    )


def independent_columns(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Right marginals, no dependence: each column permuted on its own."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({c: frame[c].to_numpy()[rng.permutation(len(frame))] for c in frame})


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    return sample(600, 0)


@pytest.fixture(scope="module")
def results(real: pd.DataFrame) -> dict:
    good = evaluate_tables(real, sample(600, 1), SCHEMA, config=FAST, parties=PARTIES)
    bad = evaluate_tables(
        real, independent_columns(sample(600, 1), 2), SCHEMA, config=FAST, parties=PARTIES
    )
    return {"good": good, "bad": bad}


def test_every_group_runs_under_stable_keys(results: dict) -> None:
    out = results["good"].to_dict()
    assert set(out) == {
        "fidelity", "statistics", "avd", "ai_utility", "ml_efficacy", "privacy",
        "seconds", "skipped", "settings",
    }  # fmt: skip
    assert out["skipped"] == {"images": "not an image table (evaluation.image_shape is not set)"}
    assert {"fd"} <= set(out["fidelity"])
    assert {
        "avg_jsd",
        "avg_wd",
        "diff_corr",
        "diff_corr_avg_client",
        "diff_corr_across_client",
    } <= set(out["statistics"])
    assert set(out["avd"]) == {
        "k2_avd", "k2_avd_within", "k2_avd_across",
        "k3_avd", "k3_avd_within", "k3_avd_across", "dcm",
    }  # fmt: skip
    assert {"trtr_accuracy", "tstr_f1", "total_difference"} <= set(out["ai_utility"])
    assert {"decision_tree_real_auc", "accuracy_difference"} <= set(out["ml_efficacy"])
    assert {"dcr_median", "holdout_dcr_median", "nndr_median"} <= set(out["privacy"])
    assert out["settings"]["holdout"] == "split of the real table"
    assert out["settings"]["parties"] == PARTIES
    json.dumps(out)  # metrics.json must be able to hold it


def test_a_faithful_table_scores_better_than_one_without_dependence(results: dict) -> None:
    good, bad = results["good"].metrics, results["bad"].metrics
    assert good["fidelity"]["fd"] < bad["fidelity"]["fd"]
    assert good["statistics"]["diff_corr"] < bad["statistics"]["diff_corr"]
    # x (party 0) and c, y (party 1) depend on each other: only the independent table breaks that.
    assert (
        good["statistics"]["diff_corr_across_client"] < bad["statistics"]["diff_corr_across_client"]
    )
    assert good["avd"]["k2_avd"] < bad["avd"]["k2_avd"]
    assert good["avd"]["k2_avd_across"] < bad["avd"]["k2_avd_across"]
    assert good["avd"]["dcm"] < bad["avd"]["dcm"]
    assert good["ai_utility"]["total_difference"] < bad["ai_utility"]["total_difference"]
    assert good["ml_efficacy"]["accuracy_difference"] < bad["ml_efficacy"]["accuracy_difference"]
    # Marginals are right in both, so the per-column distances are small in both.
    assert bad["statistics"]["avg_jsd"] < 0.1 and bad["statistics"]["avg_wd"] < 0.1


def test_copied_rows_show_in_the_distance_to_closest_record(real: pd.DataFrame) -> None:
    config = EvaluationConfig(
        fidelity=False, statistics=False, avd=False, ai_utility=False, ml_efficacy=False
    )
    copied = evaluate_tables(real, real.copy(), SCHEMA, config=config).metrics["privacy"]
    fresh = evaluate_tables(real, sample(600, 5), SCHEMA, config=config).metrics["privacy"]
    # The reference rows are the 80% training split, so copies of them sit at distance 0.
    assert copied["exact_match_fraction"] > 0.7 and copied["dcr_median"] == 0.0
    assert fresh["exact_match_fraction"] == 0.0 and fresh["dcr_median"] > 0.0


def test_same_seed_same_numbers(real: pd.DataFrame) -> None:
    synthetic = sample(600, 1)
    first = evaluate_tables(real, synthetic, SCHEMA, config=FAST).to_dict()
    second = evaluate_tables(real, synthetic, SCHEMA, config=FAST).to_dict()
    first.pop("seconds"), second.pop("seconds")
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_groups_without_a_label_or_switched_off_are_skipped_with_the_reason(
    real: pd.DataFrame,
) -> None:
    unlabeled = Schema(SCHEMA.columns, label=None)
    config = EvaluationConfig(avd=False, privacy=False, statistics=False)
    out = evaluate_tables(real, sample(300, 1), unlabeled, config=config)
    assert set(out.metrics) == {"fidelity"}
    assert out.skipped["avd"] == "switched off (evaluation.avd=false)"
    assert out.skipped["ai_utility"].startswith("no label column")
    # The key to set, for a training run and for simulations.evaluate.
    assert "dataset.label=COLUMN when training" in out.skipped["ai_utility"]
    assert "label=COLUMN in simulations.evaluate" in out.skipped["ai_utility"]
    assert out.skipped["ml_efficacy"].startswith("no label column")


def test_k_larger_than_the_table_is_reported_as_missing(real: pd.DataFrame) -> None:
    two = real[["x", "y"]]
    schema = Schema((SCHEMA.columns[0], SCHEMA.columns[4]), label="y")
    config = EvaluationConfig(
        avd_k=(2, 3), statistics=False, ai_utility=False, ml_efficacy=False, privacy=False
    )
    out = evaluate_tables(two, sample(300, 1)[["x", "y"]], schema, config=config)
    assert out.metrics["avd"]["k3_avd"] is None and math.isfinite(out.metrics["avd"]["k2_avd"])


def test_bad_pairs_fail_before_any_metric_with_a_clear_reason(real: pd.DataFrame) -> None:
    with pytest.raises(MetricInputError, match="label column 'y' is missing from the synthetic"):
        evaluate_tables(real, sample(50, 1).drop(columns="y"), SCHEMA)
    with pytest.raises(MetricInputError, match=r"missing from synthetic: \['d'\]"):
        evaluate_tables(real.drop(columns="y"), sample(50, 1).drop(columns=["d", "y"]), label=None)
    with pytest.raises(MetricInputError, match="the synthetic table is empty"):
        evaluate_tables(real, sample(50, 1).iloc[:0], SCHEMA)
    with pytest.raises(MetricInputError, match="holdout"):
        evaluate_tables(real, sample(50, 1), SCHEMA, holdout=sample(50, 2).drop(columns="d"))
    with pytest.raises(MetricInputError, match="image_shape=\\[3, 3\\] needs 9 pixel columns"):
        evaluate_tables(real, sample(50, 1), SCHEMA, config=EvaluationConfig(image_shape=(3, 3)))


def test_report_has_the_tables_and_plots(real: pd.DataFrame, results: dict, tmp_path: Path) -> None:
    history = [{"epoch": e, "fd": 1.0 / e} for e in range(1, 6)]
    written = write_report(
        tmp_path, results["good"], real, sample(600, 1), SCHEMA, title="test run", history=history
    )
    names = sorted(p.name for p in written)
    assert names == ["associations.png", "fd_history.png", "marginals.png", "report.md"]
    for png in ("associations.png", "fd_history.png", "marginals.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (tmp_path / "report.md").read_text()
    assert text.startswith("# test run")
    assert "| TRTR Acc | TRTR F1 |" in text and "Total Difference" in text
    assert "![Association matrices](associations.png)" in text
    assert f"{results['good'].metrics['fidelity']['fd']:.4g}" in text
    assert not list(tmp_path.glob(".*tmp*")), "temporary files left behind"


def test_undefined_metrics_are_null_in_the_json_form(real: pd.DataFrame) -> None:
    one_class = sample(300, 1).assign(y="pos")
    config = EvaluationConfig(
        fidelity=False, statistics=False, avd=False, ml_efficacy=False, privacy=False
    )
    out = evaluate_tables(real, one_class, SCHEMA, config=config).to_dict()
    assert out["ai_utility"]["tsts_accuracy"] is None
    assert out["ai_utility"]["total_difference"] is None
    assert out["ai_utility"]["tstr_accuracy"] is not None
    json.dumps(out, allow_nan=False)


def _with_gaps(frame: pd.DataFrame, rate: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    out = frame.copy()
    out["x"] = out["x"].where(rng.random(len(out)) >= rate)
    out["n"] = out["n"].astype(float).where(rng.random(len(out)) >= rate)
    return out


def test_numeric_gaps_are_measured_as_values_and_a_missing_rate(real: pd.DataFrame) -> None:
    """A numeric column with missing values is not refused: its present values are
    measured, and its missing rate as a category, so a wrong rate costs fidelity."""
    gappy_real = _with_gaps(real, 0.2, 3)
    same_rate = evaluate_tables(
        gappy_real, _with_gaps(sample(600, 1), 0.2, 4), SCHEMA, config=FAST, parties=PARTIES
    )
    no_gaps = evaluate_tables(gappy_real, sample(600, 1), SCHEMA, config=FAST, parties=PARTIES)
    assert same_rate.settings["numeric_gaps"] == ["x", "n"]
    assert "numeric_gaps" not in evaluate_tables(real, sample(600, 1), SCHEMA, config=FAST).settings
    # JSD over the columns (the indicators included) sees the missing rate.
    assert same_rate.metrics["statistics"]["avg_jsd"] < no_gaps.metrics["statistics"]["avg_jsd"]
    for group in ("fidelity", "avd", "ai_utility", "ml_efficacy", "privacy"):
        assert all(
            v is None or math.isfinite(v)
            for v in same_rate.metrics[group].values()
            if isinstance(v, float)
        ), group


def test_a_continuous_label_is_scored_by_regression_not_refused(tmp_path: Path) -> None:
    """California housing's label is a price: utility regresses (R²), ML efficacy's
    classifiers are skipped with the reason, and the holdout split is not stratified."""
    rng = np.random.default_rng(0)

    def table(rows: int) -> pd.DataFrame:
        x = rng.uniform(0, 4, size=rows)
        noise = rng.normal(0, 0.1, rows)
        return pd.DataFrame({"x": x, "c": rng.choice(["a", "b"], size=rows), "y": x + noise})

    schema = Schema(
        (
            ColumnSpec("x", ColumnKind.CONTINUOUS),
            ColumnSpec("c", ColumnKind.CATEGORICAL),
            ColumnSpec("y", ColumnKind.CONTINUOUS),
        ),
        label="y",
    )
    real, synthetic = table(300), table(300)
    result = evaluate_tables(real, synthetic, schema, config=FAST)
    utility = result.metrics["ai_utility"]
    assert utility["trtr_r2"] > 0.8 and utility["total_difference"] < 0.3
    assert "is continuous" in result.skipped["ml_efficacy"]
    assert result.metrics["privacy"]["rows_compared"] > 0
    write_report(tmp_path, result, real, synthetic, schema, title="price")
    text = (tmp_path / "report.md").read_text()
    assert "TRTR R²" in text and "regressors scored by R²" in text
