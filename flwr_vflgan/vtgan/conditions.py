"""CTGAN's conditional vectors over one party's categorical columns (paper 001, 3.1.4-3.1.7).

A party builds a :class:`ConditionSampler` from its encoded training matrix and the
one-hot spans of its categorical columns
(:attr:`~flwr_vflgan.data.modes.ModeSpecificEncoder.discrete_spans`). The conditional
vector is those spans' blocks concatenated in order; one condition sets exactly one
category of one column.

- Training (:meth:`ConditionSampler.sample_train`): the column is uniform, the category
  follows ``log(count + 1)`` (CTGAN's ``log_frequency``; plain counts otherwise), so rare
  categories are seen more often. :meth:`ConditionSampler.sample_rows` then picks, for
  each condition, a uniformly random real row holding that category: the indices the
  selected client sends to the server (Section 3.1.4, step 4).
- Training-with-shuffling (Section 3.1.5): after every round all clients reorder their
  rows with one shared permutation; :meth:`ConditionSampler.permute` follows the new order
  in O(n) without re-scanning the matrix, so row indices from one round say nothing about
  the rows of the next.
- Publication (:meth:`ConditionSampler.sample_generation`): the column is uniform, the
  category follows its **true** frequency, so a generator that learned the conditionals
  reproduces the data's marginals.

Two known CTGAN bugs are avoided. CTGAN #273: its conditional sampling by column and
value places the 1 at a wrong offset for every column but the first; here the offset of
column ``j`` is :attr:`ConditionSampler.cond_offsets` ``[j]``, the sum of the widths of
the spans before it. CTGAN's ``sample_original_condvec`` draws generation conditions from
the log-frequency probabilities it trains with, which over-represents rare categories
in the published data; :meth:`ConditionSampler.sample_generation` uses the true
frequencies.

Written from the papers' description, not from CTGAN's (BUSL-licensed) code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional

from flwr_vflgan.data.encoder import Span

__all__ = ["ConditionBatch", "ConditionSampler", "conditional_loss"]


@dataclass(frozen=True)
class ConditionBatch:
    """A batch of training conditions.

    Parameters
    ----------
    cond
        ``(B, cond_dim)`` float32 one-hot: exactly one 1 per row, in the chosen column's block.
    mask
        ``(B, n_columns)`` float32: 1 at the chosen column.
    column
        ``(B,)`` int64 index of the chosen categorical column.
    category
        ``(B,)`` int64 category within that column.

    Raises
    ------
    ValueError
        If the arrays' shapes disagree on ``B`` or have the wrong number of dimensions.
    """

    cond: np.ndarray
    mask: np.ndarray
    column: np.ndarray
    category: np.ndarray

    def __post_init__(self) -> None:
        if self.cond.ndim != 2 or self.mask.ndim != 2:
            raise ValueError(
                f"cond and mask must be 2-D, got shapes {self.cond.shape} and {self.mask.shape}"
            )
        if self.column.ndim != 1 or self.category.ndim != 1:
            raise ValueError(
                f"column and category must be 1-D, got shapes {self.column.shape} and "
                f"{self.category.shape}"
            )
        sizes = {len(self.cond), len(self.mask), len(self.column), len(self.category)}
        if len(sizes) != 1:
            raise ValueError(
                f"batch sizes disagree: cond has {len(self.cond)} rows, mask {len(self.mask)}, "
                f"column {len(self.column)}, category {len(self.category)}"
            )

    def __len__(self) -> int:
        return len(self.column)


class ConditionSampler:
    """Conditional vectors and matching real rows for one party (see the module docstring).

    Parameters
    ----------
    encoded
        The party's encoded training matrix, ``(n_rows, width)``, finite; row order is
        the current (shared) order.
    discrete_spans
        One-hot spans of the party's categorical columns, positions in ``encoded``. The
        category of a row is the arg-max of its block. May be empty (a party without
        categorical columns contributes no condition).
    log_frequency
        Train with ``log(count + 1)`` category probabilities (CTGAN's default) instead of
        the counts. Categories that never occur have probability 0 either way.

    Raises
    ------
    TypeError
        If ``encoded`` is not numeric or ``log_frequency`` not a bool.
    ValueError
        If ``encoded`` is not 2-D with at least one row or holds NaN or infinite values,
        or a span reaches past its width.
    """

    def __init__(
        self, encoded: np.ndarray, discrete_spans: Sequence[Span], log_frequency: bool = True
    ) -> None:
        matrix = np.asarray(encoded)
        if not np.issubdtype(matrix.dtype, np.number):
            raise TypeError(f"encoded must be a numeric array, got dtype {matrix.dtype}")
        if matrix.ndim != 2 or len(matrix) == 0:
            raise ValueError(f"encoded must be 2-D with at least one row, got shape {matrix.shape}")
        n_bad = int((~np.isfinite(matrix)).sum())
        if n_bad:
            raise ValueError(f"encoded has {n_bad} NaN or infinite values; it must be finite")
        if not isinstance(log_frequency, bool):
            raise TypeError(f"log_frequency must be a bool, got {log_frequency!r}")
        spans = tuple(discrete_spans)
        for span in spans:
            if span.stop > matrix.shape[1]:
                raise ValueError(
                    f"discrete span {span.column!r} covers columns [{span.start}, {span.stop}) "
                    f"but encoded has only {matrix.shape[1]} columns"
                )
        n_rows = len(matrix)
        self._spans = spans
        self._n_rows = n_rows
        widths = np.array([span.width for span in spans], dtype=np.int64)
        self._offsets = np.cumsum(widths) - widths
        counts, rows_by_category, starts = [], [], []
        for position, span in enumerate(spans):
            codes = matrix[:, span.start : span.stop].argmax(axis=1)
            column_counts = np.bincount(codes, minlength=span.width)
            counts.append(column_counts)
            # Original row ids grouped by category; category c of this column occupies
            # [starts[offset + c], starts[offset + c] + count) of the flat array.
            rows_by_category.append(np.argsort(codes, kind="stable"))
            starts.append(position * n_rows + np.concatenate([[0], np.cumsum(column_counts)[:-1]]))
        empty = np.zeros(0, dtype=np.int64)
        self._counts = np.concatenate(counts).astype(np.int64) if spans else empty
        self._rows_by_category = np.concatenate(rows_by_category) if spans else empty
        self._category_starts = np.concatenate(starts).astype(np.int64) if spans else empty
        weights = [np.log1p(c) if log_frequency else c.astype(np.float64) for c in counts]
        self._train_probabilities = [w / w.sum() for w in weights]
        self._true_probabilities = [c / n_rows for c in counts]
        # Current row i holds original row _current_to_original[i], and vice versa.
        self._current_to_original = np.arange(n_rows, dtype=np.int64)
        self._original_to_current = np.arange(n_rows, dtype=np.int64)
        self.log_frequency = log_frequency

    # -- layout --------------------------------------------------------------------------

    @property
    def n_columns(self) -> int:
        """Number of categorical columns."""
        return len(self._spans)

    @property
    def cond_dim(self) -> int:
        """Length of the conditional vector (sum of the discrete spans' widths)."""
        return int(sum(span.width for span in self._spans))

    @property
    def cond_offsets(self) -> tuple[int, ...]:
        """Start of each column's block in the conditional vector."""
        return tuple(int(offset) for offset in self._offsets)

    @property
    def n_rows(self) -> int:
        """Number of rows of the encoded matrix."""
        return self._n_rows

    @property
    def discrete_spans(self) -> tuple[Span, ...]:
        """The spans given at construction."""
        return self._spans

    def all_counts(self) -> list[np.ndarray]:
        """The category counts of every column (a copy)."""
        return [self.category_counts(j) for j in range(self.n_columns)]

    def set_frequencies(self, counts: Sequence[np.ndarray]) -> None:
        """Draw conditions from these (e.g. differentially private) counts instead of the
        exact ones: ``sample_train`` uses their (log-)frequencies, ``sample_generation``
        their frequencies. ``sample_rows`` still uses the real rows.

        Raises
        ------
        ValueError
            If there is not one non-negative, finite count vector per column, of the
            column's width, with a positive sum.
        """
        if len(counts) != self.n_columns:
            raise ValueError(f"expected counts for {self.n_columns} columns, got {len(counts)}")
        train, true = [], []
        for span, column in zip(self._spans, counts, strict=True):
            values = np.asarray(column, dtype=np.float64)
            if values.shape != (span.width,) or not np.isfinite(values).all():
                raise ValueError(
                    f"counts of column {span.column!r} must be {span.width} finite values, "
                    f"got shape {values.shape}"
                )
            if (values < 0).any() or values.sum() <= 0:
                raise ValueError(
                    f"counts of column {span.column!r} must be >= 0 with a positive sum"
                )
            weights = np.log1p(values) if self.log_frequency else values
            train.append(weights / weights.sum())
            true.append(values / values.sum())
        self._train_probabilities = train
        self._true_probabilities = true

    def category_counts(self, column: int) -> np.ndarray:
        """Rows holding each category of ``column`` (int64, one entry per category)."""
        self._check_column_index(column)
        offset = self._offsets[column]
        return self._counts[offset : offset + self._spans[column].width].copy()

    def _check_column_index(self, column: int) -> None:
        if not 0 <= column < self.n_columns:
            raise ValueError(f"column must be in [0, {self.n_columns}), got {column}")

    # -- sampling ------------------------------------------------------------------------

    def sample_train(self, batch: int, rng: np.random.Generator) -> ConditionBatch:
        """Training conditions: a uniform column, its category by (log-)frequency.

        Parameters
        ----------
        batch
            Number of conditions, >= 1.
        rng
            Source of randomness.

        Returns
        -------
        ConditionBatch

        Raises
        ------
        ValueError
            If ``batch`` < 1.

        With no categorical column the conditions are empty (width 0), the columns and
        categories -1, and :meth:`sample_rows` draws rows uniformly: CTGAN's
        unconditional training.
        """
        column, category = self._sample(batch, rng, self._train_probabilities, "sample_train")
        if self.n_columns == 0:
            # CTGAN's unconditional case: no condition, rows drawn uniformly by sample_rows.
            empty = np.zeros((batch, 0), dtype=np.float32)
            return ConditionBatch(cond=empty, mask=empty.copy(), column=column, category=category)
        cond = np.zeros((batch, self.cond_dim), dtype=np.float32)
        cond[np.arange(batch), self._offsets[column] + category] = 1.0
        mask = np.zeros((batch, self.n_columns), dtype=np.float32)
        mask[np.arange(batch), column] = 1.0
        return ConditionBatch(cond=cond, mask=mask, column=column, category=category)

    def sample_generation(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Publication conditions: a uniform column, its category by its true frequency.

        Returns
        -------
        numpy.ndarray
            ``(n, cond_dim)`` float32 one-hot conditions.

        Raises
        ------
        ValueError
            If ``n`` < 1.

        With no categorical column the conditions are empty: ``(n, 0)``.
        """
        column, category = self._sample(n, rng, self._true_probabilities, "sample_generation")
        if self.n_columns == 0:
            return np.zeros((n, 0), dtype=np.float32)
        cond = np.zeros((n, self.cond_dim), dtype=np.float32)
        cond[np.arange(n), self._offsets[column] + category] = 1.0
        return cond

    def _sample(
        self, batch: int, rng: np.random.Generator, probabilities: list[np.ndarray], caller: str
    ) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(batch, bool) or not isinstance(batch, int | np.integer) or batch < 1:
            raise ValueError(f"{caller}: the batch size must be an integer >= 1, got {batch!r}")
        if self.n_columns == 0:
            # No column to condition on: every row stands for "any" (column -1).
            return np.full(batch, -1, dtype=np.int64), np.full(batch, -1, dtype=np.int64)
        column = rng.integers(0, self.n_columns, size=batch, dtype=np.int64)
        category = np.zeros(batch, dtype=np.int64)
        # A loop over columns (few), not rows; numpy's choice never picks a 0-probability slot.
        for index, column_probabilities in enumerate(probabilities):
            chosen = np.flatnonzero(column == index)
            category[chosen] = rng.choice(
                len(column_probabilities), size=chosen.size, p=column_probabilities
            )
        return column, category

    def sample_rows(
        self, column: np.ndarray, category: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """For each ``(column, category)`` a uniformly random row holding that category.

        Parameters
        ----------
        column, category
            ``(B,)`` integer arrays, e.g. a (permuted) :class:`ConditionBatch`'s.
        rng
            Source of randomness.

        Returns
        -------
        numpy.ndarray
            ``(B,)`` int64 row indices in the current row order (after :meth:`permute`).

        Raises
        ------
        ValueError
            If the arrays are not 1-D integer arrays of one length, a column or category
            is out of range, or no row holds a requested category (named).
        """
        column, category = np.asarray(column), np.asarray(category)
        if column.ndim != 1 or category.ndim != 1 or column.shape != category.shape:
            raise ValueError(
                f"column and category must be 1-D arrays of one length, got shapes "
                f"{column.shape} and {category.shape}"
            )
        if column.size and not (
            np.issubdtype(column.dtype, np.integer) and np.issubdtype(category.dtype, np.integer)
        ):
            raise ValueError(
                f"column and category must be integer arrays, got {column.dtype} and "
                f"{category.dtype}"
            )
        column, category = column.astype(np.int64), category.astype(np.int64)
        if self.n_columns == 0:
            if column.size and (column != -1).any():
                raise ValueError("this party has no categorical columns: column must be -1")
            # Unconditional (CTGAN without discrete columns): uniformly random rows.
            return rng.integers(0, self._n_rows, size=column.size, dtype=np.int64)
        if column.size and (column.min() < 0 or column.max() >= self.n_columns):
            bad = int(column[(column < 0) | (column >= self.n_columns)][0])
            raise ValueError(f"column must be in [0, {self.n_columns}), got {bad}")
        widths = np.array([span.width for span in self._spans], dtype=np.int64)[column]
        outside = (category < 0) | (category >= widths)
        if outside.any():
            first = int(np.flatnonzero(outside)[0])
            raise ValueError(
                f"category {int(category[first])} is out of range for column "
                f"{int(column[first])} ({self._spans[column[first]].column!r}, "
                f"{int(widths[first])} categories)"
            )
        slot = self._offsets[column] + category
        counts = self._counts[slot]
        if (counts == 0).any():
            first = int(np.flatnonzero(counts == 0)[0])
            raise ValueError(
                f"no row has category {int(category[first])} in column {int(column[first])} "
                f"({self._spans[column[first]].column!r}); it cannot be conditioned on"
            )
        within = rng.integers(0, counts)
        original = self._rows_by_category[self._category_starts[slot] + within]
        return self._original_to_current[original]

    def permute(self, permutation: np.ndarray) -> None:
        """Follow a reordering of the rows: new row ``i`` is current row ``permutation[i]``.

        O(n) and vectorised; :meth:`sample_rows` returns indices in the new order.

        Raises
        ------
        ValueError
            If ``permutation`` is not a permutation of ``range(n_rows)``.
        """
        array = np.asarray(permutation)
        if array.shape != (self._n_rows,) or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"permutation must be a 1-D integer array of length n_rows={self._n_rows}, "
                f"got shape {array.shape} and dtype {array.dtype}"
            )
        if array.min() < 0 or array.max() >= self._n_rows:
            raise ValueError(
                f"permutation must hold each of 0..{self._n_rows - 1} once, got values in "
                f"[{array.min()}, {array.max()}]"
            )
        seen = np.zeros(self._n_rows, dtype=bool)
        seen[array] = True
        if not seen.all():
            raise ValueError(
                f"permutation must hold each of 0..{self._n_rows - 1} once; "
                f"{int((~seen).sum())} values are missing (e.g. {int(np.flatnonzero(~seen)[0])})"
            )
        self._current_to_original = self._current_to_original[array]
        self._original_to_current[self._current_to_original] = np.arange(
            self._n_rows, dtype=np.int64
        )


def conditional_loss(
    generated_logits: torch.Tensor,
    discrete_spans: Sequence[Span],
    cond: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """CTGAN's conditional loss of the generator: cross-entropy on the chosen column.

    For every categorical column ``j`` the cross-entropy between the raw logits of its
    span and the category set in ``cond``'s block ``j`` is kept where ``mask[:, j] == 1``;
    the kept terms are summed and divided by the batch size.

    Parameters
    ----------
    generated_logits
        ``(B, width)`` pre-activation generator output of the party.
    discrete_spans
        The categorical spans, positions in ``generated_logits`` (the same as the
        sampler's).
    cond
        ``(B, sum of span widths)`` conditions.
    mask
        ``(B, len(discrete_spans))`` chosen-column mask.

    Returns
    -------
    torch.Tensor
        Scalar, differentiable with respect to ``generated_logits`` (0 without spans).

    Raises
    ------
    ValueError
        If the shapes do not match (both sides named) or a span reaches past the logits.
    """
    spans = tuple(discrete_spans)
    if generated_logits.ndim != 2:
        raise ValueError(
            f"generated_logits must be 2-D (batch, width), got shape {tuple(generated_logits.shape)}"
        )
    batch = generated_logits.shape[0]
    cond_dim = sum(span.width for span in spans)
    if tuple(cond.shape) != (batch, cond_dim):
        raise ValueError(
            f"cond has shape {tuple(cond.shape)}, but generated_logits has {batch} rows and the "
            f"spans need {cond_dim} condition columns: expected ({batch}, {cond_dim})"
        )
    if tuple(mask.shape) != (batch, len(spans)):
        raise ValueError(
            f"mask has shape {tuple(mask.shape)}, but generated_logits has {batch} rows and "
            f"there are {len(spans)} spans: expected ({batch}, {len(spans)})"
        )
    # The empty slice keeps the result in the graph when there are no spans (and, unlike
    # multiplying by 0, stays 0 if a logit is infinite).
    total = generated_logits[:, :0].sum()
    offset = 0
    for index, span in enumerate(spans):
        if span.stop > generated_logits.shape[1]:
            raise ValueError(
                f"discrete span {span.column!r} covers columns [{span.start}, {span.stop}) but "
                f"generated_logits has only {generated_logits.shape[1]} columns"
            )
        target = cond[:, offset : offset + span.width].argmax(dim=1)
        losses = functional.cross_entropy(
            generated_logits[:, span.start : span.stop], target, reduction="none"
        )
        total = total + (losses * mask[:, index].to(losses.dtype)).sum()
        offset += span.width
    return total / max(batch, 1)
