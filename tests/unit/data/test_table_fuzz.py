"""Tables from the field, generated (property-based, hypothesis): any small CSV, in any
of a few encodings and delimiters, with blanks, one row, one distinct value, huge
numbers or text. ``load_table`` reads it or raises ValueError with a message (the
command line's one-line error); never another exception."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
