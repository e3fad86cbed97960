"""The seed papers' other datasets: each loader on a small file written the way its
publisher writes it, the paper's preprocessing, and the one-line message without it."""

from __future__ import annotations

import bz2
import gzip
import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data import ColumnKind, DatasetUnavailableError, list_datasets, load_dataset
from flwr_vflgan.data import _papers as papers

PAPER_NAMES = [
    "census", "covertype", "credit_fraud", "criteo", "hcv", "imdb", "intrusion", "isic",
    "loan", "mnist", "twitter", "vehicle", "wine_red", "wine_white",
]  # fmt: skip


def test_every_paper_dataset_is_listed() -> None:
    assert set(PAPER_NAMES) <= set(list_datasets())


@pytest.mark.parametrize("name", PAPER_NAMES)
def test_a_missing_file_names_the_dataset_its_source_and_the_keys(
    name: str, tmp_path: Path
) -> None:
    with pytest.raises(DatasetUnavailableError) as caught:
        load_dataset(name, data_dir=tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert re.match(rf"dataset {name!r} \(paper 00[0-4], [^()]+\) is not available", message)
    assert "dataset.file=" in message and "dataset.data_dir" in message
    assert "https://" in message  # where it is published


def test_a_named_file_that_does_not_exist_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailableError, match=r"set dataset.file .*winequality-red"):
        load_dataset("wine_red", file=tmp_path / "nope.csv")


def test_a_bundled_dataset_takes_no_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ships with the package"):
        load_dataset("adult", file=tmp_path / "adult.csv")


# --- Wine and HCV (paper 000) --------------------------------------------------------

WINE_HEADER = (
    '"fixed acidity";"volatile acidity";"citric acid";"residual sugar";"chlorides";'
    '"free sulfur dioxide";"total sulfur dioxide";"density";"pH";"sulphates";"alcohol";'
    '"quality"'
)


def test_wine_reads_ucis_semicolon_file_from_the_data_dir(tmp_path: Path) -> None:
    folder = tmp_path / "wine_red"
    folder.mkdir()
    (folder / "winequality-red.csv").write_text(
        f"{WINE_HEADER}\n7.4;0.7;0;1.9;0.076;11;34;0.9978;3.51;0.56;9.4;5\n"
        "7.8;0.88;0;2.6;0.098;25;67;0.9968;3.2;0.68;9.8;6\n"
    )
    dataset = load_dataset("wine_red", data_dir=tmp_path)
    assert dataset.frame.shape == (2, 12)
    assert dataset.schema.label == "quality"
    kinds = {c.name: c.kind for c in dataset.schema.columns}
    assert kinds["quality"] is ColumnKind.CATEGORICAL  # one-hot, as paper 000 encodes it
    assert kinds["alcohol"] is ColumnKind.CONTINUOUS
    assert dataset.frame["quality"].tolist() == [5, 6]
    assert dataset.frame["free sulfur dioxide"].dtype == np.float64


