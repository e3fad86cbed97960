"""VFLGAN-TS's benchmark, measured in one run on one machine.

    python -m simulations.bench algorithm=vflgan_ts dataset=sine6
    python -m simulations.bench algorithm=vflgan_ts dataset=sine6 +bench.steps=200

It measures (the last line printed is one JSON object):

* ``plain_step_ms``: one step of :func:`~flwr_vflgan.series.plain.plain_step`, the
  reference code's one-graph loop (the lower bound);
* ``inprocess_step_ms``: one step driven by the VFLGAN strategy over the in-process grid
  (real Flower Messages and Contexts, party state saved every message; a party in
  memory skips copying back what it saved and continues its forward's graph in the
  apply when exact); ``inprocess_over_plain`` is their ratio (issue 20's target: at
  most 1.5);

each the median of three alternating measurements after ``bench.warmup`` steps.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import torch
from omegaconf import DictConfig

from flwr_vflgan.runtime.party_data import series_blocks, series_table
from flwr_vflgan.series.local import build
from flwr_vflgan.series.plain import plain_step

from .bench_vflgan import bench_record, inprocess_step_ms
from .config import RunSpec, to_run_spec
from .launch import shared_seed_for
from .series_pipeline import encoded


def plain_step_ms(spec: RunSpec, warmup: int, steps: int) -> float:
    """Milliseconds per step of the one-graph loop on ``spec``'s series."""
    raw = series_table(spec.data)
    table = encoded(raw, [b.encoder for b in series_blocks(spec.data)], raw.values)
    parties, server, schedule = build(spec.algorithm, table, shared_seed_for(spec.seed), spec.seed)
    for step in range(warmup):
        plain_step(parties, server, step, schedule.kind(step))
    started = time.perf_counter()
    for step in range(warmup, warmup + steps):
        plain_step(parties, server, step, schedule.kind(step))
    return (time.perf_counter() - started) / steps * 1e3


def measure(cfg: DictConfig) -> dict[str, Any]:
    """The series family's benchmark: both step costs and their ratio, printed as taken."""
    bench = cfg.get("bench", {})
    warmup, steps = int(bench.get("warmup", 20)), int(bench.get("steps", 100))
    spec = to_run_spec(cfg, os.getcwd())
    torch.set_num_threads(spec.runtime.torch_threads)
    plain, inprocess = [], []
    for _ in range(3):
        plain.append(plain_step_ms(spec, warmup, steps))
        inprocess.append(inprocess_step_ms(spec, warmup, steps))
    results = bench_record(spec, steps)
    results["plain_step_ms"] = statistics.median(plain)
    results["inprocess_step_ms"] = statistics.median(inprocess)
    results["inprocess_over_plain"] = results["inprocess_step_ms"] / results["plain_step_ms"]
    print(
        f"plain loop {results['plain_step_ms']:8.2f} ms/step, in-process "
        f"{results['inprocess_step_ms']:8.2f} ms/step ({results['inprocess_over_plain']:.2f}x)",
        flush=True,
    )
    return results
