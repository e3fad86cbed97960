"""k-AVD (paper 004, eq. 5.1) and the correlation-matrix distance (eq. 5.2)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.metrics.avd import correlation_matrix_distance, k_avd, k_avd_by_party
from flwr_vflgan.metrics.tables import MetricInputError


def _schema(**kinds: str) -> Schema:
    return Schema(tuple(ColumnSpec(name, ColumnKind(kind)) for name, kind in kinds.items()))


def _categorical_frame(n: int, seed: int, n_columns: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 3, size=n)
    columns = {}
    for i in range(n_columns):
        noise = rng.integers(0, 3, size=n)
        columns[f"c{i}"] = np.where(rng.uniform(size=n) < 0.6, base, noise).astype(str)
    return pd.DataFrame(columns)


CATS = _schema(**{f"c{i}": "categorical" for i in range(5)})


def _tvd_reference(real: pd.DataFrame, synthetic: pd.DataFrame, columns: list[str]) -> float:
    """Total variation distance of the joint marginal, via pandas value counts."""
    p = real[columns].value_counts(normalize=True)
    q = synthetic[columns].value_counts(normalize=True)
    p, q = p.align(q, fill_value=0.0)
    return 0.5 * float((p - q).abs().sum())


# --- k-AVD ---------------------------------------------------------------------------


def test_identical_tables_have_zero_avd():
    frame = _categorical_frame(60, 0)
    shuffled = frame.sample(frac=1, random_state=1)
    for k in (1, 2, 3):
        assert k_avd(frame, shuffled, CATS, k=k) == pytest.approx(0.0, abs=1e-12)


def test_disjoint_supports_have_avd_one():
    real = pd.DataFrame({"a": ["x", "y"], "b": ["p", "q"]})
    synthetic = pd.DataFrame({"a": ["z", "z", "w"], "b": ["p", "q", "q"]})
    schema = _schema(a="categorical", b="categorical")
    # Any 2-way tuple differs in column a, so the supports are disjoint.
    assert k_avd(real, synthetic, schema, k=2) == pytest.approx(1.0)


def test_one_column_by_hand():
    real = pd.DataFrame({"c": ["a", "a", "b", "b"]})
    synthetic = pd.DataFrame({"c": ["a", "b", "b", "b"]})
    # 1/2 (|1/2 - 1/4| + |1/2 - 3/4|) = 1/4.
    assert k_avd(real, synthetic, _schema(c="categorical"), k=1) == pytest.approx(0.25)


def test_numeric_columns_use_real_quantile_bins():
    real = pd.DataFrame({"x": np.arange(10.0)})
    # bins=2: the real median 4.5 splits the line; -50 and 100 fall in the end bins.
    synthetic = pd.DataFrame({"x": [-50.0, 1.0, 2.0, 100.0]})
    # P_r = (1/2, 1/2), P_s = (3/4, 1/4): TVD = 1/4.
    assert k_avd(real, synthetic, _schema(x="continuous"), k=1, bins=2) == pytest.approx(0.25)


def test_integer_columns_with_few_values_keep_them():
    real = pd.DataFrame({"n": [1, 2, 3, 1]})
    synthetic = pd.DataFrame({"n": [1, 2, 4, 4]})
    # P_r = {1: 1/2, 2: 1/4, 3: 1/4}, P_s = {1: 1/4, 2: 1/4, 4: 1/2}:
    # 1/2 (1/4 + 0 + 1/4 + 1/2) = 1/2.
    assert k_avd(real, synthetic, _schema(n="integer"), k=1, bins=10) == pytest.approx(0.5)


def test_all_combinations_when_fewer_than_requested():
    real, synthetic = _categorical_frame(80, 2), _categorical_frame(70, 3)
    pairs = list(itertools.combinations(CATS.names, 2))  # 10 pairs < 100 requested
    expected = np.mean([_tvd_reference(real, synthetic, list(pair)) for pair in pairs])
    assert k_avd(real, synthetic, CATS, k=2) == pytest.approx(expected)


def test_sampled_combinations_are_deterministic_under_seed():
    real, synthetic = _categorical_frame(80, 4), _categorical_frame(80, 5)
    first = k_avd(real, synthetic, CATS, k=2, n_combinations=4, seed=7)
    assert k_avd(real, synthetic, CATS, k=2, n_combinations=4, seed=7) == first
    pairs = list(itertools.combinations(CATS.names, 2))
    values = {_tvd_reference(real, synthetic, list(pair)) for pair in pairs}
    # The result is a mean of 4 of the 10 pair distances, so it lies within their range.
    assert min(values) <= first <= max(values)
    others = {k_avd(real, synthetic, CATS, k=2, n_combinations=4, seed=s) for s in range(6)}
    assert len(others) > 1


def test_bad_parameters_are_rejected():
    frame = _categorical_frame(10, 6)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        k_avd(frame, frame, CATS, k=0)
    with pytest.raises(ValueError, match=r"k must be <= the number of columns \(5\), got 6"):
        k_avd(frame, frame, CATS, k=6)
    with pytest.raises(ValueError, match="bins must be >= 2, got 1"):
        k_avd(frame, frame, CATS, bins=1)
    with pytest.raises(ValueError, match="n_combinations must be >= 1, got 0"):
        k_avd(frame, frame, CATS, n_combinations=0)
    with pytest.raises(TypeError, match=r"k must be an integer, got 2\.0"):
        k_avd(frame, frame, CATS, k=2.0)  # type: ignore[arg-type]
    with pytest.raises(MetricInputError, match="different columns"):
        k_avd(frame, frame.drop(columns="c0"), CATS)
    with pytest.raises(MetricInputError, match="empty"):
        k_avd(frame.iloc[:0], frame, CATS)


# --- k-AVD within and across parties -------------------------------------------------

PARTIES = [["c0", "c1"], ["c2", "c3", "c4"]]


def _kinds(parties: list[list[str]], k: int) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    party = {c: p for p, cols in enumerate(parties) for c in cols}
    combos = list(itertools.combinations(CATS.names, k))
    within = [c for c in combos if len({party[x] for x in c}) == 1]
    return within, [c for c in combos if len({party[x] for x in c}) > 1]


def test_within_and_across_average_their_own_combinations():
    real, synthetic = _categorical_frame(80, 2), _categorical_frame(70, 3)
    for k in (2, 3):
        within, across = _kinds(PARTIES, k)
        result = k_avd_by_party(real, synthetic, CATS, parties=PARTIES, k=k)
        expected_within = np.mean([_tvd_reference(real, synthetic, list(c)) for c in within])
        expected_across = np.mean([_tvd_reference(real, synthetic, list(c)) for c in across])
        assert result["within"] == pytest.approx(expected_within)
        assert result["across"] == pytest.approx(expected_across)
        # Both kinds together are every combination: the pooled k-AVD is their weighted mean.
        pooled = (len(within) * result["within"] + len(across) * result["across"]) / math.comb(5, k)
        assert k_avd(real, synthetic, CATS, k=k) == pytest.approx(pooled)


def test_breaking_the_cross_party_joint_shows_only_across():
    """A table whose parties' rows are paired at random keeps every party's own joint
    (within = 0) and loses the joint between parties (across > 0)."""
    real = _categorical_frame(3000, 8)
    decoupled = real.copy()
    order = np.random.default_rng(9).permutation(len(real))
    decoupled[PARTIES[1]] = real[PARTIES[1]].to_numpy()[order]
    result = k_avd_by_party(real, decoupled, CATS, parties=PARTIES, k=2)
    assert result["within"] == pytest.approx(0.0, abs=1e-12)
    # The columns share 60 % of a 3-valued base, so a pair's joint differs from the
    # product of its marginals by far more than sampling noise at 3000 rows.
    assert result["across"] > 0.1


def test_a_kind_with_no_combination_is_none():
    frame = _categorical_frame(40, 5)
    # k = 3 exceeds the first party and equals the second: one within-combination.
    one = k_avd_by_party(frame, frame, CATS, parties=PARTIES, k=3)
    assert one["within"] == pytest.approx(0.0, abs=1e-12)
    assert k_avd_by_party(frame, frame, CATS, parties=PARTIES, k=4)["within"] is None
    assert k_avd_by_party(frame, frame, CATS, parties=[CATS.names], k=2)["across"] is None
    # Columns outside every party take no part.
    two = k_avd_by_party(frame, frame, CATS, parties=[["c0"], ["c1"]], k=2)
    assert two == {"within": None, "across": pytest.approx(0.0, abs=1e-12)}


def test_sampled_kinds_are_distinct_and_deterministic():
    real, synthetic = _categorical_frame(80, 4), _categorical_frame(80, 5)
    first = k_avd_by_party(real, synthetic, CATS, parties=PARTIES, k=2, n_combinations=3, seed=2)
    again = k_avd_by_party(real, synthetic, CATS, parties=PARTIES, k=2, n_combinations=3, seed=2)
    assert first == again
    _, across = _kinds(PARTIES, 2)
    values = [_tvd_reference(real, synthetic, list(c)) for c in across]
    assert min(values) <= first["across"] <= max(values)


def test_the_drawn_path_keeps_to_its_kind(monkeypatch):
    """Above the enumeration limit the combinations are drawn by rejection; each kind
    must still hold only its own combinations, without repeats."""
    from flwr_vflgan.metrics import avd

    monkeypatch.setattr(avd, "_MAX_ENUMERATED", 0)
    party_of = np.array([0, 0, 1, 1, 1, -1])
    for across in (False, True):
        drawn = avd._party_combinations(party_of, 2, 50, np.random.default_rng(0), across=across)
        assert len(drawn) == len(set(drawn)) == (6 if across else 4)
        assert all(5 not in c for c in drawn)
        assert all((len({party_of[i] for i in c}) > 1) == across for c in drawn)


def test_many_parties_draw_their_few_within_combinations_directly():
    """60 columns in 12 parties of 5 and k = 5: 12 within-combinations among 5.5 million,
    above the enumeration limit; drawing at random and rejecting would need millions of
    draws for each, so they are drawn party by party."""
    from flwr_vflgan.metrics import avd

    party_of = np.repeat(np.arange(12), 5)
    drawn = avd._party_combinations(party_of, 5, 100, np.random.default_rng(0), across=False)
    assert sorted(drawn) == [tuple(range(5 * p, 5 * p + 5)) for p in range(12)]
    across = avd._party_combinations(party_of, 5, 100, np.random.default_rng(0), across=True)
    assert len(set(across)) == 100
    assert all(len({party_of[i] for i in c}) > 1 for c in across)


def test_malformed_parties_are_refused():
    frame = _categorical_frame(10, 6)
    with pytest.raises(ValueError, match="names unknown column 'zz'"):
        k_avd_by_party(frame, frame, CATS, parties=[["c0"], ["zz"]])
    with pytest.raises(ValueError, match="parties must be disjoint"):
        k_avd_by_party(frame, frame, CATS, parties=[["c0"], ["c0", "c1"]])
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        k_avd_by_party(frame, frame, CATS, parties=PARTIES, k=0)


# --- correlation-matrix distance -----------------------------------------------------


def test_identical_tables_have_zero_dcm():
    rng = np.random.default_rng(0)
    frame = _categorical_frame(50, 7).assign(x=rng.normal(size=50))
    schema = _schema(**{f"c{i}": "categorical" for i in range(5)}, x="continuous")
    assert correlation_matrix_distance(frame, frame.iloc[::-1], schema) == pytest.approx(
        0.0, abs=1e-9
    )


def _dcm_two_columns(r1: float, r2: float) -> float:
    """1 - tr(R1 R2) / (||R1||_F ||R2||_F) for R = [[1, r], [r, 1]], written out."""
    trace = 2 + 2 * r1 * r2
    return 1 - trace / (math.sqrt(2 + 2 * r1**2) * math.sqrt(2 + 2 * r2**2))


def test_two_numeric_columns_by_hand():
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    real = pd.DataFrame({"x": x, "y": x + rng.normal(size=40)})
    synthetic = pd.DataFrame({"x": x, "y": -0.5 * x + rng.normal(size=40)})
    r1 = np.corrcoef(real["x"], real["y"])[0, 1]
    r2 = np.corrcoef(synthetic["x"], synthetic["y"])[0, 1]
    schema = _schema(x="continuous", y="continuous")
    got = correlation_matrix_distance(real, synthetic, schema)
    assert got == pytest.approx(_dcm_two_columns(r1, r2))


def test_opposite_correlation_reaches_one():
    x = np.arange(10.0)
    schema = _schema(x="continuous", y="continuous")
    real = pd.DataFrame({"x": x, "y": 2 * x})
    synthetic = pd.DataFrame({"x": x, "y": -x})
    assert correlation_matrix_distance(real, synthetic, schema) == pytest.approx(1.0)


def test_dcm_stays_in_range_with_constant_features():
    schema = _schema(**{f"c{i}": "categorical" for i in range(5)}, x="continuous")
    rng = np.random.default_rng(2)
    real = _categorical_frame(40, 8).assign(x=rng.normal(size=40))
    # A synthetic table that never uses some categories and has a constant number.
    synthetic = _categorical_frame(40, 9).assign(c0="0", x=1.0)
    got = correlation_matrix_distance(real, synthetic, schema)
    assert 0.0 < got <= 1.0
    assert math.isfinite(got)


def test_dcm_bad_inputs():
    frame = pd.DataFrame({"x": [1.0, 2.0], "y": [0.0, 1.0]})
    with pytest.raises(MetricInputError, match="different columns"):
        correlation_matrix_distance(frame, frame[["x"]])
    with pytest.raises(MetricInputError, match="not finite"):
        correlation_matrix_distance(frame, frame.assign(y=np.inf))
