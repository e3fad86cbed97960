"""The server's index/condition reconstruction attack that training-with-shuffling
defeats (paper 001, Section 3.1.5, Figs. 4-5).

In every discriminator step the chosen client tells the server its (permuted)
conditional vectors and the indices of real rows that match them: row ``rows[k]`` has
category ``c`` in the column that ``cond[k]`` names. Without shuffling, an index always
names the same person, so the server can collect these facts over many steps and
rebuild the client's categorical columns for every row it has seen. With shuffling the
index names a different person in every round, and the collected facts no longer
belong together.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def reconstruct_column(
    observations: Iterable[tuple[np.ndarray, np.ndarray]],
    start: int,
    width: int,
    n_rows: int,
) -> np.ndarray:
    """The server's guess of one categorical column for every row index.

    Parameters
    ----------
    observations
        ``(rows, cond)`` pairs: the chosen client's row indices ``(B,)`` and its permuted
        conditional vectors ``(B, cond_dim)`` of one step.
    start, width
        Where the attacked column's one-hot block lies in the client's conditional vector.
    n_rows
        Number of rows.

    Returns
    -------
    numpy.ndarray
        ``(n_rows,)`` int64: for every index the category most often seen with it in that
        column (ties to the smallest), ``-1`` where the column was never observed.
    """
    if width < 1 or start < 0:
        raise ValueError(
            f"the column block must have start >= 0 and width >= 1, got {start}, {width}"
        )
    votes = np.zeros((n_rows, width), dtype=np.int64)
    for rows, cond in observations:
        rows = np.asarray(rows, dtype=np.int64)
        block = np.asarray(cond)[:, start : start + width]
        if block.shape != (rows.shape[0], width):
            raise ValueError(
                f"observation has {rows.shape[0]} rows but a condition block of shape {block.shape}"
            )
        hit = block.sum(axis=1) > 0
        np.add.at(votes, (rows[hit], block[hit].argmax(axis=1)), 1)
    guess = votes.argmax(axis=1)
    guess[votes.sum(axis=1) == 0] = -1
    return guess


def reconstruction_accuracy(guess: np.ndarray, truth: np.ndarray) -> tuple[float, float, int]:
    """Accuracy of the guesses on the rows that have one, the accuracy of always guessing
    the most frequent true category on those rows (the no-information baseline), and how
    many rows were guessed."""
    seen = guess >= 0
    if not seen.any():
        return float("nan"), float("nan"), 0
    truth_seen = truth[seen]
    majority = np.bincount(truth_seen).argmax()
    return (
        float((guess[seen] == truth_seen).mean()),
        float((truth_seen == majority).mean()),
        int(seen.sum()),
    )
