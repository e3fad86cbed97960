"""Tests for flwr_vflgan.data.registry (built-in datasets and user tables)."""

from __future__ import annotations

import gzip
import hashlib
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.registry import (
    DATA_DIR_ENV,
    Dataset,
    DatasetUnavailableError,
    list_datasets,
    load_dataset,
    load_table,
)
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

# Column names and integer columns as written in ../shared/datasets/README.md.
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
    "native-country", "income",
]  # fmt: skip
ADULT_INTEGER = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
GERMAN_COLUMNS = [
    "status", "duration", "credit_history", "purpose", "amount", "savings",
    "employment_duration", "installment_rate", "personal_status_sex", "other_debtors",
    "present_residence", "property", "age", "other_installment_plans", "housing",
    "number_credits", "job", "people_liable", "telephone", "foreign_worker", "credit_risk",
]  # fmt: skip
GERMAN_INTEGER = [
    "duration", "amount", "installment_rate", "present_residence", "age", "number_credits",
    "people_liable",
]  # fmt: skip


def kinds(dataset: Dataset, kind: ColumnKind) -> list[str]:
    return [spec.name for spec in dataset.schema.columns if spec.kind is kind]


def test_list_datasets() -> None:
    assert list_datasets() == [
        "adult",
        "adult_thesis",
        "california_housing",
        "census",
        "covertype",
        "credit_fraud",
        "criteo",
        "german_credit",
        "hcv",
        "imdb",
        "intrusion",
        "isic",
        "loan",
        "mnist",
        "mnist_5k",
        "spambase",
        "twitter",
        "vehicle",
        "wine_red",
        "wine_white",
    ]


def test_unknown_dataset_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"unknown dataset 'iris'; valid names: \['adult',"):
        load_dataset("iris")


@pytest.fixture(scope="module")
def adult() -> Dataset:
    return load_dataset("adult")


class TestAdult:
    def test_shape_columns_and_kinds(self, adult: Dataset) -> None:
        assert adult.frame.shape == (48_842, 15)
        assert list(adult.frame.columns) == ADULT_COLUMNS
        assert kinds(adult, ColumnKind.INTEGER) == ADULT_INTEGER
        assert kinds(adult, ColumnKind.CATEGORICAL) == [
            c for c in ADULT_COLUMNS if c not in ADULT_INTEGER
        ]
        assert adult.schema.label == "income"
        assert all(adult.frame[c].dtype == np.int64 for c in ADULT_INTEGER)

    def test_labels_and_missing_values(self, adult: Dataset) -> None:
        assert set(adult.frame["income"]) == {"<=50K", ">50K"}
        # adult.names: 48,842 instances, 45,222 once rows with unknown values are removed.
        assert len(adult.frame.dropna()) == 45_222
        assert not (adult.frame == "?").any().any()
        missing_columns = adult.frame.columns[adult.frame.isna().any()].tolist()
        assert missing_columns == ["workclass", "occupation", "native-country"]

    def test_matches_the_uci_files(self, adult: Dataset, datasets_dir: Path) -> None:
        # An independent parse of the two raw UCI files.
        read = {"sep": ",", "header": None, "names": ADULT_COLUMNS, "skipinitialspace": True}
        train = pd.read_csv(datasets_dir / "adult" / "adult.data.gz", **read)
        test = pd.read_csv(datasets_dir / "adult" / "adult.test.gz", skiprows=1, **read)
        test["income"] = test["income"].str.rstrip(".")
        raw = pd.concat([train, test], ignore_index=True).replace("?", np.nan)
        pd.testing.assert_frame_equal(adult.frame, raw, check_dtype=False)

    def test_bundled_file_md5_is_documented(self) -> None:
        bundled = resources.files("flwr_vflgan.data").joinpath("bundled")
        compressed = bundled.joinpath("adult.csv.gz").read_bytes()
        readme = bundled.joinpath("README.md").read_text(encoding="utf-8")
        assert hashlib.md5(compressed).hexdigest() in readme
        assert hashlib.md5(gzip.decompress(compressed)).hexdigest() in readme
        assert "doi:10.24432/C5XW20" in readme
        assert "CC BY 4.0" in readme

    def test_bundled_file_keeps_question_marks(self) -> None:
        bundled = resources.files("flwr_vflgan.data").joinpath("bundled", "adult.csv.gz")
        text = gzip.decompress(bundled.read_bytes()).decode("ascii")
        assert text.splitlines()[0] == ",".join(ADULT_COLUMNS)
        assert ",?," in text


