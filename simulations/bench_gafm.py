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
from flwr.app import ArrayRecord, Message
from omegaconf import DictConfig

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.gafm.config import Method
from flwr_vflgan.gafm.data import all_features, spec_labels
from flwr_vflgan.gafm.training import PlainLink, binary_labels, train_repetition
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.simulations.config import register_configs, to_run_spec
from flwr_vflgan.simulations.launch import run_simulation_engine, shared_seed_for
from flwr_vflgan.strategies import InProcessGrid
from flwr_vflgan.strategies.gafm import GAFMStrategy

register_configs()


def _payload(message: Message) -> int:
    return sum(
        len(array.data)
        for record in message.content.values()
        if isinstance(record, ArrayRecord)
        for array in record.values()
    )


def measure(cfg: DictConfig) -> dict[str, Any]:
    """Run the measurements of the module docstring."""
    bench = cfg.get("bench", {})
    steps = int(bench.get("steps", 400))
    sim_steps = int(bench.get("simulation_steps", 20))
    simulate = bool(bench.get("simulation", True))
    spec = to_run_spec(cfg, "outputs/bench-gafm")
    torch.set_num_threads(spec.runtime.torch_threads)
    method = Method(spec.algorithm.variant.value)
    settings = replace(
        spec.algorithm.gafm, max_steps=steps, eval_every=0, repetitions=1, epochs=10**6
    )
    raw, ids, label = spec_labels(spec.data)
    labels, _ = binary_labels(np.asarray(raw), settings.positive_label)
    features = [b.encoded for b in all_features(spec.data)]

    # Warm up (first calls into torch and Flower pay one-off costs), then time.
    warm = replace(settings, max_steps=int(bench.get("warmup", 20)))
    train_repetition(method, warm, labels, PlainLink(features, warm), spec.seed)
    started = time.perf_counter()
    train_repetition(method, settings, labels, PlainLink(features, settings), spec.seed)
    plain = (time.perf_counter() - started) / steps

    log: list[Message] = []
    nodes = [{P.NODE_PARTITION_ID: i} for i in range(spec.data.n_parties)]
    strategy = GAFMStrategy(
        method, settings, n_parties=spec.data.n_parties, seed=spec.seed, labels=raw,
        label_ids=ids, label=label, data_spec=spec.data,
    )  # fmt: skip
    GAFMStrategy(
        method, warm, n_parties=spec.data.n_parties, seed=spec.seed, labels=raw,
        label_ids=ids, label=label, data_spec=spec.data,
    ).start(InProcessGrid(make_client_app(), nodes))  # fmt: skip
    started = time.perf_counter()
    strategy.start(InProcessGrid(make_client_app(), nodes, observer=log.append))
    inprocess = (time.perf_counter() - started) / steps
    step_messages = [m for m in log if m.metadata.message_type == P.GF_STEP]
    to_party = [_payload(m) for m in step_messages if m.metadata.reply_to_message_id == ""]
    from_party = [_payload(m) for m in step_messages if m.metadata.reply_to_message_id != ""]
    n = spec.data.n_parties
    result: dict[str, Any] = {
        "dataset": spec.data.source,
        "algorithm": method.value,
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
    if simulate:
        sim_settings = replace(settings, max_steps=sim_steps)
        sim_spec = replace(spec, algorithm=replace(spec.algorithm, gafm=sim_settings))
        sim = GAFMStrategy(
            method, sim_settings, n_parties=n, seed=spec.seed, labels=raw, label_ids=ids,
            label=label, data_spec=spec.data,
        )  # fmt: skip
        outcome = run_simulation_engine(sim, sim_spec, shared_seed_for(spec.seed))
        rep = outcome.repetitions[0]
        # The repetition's time covers all its exchanges (setup, steps, last update, prediction).
        result["simulation_exchange_ms"] = 1000 * rep.seconds / outcome.exchanges
    print(
        f"plain {result['plain_step_ms']:.2f} ms/step, in-process grid {result['inprocess_step_ms']:.2f} "
        f"ms/step ({result['inprocess_over_plain']:.2f}x)"
        + (
            f", simulation engine {result['simulation_exchange_ms']:.0f} ms/exchange"
            if "simulation_exchange_ms" in result
            else ""
        ),
        flush=True,
    )
    return result
