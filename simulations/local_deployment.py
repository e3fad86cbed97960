"""A whole Flower deployment on this machine: SuperLink, one node per party, ``flwr run``.

    python -m simulations.local_deployment --nodes party --work-dir runs/deploy
    python -m simulations.local_deployment --nodes supernode --work-dir runs/deploy-stock \\
        -- train.max_steps=40

Cuts the dataset into party files (as ``simulations.export_parties`` does), starts an
unmodified ``flower-superlink`` on 127.0.0.1, one ``flwr-vflgan-node`` (``--nodes
party``) or one stock ``flower-supernode`` (``--nodes supernode``) per party with its own
file and a freshly drawn shared seed, launches ``flwr run`` with the given Hydra
overrides (``runtime=deployment`` is added), waits for the run's ``metrics.json`` and
stops every process it started, by PID, also on failure or Ctrl-C. Everything (party
files, logs, the run directory) goes under ``--work-dir``; it prints one line with the
wall time and where the outputs are. ``simulations.bench`` uses it for its deployment
rows. It runs from a source checkout (``flwr run`` needs the app's ``pyproject.toml``).
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import ExportConfig, compose_run_config, to_run_spec
from flwr_vflgan.simulations.export_parties import export_parties, node_config_text
from flwr_vflgan.simulations.flower_processes import (
    HOST,
    STATUS_EVERY,
    DeploymentFailed,
    FlowerProcesses,
    executable,
    fetch_run_log,
    flower_env,
    flwr_cli,
    free_ports,
    started_run_id,
    wait_for_port,
    wait_for_run_metrics,
    write_flower_config,
)
from flwr_vflgan.simulations.tls import LocalPKI, make_local_pki

NodeKind = Literal["party", "supernode"]
FEDERATION = "local-deployment"
_SEED_BOUND = 2**62
APP_DIR = Path(__file__).resolve().parents[1]
"""The checkout root: ``flwr run`` ships it (its ``pyproject.toml`` names the apps)."""


@dataclass(frozen=True)
class DeploymentResult:
    """A finished local deployment."""

    metrics: dict
    run_dir: Path
    wall_seconds: float
    """From starting the SuperLink to ``metrics.json``."""
    log_dir: Path
    node_peak_rss_mb: list[float]
    """Peak resident memory of each party node process (Linux; empty elsewhere). For stock
    SuperNodes it is the SuperNode's own, not its per-message ClientApp processes'."""


def peak_rss_mb(pid: int) -> float | None:
    """A running process's peak resident memory in MiB (``VmHWM``; ``None`` if unknown)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024
    return None


def node_args(
    kind: NodeKind,
    superlink: str,
    node_config: str,
    runtime_port: int,
    security: Sequence[str] = ("--insecure",),
) -> list[str]:
    """The command line of one party's node (a stock SuperNode also serves its
    ClientApps' Runtime API on ``runtime_port``); ``security`` is ``--insecure`` or the
    TLS and authentication options (:meth:`~simulations.tls.LocalPKI.node_args`)."""
    if kind == "party":
        return [
            executable("flwr-vflgan-node"),
            *security,
            "--superlink",
            superlink,
            "--node-config",
            node_config,
        ]
    return [
        executable("flower-supernode"),
        *security,
        "--superlink",
        superlink,
        "--host",
        HOST,
        "--port",
        str(runtime_port),
        "--node-config",
        node_config,
    ]


def start_superlink(
    procs: FlowerProcesses,
    port: int,
    env: Mapping[str, str],
    cwd: Path,
    security: Sequence[str] = ("--insecure",),
) -> None:
    """A ``flower-superlink`` on 127.0.0.1:``port`` (all its APIs share the port), insecure
    or with ``security`` (:meth:`~simulations.tls.LocalPKI.superlink_args`), without
    runtime dependency installs; returns once it accepts connections."""
    procs.start(
        "superlink",
        [
            executable("flower-superlink"),
            *security,
            "--host",
            HOST,
            "--port",
            str(port),
            "--disable-runtime-dependency-installation",
        ],
        env,
        cwd=cwd,
    )
    procs.wait_until(lambda: True if wait_for_port(port) else None, 60, "the SuperLink", 0.5)


