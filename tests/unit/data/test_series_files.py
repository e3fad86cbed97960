"""A user's long-format series file: read, checked, split by channel, scaled by each party."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.series import SeriesEncoder
from flwr_vflgan.data.series_files import read_series_file, series_file_table


def _long(path: Path, n: int = 3, t: int = 4, **edits) -> Path:
    rows = []
    for k in range(n):
        for step in range(t):
            rows.append(
                {
                    "series": f"s{k}",
                    "t": step,
                    "hr": 60 + k + step,
                    "bp": 100.0 * k - step,
                    "spo2": 0.9 + 0.01 * step,
                }
            )
    frame = pd.DataFrame(rows)
    for change in edits.values():
        frame = change(frame)
    frame.to_csv(path, index=False)
    return path


def test_a_long_file_becomes_series_channels_and_steps_by_hand(tmp_path):
    path = _long(tmp_path / "s.csv")
    # Shuffled rows: steps are sorted, series keep their first-appearance order.
    frame = pd.read_csv(path).sample(frac=1.0, random_state=0)
    frame.to_csv(path, index=False)
    values, channels, ids = read_series_file(path, id_column="series", time_column="t")
    assert channels == ("hr", "bp", "spo2") and values.shape == (3, 3, 4)
    first = frame["series"].drop_duplicates().tolist()
    assert list(ids) == first
    k = int(first[1][1:])
    np.testing.assert_allclose(values[1, 0], [60 + k + s for s in range(4)])  # hr
    np.testing.assert_allclose(values[1, 1], [100.0 * k - s for s in range(4)])  # bp


def test_channels_split_evenly_or_by_name(tmp_path):
    path = _long(tmp_path / "s.csv")
    assert series_file_table(path, 2, id_column="series", time_column="t").parties == ((0, 1), (2,))
    named = series_file_table(
        path, 2, id_column="series", time_column="t", columns=[["spo2"], ["hr", "bp"]]
    )
    assert named.parties == ((2,), (0, 1))
    with pytest.raises(ValueError, match=r"partition.columns names \['pulse'\]"):
        series_file_table(path, 2, id_column="series", time_column="t", columns=[["pulse"], ["hr"]])
    with pytest.raises(ValueError, match=r"channels \[1\] are held by no party"):
        series_file_table(path, 2, id_column="series", time_column="t", columns=[["spo2"], ["hr"]])


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"a": lambda f: f.assign(hr=f["hr"].astype(str) + "bpm")}, "channel 'hr' is not numeric"),
        (
            {"a": lambda f: f.assign(bp=f["bp"].where(f.index != 2))},
            "channel 'bp' has 1 missing values",
        ),
        ({"a": lambda f: f[f.index != 5]}, "series 's1' has 3 of the 4 steps"),
        ({"a": lambda f: pd.concat([f, f.iloc[[0]]])}, "series 's0' has step 0 more than once"),
        (
            {"a": lambda f: f.rename(columns={"t": "time"})},
            r"dataset.time_column='t' is not a column",
        ),
    ],
)
def test_a_bad_file_is_refused_with_the_column_or_series_named(tmp_path, edit, match):
    path = _long(tmp_path / "s.csv", **edit)
    with pytest.raises(ValueError, match=match):
        read_series_file(path, id_column="series", time_column="t")


def test_one_series_is_refused_and_drop_leaves_a_column_out(tmp_path):
    with pytest.raises(ValueError, match="holds 1 series of 4 steps"):
        read_series_file(_long(tmp_path / "one.csv", n=1), id_column="series", time_column="t")
    path = _long(tmp_path / "s.csv", a=lambda f: f.assign(note="x"))
    with pytest.raises(ValueError, match="channel 'note' is not numeric"):
        read_series_file(path, id_column="series", time_column="t")
    _, channels, _ = read_series_file(path, id_column="series", time_column="t", drop=["note"])
    assert channels == ("hr", "bp", "spo2")


def test_each_party_scales_its_channels_to_minus_one_one_and_decodes_back(tmp_path):
    values = np.array([[[2.0, 4.0], [10.0, 10.0]], [[6.0, 3.0], [10.0, 10.0]]], dtype=np.float32)
    encoder = SeriesEncoder.fitted(("a", "b"), values)
    # Channel a: min 2, max 6 -> (x - 4) / 2; channel b is constant: x - 10.
    np.testing.assert_allclose(
        encoder.encode(values), [[-1.0, 0.0, 0.0, 0.0], [1.0, -0.5, 0.0, 0.0]]
    )
    decoded = encoder.inverse_transform(encoder.encode(values)).to_numpy()
    np.testing.assert_allclose(decoded, values.reshape(2, -1))
