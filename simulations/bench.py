"""Benchmark of a family's runtimes, measured in one run on one machine.

    python -m simulations.bench                                 # VFLGAN, Adult, 2 parties
    python -m simulations.bench +bench.steps=600 partition.n_parties=3
    python -m simulations.bench algorithm=vtgan                 # VT-GAN
    python -m simulations.bench algorithm=gafm dataset=spambase # GAFM

The chosen algorithm's family (:mod:`simulations.families`) names its benchmark, which
prints each measurement as it is taken; the last line printed is one JSON object. What
each family measures: :mod:`~simulations.bench_vflgan`, :mod:`~simulations.bench_vtgan`,
:mod:`~simulations.bench_gafm`.
"""

from __future__ import annotations

import json
import resource
import sys

import hydra
from omegaconf import DictConfig

from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import register_configs
from flwr_vflgan.simulations.families import family_of

register_configs()


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    """Run the benchmark of the chosen algorithm's family and print its JSON record last."""
    results = family_of(str(cfg.algorithm.variant)).benchmark()(cfg)
    results["benchmark_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.bench", main))