def launch_run(
    procs: FlowerProcesses,
    federation: str,
    run_overrides: str,
    run_dir: Path,
    *,
    env: Mapping[str, str],
    cwd: Path,
) -> int:
    """``flwr run`` this checkout on ``federation`` with the Hydra ``run_overrides``,
    writing into ``run_dir``; returns the run id once the SuperLink has started it (a
    ``run_dir`` holding checkpoints resumes from them).

    Raises
    ------
    DeploymentFailed
        The CLI did not start the run.
    """
    run_config = f"overrides={json.dumps(run_overrides)} run-dir={json.dumps(str(run_dir))}"
    launched = flwr_cli(
        ["run", str(APP_DIR), federation, "--run-config", run_config],
        env,
        procs.log_dir / "flwr-cli.log",
        timeout=180,
        cwd=cwd,
    )
    run_id = started_run_id(launched.stdout)
    if launched.returncode != 0 or run_id is None:
        raise DeploymentFailed(f"flwr run did not start the run\n{procs.logs()}")
    return run_id


def launch_and_wait(
    procs: FlowerProcesses,
    federation: str,
    run_overrides: str,
    run_dir: Path,
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    status_every: float = STATUS_EVERY,
) -> Callable[[], str]:
    """``flwr run`` this checkout on ``federation`` with the Hydra ``run_overrides`` and
    wait for ``<run_dir>/metrics.json``; returns a function that gathers every log and the
    run's log from the SuperLink, for failure messages. The run's status is asked every
    ``status_every`` seconds, and the wait fails once it has ended without the outputs
    (``math.inf``: never asked, for a run that a later ``flwr run`` may take over).

    Raises
    ------
    DeploymentFailed
        The run did not start, ended without its outputs, or ``timeout`` passed.
    """
    cli_log, run_log = procs.log_dir / "flwr-cli.log", procs.log_dir / "run.log"
    procs.add_log("flwr CLI", cli_log)
    procs.add_log("the run's ServerApp (flwr log)", run_log)
    run_id = launch_run(procs, federation, run_overrides, run_dir, env=env, cwd=cwd)

    def diagnostics() -> str:
        fetch_run_log(run_id, federation, env, run_log, cwd=cwd)
        return procs.logs()

    wait_for_run_metrics(
        procs,
        run_id,
        federation,
        run_dir,
        env=env,
        cli_log=cli_log,
        timeout=timeout,
        diagnostics=diagnostics,
        status_every=status_every,
        cwd=cwd,
    )
    return diagnostics


def register_nodes(
    procs: FlowerProcesses, pki: LocalPKI, env: Mapping[str, str], cwd: Path
) -> None:
    """Register every party's public key with the SuperLink (``flwr supernode register``),
    so that node authentication admits those nodes and no other.

    Raises
    ------
    DeploymentFailed
        The CLI could not register a key.
    """
    for i, (_, public) in enumerate(pki.node_keys):
        log = procs.log_dir / "flwr-cli.log"
        done = flwr_cli(["supernode", "register", str(public), FEDERATION], env, log, 60, cwd)
        if done.returncode != 0:
            raise DeploymentFailed(f"could not register party {i}'s node key\n{procs.logs()}")


