"""``python -m simulations.evaluate``'s real table: a built-in dataset's own file."""

from __future__ import annotations

from pathlib import Path

import pytest

from flwr_vflgan.simulations.config import EvaluateSpec
from flwr_vflgan.simulations.evaluate import load_other, load_real

HEADER = (
    '"fixed acidity";"volatile acidity";"citric acid";"residual sugar";"chlorides";'
    '"free sulfur dioxide";"total sulfur dioxide";"density";"pH";"sulphates";"alcohol";'
    '"quality"'
)


def test_real_names_a_dataset_and_file_its_file(tmp_path: Path) -> None:
    path = tmp_path / "winequality-white.csv"
    path.write_text(f"{HEADER}\n" + ";".join(["1"] * 11) + ";7\n")
    dataset = load_real(EvaluateSpec(real="wine_white", synthetic="s.csv", file=str(path)))
    assert dataset.name == "wine_white" and dataset.schema.label == "quality"
    assert dataset.frame["quality"].tolist() == [7]


def test_file_with_a_real_file_is_refused(tmp_path: Path) -> None:
    spec = EvaluateSpec(real=str(tmp_path / "r.csv"), synthetic="s.csv", file="x.csv")
    with pytest.raises(ValueError, match="file= is the file of a built-in dataset"):
        load_real(spec)


def _user_table(path: Path, rows: int = 30, with_id: bool = True) -> Path:
    lines = ["Id,age,notes,label" if with_id else "age,notes,label"]
    for i in range(rows):
        values = [str(i + 1)] if with_id else []
        lines.append(",".join([*values, str(20 + i % 7), f"free text {i}", "yn"[i % 2]]))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_runs_id_column_and_drop_leave_those_columns_out_of_every_table(
    tmp_path: Path,
) -> None:
    real = _user_table(tmp_path / "real.csv")
    spec = EvaluateSpec(
        real=str(real), synthetic="s.csv", label="label", id_column="Id", drop=["notes"]
    )
    assert load_real(spec).schema.names == ["age", "label"]
    # a published table lacks them; a table that has them loses them
    published = _user_table(tmp_path / "published.csv", with_id=False)
    assert list(load_other(str(published), "synthetic", ["Id", "notes"]).columns) == [
        "age",
        "label",
    ]
    assert list(load_other(str(real), "holdout", ["Id", "notes"]).columns) == ["age", "label"]


def test_the_real_files_refusals_name_this_commands_keys(tmp_path: Path) -> None:
    spec = EvaluateSpec(real=str(_user_table(tmp_path / "real.csv")), synthetic="s.csv")
    with pytest.raises(ValueError, match=r"\(id_column=Id\).*\(drop=\[Id\]\)") as refused:
        load_real(spec)
    assert "dataset." not in str(refused.value)


def test_id_column_is_refused_for_a_built_in_dataset_and_drop_applies() -> None:
    with pytest.raises(ValueError, match="id_column= names the ID column of a file"):
        load_real(EvaluateSpec(real="adult", synthetic="s.csv", id_column="Id"))
    dataset = load_real(EvaluateSpec(real="adult", synthetic="s.csv", drop=["fnlwgt"]))
    assert "fnlwgt" not in dataset.schema.names and "fnlwgt" not in dataset.frame.columns


def test_an_unknown_drop_is_refused_in_this_commands_keys(tmp_path: Path) -> None:
    spec = EvaluateSpec(
        real=str(_user_table(tmp_path / "real.csv")),
        synthetic="s.csv",
        id_column="Id",
        drop=["nope"],
    )
    with pytest.raises(ValueError, match=r"^drop names columns that .* does not have: \['nope'\]"):
        load_real(spec)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"drop": "notes"},
            r"drop= must be a list of column names \('drop=\[a,b\]'\), got 'notes'",
        ),
        ({"drop": ["notes", ""]}, r"drop= must be a list of column names"),
        ({"id_column": ""}, r"id_column= must name a column, got ''"),
    ],
)
def test_bad_id_column_and_drop_are_refused_by_name(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        EvaluateSpec(real="r.csv", synthetic="s.csv", **kwargs)
