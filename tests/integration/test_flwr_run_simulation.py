"""``flwr run . local``: Flower's managed local SuperLink runs the ServerApp and two
simulated SuperNodes (Ray), composing the Hydra config from ``--run-config``.

``flwr run`` starts the SuperLink detached and returns; the test finds it by its
``FLWR_HOME`` and stops it (and the simulation below it) by PID in the teardown.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FD_ONLY

from flwr_vflgan.data import load_dataset
from flwr_vflgan.simulations.flower_processes import (
    FlowerProcesses,
    fetch_run_log,
    find_local_superlink,
    flower_env,
    flwr_cli,
    free_ports,
    started_run_id,
    wait_for_run_metrics,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 300.0  # Ray's start-up dominates: ~20-40 s here, then ~0.1 s per exchange
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
]  # fmt: skip
OVERRIDES = f"train.max_steps=3 train.eval_rows=500 output.publish_rows=200 {FD_ONLY}"
FEDERATION_CONFIG = "num-supernodes=2 client-resources-num-cpus=1 init-args-num-cpus=2"


@pytest.fixture
def flwr_home(tmp_path: Path) -> Iterator[tuple[Path, FlowerProcesses]]:
    home = tmp_path / "flwr-home"
    procs = FlowerProcesses(tmp_path / "logs", env_marker=("FLWR_HOME", str(home)))
    yield home, procs
    # Also when the test failed before it adopted the SuperLink.
    adopted = {p.pid for p in procs.processes}
    for pid in find_local_superlink(home):
        if pid not in adopted:
            procs.adopt("local-superlink", pid, home / "local-superlink" / "superlink.log")
    survivors = procs.stop()
    assert not survivors, f"processes survived the teardown: {survivors}\n{procs.logs()}"
    assert not find_local_superlink(home)


def test_flwr_run_simulation_trains_and_publishes(
    tmp_path: Path, flwr_home: tuple[Path, FlowerProcesses]
) -> None:
    home, processes = flwr_home
    started = time.monotonic()
    http_port, control_port = free_ports(2)
    run_dir = tmp_path / "run"
    env = flower_env(
        home,
        {
            "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(http_port),
            "FLWR_LOCAL_CONTROL_API_PORT": str(control_port),
            # The parties' shared seed; simulated SuperNodes get only partition ids from
            # Flower, so it reaches the ClientApps through their environment.
            "FLWR_VFLGAN_SHARED_SEED": "20261122",
            # Flower's simulation process runs ray.init (which forks) while the ServerApp
            # thread already computes with numpy; a fork during a multi-threaded OpenBLAS
            # call deadlocks in OpenBLAS's fork handler (blas_thread_shutdown_), and the run
            # dies with "No heartbeat received from the task". One BLAS thread avoids it.
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        },
    )
    cli_log, run_log = processes.log_dir / "flwr-cli.log", processes.log_dir / "run.log"
    processes.log_dir.mkdir(parents=True)
    processes.add_log("flwr CLI", cli_log)
    processes.add_log("flwr log (the simulation)", run_log)
    pyproject = (REPO / "pyproject.toml").read_bytes()

    launched = flwr_cli(
        [
            "run",
            str(REPO),
            "local",
            "--federation-config",
            FEDERATION_CONFIG,
            "--run-config",
            f'overrides="{OVERRIDES}" run-dir="{run_dir}"',
        ],
        env,
        cli_log,
        timeout=120,
        cwd=tmp_path,
    )
    for pid in find_local_superlink(home):
        processes.adopt("local-superlink", pid, home / "local-superlink" / "superlink.log")
    run_id = started_run_id(launched.stdout)
    assert launched.returncode == 0 and run_id is not None, processes.logs()
    assert processes.processes, f"no local SuperLink found for {home}\n{processes.logs()}"
    # flwr run rewrites pyproject.toml when it has a [tool.flwr.federations] table.
    assert (REPO / "pyproject.toml").read_bytes() == pyproject, "flwr run changed pyproject.toml"

    def diagnostics() -> str:
        fetch_run_log(run_id, "local", env, run_log, cwd=tmp_path)
        hint = ""
        if "No module named 'flwr_vflgan." in run_log.read_text(errors="replace"):
            hint = (
                "HINT: flwr_vflgan.strategies, .clients and .simulations are the checkout's "
                "top-level folders, mapped by the install: an editable install older than "
                "pyproject.toml's package list lacks them; run pip install -e . again "
                "(docs/deployment.md)\n"
            )
        return hint + processes.logs()

    wait_for_run_metrics(
        processes,
        run_id,
        "local",
        run_dir,
        env=env,
        cli_log=cli_log,
        timeout=RUN_TIMEOUT - (time.monotonic() - started),
        diagnostics=diagnostics,
        cwd=tmp_path,
    )
    try:
        _check_outputs(run_dir)
        assert (REPO / "pyproject.toml").read_bytes() == pyproject, "pyproject.toml changed"
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnostics()}") from None


def _check_outputs(run_dir: Path) -> None:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 3 and metrics["n_parties"] == 2, metrics
    assert metrics["fd"] is not None and math.isfinite(metrics["fd"]) and metrics["fd"] > 0
    synthetic = pd.read_csv(run_dir / "synthetic.csv")
    assert list(synthetic.columns) == ADULT_COLUMNS
    assert len(synthetic) == 200 and metrics["synthetic_rows"] == 200
    real = load_dataset("adult")
    for column in real.schema.columns:
        values = synthetic[column.name]
        if column.kind == "categorical":
            unknown = set(values.dropna()) - set(real.frame[column.name].dropna())
            assert not unknown, f"{column.name}: values not in the data {unknown}"
        else:
            assert np.isfinite(values.to_numpy(dtype=float)).all(), column.name