class TestFileDatasets:
    def test_german_credit(self, datasets_dir: Path) -> None:
        german = load_dataset("german_credit", data_dir=datasets_dir)
        assert german.frame.shape == (1000, 21)
        assert list(german.frame.columns) == GERMAN_COLUMNS
        assert kinds(german, ColumnKind.INTEGER) == GERMAN_INTEGER
        assert len(kinds(german, ColumnKind.CATEGORICAL)) == 14
        assert german.schema.label == "credit_risk"
        # UCI: 700 good (1) and 300 bad (2) credit risks; codes are kept as categories.
        assert german.frame["credit_risk"].value_counts().to_dict() == {1: 700, 2: 300}
        first = "A11 6 A34 A43 1169 A65 A75 4 A93 A101 4 A121 67 A143 A152 2 A173 1 A192 A201 1"
        assert [str(v) for v in german.frame.iloc[0]] == first.split()

    def test_spambase(self, datasets_dir: Path) -> None:
        spam = load_dataset("spambase", data_dir=datasets_dir)
        assert spam.frame.shape == (4601, 58)
        assert len(kinds(spam, ColumnKind.CONTINUOUS)) == 57
        assert kinds(spam, ColumnKind.CATEGORICAL) == ["spam"]
        assert spam.schema.label == "spam"
        names = spam.schema.names
        assert names[0] == "word_freq_make" and names[47] == "word_freq_conference"
        assert names[48:54] == [f"char_freq_{c}" for c in ";([!$#"]
        assert names[54:57] == [
            "capital_run_length_average", "capital_run_length_longest", "capital_run_length_total",
        ]  # fmt: skip
        assert all(spam.frame[c].dtype == np.float64 for c in names[:57])
        # spambase.names: 1813 spam messages (39.4%).
        assert spam.frame["spam"].value_counts().to_dict() == {0: 2788, 1: 1813}

    def test_california_housing(self, datasets_dir: Path) -> None:
        housing = load_dataset("california_housing", data_dir=datasets_dir)
        # The shared README: 20,640 x 9, 8 continuous features, continuous MedHouseVal.
        assert housing.frame.shape == (20640, 9)
        assert housing.schema.names[0] == "MedInc" and housing.schema.label == "MedHouseVal"
        assert len(kinds(housing, ColumnKind.CONTINUOUS)) == 9
        assert housing.frame.iloc[0].tolist()[:2] == [8.3252, 41.0]
        assert not housing.frame.isna().any().any()

    def test_mnist_5k(self, datasets_dir: Path) -> None:
        mnist = load_dataset("mnist_5k", data_dir=datasets_dir)
        assert mnist.frame.shape == (5000, 785)
        assert mnist.schema.names == [f"pixel_{i}" for i in range(784)] + ["label"]
        assert len(kinds(mnist, ColumnKind.INTEGER)) == 784
        assert mnist.schema.label == "label"
        assert mnist.frame["label"].value_counts().to_dict() == {d: 500 for d in range(10)}
        pixels = mnist.frame.iloc[:, :784].to_numpy()
        assert pixels.min() == 0 and pixels.max() == 255

    def test_data_dir_from_environment(
        self, datasets_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(DATA_DIR_ENV, str(datasets_dir))
        assert load_dataset("german_credit").frame.shape == (1000, 21)

    def test_missing_file_names_paths_env_and_source(self, tmp_path: Path) -> None:
        with pytest.raises(DatasetUnavailableError) as caught:
            load_dataset("spambase", data_dir=tmp_path)
        message = str(caught.value)
        assert isinstance(caught.value, FileNotFoundError)
        assert "'spambase'" in message
        for file_name in ("spambase.csv.gz", "spambase.data"):
            assert str(tmp_path / "spambase" / file_name) in message
        assert DATA_DIR_ENV in message
        assert "doi:10.24432/C53G6X" in message

    def test_missing_file_in_env_dir(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
        pattern = re.escape(str(tmp_path / "german_credit" / "german.data"))
        with pytest.raises(DatasetUnavailableError, match=pattern + r".*10\.24432/C5NC77"):
            load_dataset("german_credit")

    def test_default_cache_dir(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv(DATA_DIR_ENV, raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))
        expected = tmp_path / ".cache" / "flwr_vflgan" / "datasets" / "mnist_5k" / "mnist_5k.csv.gz"
        with pytest.raises(DatasetUnavailableError, match=re.escape(str(expected))):
            load_dataset("mnist_5k")

    def test_malformed_file(self, tmp_path: Path) -> None:
        (tmp_path / "german_credit").mkdir()
        (tmp_path / "german_credit" / "german.data").write_text("A11 6 A34\n")
        with pytest.raises(ValueError, match="has 3 columns, expected 21"):
            load_dataset("german_credit", data_dir=tmp_path)


class TestDataset:
    def test_columns_must_match_schema(self) -> None:
        schema = Schema((ColumnSpec("a", ColumnKind.INTEGER), ColumnSpec("b", ColumnKind.INTEGER)))
        with pytest.raises(ValueError, match=r"frame columns \['b', 'a'\] differ from schema"):
            Dataset("t", pd.DataFrame({"b": [1], "a": [2]}), schema)

    def test_name_must_not_be_empty(self) -> None:
        schema = Schema((ColumnSpec("a", ColumnKind.INTEGER),))
        with pytest.raises(ValueError, match="name must be a non-empty string"):
            Dataset("", pd.DataFrame({"a": [1]}), schema)

    def test_frame_type(self) -> None:
        schema = Schema((ColumnSpec("a", ColumnKind.INTEGER),))
        with pytest.raises(TypeError, match="frame must be a pandas DataFrame, got dict"):
            Dataset("t", {"a": [1]}, schema)


class TestLoadTable:
    CSV = "id,age,city,score\n7,31,Paris,0.5\n3,45,?,1.25\n9,27,Lyon,NA\n"

    def test_csv_with_id_column(self, tmp_path: Path) -> None:
        path = tmp_path / "people.csv"
        path.write_text(self.CSV)
        dataset, ids = load_table(path, id_column="id", label="city")
        assert dataset.name == "people"
        assert dataset.schema.names == ["age", "city", "score"]
        assert [spec.kind for spec in dataset.schema.columns] == [
            ColumnKind.INTEGER, ColumnKind.CATEGORICAL, ColumnKind.CONTINUOUS,
        ]  # fmt: skip
        assert dataset.schema.label == "city"
        assert ids is not None and ids.tolist() == [7, 3, 9]
        assert dataset.frame["city"].isna().tolist() == [False, True, False]
        assert dataset.frame["score"].isna().tolist() == [False, False, True]

    def test_declared_kinds_and_no_id(self, tmp_path: Path) -> None:
        path = tmp_path / "people.csv"
        path.write_text(self.CSV)
        dataset, ids = load_table(path, schema={"id": "categorical", "age": "continuous"})
        assert ids is None
        assert dataset.schema.kind_of("id") is ColumnKind.CATEGORICAL
        assert dataset.schema.kind_of("age") is ColumnKind.CONTINUOUS

    def test_custom_na_values(self, tmp_path: Path) -> None:
        path = tmp_path / "people.csv"
        path.write_text(self.CSV)
        dataset, _ = load_table(path, na_values=("NA",))
        assert dataset.frame["city"].tolist()[1] == "?"

    @pytest.mark.parametrize("suffix", [".parquet", ".pq"])
    def test_parquet(self, tmp_path: Path, suffix: str) -> None:
        frame = pd.DataFrame({"row": ["a", "b"], "x": [1.5, 2.5], "c": ["u", None]})
        path = tmp_path / f"table{suffix}"
        frame.to_parquet(path)
        dataset, ids = load_table(path, id_column="row")
        assert ids is not None and ids.tolist() == ["a", "b"]
        assert dataset.schema.names == ["x", "c"]
        assert dataset.frame["x"].tolist() == [1.5, 2.5]
        assert dataset.frame["c"].isna().tolist() == [False, True]

    def test_tsv_and_csv_gz(self, tmp_path: Path) -> None:
        (tmp_path / "t.tsv").write_text("a\tb\n1\tx\n2\ty\n")
        (tmp_path / "t.csv.gz").write_bytes(gzip.compress(b"a,b\n1,x\n2,y\n"))
        for name in ("t.tsv", "t.csv.gz"):
            dataset, _ = load_table(tmp_path / name)
            assert dataset.name == "t"
            assert dataset.frame.to_dict("list") == {"a": [1, 2], "b": ["x", "y"]}

    def test_unknown_extension(self, tmp_path: Path) -> None:
        path = tmp_path / "table.xlsx"
        path.write_text("a\n1\n")
        with pytest.raises(ValueError, match=r"unsupported .*table\.xlsx.*'\.csv', '\.csv\.gz'"):
            load_table(path)

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "absent.csv"))):
            load_table(tmp_path / "absent.csv")

    def test_empty_file(self, tmp_path: Path) -> None:
        (tmp_path / "empty.csv").write_text("")
        with pytest.raises(ValueError, match=r"empty\.csv is empty"):
            load_table(tmp_path / "empty.csv")

    def test_header_only(self, tmp_path: Path) -> None:
        (tmp_path / "head.csv").write_text("a,b\n")
        with pytest.raises(ValueError, match="has a header but no rows"):
            load_table(tmp_path / "head.csv")

    def test_unparsable_parquet(self, tmp_path: Path) -> None:
        (tmp_path / "bad.parquet").write_text("not parquet")
        with pytest.raises(ValueError, match=r"cannot parse table file .*bad\.parquet"):
            load_table(tmp_path / "bad.parquet")

    def test_id_column_absent(self, tmp_path: Path) -> None:
        (tmp_path / "t.csv").write_text(self.CSV)
        with pytest.raises(ValueError, match=r"ID column 'key' not found .*\['id', 'age', 'city'"):
            load_table(tmp_path / "t.csv", id_column="key")

    def test_duplicate_ids_are_named(self, tmp_path: Path) -> None:
        (tmp_path / "t.csv").write_text("id,x\n4,1\n5,2\n4,3\n6,4\n6,5\n")
        with pytest.raises(ValueError, match=r"'id' .* has 2 repeated IDs, e\.g\. 4, 6"):
            load_table(tmp_path / "t.csv", id_column="id")

    def test_missing_ids(self, tmp_path: Path) -> None:
        (tmp_path / "t.csv").write_text("id,x\n4,1\n,2\n")
        with pytest.raises(ValueError, match=r"'id' .* has 1 missing IDs"):
            load_table(tmp_path / "t.csv", id_column="id")

    def test_only_an_id_column(self, tmp_path: Path) -> None:
        (tmp_path / "t.csv").write_text("id\n1\n2\n")
        with pytest.raises(ValueError, match="no columns besides 'id'"):
            load_table(tmp_path / "t.csv", id_column="id")

    def test_na_values_must_not_be_a_string(self, tmp_path: Path) -> None:
        with pytest.raises(TypeError, match="na_values must be a sequence of strings"):
            load_table(tmp_path / "t.csv", na_values="NA")


