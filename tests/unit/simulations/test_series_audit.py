"""The one-run audit on series: real series as canaries, scored by their nearest
published series (simulations/series_audit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.data.series import sine_table
from flwr_vflgan.privacy.audit import one_run_audit
from flwr_vflgan.simulations.series_audit import series_membership_scores


def _series() -> np.ndarray:
    return sine_table(2, n_parties=2, per_class=300, length=64).values


def test_a_generator_that_copies_its_series_is_caught_and_one_that_ignores_them_is_not():
    values = _series()
    kept, canaries = values[:200], values[200:]
    included = np.random.default_rng(6).random(len(canaries)) < 0.5
    training = np.concatenate([kept, canaries[included]])
    copied = series_membership_scores(canaries, training, kept)
    caught = one_run_audit(copied, included, [25, 50, 100], 1e-5)
    assert caught.correct == caught.guesses and caught.epsilon > 2
    fresh = sine_table(2, n_parties=2, per_class=300, length=64, seed=9).values
    ignored = series_membership_scores(canaries, fresh[: len(training)], kept)
    assert one_run_audit(ignored, included, [25, 50, 100], 1e-5).epsilon < 0.5


def test_channels_are_scaled_by_the_reference_so_a_wide_channel_does_not_drown_the_rest():
    """Channel 1 is 1,000 times wider than channel 0: a synthetic series off in channel 1
    by the same share of its range as another is off in channel 0 scores the same (raw
    distances would differ 1,000-fold)."""
    rng = np.random.default_rng(0)
    reference = rng.uniform(size=(50, 2, 8))
    reference[:, 1] *= 1000
    canary = reference[:1].copy()
    near_in_0 = canary.copy()
    near_in_0[:, 0] += 0.1
    near_in_1 = canary.copy()
    span = np.ptp(reference, axis=(0, 2))
    near_in_1[:, 1] += 0.1 * span[1] / span[0]  # as far as near_in_0 once scaled
    one = series_membership_scores(canary, near_in_0, reference)
    other = series_membership_scores(canary, near_in_1, reference)
    assert one[0] == pytest.approx(other[0], rel=1e-6)


def test_series_of_other_shapes_are_refused():
    values = _series()
    with pytest.raises(ValueError, match=r"differ in \(channels, length\)"):
        series_membership_scores(values[:5], values[:5, :, :32], values[5:])
