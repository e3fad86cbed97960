"""The ``ServerApp`` that ``flwr run`` starts (``[tool.flwr.app.components] serverapp``).

It composes the same Hydra tree as ``python -m simulations.run`` from the run config:

    flwr run . local --run-config 'overrides="train.max_steps=20" run-dir="/tmp/out"'

``overrides`` is a space-separated list of Hydra overrides; ``run-dir`` is where the
outputs go (default ``outputs/flwr-run-<run id>`` under the ServerApp's working directory).
"""

from __future__ import annotations

import logging
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from flwr_vflgan.simulations.config import compose_run_config, to_run_spec
from flwr_vflgan.simulations.families import run_experiment
from flwr_vflgan.strategies.flower_tuning import prompt_object_pulls

log = logging.getLogger(__name__)
app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run one experiment over Flower's grid and write its outputs."""
    overrides = str(context.run_config.get("overrides", ""))
    cfg = compose_run_config(overrides)
    run_dir = context.run_config.get("run-dir") or f"outputs/flwr-run-{context.run_id}"
    spec = to_run_spec(cfg, Path(str(run_dir)).resolve())
    with prompt_object_pulls():
        metrics = run_experiment(spec, grid=grid)
    if "summary" in metrics:
        log.info(
            "flwr-vflgan run finished: mean test AUC %.4f over %d seeds; outputs in %s",
            metrics["summary"]["test_auc"]["mean"],
            metrics["summary"]["repetitions"],
            spec.run_dir,
        )
        return
    log.info(
        "flwr-vflgan run finished: FD %s, %s steps; outputs in %s",
        metrics["fd"],
        metrics["steps"],
        spec.run_dir,
    )
