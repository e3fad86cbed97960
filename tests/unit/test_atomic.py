"""Atomic file writes: unique temporary names beside the target, nothing left on failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from flwr_vflgan.atomic import sibling_temp, write_atomically


def test_writes_through_a_hidden_sibling_and_renames(tmp_path: Path):
    target = tmp_path / "synthetic.csv"
    seen: list[Path] = []

    def write(tmp: Path) -> None:
        seen.append(tmp)
        tmp.write_text("a,b\n1,2\n")

    write_atomically(target, write)
    assert target.read_text() == "a,b\n1,2\n"
    assert seen[0].parent == tmp_path and seen[0].name.startswith(".synthetic.csv.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["synthetic.csv"]


def test_two_writers_of_one_target_never_share_a_temporary_file(tmp_path: Path):
    # The second writer runs while the first is mid-write: with one fixed temporary name
    # it would overwrite the first's file and rename it away under the first writer.
    target = tmp_path / "metrics.json"

    def outer(tmp: Path) -> None:
        tmp.write_text("outer, part 1;")
        write_atomically(target, lambda inner: inner.write_text("inner"))
        with tmp.open("a") as handle:
            handle.write(" part 2")

    write_atomically(target, outer)
    assert target.read_text() == "outer, part 1; part 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    target = tmp_path / "report.md"
    target.write_text("old")

    def fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(target, fail)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_the_suffix_keeps_the_format_extension_and_names_differ(tmp_path: Path):
    first, second = (
        sibling_temp(tmp_path / "a.png", ".png"),
        sibling_temp(tmp_path / "a.png", ".png"),
    )
    assert first.suffix == ".png" and first != second
