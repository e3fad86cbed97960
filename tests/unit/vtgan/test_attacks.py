"""The server's reconstruction attack on paper 001's own example (Section 3.1.5, Fig. 4)."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.vtgan.attacks import reconstruct_column, reconstruction_accuracy


def _cv(position: int, n: int) -> np.ndarray:
    cond = np.zeros((n, 4), dtype=np.float32)
    cond[:, position] = 1.0
    return cond


def test_figure_4_without_shuffling_rebuilds_both_columns() -> None:
    # Rounds r..r+3 of Fig. 4 (rows 1..6 there are 0..5 here): Gender is the first block
    # of the 4-bit conditional vector, Loan the second.
    observations = [
        (np.array([0, 1, 2]), _cv(0, 3)),
        (np.array([3, 4, 5]), _cv(1, 3)),
        (np.array([0, 1]), _cv(2, 2)),
        (np.array([2, 3, 4, 5]), _cv(3, 4)),
    ]
    gender = reconstruct_column(observations, 0, 2, 6)
    loan = reconstruct_column(observations, 2, 2, 6)
    np.testing.assert_array_equal(gender, [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(loan, [0, 0, 1, 1, 1, 1])
    # "a 1:1 ratio for the first column and a 1:2 ratio for the second"
    assert np.bincount(gender).tolist() == [3, 3] and np.bincount(loan).tolist() == [2, 4]
    accuracy, baseline, seen = reconstruction_accuracy(loan, np.array([0, 0, 1, 1, 1, 1]))
    assert (accuracy, seen) == (1.0, 6) and baseline == pytest.approx(4 / 6)


def test_unseen_rows_and_bad_blocks() -> None:
    guess = reconstruct_column([(np.array([1]), _cv(0, 1))], 0, 2, 3)
    np.testing.assert_array_equal(guess, [-1, 0, -1])
    assert reconstruction_accuracy(np.full(3, -1), np.zeros(3, dtype=int))[2] == 0
    with pytest.raises(ValueError, match="start >= 0 and width >= 1"):
        reconstruct_column([], 0, 0, 3)
    with pytest.raises(ValueError, match="observation has 2 rows but a condition block"):
        reconstruct_column([(np.array([0, 1]), _cv(0, 3))], 0, 2, 3)
