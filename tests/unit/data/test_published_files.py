"""The shared reader of published dataset files (flwr_vflgan/data/_files.py) and the
built-in datasets' read path through it."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from flwr_vflgan.data._builtin import GERMAN_CREDIT, BuiltinDataset
from flwr_vflgan.data._files import by_position, read_delimited
from flwr_vflgan.data._papers import PAPER_DATASETS

TEXT = "a;b\n1;x\n2;y\n"
EXPECTED = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2"])
def test_a_path_is_decompressed_by_its_suffix(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"t.csv{suffix}"
    opener = {"": open, ".gz": gzip.open, ".bz2": bz2.open}[suffix]
    with opener(path, "wb") as handle:
        handle.write(TEXT.encode())
    frame = read_delimited(str(path), str(path), "t", sep=";")
    pd.testing.assert_frame_equal(frame, EXPECTED)


def test_an_open_file_is_gunzipped_when_its_name_ends_in_gz() -> None:
    frame = read_delimited(io.BytesIO(gzip.compress(TEXT.encode())), "t.csv.gz", "t", sep=";")
    pd.testing.assert_frame_equal(frame, EXPECTED)
    plain = read_delimited(io.BytesIO(TEXT.encode()), "t.csv", "t", sep=";")
    pd.testing.assert_frame_equal(plain, EXPECTED)


def test_a_truncated_archive_is_one_error_naming_the_dataset_and_file(tmp_path: Path) -> None:
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(TEXT.encode() * 100)[:40])
    with pytest.raises(ValueError, match=rf"^cannot parse the wine file {re.escape(str(path))}: "):
        read_delimited(str(path), str(path), "wine", sep=";")


def test_columns_by_position_must_match_in_count() -> None:
    frame = by_position(EXPECTED.copy(), ("x", "y"), "t", "f.csv")
    assert list(frame.columns) == ["x", "y"]
    with pytest.raises(ValueError, match=r"^the t file f\.csv has 2 columns, expected 3$"):
        by_position(EXPECTED.copy(), ("x", "y", "z"), "t", "f.csv")


def test_a_builtin_file_with_a_column_missing_is_refused_by_count() -> None:
    row = " ".join(["A11"] * 20) + "\n"  # german.data has 21 columns
    with pytest.raises(ValueError, match=r"german_credit file g\.data has 20 columns, expected 21"):
        GERMAN_CREDIT.read(io.BytesIO(row.encode()), where="g.data")


def test_a_builtin_file_with_a_wrong_header_is_refused_by_name() -> None:
    spec = dataclasses.replace(GERMAN_CREDIT, header=True)
    header = " ".join(f"c{i}" for i in range(21)) + "\n"
    with pytest.raises(ValueError, match=r"has header \['c0', .*expected \['status'"):
        spec.read(io.BytesIO(header.encode()), where="g.data")


@pytest.mark.parametrize("spec", PAPER_DATASETS, ids=lambda spec: spec.name)
def test_every_paper_dataset_names_its_section_and_says_its_preprocessing(
    spec: BuiltinDataset,
) -> None:
    assert re.fullmatch(r"paper 00[0-4], (Section|Appendix) [0-9A-Z.]+", spec.paper), spec.paper
    assert spec.preprocessing and "(" not in spec.preprocessing[:1]
