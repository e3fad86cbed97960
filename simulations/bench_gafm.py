"""Benchmark of GAFM's runtimes, measured in one run on one machine.

    python -m simulations.bench algorithm=gafm dataset=spambase     # one non-label party
    python -m simulations.bench algorithm=splitnn dataset=spambase partition.n_parties=3 \
        +bench.steps=800 +bench.simulation=false

Measures (the last line printed is one JSON object), for ``bench.steps`` training steps of
one seed (batch ``gafm.batch_size``, no intermediate evaluation):

* ``plain_step_ms``: one step of the training loop with the parties as objects in this
  process (:class:`~flwr_vflgan.gafm.training.PlainLink`, the lower bound);
* ``inprocess_step_ms``: one step over the in-process grid (real Flower Messages and
  Contexts, every party's state saved and restored per message); ``inprocess_over_plain``
  is their ratio;
* ``bytes_per_step``: array payload of one training step per party, to it (its gradient
  and the next batch's row indices) and from it (its cut values);
* ``simulation_exchange_ms``: one exchange in Flower's simulation engine
  (``bench.simulation_steps`` steps; skipped with ``bench.simulation=false``).

Times cover the whole repetition (setup, steps, the final prediction) divided by the steps,
after a warm-up repetition of ``bench.warmup`` steps on each path.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from flwr.app import Message
from omegaconf import DictConfig

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.gafm.config import GAFMSettings, Method
from flwr_vflgan.gafm.data import all_features, block_fields, spec_labels
from flwr_vflgan.gafm.training import PlainLink, binary_labels, train_repetition
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.simulations.config import RunSpec, register_configs, to_run_spec
from flwr_vflgan.simulations.launch import run_simulation_engine, shared_seed_for
from flwr_vflgan.strategies import InProcessGrid
from flwr_vflgan.strategies.gafm import GAFMStrategy
from flwr_vflgan.strategies.traffic import message_array_bytes

register_configs()


def measure(cfg: DictConfig) -> dict[str, Any]:
    """GAFM's benchmark (``python -m simulations.bench algorithm=gafm``): the measurements
    of the module docstring, printed on one line; returns the record."""
    bench = cfg.get("bench", {})
    steps = int(bench.get("steps", 400))
    spec = to_run_spec(cfg, "outputs/bench-gafm")
    torch.set_num_threads(spec.runtime.torch_threads)
    settings = replace(
        spec.algorithm.gafm, max_steps=steps, eval_every=0, repetitions=1, epochs=10**6
    )
    warm = replace(settings, max_steps=int(bench.get("warmup", 20)))
    plain = _plain_step(spec, settings, warm) / steps
    inprocess, log = _inprocess_run(spec, settings, warm)
    inprocess /= steps
    step_messages = [m for m in log if m.metadata.message_type == P.GF_STEP]
    to_party = [
        message_array_bytes(m) for m in step_messages if m.metadata.reply_to_message_id == ""
    ]
    from_party = [
        message_array_bytes(m) for m in step_messages if m.metadata.reply_to_message_id != ""
    ]
    n = spec.data.n_parties
    result: dict[str, Any] = {
        "dataset": spec.data.source,
        "algorithm": spec.algorithm.variant.value,
        "n_parties": n,
        "batch_size": settings.batch_size,
        "steps": steps,
        "plain_step_ms": 1000 * plain,
        "inprocess_step_ms": 1000 * inprocess,
        "inprocess_over_plain": inprocess / plain,
        "bytes_per_step": {
            "to_party": sum(to_party) / (steps * n),
            "from_party": sum(from_party) / (steps * n),
        },
    }
    line = (
        f"plain {result['plain_step_ms']:.2f} ms/step, in-process grid "
        f"{result['inprocess_step_ms']:.2f} ms/step ({result['inprocess_over_plain']:.2f}x)"
    )
    if bool(bench.get("simulation", True)):
        sim_settings = replace(settings, max_steps=int(bench.get("simulation_steps", 20)))
        sim_spec = replace(spec, algorithm=replace(spec.algorithm, gafm=sim_settings))
        outcome = run_simulation_engine(
            _strategy(spec, sim_settings), sim_spec, shared_seed_for(spec.seed)
        )
        # The repetition's time covers all its exchanges (setup, steps, last update, prediction).
        result["simulation_exchange_ms"] = 1000 * outcome.repetitions[0].seconds / outcome.exchanges
        line += f", simulation engine {result['simulation_exchange_ms']:.0f} ms/exchange"
    print(line, flush=True)
    return result


def _strategy(spec: RunSpec, settings: GAFMSettings) -> GAFMStrategy:
    raw, ids, label = spec_labels(spec.data)
    return GAFMStrategy(
        Method(spec.algorithm.variant.value), settings, n_parties=spec.data.n_parties,
        seed=spec.seed, labels=raw, label_ids=ids, label=label, data_spec=spec.data,
    )  # fmt: skip


def _plain_step(spec: RunSpec, settings: GAFMSettings, warm: GAFMSettings) -> float:
    """Seconds of one repetition of ``settings`` with the parties as objects in this
    process, after a warm-up repetition of ``warm`` (first calls pay one-off costs)."""
    method = Method(spec.algorithm.variant.value)
    raw, _, _ = spec_labels(spec.data)
    labels, _ = binary_labels(np.asarray(raw), settings.positive_label)
    blocks = all_features(spec.data)
    features, fields = [b.encoded for b in blocks], [block_fields(b) for b in blocks]
    train_repetition(method, warm, labels, PlainLink(features, warm, fields), spec.seed)
    started = time.perf_counter()
    train_repetition(method, settings, labels, PlainLink(features, settings, fields), spec.seed)
    return time.perf_counter() - started


def _inprocess_run(
    spec: RunSpec, settings: GAFMSettings, warm: GAFMSettings
) -> tuple[float, list[Message]]:
    """Seconds of one repetition over the in-process grid (after a warm-up one) and every
    message it sent and received."""
    log: list[Message] = []
    nodes = [{P.NODE_PARTITION_ID: i} for i in range(spec.data.n_parties)]
    _strategy(spec, warm).start(InProcessGrid(make_client_app(), nodes))
    strategy = _strategy(spec, settings)
    started = time.perf_counter()
    strategy.start(InProcessGrid(make_client_app(), nodes, observer=log.append))
    return time.perf_counter() - started, log
