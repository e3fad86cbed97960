"""The VFLGAN family's benchmark, measured in one run on one machine.

    python -m simulations.bench                 # VFLGAN, Adult, 2 parties
    python -m simulations.bench +bench.steps=600 partition.n_parties=3

It measures (the last line printed is one JSON object):

* ``plain_step_ms``: one training step of :class:`~flwr_vflgan.gan.plain.PlainVFLGAN`,
  the single-process PyTorch loop doing the same math (the lower bound);
* ``inprocess_step_ms``: one step of the same training driven by the VFLGAN strategy over
  the in-process grid (real Flower Messages and Contexts, state saved and restored
  every message); ``inprocess_over_plain`` is their ratio (target: at most 2);
* ``simulation_exchange_ms``: one exchange (= one step) in Flower's simulation engine;
* ``runtimes``: at ``K = train.steps_per_exchange`` (``bench.k`` to override), each
  runtime's milliseconds per exchange and per training step, and the projected wall
  time of the default Adult job (``bench.job_steps``, 27,450 steps: 30 epochs) there:
  the in-process grid, Flower's simulation engine, and a real deployment on 127.0.0.1
  (an unmodified SuperLink with two ``flwr-vflgan-node`` party nodes, and with two
  stock ``flower-supernode`` processes) started by :mod:`simulations.local_deployment`;
  ``bench.deployment=false`` skips the deployments;
* ``party_peak_rss_mb``: peak resident memory of a process running one party (its data,
  models, optimizer state and 50 protocol steps), measured in a child process;
* ``plain_dp_gaussian_step_ms``: the plain loop with DP-VFLGAN's first-layer Gaussian
  mechanism; ``dp_gaussian_over_plain`` is its cost over the plain step (target: at
  most 1.10);
* ``inprocess_dp_gaussian_step_ms``, ``inprocess_dpsgd_step_ms`` and
  ``inprocess_dp_end_to_end_step_ms``: the in-process grid with each DP mechanism
  (epsilon 10; ``end_to_end`` with the bundled public domain), and their ratios over
  ``inprocess_step_ms``; ``inprocess_dp_gaussian_masked_step_ms``: the first-layer
  mechanism with batch masking at ``B_hat = 16 B`` (``masked_batch_size``), and
  ``masked_over_dp_gaussian``, its cost over the unmasked DP step.

Step times exclude setup and publication (the strategy times its training loop alone)
and come after ``bench.warmup`` steps.

``algorithm=vdgan`` measures an iteration on the in-process grid and compares it, per
step-equivalent, with VFLGAN's step (:func:`measure_vdgan`).
``algorithm=vertigan`` measures its in-process step beside VFLGAN's in the same run
(``vertigan_over_vflgan``), its DP mechanisms' steps and the runtimes
(:func:`measure_vertigan`); VertiGAN has no single-graph loop of its own.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import Variant
from flwr_vflgan.data.domain import required_domain
from flwr_vflgan.gan.plain import PlainVFLGAN
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.privacy import DPConfig, Mechanism, plan_privacy
from flwr_vflgan.runtime.party_data import all_blocks
from flwr_vflgan.simulations.config import RunSpec, register_configs, to_run_spec
from flwr_vflgan.simulations.launch import run_simulation_engine, shared_seed_for
from flwr_vflgan.strategies import InProcessGrid, VFLGANStrategy

register_configs()


def _strategy(spec: Any, steps: int) -> VFLGANStrategy:
    # Enough epochs for ``steps`` (an epoch is at least one step), so max_steps decides
    # the length whatever the run's default (VFLGAN-TS counts steps: epochs=null).
    train = replace(
        spec.algorithm.train, max_steps=steps, eval_every=0, epochs=steps, min_steps=None
    )
    config = replace(spec.algorithm, train=train)
    return VFLGANStrategy(
        config,
        n_parties=spec.data.n_parties,
        seed=spec.seed,
        data_spec=spec.data,
        publish_rows=64,
        poll_interval=spec.runtime.poll_interval,
    )


def plain_step_ms(spec: Any, warmup: int, steps: int) -> float:
    """Milliseconds per step of the single-process loop (with ``spec``'s DP mechanism)."""
    blocks = all_blocks(spec.data)
    t = spec.algorithm.train
    schedule = Schedule(blocks[0].n_rows, t.batch_size, t.n_critic, t.epochs or 1, None)
    plan = None
    if spec.algorithm.dp.enabled:
        plan = plan_privacy(
            spec.algorithm.dp,
            dataset_size=blocks[0].n_rows,
            batch_size=t.batch_size,
            planned_steps=schedule.d_steps_before(schedule.total_steps),
        )
    model = PlainVFLGAN(
        spec.algorithm,
        [b.encoder.spans for b in blocks],
        [b.encoded for b in blocks],
        shared_seed_for(spec.seed),
        spec.seed,
        plan,
    )
    for step in range(warmup):
        model.step(step, schedule.kind(step))
    started = time.perf_counter()
    for step in range(warmup, warmup + steps):
        model.step(step, schedule.kind(step))
    return (time.perf_counter() - started) / steps * 1e3


def bench_record(spec: RunSpec, steps: int) -> dict[str, Any]:
    """The fields every step benchmark's record starts with: what was measured, how."""
    return {
        "dataset": spec.data.source,
        "algorithm": spec.algorithm.variant.value,
        "n_parties": spec.data.n_parties,
        "batch_size": spec.algorithm.train.batch_size,
        "steps": steps,
        "torch_threads": spec.runtime.torch_threads,
    }


def inprocess_step_ms(spec: Any, warmup: int, steps: int) -> float:
    """Milliseconds per step over the in-process grid (difference of two runs)."""

    def loop_seconds(n: int) -> float:
        nodes = [
            {"partition-id": i, "shared-seed": shared_seed_for(spec.seed)}
            for i in range(spec.data.n_parties)
        ]
        return _strategy(spec, n).start(InProcessGrid(make_client_app(), nodes)).train_seconds

    short, long = loop_seconds(warmup), loop_seconds(warmup + steps)
    return (long - short) / steps * 1e3


def simulation_exchange_ms(spec: Any, steps: int) -> float:
    """Milliseconds per exchange in Flower's simulation engine (training loop only)."""
    result = run_simulation_engine(_strategy(spec, steps), spec, shared_seed_for(spec.seed))
    return result.train_seconds / (steps + 1) * 1e3


def _row(runtime: str, train_seconds: float, steps: int, exchanges: int, job: int) -> dict:
    """One runtime's costs: the training loop's ``exchanges`` (forward blocks plus the last
    apply) over ``steps`` steps, and the default job's projected training time."""
    step_ms = train_seconds / steps * 1e3
    return {
        "runtime": runtime,
        "steps": steps,
        "exchange_ms": train_seconds / exchanges * 1e3,
        "step_ms": step_ms,
        "job_minutes": step_ms * job / 6e4,
    }


def runtime_rows(spec: Any, k: int, steps: int, job: int, deployment: bool) -> list[dict]:
    """Milliseconds per exchange and per step at ``k`` steps per exchange on each runtime."""
    spec = replace(
        spec,
        algorithm=replace(
            spec.algorithm, train=replace(spec.algorithm.train, steps_per_exchange=k)
        ),
    )
    rows = []
    nodes = [
        {"partition-id": i, "shared-seed": shared_seed_for(spec.seed)}
        for i in range(spec.data.n_parties)
    ]
    result = _strategy(spec, steps).start(InProcessGrid(make_client_app(), nodes))
    rows.append(_row("in-process", result.train_seconds, steps, result.exchanges - 2, job))
    result = run_simulation_engine(_strategy(spec, steps), spec, shared_seed_for(spec.seed))
    rows.append(_row("simulation", result.train_seconds, steps, result.exchanges - 2, job))
    if deployment:
        from flwr_vflgan.simulations.local_deployment import deploy

        # A stock SuperNode takes seconds per exchange: two exchanges measure it.
        kinds = (
            ("party", "deployment, party nodes", steps),
            ("supernode", "deployment, stock SuperNodes", min(steps, 2 * k)),
        )
        for kind, name, n in kinds:
            overrides = [
                f"dataset.source={spec.data.source}",
                f"partition.n_parties={spec.data.n_parties}",
                f"train.steps_per_exchange={k}",
                f"train.max_steps={n}",
                "train.eval_every=0",
                "output.evaluate=false",
                "output.checkpoint=false",
                "output.publish_rows=64",
            ]
            with tempfile.TemporaryDirectory(prefix="bench-deploy-") as work:
                done = deploy(overrides, Path(work), nodes=kind, data=spec.data)
            m = done.metrics
            rows.append(_row(name, m["train_seconds"], m["steps"], m["exchanges"] - 2, job))
            if kind == "party":
                rows[-1]["node_peak_rss_mb"] = max(done.node_peak_rss_mb, default=float("nan"))
    return rows


_PARTY_PROBE = """
import sys
from flwr_vflgan.clients.party_process import prepare_party_process
prepare_party_process()  # as a party node and a stock SuperNode's ClientApp do
import torch
torch.set_num_threads(1)
from flwr_vflgan.runtime.party_data import DataSpec, party_block
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.gan.schedule import Schedule, StepKind
spec = DataSpec.from_json(sys.argv[1]); config = VFLGANConfig.from_dict(__import__("json").loads(sys.argv[2]))
data = party_block(spec, 0)
trainer = PartyTrainer(config, data.encoder.spans, data.encoded, 1, 0)
t = config.train
schedule = Schedule(data.n_rows, t.batch_size, t.n_critic, t.epochs or 1, None)
shape = (t.batch_size, config.model.feature_dim)
for step in range(50):
    kind = schedule.kind(step)
    trainer.forward(step, kind)
    trainer.apply(step, kind, torch.zeros(shape) if kind is StepKind.DISCRIMINATOR else None, torch.zeros(shape))
trainer.generate(data.n_rows, 1)
"""


def party_peak_rss_mb(spec: Any) -> float:
    """Peak RSS (MiB) of a child process that runs one party."""
    return probe_peak_rss_mb(
        _PARTY_PROBE, spec.data.to_json(), json.dumps(spec.algorithm.to_dict())
    )


# The child's own peak: VmHWM belongs to the address space that exec gave it. Its
# ru_maxrss does not (Linux carries the parent's peak into a forked child across exec,
# so a probe started from a benchmark that had grown to 613 MiB read 613 MiB).
_PRINT_PEAK_RSS = """
def _peak_rss_mb():
    try:
        with open("/proc/self/status") as status:
            return next(float(l.split()[1]) / 1024 for l in status if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(_peak_rss_mb())
"""


def probe_peak_rss_mb(probe: str, *args: str) -> float:
    """Run the Python source ``probe`` with ``args`` in a child process and return the
    child's peak RSS in MiB (``VmHWM``: a party's memory, apart from this benchmark's)."""
    out = subprocess.run(
        [sys.executable, "-c", probe + _PRINT_PEAK_RSS, *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


MASKED_RATIO = 16
"""``B_hat / B`` of the masked measurement: on Adult the smallest power of two whose
guarantee against the parties is clearly below the unmasked one (docs/privacy.md)."""


def with_dp(spec: Any, mechanism: str, masked_batch_size: int | None = None) -> Any:
    """``spec`` with a DP mechanism at epsilon 10, delta 1e-5 (its noise calibrated);
    ``end_to_end`` takes the dataset's bundled public domain when the spec has none;
    ``masked_batch_size`` turns on batch masking."""
    dp = DPConfig(
        mechanism=Mechanism(mechanism),
        target_epsilon=10.0,
        delta=1e-5,
        masked_batch_size=masked_batch_size,
    )
    data = spec.data
    if dp.mechanism is Mechanism.END_TO_END:
        domain = required_domain(data.public_domain, data.source)
        data = replace(data, domain=domain.to_mapping())
    return replace(spec, algorithm=replace(spec.algorithm, dp=dp), data=data)


def measure_dp(results: dict[str, Any], spec: Any, warmup: int, steps: int) -> None:
    """The DP mechanisms' step costs, as ratios over the non-DP steps of the same run."""
    gaussian = with_dp(spec, "vflgan_gaussian")
    results["plain_dp_gaussian_step_ms"] = plain_step_ms(gaussian, warmup, steps)
    results["dp_gaussian_over_plain"] = (
        results["plain_dp_gaussian_step_ms"] / results["plain_step_ms"]
    )
    print(
        f"plain loop, DP-VFLGAN {results['plain_dp_gaussian_step_ms']:8.2f} ms/step "
        f"({results['dp_gaussian_over_plain']:.2f}x plain)",
        flush=True,
    )
    mechanisms = (
        ("dp_gaussian", "vflgan_gaussian"),
        ("dpsgd", "dpsgd"),
        ("dp_end_to_end", "end_to_end"),
    )
    for name, mechanism in mechanisms:
        key = f"inprocess_{name}_step_ms"
        results[key] = inprocess_step_ms(with_dp(spec, mechanism), warmup, steps)
        results[f"inprocess_{name}_over_inprocess"] = results[key] / results["inprocess_step_ms"]
        print(
            f"in-process, {mechanism:15s} {results[key]:8.2f} ms/step "
            f"({results[f'inprocess_{name}_over_inprocess']:.2f}x in-process without DP)",
            flush=True,
        )
    if spec.algorithm.variant in (Variant.VFLGAN, Variant.VFLGAN_BASE):
        drawn = MASKED_RATIO * spec.algorithm.train.batch_size
        masked = with_dp(spec, "vflgan_gaussian", masked_batch_size=drawn)
        key = "inprocess_dp_gaussian_masked_step_ms"
        results["masked_batch_size"] = drawn
        results[key] = inprocess_step_ms(masked, warmup, steps)
        results["masked_over_dp_gaussian"] = results[key] / results["inprocess_dp_gaussian_step_ms"]
        print(
            f"in-process, vflgan_gaussian, masked {drawn} rows {results[key]:8.2f} ms/step "
            f"({results['masked_over_dp_gaussian']:.2f}x unmasked)",
            flush=True,
        )


def beside_vflgan(
    spec: Any, warmup: int, steps: int, own: Callable[[], float]
) -> tuple[float, float]:
    """The median of three alternating measurements of ``own()`` and of VFLGAN's
    in-process step on the same data and networks: ``(own, vflgan)`` in milliseconds."""
    vflgan = replace(spec, algorithm=replace(spec.algorithm, variant=Variant.VFLGAN))
    mine, theirs = [], []
    for _ in range(3):
        mine.append(own())
        theirs.append(inprocess_step_ms(vflgan, warmup, steps))
    return statistics.median(mine), statistics.median(theirs)


def measure_vertigan(results: dict[str, Any], spec: Any, warmup: int, steps: int) -> None:
    """``algorithm=vertigan``: its in-process step beside VFLGAN's on the same data and
    networks (``vertigan_over_vflgan``, issue 19's target: at most 1.2), the median of
    three alternating measurements each, and its DP mechanisms' steps."""
    own, theirs = beside_vflgan(spec, warmup, steps, lambda: inprocess_step_ms(spec, warmup, steps))
    results["inprocess_step_ms"] = own
    results["inprocess_vflgan_step_ms"] = theirs
    results["vertigan_over_vflgan"] = own / theirs
    print(
        f"in-process, vertigan {results['inprocess_step_ms']:8.2f} ms/step, vflgan "
        f"{results['inprocess_vflgan_step_ms']:8.2f} ms/step "
        f"({results['vertigan_over_vflgan']:.2f}x)",
        flush=True,
    )
    for name, mechanism in (("dp_gaussian", "vflgan_gaussian"), ("dpsgd", "dpsgd")):
        key = f"inprocess_{name}_step_ms"
        results[key] = inprocess_step_ms(with_dp(spec, mechanism), warmup, steps)
        print(f"in-process, vertigan, {mechanism:15s} {results[key]:8.2f} ms/step", flush=True)


def vdgan_iteration_ms(spec: Any, warmup: int, iterations: int) -> float:
    """Milliseconds per VDGAN iteration over the in-process grid (difference of two runs)."""
    from flwr_vflgan.strategies import VDGANStrategy

    def loop_seconds(n: int) -> float:
        train = replace(spec.algorithm.train, max_steps=n, epochs=spec.algorithm.train.epochs or 1)
        strategy = VDGANStrategy(
            replace(spec.algorithm, train=train),
            n_parties=spec.data.n_parties,
            seed=spec.seed,
            data_spec=spec.data,
            publish_rows=64,
        )
        nodes = [
            {"partition-id": i, "shared-seed": shared_seed_for(spec.seed)}
            for i in range(spec.data.n_parties)
        ]
        return strategy.start(InProcessGrid(make_client_app(), nodes)).train_seconds

    short, long = loop_seconds(warmup), loop_seconds(warmup + iterations)
    return (long - short) / iterations * 1e3


def measure_vdgan(results: dict[str, Any], spec: Any, warmup: int, steps: int) -> None:
    """``algorithm=vdgan``: an iteration on the in-process grid (``n_critic`` critic
    updates and a generator update, one exchange), per step-equivalent (divided by
    ``n_critic + 1``) beside VFLGAN's step in the same run (``vdgan_over_vflgan``, issue
    19's target: at most 1.2), the median of three alternating measurements each."""
    per_iteration = spec.algorithm.train.n_critic + 1
    iterations = max(1, steps // per_iteration)
    own, theirs = beside_vflgan(
        spec,
        warmup,
        steps,
        lambda: vdgan_iteration_ms(spec, max(1, warmup // per_iteration), iterations),
    )
    results["inprocess_iteration_ms"] = own
    results["inprocess_step_ms"] = own / per_iteration
    results["inprocess_vflgan_step_ms"] = theirs
    results["vdgan_over_vflgan"] = results["inprocess_step_ms"] / theirs
    print(
        f"in-process, vdgan {results['inprocess_iteration_ms']:8.2f} ms/iteration = "
        f"{results['inprocess_step_ms']:.2f} ms per step-equivalent, vflgan "
        f"{results['inprocess_vflgan_step_ms']:.2f} ms/step ({results['vdgan_over_vflgan']:.2f}x)",
        flush=True,
    )


def measure(cfg: DictConfig) -> dict[str, Any]:
    """The VFLGAN family's benchmark: every measurement above, printed as it is taken;
    returns the record (``algorithm=vertigan``: :func:`measure_vertigan` and the
    runtimes)."""
    bench = cfg.get("bench", {})
    warmup, steps = int(bench.get("warmup", 30)), int(bench.get("steps", 300))
    spec = to_run_spec(cfg, os.getcwd())
    torch.set_num_threads(spec.runtime.torch_threads)
    results = bench_record(spec, steps)
    if spec.algorithm.is_vdgan:
        measure_vdgan(results, spec, warmup, steps)
        return results  # its runtimes' rows are not measured yet
    if spec.algorithm.shares_backbone:
        measure_vertigan(results, spec, warmup, steps)
    else:
        measure_vflgan(results, spec, warmup, steps, int(bench.get("simulation_steps", 30)))
    k = int(bench.get("k", spec.algorithm.train.steps_per_exchange))
    job = int(bench.get("job_steps", 27450))
    results["steps_per_exchange"] = k
    results["runtimes"] = runtime_rows(
        spec, k, int(bench.get("runtime_steps", 16 * k)), job, bool(bench.get("deployment", True))
    )
    print(f"\nat {k} steps per exchange; the default job ({job} steps) projected:")
    for row in results["runtimes"]:
        print(
            f"  {row['runtime']:30s} {row['exchange_ms']:9.1f} ms/exchange "
            f"{row['step_ms']:8.2f} ms/step  {row['job_minutes']:7.1f} min",
            flush=True,
        )
    return results


def measure_vflgan(
    results: dict[str, Any], spec: Any, warmup: int, steps: int, sim_steps: int
) -> None:
    """VFLGAN's (and VFLGAN-base's) measurements: plain loop, in-process grid, a party's
    memory, the DP mechanisms, the simulation engine."""
    results["plain_step_ms"] = plain_step_ms(spec, warmup, steps)
    print(f"plain loop          {results['plain_step_ms']:8.2f} ms/step", flush=True)
    results["inprocess_step_ms"] = inprocess_step_ms(spec, warmup, steps)
    results["inprocess_over_plain"] = results["inprocess_step_ms"] / results["plain_step_ms"]
    print(
        f"in-process grid     {results['inprocess_step_ms']:8.2f} ms/step "
        f"({results['inprocess_over_plain']:.2f}x plain)",
        flush=True,
    )
    results["party_peak_rss_mb"] = party_peak_rss_mb(spec)
    print(f"one party's peak RSS {results['party_peak_rss_mb']:7.0f} MiB", flush=True)
    measure_dp(results, spec, warmup, steps)
    results["simulation_exchange_ms"] = simulation_exchange_ms(spec, sim_steps)
    print(f"simulation engine   {results['simulation_exchange_ms']:8.2f} ms/exchange", flush=True)
