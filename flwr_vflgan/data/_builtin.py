"""Definitions of the built-in datasets: file names, columns, kinds, sources; internal.

The files themselves are public datasets (see ``bundled/README.md`` and the source of
each definition below); nothing here downloads anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import numpy as np
import pandas as pd

from flwr_vflgan.data._files import by_position, read_delimited
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
)  # fmt: skip
ADULT_INTEGER = (
    "age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week",
)  # fmt: skip

GERMAN_CREDIT_COLUMNS = (
    "status", "duration", "credit_history", "purpose", "amount", "savings",
    "employment_duration", "installment_rate", "personal_status_sex", "other_debtors",
    "present_residence", "property", "age", "other_installment_plans", "housing",
    "number_credits", "job", "people_liable", "telephone", "foreign_worker", "credit_risk",
)  # fmt: skip
GERMAN_CREDIT_INTEGER = (
    "duration", "amount", "installment_rate", "present_residence", "age", "number_credits",
    "people_liable",
)  # fmt: skip

# Names as in UCI's spambase.names (word_freq_WORD, char_freq_CHAR).
_SPAM_WORDS = (
    "make", "address", "all", "3d", "our", "over", "remove", "internet", "order", "mail",
    "receive", "will", "people", "report", "addresses", "free", "business", "email", "you",
    "credit", "your", "font", "000", "money", "hp", "hpl", "george", "650", "lab", "labs",
    "telnet", "857", "data", "415", "85", "technology", "1999", "parts", "pm", "direct", "cs",
    "meeting", "original", "project", "re", "edu", "table", "conference",
)  # fmt: skip
_SPAM_CHARS = (";", "(", "[", "!", "$", "#")
SPAMBASE_FEATURES = (
    *(f"word_freq_{word}" for word in _SPAM_WORDS),
    *(f"char_freq_{char}" for char in _SPAM_CHARS),
    "capital_run_length_average",
    "capital_run_length_longest",
    "capital_run_length_total",
)
SPAMBASE_COLUMNS = (*SPAMBASE_FEATURES, "spam")

MNIST_PIXELS = tuple(f"pixel_{i}" for i in range(784))
MNIST_COLUMNS = (*MNIST_PIXELS, "label")


@dataclass(frozen=True)
class BuiltinDataset:
    """How to find, read and describe one built-in dataset."""

    name: str
    columns: tuple[str, ...]
    integer: tuple[str, ...]
    continuous: tuple[str, ...]
    label: str
    source: str
    file_names: tuple[str, ...] = ()  # under <data_dir>/<name>/; empty when bundled
    bundled_file: str | None = None  # under flwr_vflgan/data/bundled/
    sep: str = ","
    header: bool = False  # a file (not bundled) whose first line names the columns
    integer_range: tuple[int, int] | None = None  # inclusive bounds of every integer column
    image_shape: tuple[int, int] | None = None  # (height, width) when rows are images
    # Reads the published file (a path) into the frame of ``columns``, with its paper's
    # preprocessing; None: a delimited file read by :meth:`read` itself.
    reader: Callable[[str, str], pd.DataFrame] | None = None
    paper: str = ""  # which seed paper uses it, and where: "paper 000, Section 5.1.1"
    # A table derived from a delimited file (a bundled one included): the file's columns
    # (when they differ from ``columns``) and the preprocessing from them to ``columns``.
    file_columns: tuple[str, ...] = ()
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    preprocessing: str = ""  # what its paper does to the published file, in short

    def schema(self) -> Schema:
        """The dataset's declared schema."""
        specs = []
        for name in self.columns:
            if name in self.integer:
                kind = ColumnKind.INTEGER
            elif name in self.continuous:
                kind = ColumnKind.CONTINUOUS
            else:
                kind = ColumnKind.CATEGORICAL
            specs.append(ColumnSpec(name, kind))
        return Schema(tuple(specs), label=self.label)

    def read(self, source: str | IO[bytes], *, where: str) -> pd.DataFrame:
        """Read the file and check its shape and dtypes; ``where`` names it in errors."""
        if self.reader is not None:
            if not isinstance(source, str):
                raise TypeError(f"the {self.name} reader takes a path, got {type(source)}")
            frame = self.reader(source, where)
            if tuple(frame.columns) != self.columns:
                raise AssertionError(f"the {self.name} reader returned {list(frame.columns)}")
            return self._checked(frame, where)
        has_header = self.bundled_file is not None or self.header
        frame = read_delimited(
            source,
            where,
            self.name,
            sep=self.sep,
            header=0 if has_header else None,
            na_values=["?"],
            keep_default_na=False,
        )
        names, expected = tuple(frame.columns), self.file_columns or self.columns
        if has_header and len(names) == len(expected) and names != expected:
            raise ValueError(
                f"the {self.name} file {where} has header {list(names)}, expected {list(expected)}"
            )
        frame = by_position(frame, expected, self.name, where)
        if self.prepare is not None:
            frame = self.prepare(frame)
            if tuple(frame.columns) != self.columns:
                raise AssertionError(
                    f"the {self.name} preprocessing returned {list(frame.columns)}"
                )
        return self._checked(frame, where)

    def _checked(self, frame: pd.DataFrame, where: str) -> pd.DataFrame:
        for name in self.integer:
            if not pd.api.types.is_integer_dtype(frame[name].dtype):
                raise ValueError(
                    f"column {name!r} of the {self.name} file {where} should hold whole "
                    f"numbers without missing values, but was read as {frame[name].dtype}"
                )
        if self.integer_range is not None:
            low, high = self.integer_range
            values = frame[list(self.integer)].to_numpy()
            if values.min() < low or values.max() > high:
                raise ValueError(
                    f"the {self.name} file {where} has integer values in "
                    f"[{values.min()}, {values.max()}], expected within [{low}, {high}]"
                )
        if self.continuous:
            frame = frame.astype(dict.fromkeys(self.continuous, np.float64))
        return frame


