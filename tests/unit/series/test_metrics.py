"""Time-series metrics of VFLGAN-TS (paper 003), after TimeGAN's evaluation protocol.

Expected values come from the data's construction (known amplitudes, shifts, hand-worked
autocorrelations) or from independent references (``np.corrcoef``, ``np.correlate``),
never from the module's own output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flwr_vflgan.series.metrics import (
    _CausalPredictor,
    amplitude_correlation,
    channel_distances,
    discriminative_score,
    fit_amplitudes,
    predictive_score,
    series_report,
)

FREQUENCIES = (0.005, 0.01, 0.0175)
"""Paper 003's sine frequencies (cycles per step) over 800 steps."""


def _sines(
    n: int,
    seed: int,
    *,
    length: int = 400,
    channels: int = 6,
    shared_amplitude: bool = True,
) -> np.ndarray:
    """Paper 003's sine data: every channel has its own frequency and phase; with
    ``shared_amplitude`` all channels of a sample share one amplitude ``A ~ N(0.5, 0.1)``,
    otherwise each channel draws its own."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    shape = (n, 1, 1) if shared_amplitude else (n, channels, 1)
    amplitude = rng.normal(0.5, 0.1, size=shape)
    frequency = rng.choice(FREQUENCIES, size=(n, channels, 1))
    phase = rng.uniform(0, 2 * np.pi, size=(n, channels, 1))
    return amplitude * np.sin(2 * np.pi * frequency * t + phase)


def _lagged_sines(n: int, seed: int, *, length: int = 300, channels: int = 4) -> np.ndarray:
    """One sinusoid per sample, each channel a phase-shifted copy: the last channel is a
    function of the others' past, so a next-step predictor can learn it."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    amplitude = rng.normal(0.5, 0.1, size=(n, 1, 1))
    frequency = rng.uniform(0.01, 0.03, size=(n, 1, 1))
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
    shift = 0.4 * np.arange(channels)[None, :, None]
    return amplitude * np.sin(2 * np.pi * frequency * t + phase + shift)


# --------------------------------------------------------------------------- fit_amplitudes


def test_fit_amplitudes_recovers_known_sinusoids():
    t = np.arange(800)
    rows, expected = [], []
    for amplitude in (0.3, 1.0, 2.5):
        for frequency in FREQUENCIES:
            for phase in (0.0, 1.1, 4.0):
                for offset in (0.0, -0.7, 3.0):
                    rows.append(amplitude * np.sin(2 * np.pi * frequency * t + phase) + offset)
                    expected.append(amplitude)
    np.testing.assert_allclose(fit_amplitudes(np.array(rows)), expected, atol=1e-3)


def test_fit_amplitudes_between_fft_bins():
    # 0.0123 * 800 = 9.84 cycles: not on an FFT bin.
    t = np.arange(800)
    rows = np.array([1.7 * np.sin(2 * np.pi * f * t + 0.4) - 2.0 for f in (0.0123, 0.0031, 0.2)])
    np.testing.assert_allclose(fit_amplitudes(rows), 1.7, atol=1e-3)


def test_fit_amplitudes_with_noise_is_close():
    rng = np.random.default_rng(5)
    t = np.arange(800)
    rows = 0.8 * np.sin(2 * np.pi * 0.01 * t + rng.uniform(0, 6, (50, 1)))
    rows = rows + rng.normal(scale=0.05, size=rows.shape)
    np.testing.assert_allclose(fit_amplitudes(rows), 0.8, atol=0.02)


def test_fit_amplitudes_constant_row_is_zero():
    rows = np.stack([np.full(800, 0.1), np.zeros(800), np.full(800, -3.0)])
    assert fit_amplitudes(rows).tolist() == [0.0, 0.0, 0.0]


def test_fit_amplitudes_short_rows_and_nyquist():
    t = np.arange(6)
    rows = np.stack([1.5 * np.sin(2 * np.pi * t / 6 + 0.3), 2.0 * (-1.0) ** t + 1.0])
    np.testing.assert_allclose(fit_amplitudes(rows), [1.5, 2.0], atol=1e-3)


