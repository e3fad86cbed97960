"""Benchmark of ASSD's shadow training: Ray tasks against the same runs one after another.

    python -m simulations.bench_shadows audit.shadows=4 audit.jobs=2 train.epochs=20

Trains the audit's ``2 * audit.shadows`` shadows (configured as ``python -m
simulations.audit audit.scheme=assd``) twice in fresh directories under the Hydra run
directory: one after another in this process, then as Ray tasks on ``audit.jobs`` CPUs
(Ray's start included). The per-core overhead is ``ray_seconds * jobs / plain_seconds -
1`` (0: perfect scaling). The last line printed is one JSON object.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.simulations.audit_config import audit_config
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import to_run_spec
from flwr_vflgan.simulations.shadow_audit import audit_table, shadow_specs, train_shadows


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="audit", version_base=None)
def main(cfg: DictConfig) -> None:
    """Time the shadows both ways and print the JSON record last."""
    out = Path(HydraConfig.get().runtime.output_dir)
    audit = replace(audit_config(cfg), scheme="assd")
    if audit.jobs is None:
        raise ValueError("the benchmark compares against audit.jobs CPUs: give audit.jobs=<n>")
    spec = to_run_spec(OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "audit"]), out)
    table, _, target = audit_table(spec, audit)
    seconds: dict[str, float] = {}
    for executor in ("plain", "ray"):
        specs = shadow_specs(spec, audit, out / executor, table, target)
        started = time.perf_counter()
        train_shadows(
            [s for world in specs for s in world],
            replace(audit, executor=executor),
            lambda line, name=executor: print(f"{name}: {line}", flush=True),
        )
        seconds[executor] = time.perf_counter() - started
    results: dict[str, Any] = {
        "shadows": 2 * audit.shadows,
        "jobs": audit.jobs,
        "plain_seconds": seconds["plain"],
        "ray_seconds": seconds["ray"],
        "speedup": seconds["plain"] / seconds["ray"],
        "overhead_per_core": seconds["ray"] * audit.jobs / seconds["plain"] - 1,
    }
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.bench_shadows", main))
