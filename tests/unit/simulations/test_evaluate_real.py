"""``python -m simulations.evaluate``'s real table: a built-in dataset's own file."""

from __future__ import annotations

from pathlib import Path

import pytest

from flwr_vflgan.simulations.config import EvaluateSpec
from flwr_vflgan.simulations.evaluate import load_real

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