def test_fit_amplitudes_on_paper_sized_input():
    rng = np.random.default_rng(0)
    t = np.arange(800)
    amplitude = rng.uniform(0.2, 2.0, (2048, 1))
    frequency = rng.choice(FREQUENCIES, (2048, 1))
    rows = amplitude * np.sin(2 * np.pi * frequency * t + rng.uniform(0, 6, (2048, 1)))
    fitted = fit_amplitudes(rows)
    np.testing.assert_allclose(fitted, amplitude[:, 0], atol=1e-3)


# --------------------------------------------------------------------------- amplitude correlation


def test_shared_amplitudes_correlate_across_parties():
    series = _sines(256, seed=0, length=800)
    result = amplitude_correlation(series, [[0, 1, 2], [3, 4, 5]])
    assert result["cross_party"] > 0.99
    assert result["within_party"] > 0.99


def test_independent_amplitudes_do_not_correlate():
    series = _sines(256, seed=1, length=800, shared_amplitude=False)
    result = amplitude_correlation(series, [[0, 1, 2], [3, 4, 5]])
    assert abs(result["cross_party"]) < 0.15
    assert abs(result["within_party"]) < 0.15


def test_amplitude_correlation_matches_corrcoef_of_known_amplitudes():
    # Channels are exact sinusoids, so their fitted amplitudes are the drawn ones and
    # the expected means follow from np.corrcoef of those.
    rng = np.random.default_rng(3)
    amplitudes = rng.normal(1.0, 0.1, size=(64, 4))
    amplitudes[:, 1] += 0.5 * amplitudes[:, 0]
    amplitudes[:, 3] += 2.0 - 0.8 * amplitudes[:, 2]  # stays positive: amplitudes are > 0
    t = np.arange(400)
    series = amplitudes[:, :, None] * np.sin(2 * np.pi * 0.01 * t + rng.uniform(0, 6, (64, 4, 1)))
    corr = np.corrcoef(amplitudes, rowvar=False)
    result = amplitude_correlation(series, [[0, 2], [1, 3]])
    cross = np.mean([corr[0, 1], corr[0, 3], corr[1, 2], corr[2, 3]])
    within = np.mean([corr[0, 2], corr[1, 3]])
    assert amplitudes.min() > 0
    assert result["cross_party"] == pytest.approx(cross, abs=1e-6)
    assert result["within_party"] == pytest.approx(within, abs=1e-6)


def test_constant_amplitude_channel_correlates_zero_not_nan():
    rng = np.random.default_rng(4)
    t = np.arange(400)
    shared = rng.normal(0.5, 0.1, size=(128, 1))
    phase = rng.uniform(0, 6, size=(128, 3, 1))
    series = np.sin(2 * np.pi * 0.01 * t + phase)  # channel 2 keeps amplitude 1
    series[:, :2] *= shared[:, :, None]
    result = amplitude_correlation(series, [[0], [1, 2]])
    # cross pairs: (0, 1) ~ 1 and (0, 2) = 0; within pair: (1, 2) = 0.
    assert result["cross_party"] == pytest.approx(0.5, abs=1e-3)
    assert result["within_party"] == 0.0


def test_amplitude_correlation_nan_without_pairs():
    series = _sines(32, seed=2, channels=3)
    assert math.isnan(amplitude_correlation(series, [[0], [1], [2]])["within_party"])
    assert math.isnan(amplitude_correlation(series, [[0, 1, 2]])["cross_party"])


def test_parties_may_be_arrays_in_any_order():
    series = _sines(64, seed=2, channels=4)
    listed = amplitude_correlation(series, [[0, 1], [2, 3]])
    arrays = amplitude_correlation(series, [np.array([3, 2]), np.array([1, 0])])
    assert listed == pytest.approx(arrays)


# --------------------------------------------------------------------------- discriminative


