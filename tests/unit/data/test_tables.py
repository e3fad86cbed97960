"""Reading table files: the separator of a .csv file and numbers with a decimal comma."""

from __future__ import annotations

import gzip
import logging
import math
from pathlib import Path

import pytest

from flwr_vflgan.data import ColumnKind
from flwr_vflgan.data._tables import csv_separator, read_table
from flwr_vflgan.data.registry import load_table

NA = ("", "?", "NA", "NaN")


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("a,b,c\n", ","),
        ("a;b;c\n", ";"),
        ("a\tb\tc\n", "\t"),
        ("a|b|c\n", "|"),
        ("name\n", ","),  # one column: nothing to detect
        ('"x;y",z\n', ","),  # a comma in the header: a comma file whatever else is in it
        ("a;b|c\n", ","),  # two candidates: not guessed
    ],
)
def test_the_separator_comes_from_the_header_line(tmp_path: Path, header: str, expected: str):
    assert csv_separator(_write(tmp_path / "t.csv", header + "1\n")) == expected


def test_a_semicolon_file_reads_into_its_columns_and_says_so(tmp_path: Path, caplog):
    path = _write(tmp_path / "t.csv", "id;city;note\n1;Paris;a, b\n2;Lyon;c\n")
    with caplog.at_level(logging.INFO, logger="flwr_vflgan.data._tables"):
        frame = read_table(path, na_values=NA)
    assert list(frame.columns) == ["id", "city", "note"]
    assert frame["note"].tolist() == ["a, b", "c"]  # a comma inside a field is text
    assert "reading it as ';'-separated" in caplog.text


def test_a_gzipped_semicolon_file_is_detected_too(tmp_path: Path):
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("a;b\n1;2\n")
    assert list(read_table(path, na_values=NA).columns) == ["a", "b"]


def test_decimal_commas_of_a_semicolon_file_are_read_as_numbers(tmp_path: Path, caplog):
    path = _write(
        tmp_path / "t.csv",
        "x;y;code;word;whole\n79,5;-0,25;1,5;1,5;3\n;2;2,0;two;4\n12,0; 7 ;3,5;3;5\n",
    )
    with caplog.at_level(logging.INFO, logger="flwr_vflgan.data._tables"):
        frame = read_table(path, na_values=NA, text_columns=["code"])
    assert frame["x"].tolist()[0] == 79.5 and math.isnan(frame["x"].tolist()[1])
    assert frame["x"].tolist()[2] == 12.0
    assert frame["y"].tolist() == [-0.25, 2.0, 7.0]
    assert frame["code"].tolist() == ["1,5", "2,0", "3,5"]  # asked to stay text
    assert frame["word"].tolist() == ["1,5", "two", "3"]  # not all numbers: text
    assert frame["whole"].tolist() == [3, 4, 5]  # pandas read it already
    assert "column 'x' holds numbers with a decimal comma" in caplog.text
    assert "'word'" not in caplog.text


def test_a_comma_file_never_reads_a_comma_as_a_decimal_mark(tmp_path: Path):
    # In a comma-separated file "1,5" must be quoted; it may be a thousands separator.
    path = _write(tmp_path / "t.csv", 'a,b\n"1,5",1\n"2,250",2\n')
    assert read_table(path, na_values=NA)["a"].tolist() == ["1,5", "2,250"]


def test_a_semicolon_table_with_decimal_commas_loads_with_numeric_kinds(tmp_path: Path):
    path = _write(
        tmp_path / "t.csv",
        "Id;age;income;city\n"
        + "".join(f"{i};{20 + i % 7},0;{i}5,25;c{i % 3}\n" for i in range(30)),
    )
    dataset, ids = load_table(path, id_column="Id")
    assert ids is not None and ids.tolist() == list(range(30))
    assert dataset.schema.kind_of("age") is ColumnKind.INTEGER
    assert dataset.schema.kind_of("income") is ColumnKind.CONTINUOUS
    assert dataset.schema.kind_of("city") is ColumnKind.CATEGORICAL
    assert dataset.frame["income"].iloc[1] == 15.25


def test_a_windows_1252_file_is_read_with_a_warning(tmp_path: Path, caplog):
    path = tmp_path / "t.csv"
    path.write_bytes("city;n\nNîmes;1\nSète;2\n".encode("cp1252"))
    with caplog.at_level(logging.WARNING, logger="flwr_vflgan.data._tables"):
        frame = read_table(path, na_values=NA)
    assert frame["city"].tolist() == ["Nîmes", "Sète"]
    assert "is not UTF-8" in caplog.text and "read as Windows-1252" in caplog.text


def test_a_file_in_neither_encoding_is_refused_by_name(tmp_path: Path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\n\x81\x8d,1\n")  # undefined in Windows-1252, invalid UTF-8
    with pytest.raises(
        ValueError, match=r"t.csv is neither UTF-8 nor Windows-1252.*save it as UTF-8"
    ):
        read_table(path, na_values=NA)


def test_a_utf8_file_with_a_byte_order_mark_keeps_its_first_column_name(tmp_path: Path):
    path = tmp_path / "t.csv"
    path.write_bytes("Id;x\n1;2\n".encode("utf-8-sig"))
    assert list(read_table(path, na_values=NA).columns) == ["Id", "x"]
