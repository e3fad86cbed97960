"""Paper 000's Table 3 baseline attacks: each score on points worked by hand or against an
independent estimator, and the attacks on generators that copy their members or ignore
them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.privacy.baselines import (
    _log_kde,
    attack_scores,
    domias,
    gan_leaks_0,
    gan_leaks_cal,
    hamming_monte_carlo,
    logan_d1,
    mia_accuracy,
    monte_carlo,
    score_attacks,
)

RECORDS = np.array([[0.0, 0.0], [3.0, 4.0]])
SYNTHETIC = np.array([[0.0, 1.0], [3.0, 3.0], [10.0, 10.0]])
REFERENCE = np.array([[0.0, 2.0], [6.0, 8.0]])


def test_gan_leaks_by_hand():
    # Nearest synthetic squared distances: 1 (to (0, 1)) and 1 (to (3, 3)).
    assert gan_leaks_0(RECORDS, SYNTHETIC).tolist() == [-1.0, -1.0]
    # Nearest reference squared distances: 4 (to (0, 2)) and 13 (to (0, 2): 9 + 4).
    assert gan_leaks_cal(RECORDS, SYNTHETIC, REFERENCE).tolist() == [3.0, 12.0]


def test_monte_carlo_counts_the_synthetic_rows_inside_the_median_nearest_distance():
    synthetic = np.array([[0.1], [0.2], [0.9], [4.0]])
    records = np.array([[0.0], [0.15], [5.0]])
    # Nearest squared distances: 0.01, 0.0025, 1.0 -> eps (their median) 0.01. Strictly
    # closer: nothing for record 0 (its nearest is at eps), 0.1 and 0.2 (0.0025 each) for
    # record 0.15: 2 of 4 rows; nothing for 5.
    assert monte_carlo(records, synthetic).tolist() == [0.0, 0.5, 0.0]


def test_the_diagonal_kernel_estimate_is_scipys_in_one_dimension():
    rng = np.random.default_rng(0)
    sample, points = rng.normal(size=(200, 1)), rng.normal(size=(7, 1))
    expected = scipy.stats.gaussian_kde(sample[:, 0]).logpdf(points[:, 0])
    assert _log_kde(points, sample) == pytest.approx(expected, rel=1e-9)


def test_domias_is_the_log_density_ratio_and_ignores_constant_columns():
    rng = np.random.default_rng(1)
    synthetic = np.column_stack([rng.normal(size=300), np.ones(300)])
    reference = np.column_stack([rng.normal(size=300) * 2, np.ones(300)])
    points = np.array([[0.0, 1.0], [3.0, 1.0]])
    expected = _log_kde(points[:, :1], synthetic[:, :1]) - _log_kde(points[:, :1], reference[:, :1])
    assert domias(points, synthetic, reference) == pytest.approx(expected)
    # Near the centre the narrower synthetic density is higher; far out, lower.
    ratio = domias(points, synthetic, reference)
    assert ratio[0] > 0 > ratio[1]


def _table(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"x": rng.normal(size=rows), "y": rng.normal(size=rows), "c": rng.choice(list("abc"), rows)}
    )


SCHEMA = Schema(
    (
        ColumnSpec("x", ColumnKind.CONTINUOUS),
        ColumnSpec("y", ColumnKind.CONTINUOUS),
        ColumnSpec("c", ColumnKind.CATEGORICAL),
    )
)


def test_copied_members_are_found_and_an_ignorant_generator_gives_nothing_away():
    members, non_members, reference = _table(100, 0), _table(100, 1), _table(2000, 2)
    copied = score_attacks(attack_scores(members, non_members, members, reference, SCHEMA), 100)
    for name in ("mc", "gan_leaks_0"):
        assert copied[name].auc == 1.0 and copied[name].accuracy == 1.0
    assert copied["gan_leaks_cal"].auc > 0.9
    ignored = score_attacks(
        attack_scores(members, non_members, _table(100, 3), reference, SCHEMA), 100
    )
    # 100 + 100 records: one AUC's standard error is about 0.04; 0.15 is over three.
    for name, result in ignored.items():
        assert abs(result.auc - 0.5) < 0.15, name


def test_learned_attacks_repeat_under_a_seed_and_errors_name_the_problem():
    rng = np.random.default_rng(4)
    data = [rng.normal(size=(40, 3)) for _ in range(3)]
    first, again = (logan_d1(*data, seed=7, steps=20) for _ in range(2))
    assert np.array_equal(first, again) and np.isfinite(first).all()
    table = _table(10, 0)
    with pytest.raises(ValueError, match=r"unknown attacks \['logan_2'\]"):
        attack_scores(table, table, table, table, SCHEMA, attacks=("logan_2",))
    with pytest.raises(ValueError, match="at least one member and one non-member"):
        attack_scores(table.iloc[:0], table, table, table, SCHEMA)


def test_the_hamming_monte_carlo_attack_by_hand():
    """Paper 004, eq. 5.3: records (0,0,0) and (1,1,1) against synthetic rows (0,0,1),
    (0,0,0), (2,2,2): nearest distances 0 and 2, median threshold 1, so the first record
    has 2 of 3 rows within distance 1 and the second none."""
    records = np.array([[0, 0, 0], [1, 1, 1]])
    synthetic = np.array([[0, 0, 1], [0, 0, 0], [2, 2, 2]])
    np.testing.assert_allclose(hamming_monte_carlo(records, synthetic), [2 / 3, 0.0])
    with pytest.raises(ValueError, match="same attributes"):
        hamming_monte_carlo(records, synthetic[:, :2])


def test_mia_accuracy_counts_members_among_the_top_scores():
    # members first (3), then 3 non-members
    assert mia_accuracy(np.array([0.9, 0.8, 0.1, 0.7, 0.2, 0.0]), 3) == pytest.approx(2 / 3)
    assert mia_accuracy(np.array([3.0, 2.0, 1.0, 0.0, 0.0, 0.0]), 3) == 1.0
    # A constant score is a coin: half of the picks are members whatever the order.
    assert mia_accuracy(np.zeros(6), 3) == pytest.approx(0.5)
    # Ties at the cut share their members: 2 members above it, then 1 pick among 2 tied
    # records of which 1 is a member.
    assert mia_accuracy(np.array([1.0, 0.5, 0.9, 0.5, 0.0, 0.0]), 3) == pytest.approx(2.5 / 3)
    with pytest.raises(ValueError, match=r"members must be in \(0, 4\)"):
        mia_accuracy(np.zeros(4), 4)