def test_discriminative_score_small_for_same_distribution():
    real, synthetic = _sines(256, seed=10), _sines(256, seed=11)
    scores = [discriminative_score(real, synthetic, seed=s, epochs=10) for s in range(3)]
    assert np.mean(scores) < 0.1


def test_discriminative_score_large_for_white_noise():
    real = _sines(256, seed=10)
    noise = np.random.default_rng(12).normal(0.0, 0.35, size=real.shape)
    assert discriminative_score(real, noise, seed=0, epochs=10) > 0.4


def test_discriminative_score_is_seeded_and_leaves_global_rng_alone():
    real, synthetic = _sines(200, seed=13), _sines(120, seed=14)  # unequal counts
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    first = discriminative_score(real, synthetic, seed=7, epochs=3)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.random.get_state()[1].tolist() == numpy_state[1].tolist()
    assert discriminative_score(real, synthetic, seed=7, epochs=3) == first
    assert 0.0 <= first <= 0.5


# --------------------------------------------------------------------------- predictive


def test_predictive_score_real_like_training_beats_white_noise():
    real, synthetic = _lagged_sines(192, seed=20), _lagged_sines(192, seed=21)
    noise = np.random.default_rng(22).normal(0.0, 0.35, size=real.shape)
    good = predictive_score(real, synthetic, seed=0, epochs=10)
    bad = predictive_score(real, noise, seed=0, epochs=10)
    assert good < bad
    # A model of noise cannot beat predicting the target's mean (MAE about 0.32 here).
    assert bad > 0.8 * np.abs(real[:, -1] - real[:, -1].mean()).mean()


