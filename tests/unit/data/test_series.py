"""The sine datasets of paper 003 and the series table's checks."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.data.series import (
    SINE6_FREQUENCIES,
    SeriesTable,
    block_to_channels,
    check_parties,
    sine_table,
)


def test_sine6_has_the_papers_shape_and_split():
    table = sine_table(6, per_class=1024, length=800)
    assert table.values.shape == (2048, 6, 800)
    assert table.parties == ((0, 1, 2), (3, 4, 5))
    assert table.channels == ("x11", "x12", "x13", "x21", "x22", "x23")
    assert np.bincount(table.labels).tolist() == [1024, 1024]


def test_every_channel_of_a_series_is_one_amplitude_times_its_sine():
    table = sine_table(6, per_class=8, length=800, seed=3)
    t = np.arange(800)
    # Channel 0 at t=25 is A sin(2 pi 0.01 25) = A sin(pi/2) = A.
    amplitude = table.values[:, 0, 25].astype(np.float64)
    for channel, f in enumerate(SINE6_FREQUENCIES):
        expected = amplitude[:, None] * np.sin(2 * np.pi * f * t)[None]
        np.testing.assert_allclose(table.values[:, channel, :], expected, atol=1e-6)


def test_amplitude_classes_have_the_documented_means():
    table = sine_table(2, per_class=4000, length=100, seed=1)
    amplitude = table.values[:, 0, 25]
    assert table.labels is not None
    assert abs(amplitude[table.labels == 0].mean() - 0.4) < 0.005
    assert abs(amplitude[table.labels == 1].mean() - 0.6) < 0.005
    assert abs(amplitude[table.labels == 1].std() - 0.05) < 0.005


def test_the_same_seed_gives_the_same_table_and_another_seed_another():
    a, b, c = (
        sine_table(2, per_class=16, seed=5),
        sine_table(2, per_class=16, seed=5),
        sine_table(2, per_class=16, seed=6),
    )
    np.testing.assert_array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)


def test_party_blocks_are_channels_end_to_end_and_invert():
    table = sine_table(6, per_class=4, length=10)
    block = table.party_block(1)
    assert block.shape == (8, 30) and block.dtype == np.float32
    np.testing.assert_array_equal(block[:, 10:20], table.values[:, 4, :])
    np.testing.assert_array_equal(block_to_channels(block, 3), table.values[:, 3:, :])


def test_three_parties_split_channels_in_order():
    assert sine_table(6, per_class=2, length=4, n_parties=3).parties == ((0, 1), (2, 3), (4, 5))


@pytest.mark.parametrize(
    ("parties", "match"),
    [
        (((0, 1), (1, 2)), "channel 1 is held by parties 0 and 1"),
        (((0,), (2,)), r"channels \[1\] are held by no party"),
        (((0, 1, 2), ()), "at least one channel"),
        (((0, 1, 3),), "party 0 holds channel 3"),
    ],
)
def test_a_bad_split_is_named(parties, match):
    with pytest.raises(ValueError, match=match):
        check_parties(parties, 3)


def test_a_bad_table_is_refused():
    good = np.zeros((4, 2, 5), dtype=np.float32)
    with pytest.raises(ValueError, match="float32"):
        SeriesTable(good.astype(np.float64), ("a", "b"), ((0,), (1,)))
    with pytest.raises(ValueError, match="distinct names"):
        SeriesTable(good, ("a", "a"), ((0,), (1,)))
    bad = good.copy()
    bad[1, 0, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SeriesTable(bad, ("a", "b"), ((0,), (1,)))
    with pytest.raises(ValueError, match="3 labels for 4 series"):
        SeriesTable(good, ("a", "b"), ((0,), (1,)), np.zeros(3))
    with pytest.raises(ValueError, match="at least 2 series"):
        SeriesTable(good[:1], ("a", "b"), ((0,), (1,)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_channels": 7}, "1..6 channels"),
        ({"n_channels": 2, "n_parties": 3}, "cannot be split over 3"),
        ({"n_channels": 2, "per_class": 0}, "per_class must be >= 1"),
    ],
)
def test_bad_sine_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sine_table(**kwargs)


def test_block_to_channels_refuses_a_ragged_block():
    with pytest.raises(ValueError, match="does not hold 3 channels"):
        block_to_channels(np.zeros((2, 10), dtype=np.float32), 3)


def test_the_builtin_series_split_over_the_requested_parties():
    from flwr_vflgan.data.series import is_series_source, load_series

    assert is_series_source("sine6") and is_series_source("sine2") and not is_series_source("adult")
    assert load_series("sine6", 3).parties == ((0, 1), (2, 3), (4, 5))
    with pytest.raises(ValueError, match=r"splits over 1\.\.2 parties, not dataset\.n_parties=3"):
        load_series("sine2", 3)
    with pytest.raises(ValueError, match="unknown series dataset 'sine9'"):
        load_series("sine9", 2)


BASIC_MOTIONS_SHA256 = {
    "TRAIN": "8dc43cc6306cb679c888c01e26f91772ac4441a916da43bac8b79734a538b9d6",
    "TEST": "79213102bc6fca1a398ad98ce1185dff0208fa3d1465e687f48288946b0ff8dc",
}
"""sktime 1.2.0's BasicMotions_{TRAIN,TEST}.ts (flwr_vflgan/data/bundled/README.md)."""


