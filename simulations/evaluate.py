"""Evaluate any real/synthetic pair with the papers' metrics and write a report.

    python -m simulations.evaluate real=adult synthetic=runs/vflgan-adult/synthetic.csv
    python -m simulations.evaluate real=data/real.csv synthetic=data/synth.csv label=y \\
        'declared={zip: categorical}' n_parties=2 evaluation.cv_folds=10 hydra.run.dir=OUT
    python -m simulations.evaluate real=data/real.csv synthetic=runs/mine/synthetic.csv \\
        label=y id_column=Id 'drop=[notes]'      # the run's dataset.id_column and .drop

``real`` is a built-in dataset name or a CSV/Parquet file; ``synthetic`` (and the
optional ``holdout`` of real rows the generator never saw) a file with the same columns.
Writes ``metrics.json`` (under ``"evaluation"``, the same keys a training run writes),
``report.md`` and PNG plots into the Hydra run directory.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from flwr_vflgan.data import Dataset, Schema, list_datasets, load_dataset, load_table
from flwr_vflgan.data.partition import partition_columns
from flwr_vflgan.data.registry import drop_columns, image_shape_of
from flwr_vflgan.evaluation import EvaluationConfig, evaluate_tables
from flwr_vflgan.evaluation.report import write_report
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import EvaluateSpec, register_configs, to_evaluate_spec
from flwr_vflgan.simulations.outputs import write_json
from flwr_vflgan.simulations.reporting import print_evaluation

log = logging.getLogger(__name__)
register_configs()


# The loaders name the training run's keys in their advice; this command's are flat.
_RUN_KEYS = ("dataset.id_column", "dataset.drop", "dataset.declared", "dataset.label")


def load_real(spec: EvaluateSpec) -> Dataset:
    """The real table: a built-in dataset by name, else a file (its advice in this
    command's keys: ``id_column=`` for the run's ``dataset.id_column=``, ...)."""
    try:
        return _load_real(spec)
    except ValueError as exc:
        message = str(exc)
        for key in _RUN_KEYS:
            message = message.replace(key, key.removeprefix("dataset."))
        if message == str(exc):
            raise
        raise ValueError(message) from exc


def _load_real(spec: EvaluateSpec) -> Dataset:
    if spec.real in list_datasets():
        if spec.id_column is not None:
            raise ValueError(
                f"id_column= names the ID column of a file; the built-in dataset "
                f"{spec.real!r} has none"
            )
        dataset = load_dataset(spec.real, data_dir=spec.data_dir, file=spec.file)
        if spec.drop:
            dataset = drop_columns(dataset, spec.drop)
        if spec.label is not None and spec.label != dataset.schema.label:
            return Dataset(
                dataset.name, dataset.frame, Schema(dataset.schema.columns, label=spec.label)
            )
        return dataset
    if spec.file is not None:
        raise ValueError(
            f"file= is the file of a built-in dataset {list_datasets()}; real={spec.real!r} "
            "is read as a file itself"
        )
    path = Path(spec.real)
    if not path.suffix:
        raise ValueError(
            f"real={spec.real!r} is neither a built-in dataset {list_datasets()} nor a file path"
        )
    return load_table(
        path,
        schema=spec.declared or None,
        label=spec.label,
        id_column=spec.id_column,
        drop=spec.drop or (),
    )[0]


def load_other(path: str, what: str, leave_out: Sequence[str] = ()) -> pd.DataFrame:
    """A synthetic or holdout file, read without a schema (the real table's is used),
    without the columns ``leave_out`` where it has them."""
    if not Path(path).suffix:
        raise ValueError(f"{what}={path!r} must be a CSV or Parquet file path")
    return load_table(path, leave_out=leave_out)[0].frame


def evaluate_files(
    spec: EvaluateSpec, config: EvaluationConfig, out_dir: str | Path
) -> dict[str, Any]:
    """Evaluate the spec's pair and write metrics.json, report.md and plots into ``out_dir``."""
    real = load_real(spec)
    leave_out = [name for name in (spec.id_column, *(spec.drop or ())) if name is not None]
    synthetic = load_other(spec.synthetic, "synthetic", leave_out)
    holdout = load_other(spec.holdout, "holdout", leave_out) if spec.holdout else None
    if config.image_shape is None and image_shape_of(spec.real) is not None:
        config = replace(config, image_shape=image_shape_of(spec.real))
    parties = spec.parties
    if spec.n_parties is not None:
        parties = partition_columns(real.schema.names, spec.n_parties, strategy="even")
    evaluation = evaluate_tables(
        real.frame, synthetic, real.schema, config=config, parties=parties, holdout=holdout
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_report(
        out,
        evaluation,
        real.frame,
        synthetic,
        real.schema if real.schema.label else Schema(real.schema.columns, label=None),
        title=spec.title or f"{Path(spec.synthetic).name} against {spec.real}",
        run={"real": spec.real, "synthetic": spec.synthetic, "holdout": spec.holdout},
        plots_enabled=config.plots,
        image_shape=config.image_shape,
    )
    metrics = {
        "real": spec.real,
        "synthetic": spec.synthetic,
        "holdout": spec.holdout,
        "evaluation": evaluation.to_dict(),
    }
    write_json(out / "metrics.json", metrics)
    return metrics


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="evaluate", version_base=None)
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    spec, config = to_evaluate_spec(cfg)
    out_dir = HydraConfig.get().runtime.output_dir
    metrics = evaluate_files(spec, config, out_dir)
    print_evaluation(metrics["evaluation"], Path(out_dir))


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.evaluate", main))
