"""Label-stealing attacks and the leak AUC (paper 002, Section 3.5, eqs. 8-10)."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.gafm.attacks import (
    ATTACKS,
    LeakAccumulator,
    attack_scores,
    cosine_scores,
    leak_auc,
    mean_attack,
    median_attack,
    norm_scores,
)

# --- leak AUC (eq. 10) ------------------------------------------------------------------


def test_leak_auc_hand_computed() -> None:
    labels = np.array([0, 0, 1, 1])
    # Positive/negative pairs ranked correctly: (0.35 > 0.1), (0.8 > 0.1), (0.8 > 0.4): 3/4.
    assert leak_auc(labels, np.array([0.1, 0.4, 0.35, 0.8])) == pytest.approx(0.75)
    # Reversed scores give auc = 0.25, flipped to 0.75.
    assert leak_auc(labels, -np.array([0.1, 0.4, 0.35, 0.8])) == pytest.approx(0.75)


def test_leak_auc_flips_perfectly_anti_correlated_scores() -> None:
    labels = np.array([1, 1, 0, 0, 0])
    assert leak_auc(labels, np.array([0.0, 0.1, 0.7, 0.8, 0.9])) == pytest.approx(1.0)
    assert leak_auc(labels, np.array([1.0, 0.9, 0.2, 0.1, 0.0])) == pytest.approx(1.0)


def test_leak_auc_ties_and_hard_predictions() -> None:
    assert leak_auc(np.array([0, 1]), np.array([0.5, 0.5])) == pytest.approx(0.5)
    # Hard predictions: pairs (pos 1, neg 0) count 1, (pos 1, neg 1) count 1/2 -> 3/4.
    assert leak_auc(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])) == pytest.approx(0.75)
    assert leak_auc(np.array([False, True]), np.array([0.0, 1.0])) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("labels", "scores", "match"),
    [
        ([0, 1, 1], [0.1, 0.2], "differ in length"),
        ([0, 2, 1], [0.1, 0.2, 0.3], "0 or 1"),
        ([1, 1, 1], [0.1, 0.2, 0.3], "only class 1"),
        ([0, 0], [0.1, 0.2], "only class 0"),
        ([0, 1], [0.1, np.nan], "non-finite"),
        ([0, 1], [0.1, np.inf], "non-finite"),
        ([[0, 1]], [0.1, 0.2], "1-D"),
    ],
)
def test_leak_auc_validation(labels: list, scores: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        leak_auc(np.array(labels), np.array(scores))


# --- individual attacks -----------------------------------------------------------------


def test_norm_scores() -> None:
    g = np.array([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.0]])
    np.testing.assert_allclose(norm_scores(g), [5.0, 0.0, 1.0])


def test_cosine_scores_and_zero_norms() -> None:
    g = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(
        cosine_scores(g, np.array([2.0, 0.0])), [1.0, 0.0, -1.0, 0.0, np.sqrt(0.5)]
    )
    np.testing.assert_array_equal(cosine_scores(g, np.zeros(2)), np.zeros(5))
    with pytest.raises(ValueError, match="hint must have shape"):
        cosine_scores(g, np.zeros(3))


def _separable(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positives: norm 2 along +e1; negatives: norm 1 along -e1; plus tiny noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    labels[:2] = [0, 1]
    g = np.zeros((n, 4))
    g[:, 0] = np.where(labels == 1, 2.0, -1.0)
    return g + 1e-3 * rng.standard_normal(g.shape), labels


def test_separable_gradients_leak_completely() -> None:
    g, y = _separable(200, seed=0)
    scores = attack_scores(g, y, np.random.default_rng(1))
    assert tuple(scores) == ATTACKS
    for name in ATTACKS:
        assert scores[name].shape == (200,)
        if name != "median_split":  # it splits at 50%, whatever the classes' shares
            assert leak_auc(y, scores[name]) == pytest.approx(1.0), name
    assert leak_auc(y, scores["median_split"]) > 0.9
    np.testing.assert_array_equal(scores["mean"], y)
    np.testing.assert_array_equal(scores["median"], y)


def test_label_independent_gradients_do_not_leak() -> None:
    rng = np.random.default_rng(7)
    g = rng.standard_normal((4000, 8))
    y = rng.integers(0, 2, size=4000)
    scores = attack_scores(g, y, rng)
    for name in ATTACKS:
        assert leak_auc(y, scores[name]) == pytest.approx(0.5, abs=0.05), name


def test_median_attack_is_robust_to_an_outlier() -> None:
    # Four positives at x = 1 and one at x = 100; five negatives at x = -1.
    # mu_1 = 20.8 is dragged away, so the positives at 1 are nearer mu_0 = -1;
    # the medians stay at m_1 = 1, m_0 = -1 and every example is assigned correctly.
    x = np.array([1.0, 1.0, 1.0, 1.0, 100.0, -1.0, -1.0, -1.0, -1.0, -1.0])
    g = np.stack([x, np.zeros_like(x)], axis=1)
    y = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(mean_attack(g, y), [0, 0, 0, 0, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(median_attack(g, y), y)
    assert leak_auc(y, mean_attack(g, y)) == pytest.approx(0.6)
    assert leak_auc(y, median_attack(g, y)) == pytest.approx(1.0)


def test_centre_attack_ties_go_to_positive() -> None:
    g = np.array([[1.0], [-1.0], [0.0], [0.0]])
    y = np.array([1, 0, 1, 0])
    # mu_1 = m_1 = 0.5 and mu_0 = m_0 = -0.5: the rows at 0 are equidistant -> 1.
    np.testing.assert_array_equal(mean_attack(g, y), [1, 0, 1, 1])
    np.testing.assert_array_equal(median_attack(g, y), [1, 0, 1, 1])


@pytest.mark.parametrize("cls", [0, 1])
def test_one_class_batch(cls: int) -> None:
    g = np.random.default_rng(0).standard_normal((6, 3))
    y = np.full(6, cls)
    np.testing.assert_array_equal(mean_attack(g, y), y)
    np.testing.assert_array_equal(median_attack(g, y), y)
    scores = attack_scores(g, y, np.random.default_rng(0))
    np.testing.assert_array_equal(scores["mean"], y)
    np.testing.assert_array_equal(scores["median"], y)
    if cls == 0:
        np.testing.assert_array_equal(scores["cosine"], np.zeros(6))
    else:
        assert np.max(scores["cosine"]) == pytest.approx(1.0)  # the hint itself
    with pytest.raises(ValueError, match=f"only class {cls}"):
        leak_auc(y, scores["norm"])


def test_cosine_hint_is_a_positive_drawn_with_rng() -> None:
    g = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    y = np.array([1, 0, 1, 0])
    seen = set()
    for seed in range(20):
        cos = attack_scores(g, y, np.random.default_rng(seed))["cosine"]
        hint_row = int(np.argmax(cos))
        assert y[hint_row] == 1
        seen.add(hint_row)
        # Same seed, same hint.
        np.testing.assert_array_equal(
            cos, attack_scores(g, y, np.random.default_rng(seed))["cosine"]
        )
    assert seen == {0, 2}


# --- accumulator ------------------------------------------------------------------------


def _batches(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for n in (17, 32, 5, 1):
        y = rng.integers(0, 2, size=n)
        g = rng.standard_normal((n, 3)) + 0.7 * y[:, None]
        out.append((g, y))
    out.append((rng.standard_normal((4, 3)), np.zeros(4, dtype=int)))  # one-class batch
    return out


def test_accumulator_matches_hand_computation() -> None:
    batches = _batches(3)
    acc = LeakAccumulator(seed=11)
    for g, y in batches:
        acc.add(g, y)
    assert acc.n_rows == sum(len(y) for _, y in batches)

    rng = np.random.default_rng(11)
    per_batch = [attack_scores(g, y, rng) for g, y in batches]
    labels = np.concatenate([y for _, y in batches])
    expected = {
        name: leak_auc(labels, np.concatenate([s[name] for s in per_batch])) for name in ATTACKS
    }
    result = acc.result()
    assert tuple(result) == ATTACKS
    assert result == pytest.approx(expected)
    for value in result.values():
        assert 0.5 <= value <= 1.0


def test_accumulator_reset_and_empty() -> None:
    acc = LeakAccumulator(seed=0)
    with pytest.raises(ValueError, match="no batches"):
        acc.result()
    g, y = _separable(50, seed=2)
    acc.add(g, y)
    result = acc.result()
    assert result.pop("median_split") > 0.9  # 1.0 only with balanced classes
    assert result == pytest.approx(dict.fromkeys(ATTACKS[:-1], 1.0))
    acc.reset()
    assert acc.n_rows == 0
    with pytest.raises(ValueError, match="no batches"):
        acc.result()


@pytest.mark.parametrize("cls", [0, 1])
def test_accumulator_one_class_raises(cls: int) -> None:
    acc = LeakAccumulator(seed=0)
    acc.add(np.ones((3, 2)), np.full(3, cls))
    acc.add(np.ones((2, 2)), np.full(2, cls))
    with pytest.raises(ValueError, match=f"only class {cls}"):
        acc.result()


@pytest.mark.parametrize(
    ("grads", "labels", "match"),
    [
        (np.ones(4), np.array([0, 1, 0, 1]), "2-D"),
        (np.ones((2, 2, 2)), np.array([0, 1]), "2-D"),
        (np.ones((0, 3)), np.array([], dtype=int), "at least one row"),
        (np.ones((3, 2)), np.array([0, 1]), "length 2 but grads have 3 rows"),
        (np.ones((2, 2)), np.array([[0, 1]]), "1-D"),
        (np.ones((2, 2)), np.array([0, 3]), "0 or 1"),
        (np.ones((2, 2)), np.array(["a", "b"]), "numeric"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), np.array([0, 1]), "non-finite"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), np.array([0, 1]), "non-finite"),
    ],
)
def test_accumulator_add_validation(grads: np.ndarray, labels: np.ndarray, match: str) -> None:
    acc = LeakAccumulator(seed=0)
    with pytest.raises(ValueError, match=match):
        acc.add(grads, labels)
    assert acc.n_rows == 0


def test_median_split_is_the_reference_codes_attack_and_explains_table_2s_091() -> None:
    """Perfectly separated gradients with Spambase's positive rate: the split at the batch
    median calls every positive and the negatives above the median positive, so its leak
    AUC is (1 + 1 - FPR) / 2 with FPR = (0.5 - p) / (1 - p): 0.9125 at p = 0.394 (the
    paper's 0.91 for Vanilla and Max Norm)."""
    from flwr_vflgan.gafm.attacks import median_split_attack

    n_pos, n_neg = 394, 606
    g = np.concatenate([-1.0 - np.arange(n_pos) / n_pos, np.arange(n_neg) / n_neg])[:, None]
    y = np.concatenate([np.ones(n_pos, int), np.zeros(n_neg, int)])
    predicted = median_split_attack(g)
    # The upper half (strictly above the median) is 500 negatives; flipped, the lower
    # half calls all 394 positives and the 106 smallest negatives positive.
    assert predicted.sum() == 500 and predicted[:n_pos].sum() == 0
    fpr = (500 - n_pos) / n_neg
    assert leak_auc(y, predicted) == pytest.approx((1 + 1 - fpr) / 2, abs=1e-3)
    assert leak_auc(y, predicted) == pytest.approx(0.9125, abs=1e-3)
    # Balanced classes: the split separates them exactly.
    balanced = np.concatenate([np.ones(500, int), np.zeros(500, int)])
    spread = -balanced[:, None].astype(float) + 0.01 * np.arange(1000)[:, None] / 1000
    assert leak_auc(balanced, median_split_attack(spread)) == 1.0