def test_basic_motions_is_sktimes_file_split_accelerometer_and_gyroscope():
    import gzip
    import hashlib
    from importlib import resources

    from flwr_vflgan.data.series import is_scaled_series, is_series_source, load_series

    bundled = resources.files("flwr_vflgan.data") / "bundled"
    for part, digest in BASIC_MOTIONS_SHA256.items():
        raw = gzip.decompress((bundled / f"BasicMotions_{part}.ts.gz").read_bytes())
        assert hashlib.sha256(raw).hexdigest() == digest
    table = load_series("basic_motions", 2)
    assert is_series_source("basic_motions") and is_scaled_series("basic_motions")
    assert not is_scaled_series("sine6") and is_scaled_series("/data/my.csv")
    assert table.values.shape == (80, 6, 100) and table.values.dtype == np.float32
    assert table.channels[:3] == ("accel_x", "accel_y", "accel_z")
    assert table.parties == ((0, 1, 2), (3, 4, 5))
    assert table.labels is not None and np.bincount(table.labels).tolist() == [20, 20, 20, 20]
    # The gyroscope's channels average about 0 in every activity; the accelerometer's
    # do not while running (the order the channel names claim).
    for label in range(4):
        assert np.abs(table.values[table.labels == label, 3:].mean(axis=(0, 2))).max() < 0.15
    running = np.abs(table.values[table.labels == 1, :3].mean(axis=(0, 2)))
    assert running.max() > 2.0
    assert load_series("basic_motions", 3).parties == ((0, 1), (2, 3), (4, 5))


def test_the_series_encoder_round_trips_a_block_through_the_wide_table():
    from flwr_vflgan.data.series import SeriesEncoder, wide_columns

    table = sine_table(6, per_class=3, length=5)
    encoder = SeriesEncoder(("x21", "x22", "x23"), 5)
    block = table.party_block(1)
    frame = encoder.inverse_transform(block)
    assert list(frame.columns) == wide_columns(("x21", "x22", "x23"), 5)
    assert frame.columns[6] == "x22@1"
    np.testing.assert_array_equal(encoder.transform(frame), block)
    assert [(s.start, s.width) for s in encoder.spans] == [(0, 5), (5, 5), (10, 5)]
    assert encoder.output_dim == 15
    with pytest.raises(ValueError, match="has 15 columns, got shape"):
        encoder.inverse_transform(block[:, :14])


def test_long_format_has_one_row_per_series_and_step():
    from flwr_vflgan.data.series import series_long_frame, wide_to_series

    values = np.arange(2 * 2 * 3, dtype=np.float32).reshape(2, 2, 3)  # series, channel, t
    frame = series_long_frame(values, ("a", "b"))
    assert list(frame.columns) == ["series", "t", "a", "b"]
    # Series 1 at t=2: channel a is values[1, 0, 2] = 8, channel b values[1, 1, 2] = 11.
    assert frame.iloc[5].tolist() == [1, 2, 8.0, 11.0]
    with pytest.raises(ValueError, match="lacks 6 series columns"):
        wide_to_series(frame, ("a", "b"), 3)