def deploy(
    overrides: Sequence[str],
    work_dir: Path,
    *,
    nodes: NodeKind = "party",
    timeout: float = 3600.0,
    data: DataSpec | None = None,
    secure: bool = False,
) -> DeploymentResult:
    """Run one deployment end to end and return its metrics.

    ``data`` is the table and column split to export (default: composed from
    ``overrides``; a caller that runs inside Hydra already has it and must pass it).
    ``secure``: TLS with a CA made for the run, SuperNode authentication with each party's
    key registered through ``flwr supernode register`` (:mod:`simulations.tls`). With
    ``runtime.key_agreement=true`` in ``overrides`` no node is given a shared seed.

    Raises
    ------
    DeploymentFailed
        A process exited, the run ended without outputs, or ``timeout`` passed; the
        message carries the tail of every log.
    """
    started = time.monotonic()
    work_dir = work_dir.resolve()
    run_dir, parties, flwr_home = work_dir / "run", work_dir / "parties", work_dir / "flwr-home"
    procs = FlowerProcesses(work_dir / "logs", env_marker=("FLWR_HOME", str(flwr_home)))
    link_port, *node_ports = free_ports(1 + 8)
    superlink = f"{HOST}:{link_port}"
    run_overrides = shlex.join(["runtime=deployment", *overrides])
    spec = to_run_spec(compose_run_config(run_overrides), run_dir)
    data = data if data is not None else spec.data
    env = flower_env(flwr_home, {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    try:
        exported = export_parties(data, ExportConfig(out_dir=str(parties), superlink=superlink))
        n = len(exported.data_files)
        pki = make_local_pki(work_dir / "tls", n) if secure else None
        start_superlink(
            procs, link_port, env, work_dir, pki.superlink_args() if pki else ("--insecure",)
        )
        write_flower_config(flwr_home, FEDERATION, superlink, pki.ca_cert if pki else None)
        if pki is not None:
            register_nodes(procs, pki, env, work_dir)
        shared_seed = None if spec.runtime.key_agreement else secrets.randbelow(_SEED_BOUND)
        for i, path in enumerate(exported.data_files):
            node_config = node_config_text(i, n, path, shared_seed)
            security = pki.node_args(i) if pki else ("--insecure",)
            command = node_args(nodes, superlink, node_config, node_ports[i], security)
            procs.start(f"{nodes}-node-{i}", command, env, cwd=work_dir)
        launch_and_wait(
            procs,
            FEDERATION,
            run_overrides,
            run_dir,
            env=env,
            cwd=work_dir,
            timeout=timeout - (time.monotonic() - started),
        )
        metrics = json.loads((run_dir / "metrics.json").read_text())
        peaks = [peak_rss_mb(p.pid) for p in procs.processes if "-node-" in p.name]
        wall = time.monotonic() - started
        return DeploymentResult(
            metrics, run_dir, wall, procs.log_dir, [p for p in peaks if p is not None]
        )
    finally:
        _stop(procs)


def _stop(procs: FlowerProcesses) -> None:
    survivors = procs.stop()
    if survivors:
        print(f"local_deployment: processes survived the shutdown: {survivors}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; exit status 2 with one line on bad input or a failed deployment."""
    parser = argparse.ArgumentParser(prog="python -m simulations.local_deployment")
    parser.add_argument("--nodes", choices=["party", "supernode"], default="party")
    parser.add_argument("--work-dir", required=True, type=Path)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument(
        "--secure",
        action="store_true",
        help="TLS with a CA made for the run, and SuperNode authentication",
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the run")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.work_dir.exists() and any(args.work_dir.iterdir()):
        print(
            f"local_deployment: error: --work-dir {args.work_dir} is not empty; give a new folder",
            file=sys.stderr,
        )
        return 2
    try:
        result = deploy(
            args.overrides,
            args.work_dir,
            nodes=args.nodes,
            timeout=args.timeout,
            secure=args.secure,
        )
    except (ValueError, FileExistsError, FileNotFoundError) as exc:
        print(f"local_deployment: error: {exc}", file=sys.stderr)
        return 2
    except DeploymentFailed as exc:
        first = str(exc).splitlines()[0]
        print(
            f"local_deployment: error: {first} (logs in {args.work_dir / 'logs'})",
            file=sys.stderr,
        )
        return 2
    m = result.metrics
    peaks = ", ".join(f"{p:.0f}" for p in result.node_peak_rss_mb)
    print(
        f"local_deployment: {m['steps']} steps in {m['exchanges']} exchanges on {args.nodes} "
        f"nodes: {result.wall_seconds:.0f} s in all, {m.get('train_seconds', float('nan')):.0f} s "
        f"training; node peak RSS {peaks} MiB; outputs in {result.run_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
