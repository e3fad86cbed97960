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


# --------------------------------------------------------------------------- wide format


def _wide(path: Path, n: int = 3, t: int = 4) -> pd.DataFrame:
    """The long file of :func:`_long` pivoted by hand to one row per series."""
    long = pd.read_csv(_long(path.with_suffix(".long.csv"), n, t))
    frame = pd.DataFrame({"series": [f"s{k}" for k in range(n)]})
    for channel in ("hr", "bp", "spo2"):
        for step in range(t):
            frame[f"{channel}@{step}"] = long[long["t"] == step][channel].to_numpy()
    return frame


def test_a_wide_file_reads_as_the_same_series_as_its_long_file(tmp_path):
    _wide(tmp_path / "w.csv").to_csv(tmp_path / "w.csv", index=False)
    wide = read_series_file(tmp_path / "w.csv", id_column="series", time_column="t")
    long = read_series_file(tmp_path / "w.long.csv", id_column="series", time_column="t")
    np.testing.assert_array_equal(wide[0], long[0])
    assert wide[1] == long[1] == ("hr", "bp", "spo2")
    assert list(wide[2]) == list(long[2])
    # Columns in any order, steps unpadded and past 9, no ID column: rows are numbered.
    frame = _wide(tmp_path / "x.csv", t=12).drop(columns="series")
    frame[frame.columns[::-1]].to_csv(tmp_path / "x.csv", index=False)
    values, channels, ids = read_series_file(
        tmp_path / "x.csv", id_column="series", time_column="t"
    )
    assert channels == ("spo2", "bp", "hr") and values.shape == (3, 3, 12)
    np.testing.assert_allclose(values[2, 2], [62 + s for s in range(12)])
    assert list(ids) == [0, 1, 2]


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda f: f.assign(site="a"), r"column 'site' is neither the ID nor a series column"),
        (lambda f: f.drop(columns="bp@2"), r"channel 'bp' .* has steps \[0, 1, 3\]"),
        (lambda f: f.assign(series="s0"), r"series 's0' has more than one row"),
        (lambda f: f.assign(**{"hr@1": "x"}), r"channel 'hr@1' is not numeric"),
        (lambda f: f.assign(**{"hr@1": np.nan}), r"channel 'hr@1' has 3 missing values"),
    ],
)
def test_a_bad_wide_file_is_refused_with_the_column_named(tmp_path, edit, match):
    path = tmp_path / "w.csv"
    edit(_wide(path)).to_csv(path, index=False)
    with pytest.raises(ValueError, match=match):
        read_series_file(path, id_column="series", time_column="t")


def test_a_long_file_without_its_time_column_points_at_the_wide_layout(tmp_path):
    path = _long(tmp_path / "s.csv")
    with pytest.raises(ValueError, match=r"dataset.time_column='step'.*<channel>@<step>"):
        read_series_file(path, id_column="series", time_column="step")


# --------------------------------------------------------------------------- .ts files

TS = """# a comment
@problemName Toy
@timeStamps false
@univariate false
@dimensions 2
@equalLength true
@seriesLength 3
@classLabel true up down
@data
1,2,3:4,5,6:up
7,8,9:1.5,-2,0:down
"""


def test_a_ts_file_reads_its_channels_and_drop_names_them(tmp_path):
    import gzip

    path = tmp_path / "toy.ts"
    path.write_text(TS)
    values, channels, ids = read_series_file(path, id_column="series", time_column="t")
    assert channels == ("dim_0", "dim_1") and list(ids) == [0, 1]
    np.testing.assert_array_equal(values[1], [[7, 8, 9], [1.5, -2, 0]])
    with gzip.open(tmp_path / "toy.ts.gz", "wt") as out:
        out.write(TS)
    kept = read_series_file(
        tmp_path / "toy.ts.gz", id_column="series", time_column="t", drop=["dim_0"]
    )
    assert kept[1] == ("dim_1",)
    np.testing.assert_array_equal(kept[0][:, 0], values[:, 1])
    table = series_file_table(path, 2, id_column="series", time_column="t")
    assert table.parties == ((0,), (1,))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (TS.replace("@timeStamps false", "@timeStamps true"), r"stores time stamps"),
        (TS.replace("7,8,9", "7,?,9"), r"line 11: a value is missing"),
        (TS.replace("7,8,9", "7,eight,9"), r"line 11: 'eight' is not a number"),
        (TS.replace("7,8,9", "7,8"), r"series 1 has 2 channels of lengths \[2, 3\]"),
        (TS.replace("7,8,9", "7,nan,9"), r"not finite"),
        (TS.replace("@data\n", ""), r"line 9: data before the @data line"),
        (TS.split("@data")[0], r"has no @data line"),
        (TS.split("@data")[0] + "@data\n", r"holds no series"),
        (TS.replace("7,8,9:1.5,-2,0:down", "down"), r"line 11: a series line without values"),
        (TS.replace("@classLabel true up down", "@classLabel"), r"line 10: 'up' is not a number"),
    ],
)
def test_a_bad_ts_file_is_refused_with_the_line_named(tmp_path, text, match):
    path = tmp_path / "bad.ts"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        read_series_file(path, id_column="series", time_column="t")
