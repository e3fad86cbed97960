"""Regenerate paper 000's Table 1 (AI-training utility), paper 001's VT-GAN rows and
paper 002's Table 2 (GAFM and its baselines) over several seeds.

    python -m simulations.reproduce                       # Adult + German credit, 3 seeds
    python -m simulations.reproduce reproduce.seeds=[0] reproduce.datasets=[german_credit]
    python -m simulations.reproduce reproduce.jobs=2 evaluation.statistics=true
    python -m simulations.reproduce reproduce.datasets=[adult] reproduce.algorithms=[ctgan,vtgan] \\
        reproduce.n_parties=[2,3] reproduce.seeds=[0] reproduce.out_dir=runs/reproduce-vtgan
    python -m simulations.reproduce reproduce.datasets=[spambase] \\
        reproduce.algorithms=[gafm,marvell,maxnorm,splitnn] reproduce.out_dir=runs/reproduce-gafm

For every dataset x algorithm x seed it trains (or reuses a finished run in
``<out_dir>/<dataset>/<algorithm>/seed<k>/`` whose configuration matches), evaluates
the published table with the ``evaluation`` node (paper 000's random-forest settings
with 10-fold cross-validation, and the Frechet distance), and writes
``<out_dir>/table1.md`` (mean and spread over seeds next to the paper's numbers) and
``<out_dir>/table1.json``. Runs are independent processes, so ``reproduce.jobs`` runs
several at once.

Every algorithm's runs are configured by its own ``algorithm=<name>`` group (VT-GAN's
batch 500 and Adam 2e-4 come from ``conf/algorithm/vtgan.yaml``), then the command line's
overrides. ``ctgan`` and ``vtgan`` make paper 001's table instead (per client count
``reproduce.n_parties``, epochs ``reproduce.vtgan_epochs``, ``<out_dir>/paper001.md``; see
:mod:`~flwr_vflgan.simulations.reproduce_vtgan`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import hydra
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import (
    ReproduceConfig,
    RunSpec,
    register_configs,
)
from flwr_vflgan.simulations.families import (
    Reproduction,
    Rows,
    families_of,
    family_of,
    table_rows,
)
from flwr_vflgan.simulations.outputs import write_json

log = logging.getLogger(__name__)
register_configs()


def compose_per_algorithm(
    rc: ReproduceConfig, overrides: Sequence[str], config_name: str = "reproduce"
) -> dict[str, DictConfig]:
    """The configuration of each algorithm's runs: its ``algorithm=`` group, then ``overrides``.

    Needs an initialised Hydra (inside :func:`main`, or ``initialize_config_module``).
    """
    return {
        algorithm: compose(config_name, overrides=[*overrides, f"algorithm={algorithm}"])
        for algorithm in rc.algorithms
    }


def run_specs(configs: Mapping[str, DictConfig], rc: ReproduceConfig) -> list[RunSpec]:
    """One validated run spec per dataset x algorithm x seed (paper 001's algorithms: see
    :func:`~flwr_vflgan.simulations.reproduce_vtgan.paper001_specs`).

    ``configs`` maps each algorithm to its composed configuration
    (:func:`compose_per_algorithm`).
    """
    missing = [a for a in rc.algorithms if a not in configs]
    if missing:
        raise ValueError(f"no composed configuration for reproduce.algorithms {missing}")
    specs = []
    for dataset in rc.datasets:
        for epsilon in rc.variants:
            for algorithm in rc.algorithms:
                cfg = configs[algorithm]
                base = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "reproduce"])
                reproduction = family_of(algorithm).reproduction()
                specs += reproduction.specs(base, rc, dataset, algorithm, epsilon)
    return specs


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Train (unless a finished run of the same configuration exists) and evaluate one run,
    as its family's reproduction does it."""
    return family_of(spec.algorithm.variant).reproduction().run_one(spec)


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="reproduce", version_base=None)
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    raw = OmegaConf.to_container(cfg.reproduce, resolve=True)
    assert isinstance(raw, dict)
    rc = ReproduceConfig(**{str(k): v for k, v in raw.items()})
    hydra_config = HydraConfig.get()
    configs = compose_per_algorithm(
        rc, list(hydra_config.overrides.task), hydra_config.job.config_name or "reproduce"
    )
    specs = run_specs(configs, rc)
    print(f"reproduce: {len(specs)} runs into {rc.out_dir} ({rc.jobs} at a time)", flush=True)
    results: list[tuple[RunSpec, dict[str, Any]]] = []
    if rc.jobs == 1:
        for spec in specs:
            results.append((spec, _announce(spec, run_one(spec))))
    else:
        with ProcessPoolExecutor(
            rc.jobs,
            mp_context=get_context("spawn"),
            initializer=follow_parent,
            initargs=(os.getpid(),),
        ) as pool:
            for spec, metrics in zip(specs, pool.map(run_one, specs), strict=True):
                results.append((spec, _announce(spec, metrics)))
    for reproduction, made in table_groups(results, rc):
        if made:
            text, table = reproduction.write(made, rc)
            _write_table(Path(rc.out_dir), reproduction.TABLE, text, table)


def table_groups(
    results: Sequence[tuple[RunSpec, dict[str, Any]]], rc: ReproduceConfig
) -> list[tuple[Reproduction, Rows]]:
    """The rows of each table: one per reproduction module, in family order. Families
    that share a module (the marginal baselines join Table 1) write one table together."""
    groups = []
    families = families_of(rc.algorithms)
    for module in dict.fromkeys(f.reproduce for f in families):
        reproduction = next(f for f in families if f.reproduce == module).reproduction()
        rows = [
            row
            for spec, metrics in results
            if family_of(spec.algorithm.variant).reproduce == module
            for row in table_rows(reproduction, spec, metrics, rc)
        ]
        groups.append((reproduction, rows))
    return groups


def follow_parent(parent: int, poll: float = 0.5) -> None:
    """Pool initializer: end this worker once the process that started it is gone.

    Killed with SIGTERM or SIGKILL, the reproduce process cannot stop its workers, which
    would train on, unseen, into run directories a rerun then shares. A worker that
    exits here publishes nothing (its run directory's lock goes with it); the rerun
    resumes its run from the checkpoints.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)

    threading.Thread(target=watch, name="follow-parent", daemon=True).start()


def _write_table(out: Path, name: str, text: str, table: dict[str, Any]) -> None:
    write_atomically(out / f"{name}.md", lambda p: p.write_text(text))
    write_json(out / f"{name}.json", table)
    print(text, flush=True)
    print(f"wrote {out / name}.md and {name}.json", flush=True)


def _announce(spec: RunSpec, metrics: dict[str, Any]) -> dict[str, Any]:
    print(family_of(spec.algorithm.variant).reproduction().announce(spec, metrics), flush=True)
    return metrics


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.reproduce", main))