def test_drop_columns_of_a_registered_dataset() -> None:
    from flwr_vflgan.data import drop_columns

    adult = load_dataset("adult")
    dropped = drop_columns(adult, ["fnlwgt", "education-num"])
    assert "fnlwgt" not in dropped.frame.columns and "fnlwgt" not in dropped.schema.names
    assert dropped.schema.label == adult.schema.label
    assert dropped.frame.shape == (adult.n_rows, adult.frame.shape[1] - 2)
    assert drop_columns(adult, []) is adult
    with pytest.raises(
        ValueError,
        match=r"dataset.drop names columns that dataset 'adult' does not have: \['nosuch'\]",
    ):
        drop_columns(adult, ["nosuch"])
    with pytest.raises(ValueError, match=r"dataset\.drop names the label 'income'"):
        drop_columns(adult, ["income"])


def test_load_table_drops_before_inferring(tmp_path) -> None:
    import pandas as pd

    path = tmp_path / "t.csv"
    pd.DataFrame({"Id": range(40), "x": [0.5 * i for i in range(40)], "c": ["a", "b"] * 20}).to_csv(
        path, index=False
    )
    with pytest.raises(ValueError, match="column 'Id' numbers the rows"):
        load_table(path)
    dataset, _ = load_table(path, drop=["Id"])
    assert dataset.schema.names == ["x", "c"]
    with pytest.raises(ValueError, match=r"dataset\.drop leaves no column"):
        load_table(path, drop=["Id", "x", "c"])
    with pytest.raises(ValueError, match=r"dataset\.drop names the ID column 'Id'"):
        load_table(path, id_column="Id", drop=["Id"])


