"""Tests for DPLT's mathematics: the binary coding, the sensitivity and the exponential
mechanism of the grouping, the latent attributes, the spanning tree and the budget."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.schema import infer_schema
from flwr_vflgan.dplt import model as M
from flwr_vflgan.dplt.config import DPLTSettings
from flwr_vflgan.dplt.local import PartyLatentModel, synthesize_locally


def test_codes_survive_the_binary_coding() -> None:
    rng = np.random.default_rng(0)
    sizes = [2, 3, 5, 8, 17, 1]
    codes = [rng.integers(0, s, 500) for s in sizes]
    bits = M.bits_of(codes, sizes)
    assert bits.shape == (500, sum(M.code_bits(s) for s in sizes)) == (500, 1 + 2 + 3 + 3 + 5 + 1)
    assert set(np.unique(bits)) <= {0, 1}
    for back, original in zip(M.codes_of(bits, sizes), codes, strict=True):
        np.testing.assert_array_equal(back, original)


def test_a_pattern_beyond_the_codes_loses_its_highest_bits() -> None:
    # 5 codes take 3 bits; the patterns 5, 6 and 7 are no code: 5 -> 1, 6 -> 2, 7 -> 3.
    bits = ((np.arange(8)[:, None] >> np.arange(3)) & 1).astype(np.uint8)
    (codes,) = M.codes_of(bits, [5])
    np.testing.assert_array_equal(codes, [0, 1, 2, 3, 4, 1, 2, 3])
    # 17 codes take 5 bits: 31 -> 15 (the 16 bit dropped), 17 -> 1.
    bits = ((np.array([31, 17, 16])[:, None] >> np.arange(5)) & 1).astype(np.uint8)
    np.testing.assert_array_equal(M.codes_of(bits, [17])[0], [15, 1, 16])


def test_group_sizes_cover_every_bit() -> None:
    assert M.group_sizes(7, 3) == [3, 3, 1]
    assert M.group_sizes(6, 3) == [3, 3]
    assert M.group_sizes(2, 4) == [2]


def test_mutual_information_of_known_tables() -> None:
    assert M.mutual_information(np.array([[25, 25], [25, 25]])) == pytest.approx(0.0)
    assert M.mutual_information(np.array([[50, 0], [0, 50]])) == pytest.approx(1.0)
    assert M.mutual_information(np.eye(4) * 10) == pytest.approx(2.0)
    # Noise may make a cell negative: it counts as 0.
    assert M.mutual_information(np.array([[50, -3], [0, 50]])) == pytest.approx(1.0)
    assert M.mutual_information(np.zeros((2, 2))) == 0.0


def test_replacing_one_row_moves_the_information_of_a_bit_by_at_most_the_bound() -> None:
    """PrivBayes' Lemma 4.1, checked exhaustively on small tables: every replacement of
    every row of random tables of a binary and a 3-valued attribute."""
    rng = np.random.default_rng(1)
    n = 9
    bound = M.mi_sensitivity(n)
    worst = 0.0
    for _ in range(40):
        x, y = rng.integers(0, 2, n), rng.integers(0, 3, n)

        def info(x: np.ndarray, y: np.ndarray) -> float:
            return M.mutual_information(np.bincount(x * 3 + y, minlength=6).reshape(2, 3))

        base = info(x, y)
        for row, (a, b) in itertools.product(range(n), itertools.product(range(2), range(3))):
            x2, y2 = x.copy(), y.copy()
            x2[row], y2[row] = a, b
            worst = max(worst, abs(info(x2, y2) - base))
    assert worst <= bound + 1e-12
    assert worst > 0.3 * bound  # the bound is of the right size, not vacuous


def test_the_exponential_mechanism_draws_in_proportion_to_its_weights() -> None:
    rng = np.random.default_rng(2)
    scores, epsilon, sensitivity = np.array([0.0, 0.1, 0.3]), 2.0, 0.05
    draws = np.bincount(
        [M._exponential_choice(scores, epsilon, sensitivity, rng) for _ in range(20_000)],
        minlength=3,
    )
    expected = np.exp(epsilon * scores / (2 * sensitivity))
    expected /= expected.sum()
    np.testing.assert_allclose(draws / draws.sum(), expected, atol=0.015)


def test_with_a_large_budget_correlated_bits_are_grouped_together() -> None:
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2, (2000, 3)).astype(np.uint8)
    bits = np.concatenate([base, base[:, [1, 2, 0]]], axis=1)  # bit 3 = bit 1, 4 = 2, 5 = 0
    groups = M.group_bits(bits, 2, 1e6, np.random.default_rng(0))
    assert groups == [[0, 5], [1, 3], [2, 4]]
    # With no budget the choice is a coin: the same bits are not always paired.
    pairings = {
        tuple(map(tuple, M.group_bits(bits, 2, 1e-9, np.random.default_rng(s)))) for s in range(20)
    }
    assert len(pairings) > 1


def test_a_group_with_as_many_states_as_values_keeps_each_value() -> None:
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 2, (300, 2)).astype(np.uint8)
    group = M.LatentGroup.fit(bits, [0, 1], DPLTSettings(latent_states=4), 0.0, rng)
    np.testing.assert_array_equal(group.assignment, np.arange(4))
    states = group.latents(bits)
    np.testing.assert_array_equal(states, bits[:, 0] + 2 * bits[:, 1])
    np.testing.assert_array_equal(group.sample(states, rng), bits)


def test_a_state_whose_values_lost_their_noisy_mass_still_draws_its_own_values() -> None:
    # Value 3 never occurs: its histogram cell is 0, yet state 3 (the value itself) must
    # draw value 3, not any value.
    bits = np.array([[0, 0], [1, 0], [0, 1]] * 50, dtype=np.uint8)
    group = M.LatentGroup.fit(
        bits, [0, 1], DPLTSettings(latent_states=4), 0.0, np.random.default_rng(0)
    )
    assert group.histogram[3] == 0
    drawn = group.sample(np.full(20, 3), np.random.default_rng(1))
    np.testing.assert_array_equal(drawn, np.ones((20, 2), dtype=np.uint8))


def test_a_latent_class_model_separates_two_clusters() -> None:
    # Three bits that are all 0 or all 1: two latent states must tell them apart.
    rng = np.random.default_rng(5)
    on = rng.integers(0, 2, 400).astype(np.uint8)
    bits = np.stack([on, on, on], axis=1)
    group = M.LatentGroup.fit(bits, [0, 1, 2], DPLTSettings(latent_states=2), 0.0, rng)
    assert group.assignment[0] != group.assignment[7]
    drawn = group.sample(group.latents(bits), rng)
    np.testing.assert_array_equal(drawn, bits)  # each state holds one value with mass


def test_the_spanning_tree_has_the_largest_weight() -> None:
    rng = np.random.default_rng(6)
    for _ in range(10):
        n = 5
        w = rng.random((n, n))
        w = (w + w.T) / 2
        edges = M.spanning_tree(w)
        assert len(edges) == n - 1
        seen = {0}
        for parent, child in edges:  # every parent precedes its children
            assert parent in seen and child not in seen
            seen.add(child)
        best = _kruskal_weight(w)
        assert sum(w[p, c] for p, c in edges) == pytest.approx(best)


def _kruskal_weight(w: np.ndarray) -> float:
    n, parent = len(w), list(range(len(w)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    total = 0.0
    pairs = sorted((-w[i, j], i, j) for i in range(n) for j in range(i + 1, n))
    for _, a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
            total += w[a, b]
    return total


@pytest.mark.parametrize("split", [(1.0, 1.0, 1.0), (2.0, 1.0, 5.0)])
def test_the_plan_spends_exactly_the_budget(split: tuple[float, float, float]) -> None:
    settings = DPLTSettings(group_size=3, budget_split=split)
    plan = M.BudgetPlan.of(4.0, [10, 7], settings)
    # Groups: 10 bits -> 3, 3, 3, 1; 7 bits -> 3, 3, 1: 7 latents, 17 - 7 choices.
    assert (plan.latents, plan.selections, plan.pairs) == (7, 10, 21)
    spent = plan.spent()
    assert spent["total"] == pytest.approx(4.0)
    for step, name in enumerate(("grouping", "mutual_information", "parameters")):
        assert spent[name] == pytest.approx(4.0 * split[step] / sum(split))
    assert plan.pair_scale == pytest.approx(2 * 21 / plan.share(1))
    assert plan.parameter_scale == pytest.approx(2 * 2 * 7 / plan.share(2))
    # The holders' own accounts (the parties' choices and histograms, the server's
    # tables) add up to the plan's.
    holders = [plan.party_spent(10, 4), plan.party_spent(7, 3), plan.server_spent()]
    assert math.fsum(h["epsilon"] for h in holders) == pytest.approx(4.0)
    assert holders[0]["grouping"] + holders[1]["grouping"] == pytest.approx(spent["grouping"])


def _two_parties(rows: int = 3000, seed: int = 0) -> tuple[list, PublicDomain]:
    """Two parties of a table whose columns at different parties depend on each other."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, rows)
    frame = pd.DataFrame(
        {
            "a": a.astype(str),
            "n": np.clip(a * 10 + rng.integers(0, 5, rows), 0, 39),
            "b": np.where(rng.random(rows) < 0.9, a % 2, 1 - a % 2).astype(str),
            "m": rng.integers(0, 8, rows),
        }
    )
    domain = PublicDomain.from_mapping(
        {
            "a": {"kind": "categorical", "categories": ["0", "1", "2", "3"]},
            "n": {"kind": "integer", "min": 0, "max": 39},
            "b": {"kind": "categorical", "categories": ["0", "1"]},
            "m": {"kind": "integer", "min": 0, "max": 7},
        }
    )
    schema = infer_schema(frame)
    parties = []
    for columns in (["a", "n"], ["b", "m"]):
        party = type("Party", (), {})()
        party.frame, party.schema = frame[columns], schema.subset(columns)
        parties.append(party)
    return parties, domain


