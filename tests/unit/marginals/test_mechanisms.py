"""Tests for MST and AIM: the budget they spend, the noise they add, what they keep.

The tables are small and built so that the answer is known: column ``b`` copies ``a``
most of the time and ``c`` is independent of both.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from flwr_vflgan.marginals.config import MarginalSettings
from flwr_vflgan.marginals.mechanisms import _Marginals, _Model, aim, exponential_choice, mst
from flwr_vflgan.privacy.zcdp import gaussian_rho

SIZES = {"a": 4, "b": 4, "c": 3, "d": 5}
FAST = MarginalSettings(iterations=60, final_iterations=200, rounds=8)
# Fewer rounds and fitting iterations where only the seed's effect is checked: the table
# need not be good to be the same.
QUICK = MarginalSettings(iterations=20, final_iterations=40, rounds=5)


def _table(rows: int = 3000, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, rows)
    copy = rng.random(rows) < 0.9
    b = np.where(copy, a, rng.integers(0, 4, rows))
    return {"a": a, "b": b, "c": rng.integers(0, 3, rows), "d": rng.integers(0, 5, rows)}


def _agreement(codes: dict[str, np.ndarray]) -> float:
    return float(np.mean(codes["a"] == codes["b"]))


@pytest.mark.parametrize("mechanism", [mst, aim])
def test_the_whole_budget_is_spent_and_no_more(mechanism) -> None:
    rho = 0.05
    result = mechanism(_table(), SIZES, rho, FAST, np.random.default_rng(1), 500)
    assert result.rho_spent == pytest.approx(rho, rel=1e-9)
    assert result.selections >= 1
    # Every release is logged: one-way marginals first, then the selected ones.
    assert [m.clique for m in result.measurements[:4]] == [(n,) for n in SIZES]


def test_mst_splits_its_budget_in_thirds() -> None:
    rho = 0.09
    result = mst(_table(), SIZES, rho, FAST, np.random.default_rng(2), 500)
    oneway = sum(gaussian_rho(m.sigma) for m in result.measurements if len(m.clique) == 1)
    pairs = sum(gaussian_rho(m.sigma) for m in result.measurements if len(m.clique) == 2)
    selections = sum(e**2 / 8 for e in result.selection_epsilons)
    assert (oneway, pairs, selections) == pytest.approx((rho / 3,) * 3, rel=1e-9)
    assert result.selections == len(SIZES) - 1  # a spanning tree


def test_a_measurement_carries_noise_of_its_logged_size() -> None:
    rng = np.random.default_rng(3)
    big = {"x": rng.integers(0, 50, 20_000), "y": rng.integers(0, 40, 20_000)}
    session = _Model(big, {"x": 50, "y": 40})
    session.measure(("x", "y"), 7.0, rng)
    noisy = np.asarray(session.measured[0].noisy_measurement)
    residual = noisy - session.answer(("x", "y"))
    assert session.log[0].sigma == 7.0 and session.log[0].cells == 2000
    assert residual.std() == pytest.approx(7.0, rel=0.05)
    assert abs(residual.mean()) < 0.5


@pytest.mark.parametrize("mechanism", [mst, aim])
def test_a_large_budget_keeps_the_dependence_and_a_tiny_one_loses_it(mechanism) -> None:
    table = _table()
    assert _agreement(table) == pytest.approx(0.925, abs=0.02)
    rich = mechanism(table, SIZES, 50.0, FAST, np.random.default_rng(4), 3000)
    poor = mechanism(table, SIZES, 1e-6, FAST, np.random.default_rng(4), 3000)
    assert _agreement(rich.codes) > 0.85
    assert _agreement(poor.codes) < 0.5  # independent columns agree 1/4 of the time
    for result in (rich, poor):
        assert set(result.codes) == set(SIZES)
        for name, size in SIZES.items():
            assert len(result.codes[name]) == 3000
            assert result.codes[name].min() >= 0 and result.codes[name].max() < size


@pytest.mark.parametrize("mechanism", [mst, aim])
def test_the_same_seed_gives_the_same_table(mechanism) -> None:
    runs = [
        mechanism(_table(), SIZES, 0.5, QUICK, np.random.default_rng(s), 400) for s in (7, 7, 8)
    ]
    assert all(np.array_equal(runs[0].codes[n], runs[1].codes[n]) for n in SIZES)
    assert not all(np.array_equal(runs[0].codes[n], runs[2].codes[n]) for n in SIZES)
    before = np.random.get_state()[1].copy()
    mechanism(_table(), SIZES, 0.5, QUICK, np.random.default_rng(9), 400)
    assert np.array_equal(np.random.get_state()[1], before)  # numpy's global state restored


def test_mst_merges_rare_codes_and_restores_them() -> None:
    table = _table()
    table["d"] = np.where(np.arange(3000) < 2, 4, np.minimum(table["d"], 3))  # code 4: 2 rows
    result = mst(table, SIZES, 5.0, FAST, np.random.default_rng(5), 3000)
    assert 0 <= result.codes["d"].max() <= 4
    assert np.mean(result.codes["d"] == 4) < 0.2  # the merged rare code is not inflated


def test_aim_refuses_a_workload_with_no_marginal_small_enough() -> None:
    with pytest.raises(ValueError, match=r"no 2-way marginal has at most marginals\.max_cells=5"):
        aim(_table(), SIZES, 1.0, MarginalSettings(max_cells=5), np.random.default_rng(0), 10)


def test_aim_refuses_fewer_rounds_than_columns() -> None:
    with pytest.raises(
        ValueError, match=r"marginals\.rounds=2 must be at least the number of columns"
    ):
        aim(_table(), SIZES, 1.0, MarginalSettings(rounds=2), np.random.default_rng(0), 10)


def test_exponential_choice_follows_its_distribution() -> None:
    rng = np.random.default_rng(6)
    scores = np.array([0.0, 1.0, 3.0])
    picks = np.bincount(
        [exponential_choice(scores, 2.0, 1.0, rng) for _ in range(20_000)], minlength=3
    )
    expected = np.exp(scores) / np.exp(scores).sum()  # exp(epsilon q / (2 sensitivity))
    assert picks / picks.sum() == pytest.approx(expected, abs=0.015)
    assert exponential_choice(np.array([5.0, 9.0, 1.0]), 1e6, 1.0, rng) == 1


def test_numpy_marginals_match_mbi_projection() -> None:
    rng = np.random.default_rng(0)
    session = _Model(_table(500), SIZES)
    for clique in [("a",), ("b",), ("c",), ("d",), ("a", "b"), ("b", "c")]:
        session.measure(clique, 1.0, rng)
    model = session.estimate(100)
    fitted = _Marginals(model)
    for k in (1, 2, 3):
        for clique in itertools.permutations(SIZES, k):
            expected = np.asarray(model.project(clique).datavector())
            np.testing.assert_allclose(fitted.project(clique), expected, atol=1e-8)


def _mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


@pytest.mark.skipif(
    not os.path.exists("/proc/self/maps"),
    reason="vm.max_map_count, the limit this guards against, and /proc/self/maps are Linux's",
)
def test_estimates_do_not_pile_up_compiled_programs() -> None:
    """Each estimate of a new set of measurements compiles new programs; kept, their
    memory mappings grow by hundreds per estimate until AIM's later rounds (or a second
    run in the same process) hit vm.max_map_count and XLA fails to compile."""
    rng = np.random.default_rng(0)
    session = _Model(_table(500), SIZES)
    for name in SIZES:
        session.measure((name,), 1.0, rng)
    session.estimate(20)  # warm up what every estimate shares
    before = _mappings()
    for clique in itertools.combinations(SIZES, 2):
        session.measure(clique, 1.0, rng)
        session.estimate(20)
    assert _mappings() - before < 600