def test_wine_refuses_a_file_with_another_header(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(WINE_HEADER.replace('"alcohol"', '"ethanol"') + "\n" + "1;" * 11 + "5\n")
    with pytest.raises(ValueError, match=r"missing \['alcohol'\], unexpected \['ethanol'\]"):
        load_dataset("wine_white", file=path)


def test_hcv_reads_the_egyptian_file_by_position(tmp_path: Path) -> None:
    # UCI's header has names with trailing spaces: read by position.
    header = ",".join(f"{c} " for c in papers.HCV_COLUMNS)
    row = [56, 1, 35, 2, 1, 1, 1, 2, 2, 2, 7425, 4248807, 14, 112132, 99, 84, 52, 109, 81, 5,
           5, 5, 655330, 634536, 288194, 5, 5, 13, 2]  # fmt: skip
    path = tmp_path / "HCV-Egy-Data.csv"
    path.write_text(header + "\n" + ",".join(map(str, row)) + "\n")
    dataset = load_dataset("hcv", file=path)
    assert list(dataset.frame.columns) == list(papers.HCV_COLUMNS)
    assert dataset.frame.iloc[0].tolist() == row
    kinds = [c.kind for c in dataset.schema.columns]
    assert kinds.count(ColumnKind.CATEGORICAL) == 10 and kinds.count(ColumnKind.INTEGER) == 19
    assert dataset.schema.label == "Baselinehistological staging"


# --- MNIST (paper 000) ---------------------------------------------------------------


def _write_idx(path: Path, magic: int, array: np.ndarray) -> None:
    head = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(head + array.astype(np.uint8).tobytes())


def test_mnist_reads_the_idx_images_and_the_labels_beside_them(tmp_path: Path) -> None:
    images = np.random.default_rng(0).integers(0, 256, size=(3, 28, 28))
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", 0x803, images)
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", 0x801, np.array([7, 2, 1]))
    dataset = load_dataset("mnist", file=tmp_path / "train-images-idx3-ubyte.gz")
    assert dataset.frame.shape == (3, 785)
    assert dataset.frame["label"].tolist() == [7, 2, 1]
    # Row-major pixels: pixel_i is row i // 28, column i % 28 (the top half is 0..391).
    np.testing.assert_array_equal(dataset.frame.iloc[1, :784].to_numpy(), images[1].reshape(-1))


def test_mnist_without_its_labels_or_with_a_wrong_magic_is_refused(tmp_path: Path) -> None:
    images = tmp_path / "train-images-idx3-ubyte.gz"
    _write_idx(images, 0x803, np.zeros((2, 28, 28)))
    with pytest.raises(ValueError, match=r"labels .* are missing"):
        load_dataset("mnist", file=images)
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", 0x801, np.zeros(2))
    _write_idx(images, 0x801, np.zeros((2, 28, 28)))
    with pytest.raises(ValueError, match="not an MNIST idx file"):
        load_dataset("mnist", file=images)


# --- Paper 001: stratified samples, Intrusion, Credit, Loan --------------------------


def test_stratified_sample_keeps_each_class_in_proportion_and_the_file_order() -> None:
    labels = np.repeat(["a", "b", "c"], [600, 300, 100])
    frame = pd.DataFrame({"x": np.arange(1000), "y": labels})
    sample = papers.stratified_sample(frame, "y", 100, seed=0)
    assert len(sample) == 100
    assert sample["y"].value_counts().to_dict() == {"a": 60, "b": 30, "c": 10}
    assert sample["x"].is_monotonic_increasing and sample["x"].is_unique
    again = papers.stratified_sample(frame, "y", 100, seed=0)
    pd.testing.assert_frame_equal(sample, again)
    other = papers.stratified_sample(frame, "y", 100, seed=1)
    assert not sample["x"].equals(other["x"])


def test_stratified_sample_gives_the_remainders_to_the_largest_fractions() -> None:
    # Quotas 3.5, 3.25, 0.25 of 7: floors 3, 3, 0 and one more row to the first class.
    frame = pd.DataFrame({"y": ["a"] * 14 + ["b"] * 13 + ["c"] * 1})
    sample = papers.stratified_sample(frame, "y", 7, seed=0)
    assert sample["y"].value_counts().to_dict() == {"a": 4, "b": 3}
    assert papers.stratified_sample(frame, "y", 50, seed=0).equals(frame)


def test_covertype_is_sampled_stratified_on_cover_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(papers, "STRATIFIED_ROWS", 20)
    rng = np.random.default_rng(0)
    rows = np.column_stack(
        [rng.integers(0, 3000, size=(40, 10)), rng.integers(0, 2, size=(40, 44)),
         np.repeat([1, 2], [30, 10])]
    )  # fmt: skip
    path = tmp_path / "covtype.data.gz"
    with gzip.open(path, "wt") as handle:
        np.savetxt(handle, rows, fmt="%d", delimiter=",")
    dataset = load_dataset("covertype", file=path)
    assert dataset.frame.shape == (20, 55)
    assert dataset.frame["Cover_Type"].value_counts().to_dict() == {1: 15, 2: 5}
    kinds = {c.name: c.kind for c in dataset.schema.columns}
    assert kinds["Elevation"] is ColumnKind.INTEGER
    assert kinds["Soil_Type40"] is ColumnKind.CATEGORICAL


def test_intrusion_strips_the_attack_names_dot(tmp_path: Path) -> None:
    row = (
        "0,tcp,http,SF,181,5450,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,8,8,0.00,0.00,0.00,0.00,"
        "1.00,0.00,0.00,9,9,1.00,0.00,0.11,0.00,0.00,0.00,0.00,0.00,"
    )
    path = tmp_path / "kddcup.data_10_percent"
    path.write_text(f"{row}normal.\n{row}smurf.\n{row}normal.\n")
    dataset = load_dataset("intrusion", file=path)
    assert dataset.frame["Class"].tolist() == ["normal", "smurf", "normal"]
    assert dataset.frame["src_bytes"].dtype == np.int64
    assert dataset.frame["serror_rate"].dtype == np.float64
    assert {c.name: c.kind for c in dataset.schema.columns}["service"] is ColumnKind.CATEGORICAL


def test_credit_fraud_reads_kaggles_quoted_header(tmp_path: Path) -> None:
    header = ",".join(f'"{c}"' for c in papers.CREDIT_COLUMNS)
    values = ",".join(["0"] + ["-1.36"] * 28 + ["149.62"])
    path = tmp_path / "creditcard.csv"
    path.write_text(f'{header}\n{values},"0"\n{values},"1"\n')
    dataset = load_dataset("credit_fraud", file=path)
    assert dataset.frame["Class"].tolist() == [0, 1]
    assert dataset.frame["Amount"].tolist() == [149.62, 149.62]


LOAN_KAGGLE = (
    "ID,Age,Experience,Income,ZIP Code,Family,CCAvg,Education,Mortgage,Personal Loan,"
    "Securities Account,CD Account,Online,CreditCard\n"
    "1,25,1,49,91107,4,1.6,1,0,0,1,0,0,0\n2,45,19,34,90089,3,1.5,1,101,1,1,0,0,0\n"
)
LOAN_VTGAN = (
    "Age,Experience,Income,ZIP Code,Family,CCAvg,Education,Mortgage,Securities Account,"
    "CD Account,Online,CreditCard,PersonalLoan\n"
    "25,1,49,91107,4,1.6,1,0,1,0,0,0,0\n45,19,34,90089,3,1.5,1,101,1,0,0,0,1\n"
)


@pytest.mark.parametrize("text", [LOAN_KAGGLE, LOAN_VTGAN], ids=["kaggle", "vt-gan"])
def test_loan_reads_kaggles_file_and_vt_gans_alike(tmp_path: Path, text: str) -> None:
    path = tmp_path / "loan.csv"
    path.write_text(text)
    dataset = load_dataset("loan", file=path)
    assert list(dataset.frame.columns) == list(papers.LOAN_COLUMNS)
    assert dataset.frame["PersonalLoan"].tolist() == [0, 1]
    assert dataset.frame["Mortgage"].tolist() == [0, 101]
    assert dataset.frame["CCAvg"].tolist() == [1.6, 1.5]


# --- Paper 002: Criteo, IMDB, ISIC ---------------------------------------------------


def test_criteo_counts_become_log_squared_categories_and_rare_values_share_one() -> None:
    assert papers._criteo_number("") == "NULL"
    assert papers._criteo_number("1") == "-1" and papers._criteo_number("2") == "0"
    assert papers._criteo_number("100") == str(int(np.log(100) ** 2))  # 21


def test_criteo_reads_the_tab_separated_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(papers, "CRITEO_RARE", 2)
    ints = ["100", "", *["1"] * 11]
    line = "\t".join(["0", *ints, "68fd1e64", *["a"] * 25])
    rare = "\t".join(["1", *ints, "05db9164", *["a"] * 25])
    path = tmp_path / "dac_sample.txt"
    path.write_text(f"{line}\n{line}\n{rare}\n")
    dataset = load_dataset("criteo", file=path)
    assert dataset.frame.shape == (3, 40)
    assert dataset.frame["click"].tolist() == [0, 0, 1]
    assert (
        dataset.frame["I1"].tolist() == ["21"] * 3 and dataset.frame["I2"].tolist() == ["NULL"] * 3
    )
    assert dataset.frame["C1"].tolist() == ["68fd1e64", "68fd1e64", "rare"]


def test_imdb_marks_the_500_most_frequent_words_each_review_holds(tmp_path: Path) -> None:
    path = tmp_path / "imdb.npz"
    reviews = np.empty(2, dtype=object)
    reviews[0], reviews[1] = [1, 14, 22, 501, 9000], [2, 2, 500]
    test = np.empty(1, dtype=object)
    test[0] = [3]
    np.savez(path, x_train=reviews, y_train=np.array([1, 0]), x_test=test, y_test=np.array([1]))
    dataset = load_dataset("imdb", file=path)
    frame = dataset.frame
    assert frame.shape == (3, 501) and frame["sentiment"].tolist() == [1, 0, 1]
    assert [c for c in frame.columns[:-1] if frame.loc[0, c]] == ["word_1", "word_14", "word_22"]
    assert [c for c in frame.columns[:-1] if frame.loc[1, c]] == ["word_2", "word_500"]
    assert frame.iloc[2, :500].sum() == 1


def test_isic_reads_the_images_as_64_by_64_grayscale(tmp_path: Path) -> None:
    from PIL import Image

    (tmp_path / "jpeg" / "train").mkdir(parents=True)
    for name, shade in (("ISIC_1", 10), ("ISIC_2", 200)):
        Image.new("RGB", (100, 80), (shade, shade, shade)).save(
            tmp_path / "jpeg" / "train" / f"{name}.jpg"
        )
    (tmp_path / "train.csv").write_text("image_name,patient_id,target\nISIC_1,p,0\nISIC_2,q,1\n")
    dataset = load_dataset("isic", file=tmp_path / "train.csv")
    assert dataset.frame.shape == (2, 64 * 64 + 1)
    assert dataset.frame["target"].tolist() == [0, 1]
    pixels = dataset.frame.iloc[:, :-1].to_numpy()
    assert abs(pixels[0].mean() - 10) < 3 and abs(pixels[1].mean() - 200) < 3


def test_isic_without_its_images_is_refused(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("image_name,target\nISIC_1,0\n")
    with pytest.raises(ValueError, match="images are missing"):
        load_dataset("isic", file=tmp_path / "train.csv")


# --- Paper 004: Census, Twitter, Vehicle ---------------------------------------------


def test_resample_draws_without_replacement_down_and_with_it_up() -> None:
    frame = pd.DataFrame({"x": np.arange(10)})
    down = papers.resample(frame, 4, seed=0)
    assert len(down) == 4 and down["x"].is_unique and down["x"].is_monotonic_increasing
    up = papers.resample(frame, 25, seed=0)
    assert len(up) == 25 and not up["x"].is_unique


def test_census_drops_the_case_id_and_is_down_sampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(papers, "THESIS_ROWS", 3)
    header = ",".join(["caseid", *papers.CENSUS_COLUMNS])
    rows = [",".join(map(str, [10000 + i, *[i % 3] * 68])) for i in range(5)]
    path = tmp_path / "USCensus1990.data.txt"
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    dataset = load_dataset("census", file=path)
    assert dataset.frame.shape == (3, 68) and "caseid" not in dataset.frame.columns
    assert dataset.schema.label == "dYrsserv"
    assert all(c.kind is ColumnKind.CATEGORICAL for c in dataset.schema.columns)


def test_twitter_is_discretised_into_equal_frequency_bins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(papers, "THESIS_ROWS", 100)
    values = np.tile(np.arange(100, dtype=float)[:, None], (1, 78))
    values[:, 1] = 0.0  # a constant column keeps one code
    path = tmp_path / "Twitter.data"
    np.savetxt(path, values, fmt="%.1f", delimiter=",")
    frame = load_dataset("twitter", file=path).frame
    assert frame.shape == (100, 78)
    assert frame["NCD_0"].value_counts().sort_index().tolist() == [20] * 5
    assert frame["NCD_1"].nunique() == 1


def test_vehicle_binarises_the_sensors_and_groups_the_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(papers, "THESIS_ROWS", 30)
    lines = [f"{label} 1:{x} 100:{-x}" for label, x in ((1, 0.1), (3, 0.9), (2, 0.5))]
    with bz2.open(tmp_path / "combined.bz2", "wt") as handle:
        handle.write("\n".join(lines[:2]) + "\n")
    with bz2.open(tmp_path / "combined.t.bz2", "wt") as handle:
        handle.write(lines[2] + "\n")
    frame = load_dataset("vehicle", file=tmp_path / "combined.bz2").frame
    assert frame.shape == (30, 101)
    # The three rows drawn with replacement (up-sampling); each sensor is 1 above its
    # median, and class 3 is the positive class.
    distinct = frame.drop_duplicates().sort_values(["sensor_1", "sensor_100"]).to_numpy()
    assert distinct[:, [0, 99, 100]].tolist() == [[0, 0, 0], [0, 1, 0], [1, 0, 1]]
