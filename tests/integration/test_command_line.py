"""A user's mistake at the command line: one line on stderr naming it, exit status 2.

The traceback appears only with HYDRA_FULL_ERROR=1; nothing is written to the run
directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.batch_size=-1", "batch_size must be a positive integer, got -1"),
        ("seed=abc", "seed must be an integer >= 0, got 'abc'"),
        ("dataset=csv", "dataset=csv needs the table: add dataset.source="),
        ("train.nosuch=1", "Could not override 'train.nosuch'"),
        ("algorithm=nosuch", "Available options in 'algorithm': aim; ctgan; dplt; gafm"),
        ("dp.target_epsilon=-1", "dp.target_epsilon=-1 without a DP mechanism"),
        ("dataset.source=/nonexistent/table.csv", "/nonexistent/table.csv does not exist"),
        ("latent.ae_epochs=0", "latent.ae_epochs must be a positive integer, got 0"),
    ],
)
def test_bad_input_gets_one_line_and_status_2(tmp_path: Path, override: str, message: str):
    out = tmp_path / "run"
    done = _run("simulations.run", override, f"hydra.run.dir={out}", "train.max_steps=2")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("simulations.run: error: ") and message in lines[0], lines[0]
    assert "HYDRA_FULL_ERROR=1" in lines[0]
    assert not (out / "synthetic.csv").exists() and not (out / "metrics.json").exists()


def test_hydra_full_error_shows_the_traceback(tmp_path: Path):
    done = _run(
        "simulations.run", "seed=abc", f"hydra.run.dir={tmp_path}", env={"HYDRA_FULL_ERROR": "1"}
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "seed must be an integer >= 0" in done.stderr


def test_every_hydra_entry_point_reports_bad_input_in_one_line(tmp_path: Path):
    for module in (
        "simulations.evaluate",
        "simulations.reproduce",
        "simulations.bench",
        "simulations.audit",
        "simulations.audit_tables",
        "simulations.bench_shadows",
    ):
        done = _run(module, "nosuch.key=1", f"hydra.run.dir={tmp_path / module}")
        assert done.returncode == 2, (module, done.stderr[-2000:])
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{module}: error: "), (module, lines)


def test_a_table_with_a_row_id_column_is_refused_in_one_line(tmp_path: Path):
    """A user's own table whose first column numbers the rows: refused before training
    with what to do, rather than trained on and published as made-up IDs."""
    table = tmp_path / "table.csv"
    lines = ["Id,colour,size"] + [
        f"{i},{'red' if i % 3 else 'blue'},{i % 5 + 0.5}" for i in range(1, 101)
    ]
    table.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    done = _run("simulations.run", "dataset=csv", f"dataset.source={table}", f"hydra.run.dir={out}")
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "column 'Id' numbers the rows" in line and "dataset.id_column=Id" in line, line
    assert not (out / "synthetic.csv").exists()


def test_dataset_drop_leaves_columns_out_and_names_unknown_ones(tmp_path: Path):
    table = tmp_path / "table.csv"
    rows = [f"{i},{'red' if i % 3 else 'blue'},{i % 5 + 0.5},{i % 4}" for i in range(1, 201)]
    table.write_text("\n".join(["Id,colour,size,count", *rows]) + "\n")
    out = tmp_path / "run"
    common = ("dataset=csv", f"dataset.source={table}", "train.max_steps=2", "train.batch_size=16")
    done = _run(
        "simulations.run",
        *common,
        "dataset.drop=[Id]",
        f"hydra.run.dir={out}",
        "output.evaluate=false",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    header = (out / "synthetic.csv").read_text().splitlines()[0]
    assert header == "colour,size,count", header
    done = _run("simulations.run", *common, "dataset.drop=[Idd]", f"hydra.run.dir={tmp_path / 'b'}")
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "dataset.drop names columns that" in line and "['Idd']" in line, line


def test_a_spreadsheet_export_trains_and_evaluates_against_itself(tmp_path: Path):
    """A Western-locale spreadsheet's "CSV": Windows-1252, ';'-separated, decimal commas,
    an ID column and a column of dates. The dates are refused by name; left out, the table
    trains, its numbers stay numbers, and simulations.evaluate compares the published table
    with the same file given the run's id_column and drop."""
    table = tmp_path / "export.csv"
    rows = [
        f"{i};{['Nîmes', 'Sète', 'Lyon'][i % 3]};{i % 9},{i % 4}5;{day.date()};"
        f"{'oui' if i % 3 else 'non'}"
        for i, day in enumerate(pd.date_range("2024-01-01", periods=200), start=1)
    ]
    table.write_bytes("\n".join(["Id;ville;montant;date;label", *rows, ""]).encode("cp1252"))
    common = (
        "dataset=csv",
        f"dataset.source={table}",
        "dataset.id_column=Id",
        "train.batch_size=16",
    )
    done = _run("simulations.run", *common, f"hydra.run.dir={tmp_path / 'a'}")
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "column 'date' holds dates" in line and "dataset.drop=[date]" in line, line
    out = tmp_path / "run"
    done = _run(
        "simulations.run",
        *common,
        "dataset.drop=[date]",
        "dataset.label=label",
        "train.max_steps=4",
        "output.evaluate=false",
        f"hydra.run.dir={out}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert "read as Windows-1252" in said and "decimal comma" in said, said[-2000:]
    published = (out / "synthetic.csv").read_text(encoding="utf-8").splitlines()
    assert published[0] == "ville,montant,label", published[0]
    cities = {row.split(",")[0] for row in published[1:]}
    assert cities <= {"Nîmes", "Sète", "Lyon"}, cities  # decoded, not mojibake
    assert all(float(row.split(",")[1]) >= 0 for row in published[1:])  # a number
    done = _run(
        "simulations.evaluate",
        f"real={table}",
        f"synthetic={out / 'synthetic.csv'}",
        "label=label",
        "id_column=Id",
        "drop=[date]",
        "evaluation.ai_utility=false",
        "evaluation.ml_efficacy=false",
        "evaluation.privacy=false",
        f"hydra.run.dir={tmp_path / 'eval'}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "eval" / "metrics.json").exists()


def test_each_epoch_prints_once_and_the_log_file_keeps_it(tmp_path: Path):
    table = tmp_path / "table.csv"
    rows = [
        f"{'red' if i % 3 else 'blue'},{i % 5 + 0.5},{'x' if i % 2 else 'y'}" for i in range(160)
    ]
    table.write_text("\n".join(["colour,size,kind", *rows]) + "\n")
    out = tmp_path / "run"
    done = _run(
        "simulations.run",
        "algorithm=vtgan",
        "dataset=csv",
        f"dataset.source={table}",
        "train.epochs=2",
        "train.batch_size=16",
        "output.evaluate=false",
        f"hydra.run.dir={out}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [" ".join(line.split()) for line in (done.stdout + done.stderr).splitlines()]
    for epoch in (1, 2):
        shown = [
            line
            for line in console
            if line.startswith(f"epoch {epoch} ") or f"- epoch {epoch} " in line
        ]
        assert len(shown) == 1, console
    logged = (out / "run.log").read_text()
    assert "epoch 1 step" in logged and "epoch 2 step" in logged