def test_numbers_stored_as_text_are_read_as_numbers_with_gaps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A column of numbers with blank cells (" ") is numeric with missing values, and the
    log says so; text that is not plain numbers, or declared categorical, stays text."""
    path = tmp_path / "messy.csv"
    path.write_text(
        "age,weight,code,y\n41, 1,12,a\n , 2,13,b\n37,1 200,14,a\n52, 4,15,b\n",
        encoding="utf-8",
    )
    with caplog.at_level("INFO", logger="flwr_vflgan.data.registry"):
        dataset, _ = load_table(path, schema={"code": "categorical"})
    frame = dataset.frame
    assert frame["age"].dtype == np.float64 and frame["age"].isna().tolist() == [
        False,
        True,
        False,
        False,
    ]
    assert dataset.schema.kind_of("age") is ColumnKind.INTEGER
    assert dataset.schema.kind_of("weight") is ColumnKind.CATEGORICAL  # "1 200" is not a number
    assert dataset.schema.kind_of("code") is ColumnKind.CATEGORICAL
    assert "column 'age' holds numbers stored as text; read as numbers, with 1 blank" in caplog.text
    assert "'weight'" not in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="flwr_vflgan.data.registry"):
        load_table(path, schema={"code": "categorical"})  # a run loads its table again
    assert "stored as text" not in caplog.text, "said once per file and column is enough"
