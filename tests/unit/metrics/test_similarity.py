"""Statistical similarity of paper 001 (JSD, WD, association matrices and their difference)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.metrics.similarity import (
    association_difference,
    association_matrix,
    jensen_shannon_divergences,
    statistical_similarity,
    wasserstein_distances,
)
from flwr_vflgan.metrics.tables import MetricInputError


def _schema(**kinds: str) -> Schema:
    return Schema(tuple(ColumnSpec(name, ColumnKind(kind)) for name, kind in kinds.items()))


CAT = _schema(c="categorical")
NUM = _schema(x="continuous")


# --- Jensen-Shannon ------------------------------------------------------------------


def test_jsd_identical_distributions_is_zero():
    real = pd.DataFrame({"c": ["a", "b", "b", "c"]})
    synthetic = pd.DataFrame({"c": ["b", "c", "a", "b"] * 2})
    assert jensen_shannon_divergences(real, synthetic, CAT) == {"c": 0.0}


def test_jsd_disjoint_categories_is_one():
    real = pd.DataFrame({"c": ["a", "b"]})
    synthetic = pd.DataFrame({"c": ["x", "y", "y"]})
    assert jensen_shannon_divergences(real, synthetic, CAT)["c"] == pytest.approx(1.0)


def test_jsd_by_hand_is_the_base_2_distance():
    # p = (1/2, 1/2), q = (1, 0), m = (3/4, 1/4):
    # JS divergence = (KL(p||m) + KL(q||m)) / 2 in bits; CTAB-GAN reports its square root.
    kl_p = 0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)
    kl_q = 1.0 * math.log2(1.0 / 0.75)
    expected = math.sqrt((kl_p + kl_q) / 2)
    real = pd.DataFrame({"c": ["a", "b"] * 5})
    synthetic = pd.DataFrame({"c": ["a"] * 7})
    assert jensen_shannon_divergences(real, synthetic, CAT)["c"] == pytest.approx(expected)


def test_jsd_counts_missing_values_and_synthetic_only_categories():
    real = pd.DataFrame({"c": ["a", None, "a", None]})
    same = pd.DataFrame({"c": [np.nan, "a"]})
    assert jensen_shannon_divergences(real, same, CAT)["c"] == 0.0
    # A category only the synthetic table has is part of the union (no KeyError):
    # p = (1, 0), q = (1/2, 1/2) is the hand case above with the roles swapped.
    real = pd.DataFrame({"c": ["a", "a"]})
    synthetic = pd.DataFrame({"c": ["a", "new"]})
    kl_q = 0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)
    kl_p = math.log2(1.0 / 0.75)
    got = jensen_shannon_divergences(real, synthetic, CAT)["c"]
    assert got == pytest.approx(math.sqrt((kl_p + kl_q) / 2))


def test_jsd_without_categorical_columns_is_empty():
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    assert jensen_shannon_divergences(frame, frame, NUM) == {}


# --- Wasserstein ---------------------------------------------------------------------


def test_wd_scales_by_the_real_range_before_scipy():
    real_x = np.array([0.0, 2.0, 4.0, 10.0])
    synthetic_x = np.array([1.0, 3.0, 12.0])
    # Real min 0, max 10: both columns are divided by 10.
    expected = scipy.stats.wasserstein_distance(real_x / 10, synthetic_x / 10)
    got = wasserstein_distances(pd.DataFrame({"x": real_x}), pd.DataFrame({"x": synthetic_x}), NUM)
    assert got["x"] == pytest.approx(expected)


def test_wd_by_hand_and_identical():
    # Shifting every value by 1 on a real range of 3 moves all mass by 1/3.
    real = pd.DataFrame({"x": [0, 1, 2, 3]})
    synthetic = pd.DataFrame({"x": [1, 2, 3, 4]})
    schema = _schema(x="integer")
    assert wasserstein_distances(real, synthetic, schema)["x"] == pytest.approx(1 / 3)
    assert wasserstein_distances(real, real.sample(frac=1, random_state=0), schema)["x"] == 0.0


def test_wd_constant_real_column_uses_scale_one():
    real = pd.DataFrame({"x": [5.0, 5.0]})
    synthetic = pd.DataFrame({"x": [6.0, 7.0]})
    assert wasserstein_distances(real, synthetic, NUM)["x"] == pytest.approx(1.5)


# --- association difference ----------------------------------------------------------


def _two_party_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a1 = rng.normal(size=n)
    b1 = a1 + 0.3 * rng.normal(size=n)
    return pd.DataFrame(
        {
            "a1": a1,
            "a2": np.where(a1 + 0.5 * rng.normal(size=n) > 0, "hi", "lo"),
            "b1": b1,
            "b2": np.where(b1 > 0.2, "up", "down"),
        }
    )


PARTY_SCHEMA = _schema(a1="continuous", a2="categorical", b1="continuous", b2="categorical")
PARTIES = [["a1", "a2"], ["b1", "b2"]]


def test_identical_tables_have_no_difference():
    frame = _two_party_frame(100, 0)
    got = association_difference(frame, frame, PARTY_SCHEMA, parties=PARTIES)
    assert got == {"overall": 0.0, "avg_client": 0.0, "across_client": 0.0}


def test_breaking_only_the_cross_party_link_shows_up_across_clients():
    real = _two_party_frame(400, 1)
    # Shuffle party B's rows jointly: each party's own table is unchanged up to row
    # order, but the dependence between the parties is gone.
    order = np.random.default_rng(2).permutation(len(real))
    synthetic = real.copy()
    synthetic[["b1", "b2"]] = real[["b1", "b2"]].to_numpy()[order]
    got = association_difference(real, synthetic, PARTY_SCHEMA, parties=PARTIES)
    assert got["avg_client"] == pytest.approx(0.0, abs=1e-12)
    assert got["across_client"] > 1.0
    # Full-matrix convention: the cross block counts twice, within blocks are ~0.
    real_matrix = association_matrix(real, PARTY_SCHEMA)
    synthetic_matrix = association_matrix(synthetic, PARTY_SCHEMA)
    cross = (real_matrix - synthetic_matrix).loc[["a1", "a2"], ["b1", "b2"]].to_numpy()
    assert got["across_client"] == pytest.approx(math.sqrt(2 * np.sum(cross**2)))
    assert got["overall"] == pytest.approx(got["across_client"])


def test_overall_is_the_frobenius_norm_of_the_difference():
    real, synthetic = _two_party_frame(150, 3), _two_party_frame(120, 4)
    difference = association_matrix(real, PARTY_SCHEMA) - association_matrix(
        synthetic, PARTY_SCHEMA
    )
    expected = math.sqrt(float((difference.to_numpy() ** 2).sum()))
    got = association_difference(real, synthetic, PARTY_SCHEMA)
    assert got == {"overall": pytest.approx(expected)}


def test_parties_are_validated():
    frame = _two_party_frame(20, 5)
    with pytest.raises(ValueError, match="unknown column 'zz'"):
        association_difference(frame, frame, PARTY_SCHEMA, parties=[["a1"], ["zz"]])
    with pytest.raises(ValueError, match="'a1' is in parties\\[0\\] and parties\\[1\\]"):
        association_difference(frame, frame, PARTY_SCHEMA, parties=[["a1"], ["a1", "b1"]])
    with pytest.raises(ValueError, match="parties\\[1\\] is empty"):
        association_difference(frame, frame, PARTY_SCHEMA, parties=[["a1"], []])
    with pytest.raises(TypeError, match="parties\\[0\\] must be a sequence"):
        association_difference(frame, frame, PARTY_SCHEMA, parties=["a1"])


# --- combined report and bad inputs --------------------------------------------------


def test_statistical_similarity_keys_and_averages():
    real, synthetic = _two_party_frame(80, 6), _two_party_frame(90, 7)
    report = statistical_similarity(real, synthetic, PARTY_SCHEMA, parties=PARTIES)
    assert set(report) == {
        "avg_jsd",
        "avg_wd",
        "diff_corr",
        "diff_corr_avg_client",
        "diff_corr_across_client",
        "jsd_by_column",
        "wd_by_column",
    }
    assert set(report["jsd_by_column"]) == {"a2", "b2"}
    assert report["avg_jsd"] == pytest.approx(np.mean(list(report["jsd_by_column"].values())))
    assert report["avg_wd"] == pytest.approx(np.mean(list(report["wd_by_column"].values())))
    assert report["diff_corr_across_client"] is not None
    plain = statistical_similarity(real[["a1", "b1"]], synthetic[["a1", "b1"]])
    assert plain["avg_jsd"] is None
    assert plain["diff_corr_avg_client"] is None
    assert plain["diff_corr_across_client"] is None


def test_bad_inputs_raise_metric_input_error():
    frame = _two_party_frame(10, 8)
    with pytest.raises(MetricInputError, match="different columns"):
        statistical_similarity(frame, frame.drop(columns="b2"), PARTY_SCHEMA)
    with pytest.raises(MetricInputError, match="empty"):
        jensen_shannon_divergences(frame, frame.iloc[:0], PARTY_SCHEMA)
    with pytest.raises(MetricInputError, match="empty"):
        association_matrix(frame.iloc[:0], PARTY_SCHEMA)
    with pytest.raises(MetricInputError, match="missing values"):
        wasserstein_distances(frame, frame.assign(a1=np.nan), PARTY_SCHEMA)