def _error(parties: list, synthetic: pd.DataFrame) -> float:
    """Total variation of the cross-party pair (a, b) between real and synthetic."""
    real = pd.concat([p.frame for p in parties], axis=1)
    r = real.groupby(["a", "b"]).size() / len(real)
    s = synthetic.groupby(["a", "b"]).size() / len(synthetic)
    return float(0.5 * r.subtract(s, fill_value=0).abs().sum())


def test_a_large_budget_keeps_a_relation_across_parties_and_a_tiny_one_does_not() -> None:
    parties, domain = _two_parties()
    settings = DPLTSettings(bins=8, latent_states=8)
    large, _, _ = synthesize_locally(parties, domain, settings, 1e6, 0, 3000)
    tiny, _, _ = synthesize_locally(parties, domain, settings, 0.05, 0, 3000)
    assert list(large.columns) == ["a", "n", "b", "m"] and len(large) == 3000
    assert _error(parties, large) < 0.05
    assert _error(parties, tiny) > 2 * _error(parties, large)


def test_every_release_is_in_the_account(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each noisy histogram and each exponential choice made by a whole run, summed as
    releases (sensitivity over scale; epsilon of a choice), is what the plan reports: a
    release added without accounting, or accounted at the wrong scale, fails here."""
    releases: list[float] = []
    real_counts, real_choice = M.noisy_counts, M._exponential_choice

    def counted(values, size, scale, rng):  # type: ignore[no-untyped-def]
        releases.append(M.HISTOGRAM_SENSITIVITY / scale)
        return real_counts(values, size, scale, rng)

    def chosen(scores, epsilon, sensitivity, rng):  # type: ignore[no-untyped-def]
        assert sensitivity == M.mi_sensitivity(3000)
        releases.append(epsilon)
        return real_choice(scores, epsilon, sensitivity, rng)

    monkeypatch.setattr(M, "noisy_counts", counted)
    monkeypatch.setattr(M, "_exponential_choice", chosen)
    parties, domain = _two_parties()
    _, plan, _ = synthesize_locally(parties, domain, DPLTSettings(bins=8), 3.0, 1, 3000)
    assert len(releases) == plan.selections + plan.pairs + 2 * plan.latents
    assert math.fsum(releases) == pytest.approx(3.0)
    assert plan.spent()["total"] == pytest.approx(3.0)


def test_the_party_model_sends_one_state_per_row_and_group() -> None:
    parties, domain = _two_parties(500)
    settings = DPLTSettings(bins=8)
    plan = M.BudgetPlan.of(10.0, [6, 4], settings)
    party = parties[0]
    model = PartyLatentModel.fit(
        party.frame, party.schema, domain, settings, plan, np.random.default_rng(0)
    )
    assert model.latents.shape == (500, len(M.group_sizes(6, 3)))
    assert all(model.latents[:, j].max() < s for j, s in enumerate(model.states))
    decoded = model.decode(model.latents[:50], np.random.default_rng(1))
    assert list(decoded.columns) == ["a", "n"] and len(decoded) == 50
    assert set(decoded["a"]) <= {"0", "1", "2", "3"}
    assert decoded["n"].between(0, 39).all()
