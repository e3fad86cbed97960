"""VFLGAN-TS's settings and the score that picks its published epoch."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.config import Variant, VFLGANConfig
from flwr_vflgan.data.series import sine_table
from flwr_vflgan.series.config import SeriesModelConfig, SeriesSettings, SeriesTrainConfig
from flwr_vflgan.series.report import SeriesSelection, pooled


def test_settings_round_trip_through_plain_values():
    settings = SeriesSettings(
        SeriesModelConfig(attribute_hidden=(7, 3), generator_smoothing=2.5),
        SeriesTrainConfig(shared_weight=2.0, loss="wgan_gp"),
    )
    assert SeriesSettings.from_dict(settings.to_dict()) == settings
    config = VFLGANConfig(variant=Variant.VFLGAN_TS, series=settings)
    assert VFLGANConfig.from_dict(config.to_dict()) == config
    assert config.is_series and not VFLGANConfig().is_series


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: SeriesModelConfig(noise_dim=0),
            "series.model.noise_dim must be a positive integer",
        ),
        (
            lambda: SeriesModelConfig(attribute_hidden=()),
            "series.model.attribute_hidden must be a non-empty",
        ),
        (lambda: SeriesModelConfig(dropout=1.0), r"series.model.dropout must be in \[0, 1\)"),
        (
            lambda: SeriesModelConfig(generator_basis=0),
            "series.model.generator_basis must be a positive integer or null",
        ),
        (
            lambda: SeriesModelConfig(generator_smoothing=0),
            "series.model.generator_smoothing must be a positive number of steps or null",
        ),
        (
            lambda: SeriesModelConfig(generator_smoothing=True),
            "series.model.generator_smoothing must be a positive number",
        ),
        (
            lambda: SeriesModelConfig(generator_smoothing=float("nan")),
            "series.model.generator_smoothing must be a positive number",
        ),
        (lambda: SeriesTrainConfig(shared_lr=0.0), "series.train.shared_lr must be > 0"),
        (lambda: SeriesTrainConfig(local_weight=-1.0), "must be >= 0"),
        (
            lambda: SeriesTrainConfig(loss="wgan"),
            r"series.train.loss must be one of \['bce', 'wgan_gp'\], got 'wgan'",
        ),
        (
            lambda: SeriesSettings.from_dict({"modle": {}}),
            r"unknown series config keys \['modle'\]",
        ),
        (
            lambda: SeriesSettings.from_dict({"train": {"lr": 1}}),
            r"unknown series.train config keys \['lr'\]",
        ),
    ],
)
def test_bad_settings_are_named(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_dpvflgan_ts_is_the_first_layer_mechanism_on_fixed_batches():
    ok = VFLGANConfig(
        variant=Variant.VFLGAN_TS, dp={"mechanism": "vflgan_gaussian", "target_epsilon": 1.0}
    )
    assert ok.dp.enabled
    with pytest.raises(ValueError, match=r"dp=dpsgd is not built for vflgan_ts"):
        VFLGANConfig(variant=Variant.VFLGAN_TS, dp={"mechanism": "dpsgd", "target_epsilon": 1.0})
    with pytest.raises(ValueError, match=r"dp.sampling=poisson needs dp=dpsgd"):
        VFLGANConfig(
            variant=Variant.VFLGAN_TS,
            dp={"mechanism": "vflgan_gaussian", "target_epsilon": 1.0, "sampling": "poisson"},
        )


def test_pooling_averages_windows_by_hand():
    values = np.arange(10, dtype=np.float32).reshape(1, 1, 10)
    # Five windows of two steps: means 0.5, 2.5, 4.5, 6.5, 8.5.
    np.testing.assert_allclose(pooled(values, 5), [[0.5, 2.5, 4.5, 6.5, 8.5]])
    # Three windows over 10 steps: edges 0, 3, 7, 10.
    np.testing.assert_allclose(pooled(values, 3), [[1.0, 4.5, 8.0]])
    # Never more points than steps; channels laid end to end.
    two = np.stack([values[0, 0], -values[0, 0]])[None]
    assert pooled(two, 64).shape == (1, 20)


def test_the_selection_score_is_zero_for_the_real_series_and_sees_cross_party_structure():
    table = sine_table(2, per_class=256, length=64, seed=1)
    selection = SeriesSelection(table)
    blocks = [table.party_block(0), table.party_block(1)]
    assert selection(blocks)["fd"] == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_array_equal(selection.assemble(blocks), table.values)
    # The same channels with party 1's series shuffled: every channel's marginal is the
    # real one, only the amplitude they share across parties is lost.
    shuffled = blocks[1][np.random.default_rng(0).permutation(len(blocks[1]))]
    assert selection([blocks[0], shuffled])["fd"] > 0.1
    with pytest.raises(ValueError, match="1 blocks for 2 parties"):
        selection(blocks[:1])


def test_the_cosine_basis_is_orthonormal_and_a_basis_generator_is_smooth():
    import torch

    from flwr_vflgan.series.models import ChannelGenerator, cosine_basis

    basis = cosine_basis(16, 100).double()
    torch.testing.assert_close(
        basis @ basis.T, torch.eye(16, dtype=torch.float64), atol=1e-5, rtol=0
    )
    # By hand: row 0 is constant 1/sqrt(T); row 1 a half cosine from +c to -c.
    assert torch.allclose(basis[0], torch.full((100,), 0.1, dtype=torch.float64), atol=1e-6)
    assert basis[1, 0] > 0 > basis[1, -1]
    with pytest.raises(ValueError, match=r"generator_basis=101 must be between 1 and the series"):
        cosine_basis(101, 100)
    torch.manual_seed(0)
    z = torch.randn(64, 8)
    per_step, smooth = ChannelGenerator(8, 32, 200), ChannelGenerator(8, 32, 200, basis=8)
    assert smooth(z).shape == per_step(z).shape == (64, 200)
    # At initialisation the per-step map writes white noise across steps; the basis
    # generator's output has no content above 8 / 400 cycles per step: its second
    # differences are two orders of magnitude smaller at a similar spread.
    rough = [g(z).diff(n=2, dim=1).abs().mean() / g(z).std() for g in (per_step, smooth)]
    assert rough[1] < rough[0] / 100
    assert 0.3 < smooth(z).std() / per_step(z).std() < 3
    assert "basis" not in smooth.state_dict()  # a constant, not a weight to checkpoint


def test_a_smoothed_generator_is_the_per_step_generator_through_a_gaussian_filter():
    import torch
    from scipy.ndimage import gaussian_filter1d

    from flwr_vflgan.series.models import ChannelGenerator, gaussian_kernel

    kernel = gaussian_kernel(3.0, 200)
    assert kernel.shape == (1, 1, 25)  # ceil(4 * 3) = 12 steps each side
    assert torch.isclose(kernel.sum(), torch.tensor(1.0))
    assert torch.equal(kernel, kernel.flip(-1))
    with pytest.raises(ValueError, match=r"generator_smoothing=30 reaches 120 steps .* length 100"):
        gaussian_kernel(30, 100)
    torch.manual_seed(0)
    z = torch.randn(16, 8)
    per_step = ChannelGenerator(8, 32, 200)
    smooth = ChannelGenerator(8, 32, 200, smoothing=3.0)
    smooth.load_state_dict(per_step.state_dict())  # the same weights; the filter is no state
    assert list(smooth.state_dict()) == list(per_step.state_dict())
    with torch.no_grad():
        raw, filtered = per_step(z).double().numpy(), smooth(z).double().numpy()
    # scipy's filter, written independently: the same truncation (4 sigma), and its
    # "mirror" mode is torch's "reflect" (the end sample is not repeated).
    expected = gaussian_filter1d(raw, 3.0, axis=1, mode="mirror", truncate=4.0)
    np.testing.assert_allclose(filtered, expected, atol=1e-5, rtol=0)
    roughness = [np.abs(np.diff(x, n=2, axis=1)).mean() / x.std() for x in (raw, filtered)]
    assert roughness[1] < roughness[0] / 20
    # The filter keeps what is already smooth: a slow sine passes (but for the ends).
    t = torch.arange(200, dtype=torch.float32)
    slow = torch.sin(2 * torch.pi * t / 100)[None, None, :]
    padded = torch.nn.functional.pad(slow, (12, 12), mode="reflect")
    passed = torch.nn.functional.conv1d(padded, kernel)[0, 0]
    assert torch.allclose(passed[20:-20], slow[0, 0, 20:-20] * 0.98, atol=0.01)