def test_predictive_score_is_seeded_in_data_units_and_leaves_global_rng_alone():
    real, synthetic = _lagged_sines(64, seed=23, length=120), _lagged_sines(64, seed=24, length=120)
    state = torch.get_rng_state()
    first = predictive_score(real, synthetic, seed=3, epochs=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert predictive_score(real, synthetic, seed=3, epochs=3) == first
    # Standardising makes training scale-free: ten times the data, ten times the error.
    scaled = predictive_score(10 * real, 10 * synthetic, seed=3, epochs=3)
    assert scaled == pytest.approx(10 * first, rel=1e-2)


def test_causal_predictor_sees_no_future_step():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = _CausalPredictor(3)
        inputs = torch.randn(2, 3, 80)
    changed = inputs.clone()
    changed[:, :, 50] += 5.0
    with torch.no_grad():
        before, after = model(inputs), model(changed)
    assert before.shape == (2, 1, 80)
    assert torch.equal(before[:, :, :50], after[:, :, :50])
    assert not torch.equal(before[:, :, 50], after[:, :, 50])


# --------------------------------------------------------------------------- distances


def test_channel_distances_zero_for_identical_arrays():
    series = _sines(16, seed=30, channels=3)
    result = channel_distances(series, series.copy())
    assert result == {"wasserstein": [0.0] * 3, "autocorrelation": [0.0] * 3}


def test_channel_distances_of_shifted_copy():
    series = _sines(16, seed=31, channels=2)
    result = channel_distances(series, series + 0.3)
    np.testing.assert_allclose(result["wasserstein"], [0.3, 0.3], atol=1e-9)
    np.testing.assert_allclose(result["autocorrelation"], [0.0, 0.0], atol=1e-9)


def test_channel_distances_hand_worked_alternating_series():
    # x = (1, -1, 1, -1): acf(k) = (4 - k) / 4 * (-1)^k at lags 1..3; a constant series
    # counts as 0, so the mean |difference| is (3/4 + 2/4 + 1/4) / 3 = 0.5. Values are
    # +-1 against 0, so W1 = 1.
    alternating = np.tile([1.0, -1.0, 1.0, -1.0], (2, 1, 1))
    constant = np.zeros((2, 1, 4))
    result = channel_distances(alternating, constant)
    assert result["wasserstein"] == pytest.approx([1.0])
    assert result["autocorrelation"] == pytest.approx([0.5])


def test_channel_autocorrelation_matches_direct_sum_over_fifty_lags():
    rng = np.random.default_rng(32)
    real = np.cumsum(rng.normal(size=(5, 1, 120)), axis=2)
    synthetic = rng.normal(size=(4, 1, 120))

    def mean_acf(rows: np.ndarray) -> np.ndarray:
        acfs = []
        for row in rows[:, 0]:
            x = row - row.mean()
            full = np.correlate(x, x, mode="full")[x.size - 1 :]
            acfs.append(full[1:51] / full[0])
        return np.mean(acfs, axis=0)

    expected = np.abs(mean_acf(real) - mean_acf(synthetic)).mean()
    result = channel_distances(real, synthetic)
    assert result["autocorrelation"] == pytest.approx([expected], abs=1e-12)


# --------------------------------------------------------------------------- report


def test_series_report_has_every_metric():
    real, synthetic = _sines(64, seed=40, length=200), _sines(64, seed=41, length=200)
    report = series_report(real, synthetic, [[0, 1, 2], [3, 4, 5]], seed=0, epochs=2)
    assert set(report) == {
        "discriminative_score",
        "predictive_score",
        "cross_party_amplitude_correlation",
        "within_party_amplitude_correlation",
        "real_cross_party_amplitude_correlation",
        "real_within_party_amplitude_correlation",
        "channel_wasserstein",
        "channel_autocorrelation_difference",
        "mean_channel_wasserstein",
    }
    assert isinstance(report["channel_wasserstein"], list)
    assert len(report["channel_wasserstein"]) == 6
    assert report["mean_channel_wasserstein"] == pytest.approx(
        np.mean(report["channel_wasserstein"])
    )
    assert report["cross_party_amplitude_correlation"] > 0.99
    assert report["real_cross_party_amplitude_correlation"] > 0.99


def test_series_report_reads_the_real_correlation_from_the_real_series():
    """The real_ correlations are the real series', not the synthetic's: synthetic series
    whose parties' amplitudes are independent score low beside a real 1."""
    real = _sines(64, seed=44, length=200)
    synthetic = _sines(64, seed=45, length=200, shared_amplitude=False)
    report = series_report(real, synthetic, [[0, 1, 2], [3, 4, 5]], seed=0, epochs=1)
    assert report["real_cross_party_amplitude_correlation"] > 0.99
    assert report["cross_party_amplitude_correlation"] < 0.5


def test_series_report_without_predictive_score_for_one_channel():
    real, synthetic = _sines(32, seed=42, channels=1), _sines(32, seed=43, channels=1)
    report = series_report(real, synthetic, [[0]], seed=0, epochs=1)
    assert "predictive_score" not in report
    assert math.isnan(report["within_party_amplitude_correlation"])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- validation

GOOD = np.zeros((4, 2, 16))


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([[0.0] * 16] * 4, "series must be a numpy array"),
        (np.zeros(16), "series must be 2-D"),
        (np.zeros((0, 16)), "at least 1 series, got 0"),
        (np.zeros((2, 3)), "at least 4 time steps, got 3"),
        (np.array([[0.0, 1.0, np.nan, 2.0]]), "series must be finite"),
        (np.zeros((2, 8), dtype=bool), "must hold real numbers, got dtype bool"),
        (np.zeros((2, 8), dtype=complex), "must hold real numbers, got dtype complex"),
        (np.zeros((2, 8), dtype=object), "must hold real numbers, got dtype object"),
    ],
)
def test_fit_amplitudes_rejects_bad_series(bad, match):
    with pytest.raises(ValueError, match=match):
        fit_amplitudes(bad)


