"""Tests for flwr_vflgan.vtgan.conditions (CTGAN's conditional vectors, per party)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flwr_vflgan.data.encoder import Span
from flwr_vflgan.vtgan.conditions import ConditionBatch, ConditionSampler, conditional_loss

# Encoded layout of 8 rows: [scalar | a (2 categories) | mode block (2) | b (3 categories)].
SPAN_A = Span("a", 1, 2, "gumbel_softmax")
SPAN_B = Span("b", 5, 3, "gumbel_softmax")
SPANS = (SPAN_A, SPAN_B)
CATEGORY_A = [0, 1, 0, 0, 1, 0, 0, 0]  # counts [6, 2]
CATEGORY_B = [2, 0, 0, 2, 0, 2, 0, 0]  # counts [5, 0, 3]: category 1 never occurs


def encoded_matrix() -> np.ndarray:
    rng = np.random.default_rng(0)
    x = np.zeros((8, 8), dtype=np.float32)
    x[:, 0] = rng.uniform(-0.9, 0.9, 8)
    x[np.arange(8), 1 + np.array(CATEGORY_A)] = 1
    x[np.arange(8), 3 + rng.integers(0, 2, 8)] = 1
    x[np.arange(8), 5 + np.array(CATEGORY_B)] = 1
    return x


def sampler(log_frequency: bool = True) -> ConditionSampler:
    return ConditionSampler(encoded_matrix(), SPANS, log_frequency=log_frequency)


def assert_frequencies(observed: np.ndarray, expected: list[float]) -> None:
    """Each share within 4 binomial standard deviations of ``expected``."""
    n = observed.size
    for category, p in enumerate(expected):
        share = float((observed == category).mean())
        assert abs(share - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12, (category, share, p)


class TestLayout:
    def test_dimensions_and_offsets(self) -> None:
        s = sampler()
        assert (s.n_columns, s.cond_dim, s.cond_offsets, s.n_rows) == (2, 5, (0, 2), 8)
        assert s.discrete_spans == SPANS
        np.testing.assert_array_equal(s.category_counts(0), [6, 2])
        np.testing.assert_array_equal(s.category_counts(1), [5, 0, 3])

    def test_no_categorical_columns_is_ctgans_unconditional_case(self) -> None:
        s = ConditionSampler(encoded_matrix(), [])
        assert (s.n_columns, s.cond_dim, s.cond_offsets) == (0, 0, ())
        rng = np.random.default_rng(0)
        drawn = s.sample_train(4, rng)
        assert drawn.cond.shape == (4, 0) and drawn.mask.shape == (4, 0)
        assert (drawn.column == -1).all() and (drawn.category == -1).all()
        assert s.sample_generation(3, rng).shape == (3, 0)
        rows = s.sample_rows(drawn.column, drawn.category, np.random.default_rng(1))
        assert rows.shape == (4,) and ((rows >= 0) & (rows < s.n_rows)).all()
        many = s.sample_rows(np.full(4000, -1), np.full(4000, -1), np.random.default_rng(2))
        assert np.bincount(many, minlength=s.n_rows).min() > 0  # uniform over every row
        with pytest.raises(ValueError, match="no categorical columns: column must be -1"):
            s.sample_rows(np.zeros(2, np.int64), np.zeros(2, np.int64), rng)
        with pytest.raises(ValueError, match="batch size must be an integer >= 1"):
            s.sample_train(0, rng)


class TestSampleTrain:
    def test_cond_and_mask_put_the_one_at_the_right_offset(self) -> None:
        batch = sampler().sample_train(2000, np.random.default_rng(1))
        assert len(batch) == 2000
        assert batch.cond.dtype == np.float32 and batch.mask.dtype == np.float32
        assert batch.column.dtype == np.int64 and batch.category.dtype == np.int64
        np.testing.assert_array_equal(batch.cond.sum(axis=1), 1)
        np.testing.assert_array_equal(batch.mask.sum(axis=1), 1)
        offsets = np.array([0, 2])  # by hand: a's block is [0, 2), b's is [2, 5)
        rows = np.arange(2000)
        np.testing.assert_array_equal(batch.cond[rows, offsets[batch.column] + batch.category], 1)
        np.testing.assert_array_equal(batch.mask[rows, batch.column], 1)
        # Both columns occur, so the offset of the second column is exercised (CTGAN #273).
        assert set(batch.column.tolist()) == {0, 1}

    def test_columns_uniform_categories_by_log_frequency(self) -> None:
        batch = sampler().sample_train(200_000, np.random.default_rng(2))
        assert_frequencies(batch.column, [0.5, 0.5])
        a = [math.log(7), math.log(3)]
        b = [math.log(6), 0.0, math.log(4)]
        assert_frequencies(batch.category[batch.column == 0], [v / sum(a) for v in a])
        assert_frequencies(batch.category[batch.column == 1], [v / sum(b) for v in b])
        assert not np.any((batch.column == 1) & (batch.category == 1))

    def test_plain_frequency(self) -> None:
        batch = sampler(log_frequency=False).sample_train(100_000, np.random.default_rng(3))
        assert_frequencies(batch.category[batch.column == 0], [6 / 8, 2 / 8])
        assert_frequencies(batch.category[batch.column == 1], [5 / 8, 0.0, 3 / 8])

    def test_same_seed_same_batch(self) -> None:
        first = sampler().sample_train(50, np.random.default_rng(7))
        second = sampler().sample_train(50, np.random.default_rng(7))
        np.testing.assert_array_equal(first.cond, second.cond)
        np.testing.assert_array_equal(first.column, second.column)

    @pytest.mark.parametrize("batch", [0, -3, 2.0, True])
    def test_batch_size(self, batch: object) -> None:
        with pytest.raises(ValueError, match="batch size must be an integer >= 1"):
            sampler().sample_train(batch, np.random.default_rng(0))  # type: ignore[arg-type]


class TestSampleGeneration:
    def test_true_frequencies(self) -> None:
        cond = sampler().sample_generation(200_000, np.random.default_rng(4))
        assert cond.shape == (200_000, 5) and cond.dtype == np.float32
        np.testing.assert_array_equal(cond.sum(axis=1), 1)
        column = (cond[:, 2:].sum(axis=1) == 1).astype(np.int64)
        assert_frequencies(column, [0.5, 0.5])
        assert_frequencies(cond[column == 0, :2].argmax(axis=1), [6 / 8, 2 / 8])
        assert_frequencies(cond[column == 1, 2:].argmax(axis=1), [5 / 8, 0.0, 3 / 8])

    def test_size(self) -> None:
        with pytest.raises(ValueError, match="sample_generation: the batch size must be"):
            sampler().sample_generation(0, np.random.default_rng(0))


class TestSampleRows:
    def test_rows_hold_the_requested_category(self) -> None:
        s, x = sampler(), encoded_matrix()
        rng = np.random.default_rng(5)
        batch = s.sample_train(1000, rng)
        rows = s.sample_rows(batch.column, batch.category, rng)
        assert rows.dtype == np.int64 and rows.shape == (1000,)
        starts = np.array([SPAN_A.start, SPAN_B.start])
        np.testing.assert_array_equal(x[rows, starts[batch.column] + batch.category], 1)

    def test_rows_are_uniform_among_matches(self) -> None:
        rows = sampler().sample_rows(
            np.zeros(60_000, dtype=np.int64),
            np.ones(60_000, dtype=np.int64),
            np.random.default_rng(6),
        )
        # a == 1 in rows 1 and 4 only.
        assert set(rows.tolist()) == {1, 4}
        assert_frequencies((rows == 4).astype(np.int64), [0.5, 0.5])

    def test_after_permute_rows_are_in_the_new_order(self) -> None:
        s, x = sampler(), encoded_matrix()
        rng = np.random.default_rng(8)
        first, second = rng.permutation(8), rng.permutation(8)
        s.permute(first)
        s.permute(second)
        current = x[first][second]
        batch = s.sample_train(1000, rng)
        rows = s.sample_rows(batch.column, batch.category, rng)
        starts = np.array([SPAN_A.start, SPAN_B.start])
        np.testing.assert_array_equal(current[rows, starts[batch.column] + batch.category], 1)
        # b == 2 held by original rows 0, 3 and 5: where are they now?
        expected = {int(i) for i in np.flatnonzero(np.isin(first[second], [0, 3, 5]))}
        rows = s.sample_rows(np.ones(500, np.int64), np.full(500, 2), rng)
        assert set(rows.tolist()) == expected

    def test_category_without_rows(self) -> None:
        with pytest.raises(ValueError, match=r"no row has category 1 in column 1 \('b'\)"):
            sampler().sample_rows(np.array([0, 1]), np.array([0, 1]), np.random.default_rng(0))

    def test_category_out_of_range(self) -> None:
        with pytest.raises(ValueError, match=r"category 2 is out of range for column 0 \('a', 2"):
            sampler().sample_rows(np.array([0]), np.array([2]), np.random.default_rng(0))

    def test_column_out_of_range(self) -> None:
        with pytest.raises(ValueError, match=r"column must be in \[0, 2\), got 2"):
            sampler().sample_rows(np.array([2]), np.array([0]), np.random.default_rng(0))

    def test_shapes(self) -> None:
        with pytest.raises(ValueError, match=r"got shapes \(2,\) and \(3,\)"):
            sampler().sample_rows(np.zeros(2, int), np.zeros(3, int), np.random.default_rng(0))

    def test_dtype(self) -> None:
        with pytest.raises(ValueError, match="must be integer arrays, got float64 and int64"):
            sampler().sample_rows(np.zeros(2), np.zeros(2, np.int64), np.random.default_rng(0))


class TestPermute:
    def test_wrong_length(self) -> None:
        with pytest.raises(ValueError, match=r"length n_rows=8, got shape \(7,\)"):
            sampler().permute(np.arange(7))

    def test_not_integer(self) -> None:
        with pytest.raises(ValueError, match=r"1-D integer array.*dtype float64"):
            sampler().permute(np.arange(8.0))

    def test_repeated_value(self) -> None:
        with pytest.raises(ValueError, match=r"1 values are missing \(e\.g\. 7\)"):
            sampler().permute(np.array([0, 1, 2, 3, 4, 5, 6, 6]))

    def test_out_of_range(self) -> None:
        with pytest.raises(ValueError, match=r"each of 0..7 once, got values in \[0, 8\]"):
            sampler().permute(np.array([0, 1, 2, 3, 4, 5, 6, 8]))


class TestConstruction:
    def test_not_2d(self) -> None:
        with pytest.raises(ValueError, match=r"encoded must be 2-D with at least one row.*\(8,\)"):
            ConditionSampler(np.zeros(8), SPANS)

    def test_no_rows(self) -> None:
        with pytest.raises(ValueError, match=r"at least one row, got shape \(0, 8\)"):
            ConditionSampler(np.zeros((0, 8)), SPANS)

    def test_not_finite(self) -> None:
        x = encoded_matrix()
        x[2, 0] = np.inf
        with pytest.raises(ValueError, match="encoded has 1 NaN or infinite values"):
            ConditionSampler(x, SPANS)

    def test_not_numeric(self) -> None:
        with pytest.raises(TypeError, match="encoded must be a numeric array"):
            ConditionSampler(np.array([["a"]]), [])

    def test_span_outside(self) -> None:
        with pytest.raises(ValueError, match=r"'b' covers columns \[5, 8\) but encoded has only 6"):
            ConditionSampler(encoded_matrix()[:, :6], SPANS)

    def test_log_frequency_type(self) -> None:
        with pytest.raises(TypeError, match="log_frequency must be a bool, got 1"):
            ConditionSampler(encoded_matrix(), SPANS, log_frequency=1)  # type: ignore[arg-type]

    def test_category_counts_index(self) -> None:
        with pytest.raises(ValueError, match=r"column must be in \[0, 2\), got 5"):
            sampler().category_counts(5)

    def test_batch_shapes(self) -> None:
        with pytest.raises(ValueError, match="cond has 3 rows, mask 2"):
            ConditionBatch(
                np.zeros((3, 5)), np.zeros((2, 2)), np.zeros(2, np.int64), np.zeros(2, np.int64)
            )
        with pytest.raises(ValueError, match="cond and mask must be 2-D"):
            ConditionBatch(np.zeros(3), np.zeros((3, 2)), np.zeros(3), np.zeros(3))
        with pytest.raises(ValueError, match="column and category must be 1-D"):
            ConditionBatch(np.zeros((3, 5)), np.zeros((3, 2)), np.zeros((3, 1)), np.zeros(3))


LOGITS = [
    [0.3, 1.0, -0.5, 2.0, 0.0, 0.2, -1.0, 0.7],
    [-0.2, 0.4, 0.9, 0.0, 1.0, 1.5, 0.1, -0.3],
]


def cross_entropy(logits: list[float], target: int) -> float:
    return -(logits[target] - math.log(sum(math.exp(v) for v in logits)))


class TestConditionalLoss:
    def setup_method(self) -> None:
        self.logits = torch.tensor(LOGITS, requires_grad=True)
        # Row 0 conditions on a = 1, row 1 on b = 2.
        self.cond = torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]])
        self.mask = torch.tensor([[1.0, 0.0], [0.0, 1.0]])

    def test_value_by_hand(self) -> None:
        loss = conditional_loss(self.logits, SPANS, self.cond, self.mask)
        expected = (cross_entropy(LOGITS[0][1:3], 1) + cross_entropy(LOGITS[1][5:8], 2)) / 2
        assert loss.shape == ()
        assert loss.item() == pytest.approx(expected, rel=1e-6)

    def test_unmasked_columns_do_not_count(self) -> None:
        changed = torch.tensor(LOGITS)
        changed[0, 5:8] = torch.tensor([9.0, -9.0, 3.0])  # row 0's b: unmasked
        changed[1, 1:3] = torch.tensor([-7.0, 7.0])  # row 1's a: unmasked
        before = conditional_loss(self.logits, SPANS, self.cond, self.mask)
        after = conditional_loss(changed, SPANS, self.cond, self.mask)
        assert after.item() == pytest.approx(before.item(), rel=1e-6)

    def test_gradient_only_inside_the_masked_span(self) -> None:
        conditional_loss(self.logits, SPANS, self.cond, self.mask).backward()
        grad = self.logits.grad
        assert grad is not None
        nonzero = grad != 0
        expected = torch.zeros(2, 8, dtype=torch.bool)
        expected[0, 1:3] = True
        expected[1, 5:8] = True
        assert torch.equal(nonzero, expected)
        # d/dlogits of cross-entropy: softmax - one_hot; row 0's a by hand, over batch 2.
        e1, e2 = math.exp(1.0), math.exp(-0.5)
        assert grad[0, 1].item() == pytest.approx((e1 / (e1 + e2) - 0) / 2, rel=1e-5)
        assert grad[0, 2].item() == pytest.approx((e2 / (e1 + e2) - 1) / 2, rel=1e-5)

    def test_without_spans_is_zero_and_differentiable(self) -> None:
        loss = conditional_loss(self.logits, [], torch.zeros(2, 0), torch.zeros(2, 0))
        assert loss.item() == 0.0
        loss.backward()
        assert self.logits.grad is not None and torch.all(self.logits.grad == 0)

    def test_cond_shape(self) -> None:
        with pytest.raises(ValueError, match=r"cond has shape \(2, 4\).*expected \(2, 5\)"):
            conditional_loss(self.logits, SPANS, self.cond[:, :4], self.mask)

    def test_mask_shape(self) -> None:
        with pytest.raises(ValueError, match=r"mask has shape \(1, 2\).*expected \(2, 2\)"):
            conditional_loss(self.logits, SPANS, self.cond, self.mask[:1])

    def test_logits_shape(self) -> None:
        with pytest.raises(ValueError, match=r"generated_logits must be 2-D.*\(8,\)"):
            conditional_loss(self.logits[0], SPANS, self.cond, self.mask)

    def test_span_outside_logits(self) -> None:
        with pytest.raises(ValueError, match=r"'b' covers columns \[5, 8\) but generated_logits"):
            conditional_loss(self.logits[:, :7], SPANS, self.cond, self.mask)
