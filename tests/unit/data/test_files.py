"""Tests for flwr_vflgan.data.files and flwr_vflgan.data.alignment."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data import files
from flwr_vflgan.data.alignment import AlignmentError, check_aligned, id_digest
from flwr_vflgan.data.files import load_party_file, write_party_files
from flwr_vflgan.data.registry import Dataset, load_dataset
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

CAT, INT, CONT = ColumnKind.CATEGORICAL, ColumnKind.INTEGER, ColumnKind.CONTINUOUS


def small_dataset() -> Dataset:
    frame = pd.DataFrame(
        {
            "code": ["007", "NA", None, "12"],
            "n": [1, 2, 3, 4],
            "x": [0.1, 0.2, 0.30000000000000004, 1e-9],
            "y": [2, 1, 2, 2],
        }
    )
    schema = Schema(
        (
            ColumnSpec("code", CAT),
            ColumnSpec("n", INT),
            ColumnSpec("x", CONT),
            ColumnSpec("y", CAT),
        ),
        label="y",
    )
    return Dataset("small", frame, schema)


@pytest.fixture(scope="module")
def adult() -> Dataset:
    return load_dataset("adult")


class TestWriteThenLoad:
    @pytest.mark.parametrize("file_format", ["csv", "parquet"])
    def test_adult_round_trip_and_alignment(
        self, adult: Dataset, tmp_path: Path, file_format: Any
    ) -> None:
        parts = [adult.schema.names[:8], adult.schema.names[8:]]
        paths = write_party_files(adult, parts, tmp_path / "out", file_format=file_format)
        assert paths == [tmp_path / "out" / f"party-{i}.{file_format}" for i in (0, 1)]
        digests, counts = {}, {}
        for party, (path, columns) in enumerate(zip(paths, parts, strict=True)):
            dataset, ids = load_party_file(path)
            pd.testing.assert_frame_equal(dataset.frame, adult.frame[columns])
            assert dataset.schema == adult.schema.subset(columns)
            assert ids.tolist() == list(range(48_842))
            digests[party], counts[party] = id_digest(ids), len(ids)
        check_aligned(digests, counts)
        assert digests[0] == id_digest(pd.Series(range(48_842)))

    def test_layout_manifest_and_sidecar(self, tmp_path: Path) -> None:
        dataset = small_dataset()
        write_party_files(dataset, [["code", "n"], ["x", "y"]], tmp_path / "out", id_column="key")
        out = tmp_path / "out"
        assert sorted(p.name for p in out.iterdir()) == [
            "manifest.json", "party-0.csv", "party-0.schema.json", "party-1.csv",
            "party-1.schema.json",
        ]  # fmt: skip
        assert (out / "party-1.csv").read_text().splitlines()[0] == "key,x,y"
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["dataset"] == "small" and manifest["n_rows"] == 4
        assert manifest["id_column"] == "key"
        assert [p["columns"] for p in manifest["parties"]] == [["code", "n"], ["x", "y"]]
        assert [p["file"] for p in manifest["parties"]] == ["party-0.csv", "party-1.csv"]
        sidecar = json.loads((out / "party-1.schema.json").read_text())
        assert sidecar["id_column"] == "key"
        assert Schema.from_dict(
            {k: sidecar[k] for k in ("schema_version", "columns", "label")}
        ) == (Schema((ColumnSpec("x", CONT), ColumnSpec("y", CAT)), label="y"))

    @pytest.mark.parametrize("file_format", ["csv", "parquet"])
    def test_text_codes_ids_and_floats_survive(self, tmp_path: Path, file_format: Any) -> None:
        dataset = small_dataset()
        ids = ["a-01", "0002", "b", "3"]
        paths = write_party_files(
            dataset, [["code"], ["n", "x", "y"]], tmp_path / "o", ids=ids, file_format=file_format
        )
        first, first_ids = load_party_file(paths[0])
        assert first_ids.tolist() == ids
        assert first.frame["code"].tolist()[:2] == ["007", "NA"]
        assert pd.isna(first.frame["code"].iloc[2])
        second, _ = load_party_file(paths[1])
        pd.testing.assert_frame_equal(second.frame, dataset.frame[["n", "x", "y"]])

    def test_load_without_sidecar_infers(self, tmp_path: Path) -> None:
        path = tmp_path / "mine.csv"
        path.write_text("row_id,age,city\n1,30,?\n2,40,Lyon\n")
        dataset, ids = load_party_file(path)
        assert dataset.name == "mine"
        assert dataset.schema == Schema((ColumnSpec("age", INT), ColumnSpec("city", CAT)))
        assert ids.tolist() == [1, 2]
        assert pd.isna(dataset.frame["city"].iloc[0])


class TestAtomicity:
    def test_failure_midway_leaves_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        real_write = files.write_table
        calls = []

        def failing_write(frame: pd.DataFrame, path: Path, fmt: Any) -> None:
            calls.append(path)
            if len(calls) == 2:
                raise OSError("disk full")
            real_write(frame, path, fmt)

        monkeypatch.setattr(files, "write_table", failing_write)
        with pytest.raises(OSError, match="disk full"):
            write_party_files(small_dataset(), [["code", "n"], ["x", "y"]], tmp_path / "out")
        assert len(calls) == 2
        assert list(tmp_path.iterdir()) == []

    def test_failure_keeps_existing_folder(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        out = tmp_path / "out"
        out.mkdir()
        (out / "old.txt").write_text("keep me")

        def failing_write(frame: pd.DataFrame, path: Path, fmt: Any) -> None:
            raise RuntimeError("boom")

        monkeypatch.setattr(files, "write_table", failing_write)
        with pytest.raises(RuntimeError, match="boom"):
            write_party_files(small_dataset(), [["code"], ["n"]], out, overwrite=True)
        assert [p.name for p in tmp_path.iterdir()] == ["out"]
        assert (out / "old.txt").read_text() == "keep me"

    def test_refuses_non_empty_folder(self, tmp_path: Path) -> None:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "old.txt").write_text("x")
        with pytest.raises(FileExistsError, match="is not empty; pass overwrite=True"):
            write_party_files(small_dataset(), [["code"], ["n"]], tmp_path / "out")

    def test_overwrite_replaces_folder(self, tmp_path: Path) -> None:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "old.txt").write_text("x")
        write_party_files(small_dataset(), [["code"], ["n"]], tmp_path / "out", overwrite=True)
        assert not (tmp_path / "out" / "old.txt").exists()
        assert (tmp_path / "out" / "party-1.csv").is_file()
        assert [p.name for p in tmp_path.iterdir()] == ["out"]

    def test_empty_existing_folder_is_used(self, tmp_path: Path) -> None:
        (tmp_path / "out").mkdir()
        write_party_files(small_dataset(), [["code"], ["n"]], tmp_path / "out")
        assert (tmp_path / "out" / "manifest.json").is_file()


class TestWriteErrors:
    def test_unknown_column(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match=r"party 1: unknown column 'zip'; valid columns"):
            write_party_files(small_dataset(), [["code"], ["zip"]], tmp_path / "o")

    def test_column_in_two_parties(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="column 'n' is assigned to both party 0 and party 1"):
            write_party_files(small_dataset(), [["code", "n"], ["n"]], tmp_path / "o")

    def test_empty_party(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="party 0 has no columns"):
            write_party_files(small_dataset(), [[], ["n"]], tmp_path / "o")

    def test_id_column_clash(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="id_column 'n' is already a column"):
            write_party_files(small_dataset(), [["code"], ["x"]], tmp_path / "o", id_column="n")

    def test_ids_wrong_length(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="ids has 3 values, the dataset has 4 rows"):
            write_party_files(small_dataset(), [["code"], ["x"]], tmp_path / "o", ids=[1, 2, 3])

    def test_ids_repeated(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match=r"1 repeated IDs, e\.g\. 'a'"):
            write_party_files(small_dataset(), [["code"], ["x"]], tmp_path / "o", ids=list("abca"))
        with pytest.raises(TypeError, match="ids must be a sequence of IDs, got the string"):
            write_party_files(small_dataset(), [["code"], ["x"]], tmp_path / "o", ids="abcd")

    def test_bad_format(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="file_format must be 'csv' or 'parquet', got 'xlsx'"):
            write_party_files(small_dataset(), [["code"]], tmp_path / "o", file_format="xlsx")  # type: ignore[arg-type]
        assert not (tmp_path / "o").exists()


class TestLoadErrors:
    def write(self, tmp_path: Path) -> list[Path]:
        return write_party_files(small_dataset(), [["code", "n"], ["x", "y"]], tmp_path / "o")

    def test_id_column_absent(self, tmp_path: Path) -> None:
        path = tmp_path / "p.csv"
        path.write_text("id,a\n1,2\n")
        with pytest.raises(ValueError, match=r"ID column 'row_id' not found .*\['id', 'a'\]"):
            load_party_file(path)

    def test_duplicate_ids(self, tmp_path: Path) -> None:
        path = tmp_path / "p.csv"
        path.write_text("row_id,a\n1,2\n1,3\n")
        with pytest.raises(ValueError, match=r"1 repeated IDs, e\.g\. 1"):
            load_party_file(path)

    def test_extra_and_missing_columns(self, tmp_path: Path) -> None:
        path = self.write(tmp_path)[0]
        frame = pd.read_csv(path).rename(columns={"n": "m"})
        frame.to_csv(path, index=False)
        with pytest.raises(ValueError, match=r"extra columns \['m'\], missing columns \['n'\]"):
            load_party_file(path)

    def test_id_column_disagrees_with_sidecar(self, tmp_path: Path) -> None:
        path = self.write(tmp_path)[0]
        with pytest.raises(ValueError, match="says the ID column is 'row_id', but id_column='key'"):
            load_party_file(path, id_column="key")

    def test_explicit_schema_path_missing(self, tmp_path: Path) -> None:
        path = self.write(tmp_path)[0]
        with pytest.raises(FileNotFoundError, match=r"schema file .*nope\.json does not exist"):
            load_party_file(path, schema_path=tmp_path / "nope.json")

    def test_explicit_schema_path(self, tmp_path: Path) -> None:
        paths = self.write(tmp_path)
        moved = tmp_path / "elsewhere.json"
        (tmp_path / "o" / "party-1.schema.json").rename(moved)
        dataset, _ = load_party_file(paths[1], schema_path=moved)
        assert dataset.schema.label == "y"

    def test_malformed_sidecar(self, tmp_path: Path) -> None:
        path = self.write(tmp_path)[0]
        (tmp_path / "o" / "party-0.schema.json").write_text("{not json")
        with pytest.raises(ValueError, match=r"cannot read schema file .*party-0\.schema\.json"):
            load_party_file(path)


class TestAlignment:
    def test_digest_matches_documented_construction(self) -> None:
        expected = hashlib.sha256()
        for token in (b"a", b"bc"):
            expected.update(len(token).to_bytes(8, "big") + token)
        assert id_digest(pd.Series(["a", "bc"])) == expected.hexdigest()

    def test_digest_depends_on_order_and_boundaries(self) -> None:
        assert id_digest(pd.Series([1, 2])) != id_digest(pd.Series([2, 1]))
        assert id_digest(pd.Series(["ab", "c"])) != id_digest(pd.Series(["a", "bc"]))

    def test_digest_canonical_numbers(self) -> None:
        assert id_digest(pd.Series([7, 8])) == id_digest(pd.Series([7.0, 8.0]))
        assert id_digest(pd.Series([7, 8])) == id_digest(pd.Series(["7", "8"]))

    def test_digest_errors(self) -> None:
        with pytest.raises(ValueError, match="ids has 1 missing values"):
            id_digest(pd.Series([1.0, None]))
        with pytest.raises(TypeError, match="ids must be a pandas Series, got list"):
            id_digest([1, 2])

    def test_aligned(self) -> None:
        check_aligned({0: "d", 1: "d", 2: "d"}, {0: 5, 1: 5, 2: 5})

    def test_row_counts_differ(self) -> None:
        with pytest.raises(AlignmentError, match="party 1 has 812 rows, party 0 has 800") as caught:
            check_aligned({0: "d", 1: "d"}, {0: 800, 1: 812})
        assert caught.value.parties == (1,)
        assert isinstance(caught.value, ValueError)

    def test_ids_differ(self) -> None:
        message = r"party 2's row IDs do not match party 0's \(same count, different IDs or order\)"
        with pytest.raises(AlignmentError, match=message) as caught:
            check_aligned({0: "d", 1: "d", 2: "e"}, {0: 3, 1: 3, 2: 3})
        assert caught.value.parties == (2,)

    def test_every_mismatch_is_reported(self) -> None:
        with pytest.raises(
            AlignmentError, match=r"party 2 has 4 rows, party 1 has 3; party 3's"
        ) as caught:
            check_aligned({1: "d", 2: "d", 3: "e"}, {1: 3, 2: 4, 3: 3})
        assert caught.value.parties == (2, 3)

    def test_mappings_must_cover_the_same_parties(self) -> None:
        with pytest.raises(ValueError, match=r"digests has \[0, 1\], row_counts has \[0\]"):
            check_aligned({0: "d", 1: "d"}, {0: 3})

    def test_needs_a_party(self) -> None:
        with pytest.raises(ValueError, match="at least one party"):
            check_aligned({}, {})


def test_a_party_file_without_sidecar_reads_numbers_stored_as_text(tmp_path: Path) -> None:
    """A deployed party's own file: a column of numbers with a blank cell is numeric with
    a gap, and its encoder models the gap (value plus indicator)."""
    from flwr_vflgan.runtime.party_data import party_file

    path = tmp_path / "party-0.csv"
    rows = [f"{i},{'  ' if i % 5 == 0 else 20 + i},{'ab'[i % 2]}" for i in range(40)]
    path.write_text("row_id,age,c\n" + "\n".join(rows) + "\n", encoding="utf-8")
    dataset, _ = load_party_file(path)
    assert dataset.frame["age"].dtype == np.float64
    assert int(dataset.frame["age"].isna().sum()) == 8
    (span,) = [s for s in party_file(path).encoder.spans if s.column == "age"]
    assert span.activation == "identity_missing" and span.width == 3