@pytest.mark.parametrize(
    ("parties", "match"),
    [
        ([[0], [1, 1]], r"channel 1 is held by parties\[1\] and parties\[1\]"),
        ([[0, 1], [1]], r"channel 1 is held by parties\[0\] and parties\[1\]"),
        ([[0]], "channel 1 is missing"),
        ([[0, 1, 2]], r"parties\[0\] holds channel 2, outside range\(0, 2\)"),
        ([[0, -1], [1]], r"holds channel -1, outside range"),
        ([[0, 1], []], r"parties\[1\] must be a non-empty sequence"),
        ([[0, 1.0]], r"holds channel 1.0, which is not an int"),
        ([[0, True]], r"holds channel True, which is not an int"),
        ([], "parties must be a non-empty sequence"),
        ("01", "parties must be a non-empty sequence"),
        ([0, 1], r"parties\[0\] must be a non-empty sequence"),
    ],
)
def test_parties_must_partition_the_channels(parties, match):
    with pytest.raises(ValueError, match=match):
        amplitude_correlation(GOOD, parties)
    with pytest.raises(ValueError, match=match):
        series_report(GOOD, GOOD, parties, seed=0, epochs=1)


@pytest.mark.parametrize(
    ("real", "synthetic", "match"),
    [
        (np.zeros((4, 16)), GOOD, "real must be 3-D, got shape"),
        (GOOD, np.zeros((4, 2, 16, 1)), "synthetic must be 3-D"),
        (np.zeros((1, 2, 16)), GOOD, "real must hold at least 2 series, got 1"),
        (GOOD, np.zeros((4, 3, 16)), r"same \(channels, length\), got \(2, 16\) and \(3, 16\)"),
        (GOOD, np.zeros((4, 2, 15)), r"same \(channels, length\)"),
        (GOOD, np.full((4, 2, 16), np.inf), "synthetic must be finite"),
        (np.zeros((4, 0, 16)), np.zeros((4, 0, 16)), "at least 1 channel"),
        (np.zeros((4, 2, 1)), np.zeros((4, 2, 1)), "at least 2 time steps, got 1"),
    ],
)
def test_pairs_are_validated(real, synthetic, match):
    with pytest.raises(ValueError, match=match):
        channel_distances(real, synthetic)
    with pytest.raises(ValueError, match=match):
        discriminative_score(real, synthetic, seed=0, epochs=1)
    with pytest.raises(ValueError, match=match):
        predictive_score(real, synthetic, seed=0, epochs=1)


def test_series_report_and_amplitudes_need_four_steps():
    short = np.zeros((4, 2, 3))
    with pytest.raises(ValueError, match="at least 4 time steps, got 3"):
        series_report(short, short, [[0], [1]], seed=0)
    with pytest.raises(ValueError, match="series must have at least 4 time steps"):
        amplitude_correlation(short, [[0], [1]])
    with pytest.raises(ValueError, match="series must hold at least 2 series"):
        amplitude_correlation(np.zeros((1, 2, 8)), [[0], [1]])


def test_predictive_score_needs_two_channels():
    one = np.zeros((4, 1, 16))
    with pytest.raises(ValueError, match=r"at least 2 channels .*got 1"):
        predictive_score(one, one, seed=0)


@pytest.mark.parametrize("metric", [discriminative_score, predictive_score])
@pytest.mark.parametrize(
    ("settings", "error", "match"),
    [
        ({"seed": -1}, ValueError, "seed must be >= 0, got -1"),
        ({"seed": 1.5}, TypeError, "seed must be an int, got float"),
        ({"seed": True}, TypeError, "seed must be an int, got bool"),
        ({"seed": 0, "epochs": 0}, ValueError, "epochs must be >= 1, got 0"),
        ({"seed": 0, "epochs": 2.0}, TypeError, "epochs must be an int, got float"),
        ({"seed": 0, "batch_size": 0}, ValueError, "batch_size must be >= 1, got 0"),
        ({"seed": 0, "learning_rate": 0.0}, ValueError, "learning_rate must be finite and > 0"),
        ({"seed": 0, "learning_rate": math.nan}, ValueError, "learning_rate .* got nan"),
    ],
)
def test_training_settings_are_validated(metric, settings, error, match):
    with pytest.raises(error, match=match):
        metric(GOOD, GOOD, **settings)


def test_series_report_validates_seed():
    with pytest.raises(ValueError, match="seed must be >= 0, got -2"):
        series_report(GOOD, GOOD, [[0], [1]], seed=-2)
