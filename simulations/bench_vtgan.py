"""Benchmark of the VT-GAN runtimes and of its traffic, measured in one run on one machine.

    python -m simulations.bench algorithm=vtgan                     # Adult, 2 clients, D2_0-G0_2
    python -m simulations.bench algorithm=vtgan partition.n_parties=3 +bench.steps=60
    python -m simulations.bench algorithm=vtgan vtgan.d_client_blocks=1

``+bench.warmup`` (default 12), ``+bench.steps`` (60) and ``+bench.simulation_steps`` (12)
set its lengths; ``algorithm=ctgan`` (centralized, nothing to exchange) is refused.

Measures (one line per measurement; the last line printed is one JSON object):

* ``local_step_ms`` (and ``local_d_step_ms``, ``local_g_step_ms``): one step of
  :func:`flwr_vflgan.vtgan.local.run_step` on :class:`VTGANServer` and
  :class:`VTGANParty` objects in this process (no Flower: the lower bound);
  ``local_cpu_step_ms`` is its process CPU time, which other jobs on a shared machine
  disturb less than wall time;
* ``inprocess_step_ms``: one step of the VT-GAN strategy over the in-process grid (real
  Flower Messages and Contexts, client state saved and restored every message), as the
  difference of two runs; ``inprocess_over_local`` is their ratio;
  ``inprocess_d_step_ms``/``inprocess_g_step_ms`` split it by kind (from the time
  between the first messages of consecutive steps) and ``inprocess_client_share`` is
  the share of that time spent in the ClientApps; ``inprocess_cpu_step_ms`` and
  ``inprocess_over_local_cpu`` are the same comparison in process CPU time;
* ``simulation_step_ms``: one step in Flower's simulation engine (training loop only);
* ``traffic``: array payload per D and G step, per client and direction (bytes, as
  serialised: NumPy's 128-byte header per array included), and the server's total;
  ``every_row_bytes`` is what a non-chosen client uploads as real features (all ``N``
  rows, once per exchange: per D step at ``K = 1``; what comes back is only the
  selected rows' gradients), ``batch_only_bytes`` what a protocol that sent only the
  selected rows would upload, and ``every_row_over_batch`` their ratio ``N / B``;
* ``forward_every_row_ms`` / ``forward_chosen_ms``: a client's real-feature forward
  pass in a D step as a non-chosen client (all ``N`` rows) and as the chosen one;
* ``party_peak_rss_mb``: peak resident memory of a process running one never-chosen
  client (its data, encoder, models, optimizers and 50 steps), in a child process.

Step times come after ``bench.warmup`` steps and exclude setup and publication.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from flwr.app import Message
from omegaconf import DictConfig

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import Variant
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import party_block
from flwr_vflgan.runtime.rng import Stream, derive_seed, numpy_generator
from flwr_vflgan.simulations.bench_vflgan import probe_peak_rss_mb
from flwr_vflgan.simulations.config import register_configs, to_run_spec
from flwr_vflgan.simulations.launch import run_simulation_engine, shared_seed_for
from flwr_vflgan.strategies import InProcessGrid, VTGANStrategy
from flwr_vflgan.vtgan.local import run_step
from flwr_vflgan.vtgan.party import VTGANParty
from flwr_vflgan.vtgan.server import ClientShape, VTGANServer

register_configs()

KIB, MIB = 1024.0, 1024.0**2


def _strategy(spec: Any, steps: int) -> VTGANStrategy:
    train = replace(spec.algorithm.train, max_steps=steps, eval_every=0)
    return VTGANStrategy(
        replace(spec.algorithm, train=train),
        n_parties=spec.data.n_parties,
        seed=spec.seed,
        data_spec=spec.data,
        publish_rows=64,
        poll_interval=spec.runtime.poll_interval,
    )


# -- local: the step sequence on the objects, no Flower ---------------------------------
def local_objects(spec: Any) -> tuple[VTGANServer, list[VTGANParty]]:
    """The server and the clients, each client encoded and built as ``clients.vtgan`` does."""
    settings, train = spec.algorithm.vtgan, spec.algorithm.train
    shared = shared_seed_for(spec.seed)
    encoded, encoders = [], []
    for i in range(spec.data.n_parties):
        block = party_block(spec.data, i)
        private = derive_seed(shared, Stream.INIT, 1, i + 1)
        encoder = ModeSpecificEncoder(
            max_modes=settings.max_modes,
            weight_threshold=settings.mode_weight_threshold,
            seed=private % (2**31),
            point_mass_share=settings.point_mass_share,
        ).fit(block.frame, block.schema)
        encoded.append(encoder.transform(block.frame, numpy_generator(private, Stream.INIT, 2)))
        encoders.append((encoder, len(block.schema.names)))
    shapes = [
        ClientShape(columns, int(x.shape[1]), sum(s.width for s in e.discrete_spans))
        for (e, columns), x in zip(encoders, encoded, strict=True)
    ]
    server = VTGANServer(settings, train, shapes, spec.seed)
    parties = [
        VTGANParty(settings, train, x, e.spans, e.discrete_spans, layout, shared, i)
        for i, ((e, _), x, layout) in enumerate(zip(encoders, encoded, server.layouts, strict=True))
    ]
    return server, parties


def local_step_ms(
    server: VTGANServer, parties: list[VTGANParty], schedule: Schedule, warmup: int, steps: int
) -> dict[str, float]:
    """Milliseconds per step of :func:`run_step` (all steps, D steps, G steps), and the
    process CPU time per step (less sensitive than wall time to other jobs' load)."""
    for step in range(warmup):
        run_step(step, schedule.kind(step), server, parties)
    times: dict[str, list[float]] = defaultdict(list)
    cpu_started = time.process_time()
    for step in range(warmup, warmup + steps):
        kind = schedule.kind(step)
        started = time.perf_counter()
        run_step(step, kind, server, parties)
        times[kind.value].append(time.perf_counter() - started)
    cpu = time.process_time() - cpu_started
    every = [t for values in times.values() for t in values]
    return {
        "local_step_ms": float(np.mean(every)) * 1e3,
        "local_d_step_ms": float(np.mean(times["d"])) * 1e3,
        "local_g_step_ms": float(np.mean(times["g"])) * 1e3 if times["g"] else float("nan"),
        "local_cpu_step_ms": cpu / steps * 1e3,
    }


def forward_ms(parties: list[VTGANParty], step: int, repeats: int = 5) -> dict[str, list[float]]:
    """Each client's real-feature forward pass of D step ``step``: every row vs chosen."""
    out: dict[str, list[float]] = {"forward_every_row_ms": [], "forward_chosen_ms": []}
    for party in parties:
        for key, chosen in (("forward_every_row_ms", False), ("forward_chosen_ms", True)):
            if chosen and party.sampler.cond_dim == 0:
                out[key].append(float("nan"))  # never chosen: no categorical column
                continue
            party.forward_real(step, chosen)
            started = time.perf_counter()
            for _ in range(repeats):
                party.forward_real(step, chosen)
            out[key].append((time.perf_counter() - started) / repeats * 1e3)
    return out


# -- Flower runtimes -------------------------------------------------------------------------
class StepClock:
    """Observer of an in-process grid that times every step from its messages.

    A step starts with the first message asking for its forward pass; a G step also
    holds its generator-update exchange. Client time is the time between a message and
    its reply (ClientApp, state restore and save), booked to the message's forward step
    (or, without one, to the step it applies).
    """

    def __init__(self) -> None:
        self.starts: dict[int, float] = {}
        self.cpu_starts: dict[int, float] = {}
        self.client: dict[int, float] = defaultdict(float)
        self._sent: dict[str, tuple[int, float]] = {}

    def __call__(self, message: Message) -> None:
        now = time.perf_counter()
        if message.metadata.reply_to_message_id:
            sent = self._sent.pop(message.metadata.reply_to_message_id, None)
            if sent is not None:
                self.client[sent[0]] += now - sent[1]
            return
        if message.metadata.message_type != P.VT_STEP:
            return
        cfg = message.content[P.CONFIG]
        forward, applied = int(cfg["forward_start"]), int(cfg["apply_start"])  # type: ignore[arg-type]
        if forward != P.NO_STEP and forward not in self.starts:
            self.starts[forward] = now
            self.cpu_starts[forward] = time.process_time()
        step = forward if forward != P.NO_STEP else applied
        if step != P.NO_STEP:
            self._sent[message.metadata.message_id] = (step, now)

    def split(self, schedule: Schedule, first: int) -> dict[str, float]:
        """Mean wall milliseconds of the D and G steps from the first exchange that starts
        at or after step ``first``, the share spent in the ClientApps and the process CPU
        milliseconds per step. With several steps per exchange an exchange's time is
        shared equally by its steps (a block holds steps of one kind)."""
        wall: dict[str, list[float]] = defaultdict(list)
        client: list[float] = []
        starts = sorted(step for step in self.starts if step >= first)
        for begin, end in itertools.pairwise(starts):
            per_step = (self.starts[end] - self.starts[begin]) / (end - begin)
            wall[schedule.kind(begin).value].extend([per_step] * (end - begin))
            client.append(self.client[begin])
        every = [t for values in wall.values() for t in values]
        begin, last = starts[0], starts[-1]
        cpu = (self.cpu_starts[last] - self.cpu_starts[begin]) / (last - begin)
        return {
            "inprocess_d_step_ms": float(np.mean(wall["d"])) * 1e3,
            "inprocess_g_step_ms": float(np.mean(wall["g"])) * 1e3 if wall["g"] else float("nan"),
            "inprocess_client_share": float(np.sum(client) / np.sum(every)),
            "inprocess_cpu_step_ms": cpu * 1e3,
        }


def inprocess(spec: Any, schedule: Schedule, warmup: int, steps: int) -> dict[str, Any]:
    """In-process step time (difference of two runs), its split and the traffic."""

    def run(n: int) -> tuple[float, VTGANStrategy, StepClock]:
        nodes = [
            {"partition-id": i, "shared-seed": shared_seed_for(spec.seed)}
            for i in range(spec.data.n_parties)
        ]
        clock = StepClock()
        strategy = _strategy(spec, n)
        result = strategy.start(InProcessGrid(make_client_app(), nodes, observer=clock))
        return result.train_seconds, strategy, clock

    short, _, _ = run(warmup)
    long, strategy, clock = run(warmup + steps)
    out: dict[str, Any] = {"inprocess_step_ms": (long - short) / steps * 1e3}
    out.update(clock.split(schedule, warmup))
    out["traffic_per_step"] = strategy.traffic.per_step()
    out["traffic_steps"] = dict(strategy.traffic.steps)
    return out


def simulation_step_ms(spec: Any, steps: int) -> dict[str, float]:
    """Milliseconds per step and per exchange in Flower's simulation engine."""
    result = run_simulation_engine(_strategy(spec, steps), spec, shared_seed_for(spec.seed))
    # setup, build and the two publication exchanges are outside the training loop
    loop_exchanges = result.exchanges - 4
    return {
        "simulation_step_ms": result.train_seconds / steps * 1e3,
        "simulation_exchange_ms": result.train_seconds / loop_exchanges * 1e3,
    }


# -- traffic -----------------------------------------------------------------------------------
def traffic_summary(
    per_step: dict[str, dict[str, list[float]]], parties: list[VTGANParty], batch: int
) -> dict[str, Any]:
    """Server totals per step and the every-row payload against a batch-only protocol."""
    out: dict[str, Any] = {"traffic": per_step}
    for kind, directions in per_step.items():
        out[f"server_bytes_per_{kind}_step"] = sum(sum(values) for values in directions.values())
    out["every_row_bytes"] = [p.n_rows * p.feature_dim * 4 for p in parties]
    out["batch_only_bytes"] = [batch * p.feature_dim * 4 for p in parties]
    out["every_row_over_batch"] = parties[0].n_rows / batch
    return out


def print_traffic(results: dict[str, Any]) -> None:
    """One line per step kind and client, then the server and the every-row part."""
    names = {"d": "D step", "g": "G step"}
    for kind, directions in results["traffic"].items():
        for i, (up, down) in enumerate(
            zip(directions["from_client"], directions["to_client"], strict=True)
        ):
            print(
                f"{names[kind]}, client {i}: upload {up / KIB:10.1f} KiB ({up / MIB:7.2f} MiB), "
                f"download {down / KIB:10.1f} KiB ({down / MIB:7.2f} MiB)"
            )
        total = results[f"server_bytes_per_{kind}_step"]
        print(f"{names[kind]}, server total  {total / KIB:10.1f} KiB ({total / MIB:7.2f} MiB)")
    for i, (every, batch) in enumerate(
        zip(results["every_row_bytes"], results["batch_only_bytes"], strict=True)
    ):
        print(
            f"client {i} not chosen: {every / MIB:7.2f} MiB of every-row features up per "
            f"exchange; batch-only {batch / KIB:7.1f} KiB "
            f"(N/B = {results['every_row_over_batch']:.1f}x)"
        )
    for i, (every, chosen) in enumerate(
        zip(results["forward_every_row_ms"], results["forward_chosen_ms"], strict=True)
    ):
        print(f"client {i} real forward: every row {every:7.2f} ms, chosen {chosen:6.2f} ms")


# -- memory -------------------------------------------------------------------------------------
_PARTY_PROBE = """
import json, sys
import numpy as np, torch
torch.set_num_threads(1)
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.runtime.codec import tensors_to_record
from flwr_vflgan.runtime.party_data import DataSpec, party_block
from flwr_vflgan.runtime.rng import Stream, derive_seed, numpy_generator
from flwr_vflgan.vtgan.party import PartyLayout, VTGANParty
spec = DataSpec.from_json(sys.argv[1]); config = VFLGANConfig.from_dict(json.loads(sys.argv[2]))
layout = PartyLayout(*json.loads(sys.argv[3])); shared = int(sys.argv[4])
s, t = config.vtgan, config.train
data = party_block(spec, 0)
private = derive_seed(shared, Stream.INIT, 1, 1)
encoder = ModeSpecificEncoder(max_modes=s.max_modes, weight_threshold=s.mode_weight_threshold,
                              seed=private % 2**31,
                              point_mass_share=s.point_mass_share).fit(data.frame, data.schema)
encoded = encoder.transform(data.frame, numpy_generator(private, Stream.INIT, 2))
party = VTGANParty(s, t, encoded, encoder.spans, encoder.discrete_spans, layout, shared, 0)
schedule = Schedule(party.n_rows, t.batch_size, t.n_critic, t.epochs or 1, None)
chunk = torch.randn(t.batch_size, layout.chunk_width, generator=torch.Generator().manual_seed(0))
grad_fake = torch.full((t.batch_size, party.feature_dim), 1e-3)
selected = np.random.default_rng(0).choice(party.n_rows, t.batch_size, replace=False)
for step in range(50):  # reply and message stay alive into the next step, as in a client
    party.forward_fake(step, chunk)
    if schedule.kind(step) is StepKind.DISCRIMINATOR:
        reply = tensors_to_record({"real": party.forward_real(step, False).features})
        grad_real = torch.full((t.batch_size, party.feature_dim), 1e-3)
        message = tensors_to_record({"real": grad_real, "fake": grad_fake})
        party.apply_discriminator(step, chunk, False, grad_real, grad_fake, np.sort(selected))
    else:
        party.apply_generator(step, chunk, False, grad_fake)
"""


def party_peak_rss_mb(spec: Any, server: VTGANServer) -> float:
    """Peak RSS (MiB) of a child process that runs client 0, never chosen."""
    layout = server.layouts[0]
    return probe_peak_rss_mb(
        _PARTY_PROBE,
        spec.data.to_json(),
        json.dumps(spec.algorithm.to_dict()),
        json.dumps([layout.chunk_width, layout.g_block_width, layout.d_block_width]),
        str(shared_seed_for(spec.seed)),
    )


# -- entry point ------------------------------------------------------------------------------
def measure(spec: Any, warmup: int, steps: int, sim_steps: int) -> dict[str, Any]:
    """Every measurement, printing one line each as it completes."""
    server, parties = local_objects(spec)
    t = spec.algorithm.train
    schedule = Schedule(parties[0].n_rows, t.batch_size, t.n_critic, t.epochs or 1)
    results: dict[str, Any] = {}
    results.update(local_step_ms(server, parties, schedule, warmup, steps))
    print(
        f"local run_step       {results['local_step_ms']:8.2f} ms/step "
        f"(D {results['local_d_step_ms']:.2f}, G {results['local_g_step_ms']:.2f}; "
        f"CPU {results['local_cpu_step_ms']:.2f} ms/step)",
        flush=True,
    )
    d_step = next(
        s for s in range(warmup + steps, 10**9) if schedule.kind(s) is StepKind.DISCRIMINATOR
    )
    results.update(forward_ms(parties, d_step))
    measured = inprocess(spec, schedule, warmup, steps)
    results.update({k: v for k, v in measured.items() if not k.startswith("traffic")})
    results["inprocess_over_local"] = results["inprocess_step_ms"] / results["local_step_ms"]
    results["inprocess_over_local_cpu"] = (
        results["inprocess_cpu_step_ms"] / results["local_cpu_step_ms"]
    )
    print(
        f"in-process grid      {results['inprocess_step_ms']:8.2f} ms/step "
        f"({results['inprocess_over_local']:.2f}x local; D {results['inprocess_d_step_ms']:.2f}, "
        f"G {results['inprocess_g_step_ms']:.2f}, "
        f"{100 * results['inprocess_client_share']:.0f}% in the ClientApps; "
        f"CPU {results['inprocess_cpu_step_ms']:.2f} ms/step, "
        f"{results['inprocess_over_local_cpu']:.2f}x local)",
        flush=True,
    )
    results.update(
        traffic_summary(measured["traffic_per_step"], parties, spec.algorithm.train.batch_size)
    )
    results["traffic_steps"] = measured["traffic_steps"]
    print_traffic(results)
    results["party_peak_rss_mb"] = party_peak_rss_mb(spec, server)
    print(f"one client's peak RSS {results['party_peak_rss_mb']:6.0f} MiB", flush=True)
    del server, parties
    results.update(simulation_step_ms(spec, sim_steps))
    print(
        f"simulation engine    {results['simulation_step_ms']:8.2f} ms/step "
        f"({results['simulation_exchange_ms']:.2f} ms/exchange)",
        flush=True,
    )
    return results


def measure_cfg(cfg: DictConfig) -> dict[str, Any]:
    """VT-GAN's benchmark (``python -m simulations.bench algorithm=vtgan``): every
    measurement above, printed as it is taken; returns the record."""
    bench = cfg.get("bench", {})
    warmup, steps = int(bench.get("warmup", 12)), int(bench.get("steps", 60))
    sim_steps = int(bench.get("simulation_steps", 12))
    spec = to_run_spec(cfg, os.getcwd())
    if spec.algorithm.variant is not Variant.VTGAN:
        raise ValueError(
            f"algorithm={spec.algorithm.variant.value} trains in one process and exchanges "
            "nothing to measure; benchmark algorithm=vtgan"
        )
    if warmup < 1 or steps < 1 or sim_steps < 1:
        raise ValueError(
            f"bench.warmup, bench.steps and bench.simulation_steps must be >= 1, got "
            f"{warmup}, {steps}, {sim_steps}"
        )
    torch.set_num_threads(spec.runtime.torch_threads)
    results: dict[str, Any] = {
        "dataset": spec.data.source,
        "n_parties": spec.data.n_parties,
        "partition": spec.algorithm.vtgan.partition_name,
        "batch_size": spec.algorithm.train.batch_size,
        "warmup": warmup,
        "steps": steps,
        "simulation_steps": sim_steps,
        "torch_threads": spec.runtime.torch_threads,
    }
    results.update(measure(spec, warmup, steps, sim_steps))
    return results
