"""The one-run audit (Steinke, Nasr and Jagielski 2023): its p-value and bound against
closed forms, its soundness on a mechanism of known epsilon, and the canaries' scores on
generators that copy or ignore their data."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.privacy.audit import (
    audit_p_value,
    draw_canaries,
    epsilon_lower_bound,
    membership_scores,
    one_run_audit,
)


def test_pure_dp_p_value_is_the_binomial_tail():
    for epsilon in (0.0, 0.5, 2.0):
        q = math.exp(epsilon) / (1 + math.exp(epsilon))
        expected = scipy.stats.binom.sf(69, 100, q)
        assert audit_p_value(1000, 100, 70, epsilon, 0.0) == pytest.approx(expected, rel=1e-12)


def test_delta_adds_its_share_and_the_p_value_rises_with_epsilon():
    plain = audit_p_value(1000, 100, 70, 1.0, 0.0)
    assert audit_p_value(1000, 100, 70, 1.0, 1e-5) > plain
    values = [audit_p_value(1000, 100, 70, e, 1e-5) for e in np.linspace(0, 3, 13)]
    # A larger epsilon explains more correct guesses: the p-value of the same count rises.
    assert all(a <= b for a, b in itertools.pairwise(values))
    assert audit_p_value(1000, 100, 0, 1.0, 1e-5) == 1.0


def test_all_guesses_right_gives_the_closed_form_bound():
    # delta 0, r = v: the bound is the epsilon with q**r = 0.05, q = e^eps / (1 + e^eps).
    q = 0.05 ** (1 / 100)
    expected = math.log(q / (1 - q))
    assert epsilon_lower_bound(1000, 100, 100, 0.0, 0.95) == pytest.approx(expected, abs=1e-6)


def test_half_right_gives_no_bound():
    assert epsilon_lower_bound(1000, 100, 50, 1e-5) == 0.0


@pytest.mark.parametrize("bad", [(10, 20, 5), (10, 5, 6), (10, 5, -1)])
def test_impossible_counts_are_refused(bad):
    with pytest.raises(ValueError, match="correct <= guesses <= canaries"):
        audit_p_value(*bad, 1.0, 0.0)


def test_the_bound_is_sound_on_randomised_response():
    """Guesses each right with probability e^eps / (1 + e^eps), the best an eps-DP
    mechanism allows: the bound exceeds eps in at most about 5% of audits."""
    epsilon, trials, r = 1.0, 300, 200
    rng = np.random.default_rng(0)
    q = math.exp(epsilon) / (1 + math.exp(epsilon))
    over = sum(
        epsilon_lower_bound(1000, r, int(rng.binomial(r, q)), 0.0) > epsilon for _ in range(trials)
    )
    assert over / trials <= 0.08
    # ... and it is not vacuous: most audits of that mechanism find some privacy loss.
    found = sum(
        epsilon_lower_bound(1000, r, int(rng.binomial(r, q)), 0.0) > 0.3 for _ in range(100)
    )
    assert found > 50


def test_perfect_scores_give_a_high_bound_and_random_ones_none():
    rng = np.random.default_rng(1)
    included = rng.random(1000) < 0.5
    perfect = one_run_audit(included.astype(float), included, [25, 100, 250], 1e-5)
    assert perfect.correct == perfect.guesses == 500 and perfect.epsilon > 4
    random = one_run_audit(rng.normal(size=1000), included, [25, 100, 250], 1e-5)
    assert random.epsilon < 0.5
    assert set(random.tried) == {25, 100, 250}


def test_guess_counts_beyond_half_the_canaries_are_refused():
    with pytest.raises(ValueError, match="between 1 and half the 10 canaries"):
        one_run_audit(np.zeros(10), np.zeros(10, bool), [6], 1e-5)


SCHEMA = Schema(
    (
        ColumnSpec("age", ColumnKind.INTEGER),
        ColumnSpec("hours", ColumnKind.CONTINUOUS),
        ColumnSpec("job", ColumnKind.CATEGORICAL),
    )
)


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(20, 40, n),
            "hours": rng.normal(40, 2, n),
            "job": rng.choice(["a", "b"], n),
        }
    )


def test_canary_numbers_come_from_the_domain_when_given_and_categories_from_the_table():
    frame = _table(200, 0)
    domain = PublicDomain.from_mapping(
        {
            "age": {"kind": "integer", "min": 0, "max": 100},
            "hours": {"kind": "continuous", "min": 0, "max": 99},
            "job": {"kind": "categorical", "categories": ["a", "b", "c", "d"]},
        }
    )
    canaries = draw_canaries(SCHEMA, frame, 500, seed=3, domain=domain)
    assert list(canaries.columns) == SCHEMA.names and len(canaries) == 500
    assert canaries["age"].between(0, 100).all() and canaries["age"].max() > 60
    assert set(canaries["job"]) == {"a", "b"}  # every encoder of the table knows them
    assert canaries["age"].dtype == frame["age"].dtype
    seen = draw_canaries(SCHEMA, frame, 500, seed=3)
    assert seen["age"].between(20, 39).all() and set(seen["job"]) <= {"a", "b"}
    assert draw_canaries(SCHEMA, frame, 500, seed=3).equals(seen)


def test_a_generator_that_copies_its_table_is_caught_and_one_that_ignores_it_is_not():
    kept = _table(300, 0)
    canaries = draw_canaries(SCHEMA, kept, 400, seed=5)
    included = np.random.default_rng(6).random(400) < 0.5
    training = pd.concat([kept, canaries[included]], ignore_index=True)
    copied = membership_scores(canaries, training, kept, SCHEMA)
    caught = one_run_audit(copied, included, [25, 50, 100], 1e-5)
    assert caught.correct == caught.guesses and caught.epsilon > 2
    ignored = membership_scores(canaries, _table(len(training), 9), kept, SCHEMA)
    assert one_run_audit(ignored, included, [25, 50, 100], 1e-5).epsilon < 0.5