ADULT = BuiltinDataset(
    name="adult",
    columns=ADULT_COLUMNS,
    integer=ADULT_INTEGER,
    continuous=(),
    label="income",
    bundled_file="adult.csv.gz",
    source="UCI Adult, CC BY 4.0, Becker & Kohavi (1996), doi:10.24432/C5XW20",
)

GERMAN_CREDIT = BuiltinDataset(
    name="german_credit",
    columns=GERMAN_CREDIT_COLUMNS,
    integer=GERMAN_CREDIT_INTEGER,
    continuous=(),
    label="credit_risk",
    file_names=("german.data",),
    sep=" ",
    source=(
        "Statlog (German Credit Data), CC BY 4.0, Hofmann (1994), UCI ML Repository, "
        "https://archive.ics.uci.edu/dataset/144/statlog+german+credit+data "
        "(doi:10.24432/C5NC77); use the space-separated german.data"
    ),
)

SPAMBASE = BuiltinDataset(
    name="spambase",
    columns=SPAMBASE_COLUMNS,
    integer=(),
    continuous=SPAMBASE_FEATURES,
    label="spam",
    file_names=("spambase.csv.gz", "spambase.data", "spambase.csv"),
    source=(
        "Spambase, CC BY 4.0, Hopkins et al. (1999), UCI ML Repository, "
        "https://archive.ics.uci.edu/dataset/94/spambase (doi:10.24432/C53G6X); "
        "UCI's spambase.data (header-less CSV) can be used as is"
    ),
)

MNIST_5K = BuiltinDataset(
    name="mnist_5k",
    image_shape=(28, 28),
    columns=MNIST_COLUMNS,
    integer=MNIST_PIXELS,
    continuous=(),
    label="label",
    integer_range=(0, 255),
    file_names=("mnist_5k.csv.gz", "mnist_5k.csv"),
    source=(
        "a 5,000-image subset (500 per digit) of MNIST, CC BY-SA 3.0, LeCun, Cortes & "
        "Burges, https://yann.lecun.com/exdb/mnist/; build it as a header-less CSV with the "
        "784 pixel values (0..255) of each image followed by its digit"
    ),
)

CALIFORNIA_HOUSING_COLUMNS = (
    "MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude",
    "Longitude", "MedHouseVal",
)  # fmt: skip

CALIFORNIA_HOUSING = BuiltinDataset(
    name="california_housing",
    columns=CALIFORNIA_HOUSING_COLUMNS,
    integer=(),
    continuous=CALIFORNIA_HOUSING_COLUMNS,
    label="MedHouseVal",
    file_names=("california_housing.csv.gz", "california_housing.csv"),
    header=True,
    source=(
        "California Housing (1990 census block groups), Pace & Barry (1997), via StatLib; "
        "scikit-learn's fetch_california_housing(as_frame=True).frame written as a CSV "
        "with its header is the same table (paper 000 Table 3's Housing)"
    ),
)

BUILTIN_DATASETS: tuple[BuiltinDataset, ...] = (
    ADULT,
    CALIFORNIA_HOUSING,
    GERMAN_CREDIT,
    MNIST_5K,
    SPAMBASE,
)
