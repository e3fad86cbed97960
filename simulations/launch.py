"""Start a strategy on the runtime a :class:`~simulations.config.RunSpec` names.

Every family's pipeline and benchmark starts its strategy here: over a Grid it is given
(the ``flwr run`` ServerApp's), over the in-process grid, or in Flower's simulation
engine. A deployment is started by ``flwr run`` against a SuperLink, never from here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from flwr.serverapp import Grid

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.rng import Stream, derive_seed
from flwr_vflgan.strategies import InProcessGrid, RunStopped
from flwr_vflgan.strategies.flower_tuning import prompt_simulation_delivery

from .config import RunSpec

DEPLOYMENT_HINT = (
    "runtime=deployment runs on a SuperLink with SuperNodes: start them and launch with "
    "`flwr run . <federation> --run-config 'overrides=\"runtime=deployment ...\"'` "
    "(see docs/deployment.md)"
)


class Startable(Protocol):
    """What every strategy offers: ``start(grid)`` runs it to its result."""

    def start(self, grid: Grid) -> Any: ...


def shared_seed_for(seed: int) -> int:
    """The parties' shared seed for launcher-started runs (stands in for key agreement).

    The launcher gives it to the parties through their node settings or environment,
    never through the server.
    """
    return derive_seed(seed, Stream.NOISE, 0, 2)


def inprocess_nodes(n_parties: int, shared_seed: int) -> list[dict[str, Any]]:
    """Node configs of an in-process run: each party's id and the shared seed."""
    return [
        {P.NODE_PARTITION_ID: i, "num-partitions": n_parties, P.NODE_SHARED_SEED: shared_seed}
        for i in range(n_parties)
    ]


def strategy_settings(spec: RunSpec, progress: Callable | None = None) -> dict[str, Any]:
    """The keyword arguments every family's strategy takes from a run spec: the node
    count, the server's seed, the data spec (none in a deployment, where each party reads
    its own file), the runtime's exchange settings and the progress callback."""
    return {
        "n_parties": spec.data.n_parties,
        "seed": spec.seed,
        "data_spec": None if spec.runtime.kind == "deployment" else spec.data,
        "poll_interval": spec.runtime.poll_interval,
        "timeout": spec.runtime.timeout,
        "node_wait_timeout": spec.runtime.node_wait_timeout,
        "progress": progress,
        "key_agreement": spec.runtime.key_agreement,
        "rejoin_grace": spec.runtime.rejoin_grace,
        "align_ids": spec.runtime.align_ids,
    }


def start_on_runtime(
    strategy: Startable,
    spec: RunSpec,
    *,
    grid: Grid | None = None,
    observer: Callable | None = None,
) -> Any:
    """``strategy.start`` over ``grid`` if given, else over the runtime of ``spec``.

    ``observer`` sees every message of an in-process run (the privacy tests' wire tap).

    Raises
    ------
    ValueError
        ``runtime=deployment`` without a grid: a deployment is launched with ``flwr run``.
    """
    if grid is not None:
        return strategy.start(grid)
    shared = shared_seed_for(spec.seed)
    if spec.runtime.kind == "inprocess":
        nodes = inprocess_nodes(spec.data.n_parties, shared)
        return strategy.start(InProcessGrid(make_client_app(), nodes, observer=observer))
    if spec.runtime.kind == "simulation":
        return run_simulation_engine(strategy, spec, shared)
    raise ValueError(DEPLOYMENT_HINT)


def run_simulation_engine(strategy: Startable, spec: RunSpec, shared: int) -> Any:
    """Run ``strategy`` as the ServerApp of Flower's simulation engine, one simulated
    SuperNode per party; returns its result.

    Raises
    ------
    RunStopped
        The strategy raised (its exception is the cause) or the engine ended without a
        result.
    """
    from flwr.serverapp import ServerApp

    outcome: dict[str, Any] = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Any) -> None:
        try:
            outcome["result"] = strategy.start(grid)
        except Exception as exc:
            outcome["error"] = exc
            raise

    # Simulated SuperNodes only get partition ids from Flower: the shared seed reaches
    # the ClientApps through their environment (Ray workers inherit it), not the server.
    os.environ[P.ENV_SHARED_SEED] = str(shared)
    os.environ.setdefault("OMP_NUM_THREADS", str(spec.runtime.torch_threads))
    cpus = spec.runtime.cpus_per_node
    with prompt_simulation_delivery():
        _simulate(server_app, spec, cpus)
    if "error" in outcome:
        raise RunStopped(f"the simulation stopped: {outcome['error']}") from outcome["error"]
    if "result" not in outcome:
        raise RunStopped("the simulation ended without a result; see Flower's log above")
    return outcome["result"]


def _simulate(server_app: Any, spec: RunSpec, cpus: float) -> None:
    from flwr.simulation import run_simulation

    run_simulation(
        server_app=server_app,
        client_app=make_client_app(),
        num_supernodes=spec.data.n_parties,
        backend_config={
            "client_resources": {"num_cpus": cpus, "num_gpus": 0.0},
            "init_args": {
                "num_cpus": max(1, int(np.ceil(cpus * spec.data.n_parties))),
                "include_dashboard": False,
            },
        },
    )
