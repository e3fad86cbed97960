"""Tables from the field, generated (property-based, hypothesis): any small CSV, in any
of a few encodings and delimiters, with blanks, one row, one distinct value, huge
numbers or text; any small Parquet table of mixed column types and nulls; any party file
(CSV or Parquet) with any IDs and any schema sidecar. ``load_table`` and
``load_party_file`` read it or raise ValueError with a message (the command line's
one-line error, a party's error reply); never another exception."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flwr_vflgan.data import load_party_file
from flwr_vflgan.data.registry import load_table

CELLS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", " ", "?", "NA", "a", "b", "é", "1,5", "12 kg", '"q"', "x;y"]),
    st.text(max_size=6),
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[bytes, str]:
    """A CSV file's bytes and its suffix."""
    n_cols = draw(st.integers(1, 4))
    n_rows = draw(st.integers(0, 6))
    delimiter = draw(st.sampled_from([",", ";", "\t"]))
    header = draw(st.lists(st.text(min_size=0, max_size=5), min_size=n_cols, max_size=n_cols))
    rows = [
        draw(st.lists(CELLS, min_size=n_cols, max_size=draw(st.integers(n_cols, n_cols + 1))))
        for _ in range(n_rows)
    ]
    text = "\n".join(delimiter.join(cells) for cells in [header, *rows])
    encoding = draw(st.sampled_from(["utf-8", "utf-16", "latin-1"]))
    suffix = ".tsv" if delimiter == "\t" and draw(st.booleans()) else ".csv"
    return text.encode(encoding, errors="replace"), suffix


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(table=tables())
def test_any_small_table_loads_or_is_refused_with_a_message(
    tmp_path: Path, table: tuple[bytes, str]
) -> None:
    content, suffix = table
    path = tmp_path / f"t{suffix}"
    path.write_bytes(content)
    try:
        dataset, _ = load_table(path)
    except ValueError as exc:
        # The project's own message, not a decoder's or a parser's leaking through.
        assert str(exc), "an error without a message"
        assert not isinstance(exc, UnicodeError), repr(exc)
        assert type(exc).__module__.split(".")[0] not in ("pandas", "numpy", "pyarrow"), repr(exc)
        return
    assert len(dataset.frame.columns) == len(dataset.schema.names)


COLUMN_VALUES = st.one_of(
    st.lists(st.one_of(st.none(), st.integers(-(2**62), 2**62)), min_size=0, max_size=6),
    st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), max_size=6),
    st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=6),
    st.lists(st.one_of(st.none(), st.booleans()), max_size=6),
)


@st.composite
def frames(draw: st.DrawFn, id_column: str | None = None) -> pd.DataFrame:
    """A small table of mixed column types, nulls and odd values (every column padded to
    the same length), optionally with an ID column of any IDs (repeated, missing)."""
    names = draw(st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=4, unique=True))
    columns = [draw(COLUMN_VALUES) for _ in names]
    n_rows = max((len(c) for c in columns), default=0)
    data = {n: (c + [None] * n_rows)[:n_rows] for n, c in zip(names, columns, strict=True)}
    if id_column is not None and id_column not in data:
        ids = draw(
            st.one_of(
                st.just(list(range(n_rows))),
                st.lists(
                    st.one_of(st.none(), st.integers(0, 3), st.text(max_size=2)),
                    min_size=n_rows,
                    max_size=n_rows,
                ),
            )
        )
        data = {id_column: ids, **data} if draw(st.booleans()) else data
    return pd.DataFrame(data)


def _check_refusal(exc: Exception) -> None:
    assert str(exc), "an error without a message"
    assert not isinstance(exc, UnicodeError), repr(exc)
    assert type(exc).__module__.split(".")[0] not in ("pandas", "numpy", "pyarrow"), repr(exc)


def _write_parquet(frame: pd.DataFrame, path: Path) -> bool:
    """Write ``frame``; False when pyarrow itself cannot store it (mixed-type objects)."""
    try:
        frame.to_parquet(path, index=False)
    except Exception:  # pyarrow's own refusal of a column: not the loader's business
        return False
    return True


@settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(frame=frames())
def test_any_small_parquet_table_loads_or_is_refused_with_a_message(
    tmp_path: Path, frame: pd.DataFrame
) -> None:
    path = tmp_path / "t.parquet"
    if not _write_parquet(frame, path):
        return
    try:
        dataset, _ = load_table(path)
    except ValueError as exc:
        _check_refusal(exc)
        return
    assert list(dataset.frame.columns) == dataset.schema.names


SIDECARS = st.one_of(
    st.none(),
    st.just("{"),
    st.just('{"columns": []}'),
    st.just('{"id_column": "other", "columns": []}'),
    st.dictionaries(
        st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=4)), max_size=3
    ).map(json.dumps),
)


@settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    frame=frames(id_column="row_id"),
    suffix=st.sampled_from([".csv", ".parquet"]),
    sidecar=SIDECARS,
)
def test_any_party_file_loads_or_is_refused_with_a_message(
    tmp_path: Path, frame: pd.DataFrame, suffix: str, sidecar: str | None
) -> None:
    """A party's file with any IDs (repeated, missing, absent) and any schema sidecar
    (none, malformed, naming other columns): read, or refused with a message."""
    path = tmp_path / f"party{suffix}"
    for old in tmp_path.glob("party*"):
        old.unlink()
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif not _write_parquet(frame, path):
        return
    if sidecar is not None:
        (tmp_path / f"party{suffix}.schema.json").write_text(sidecar)
    try:
        dataset, ids = load_party_file(path)
    except ValueError as exc:
        _check_refusal(exc)
        return
    assert len(ids) == len(dataset.frame) and ids.is_unique and ids.notna().all()
    assert "row_id" not in dataset.frame.columns
