"""DPLT's benchmark, measured in one run on one machine.

    python -m simulations.bench algorithm=dplt dp=end_to_end
    python -m simulations.bench algorithm=dplt dp=end_to_end +bench.runtimes=[inprocess,simulation]

For each runtime in ``bench.runtimes`` (default: the in-process grid) it runs the
command line's settings and reports the wall seconds of each phase (the parties' latents
with their exchange, ``latents``; the server's tree, ``tree``; sampling, decoding and the
publication exchange, ``publication``) and of the whole run, its exchanges and (in-process)
the bytes of array payload each party sends and receives. The last line printed is one
JSON object.
"""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig

from .bench_latent import bench_runtimes, runtime_rows
from .config import to_run_spec


def measure(cfg: DictConfig) -> dict[str, Any]:
    """Each runtime's phases, exchanges and bytes, printed as taken."""
    runtimes = bench_runtimes(cfg)
    spec = to_run_spec(cfg, os.getcwd())
    return {
        "dataset": spec.data.source,
        "algorithm": spec.algorithm.variant.value,
        "n_parties": spec.data.n_parties,
        "runtimes": runtime_rows(spec, runtimes, digits=2),
    }
