"""Train one VFLGAN-family model (or a split classifier) and write its outputs and metrics.

    python -m simulations.run                                   # VFLGAN on Adult, 2 parties
    python -m simulations.run algorithm=vflgan_base train.epochs=5
    python -m simulations.run runtime=simulation train.max_steps=20 hydra.run.dir=OUT
    python -m simulations.run --multirun algorithm=vflgan,vflgan_base,wgan_gp seed=0,1
    python -m simulations.run algorithm=gafm dataset=spambase   # GAFM, 10 seeds

Writes ``synthetic.csv``, ``metrics.json`` and ``config.json`` into the Hydra run
directory (``hydra.run.dir``); re-running in the same directory resumes from its checkpoints.
"""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import register_configs, to_run_spec
from flwr_vflgan.simulations.families import run_experiment
from flwr_vflgan.simulations.reporting import Reporter

log = logging.getLogger(__name__)
register_configs()


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> float:
    """Hydra entry point; returns the final Frechet distance (for sweepers; NaN unevaluated),
    or for split classification the mean test AUC."""
    run_dir = HydraConfig.get().runtime.output_dir
    spec = to_run_spec(cfg, run_dir)
    reporter = Reporter(spec)
    reporter.start()
    metrics = run_experiment(spec, progress=reporter.progress)
    reporter.finish(metrics)
    if "summary" in metrics:
        return float(metrics["summary"]["test_auc"]["mean"])
    return float("nan") if metrics["fd"] is None else float(metrics["fd"])


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.run", main))
