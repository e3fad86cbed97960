"""Start, watch and stop Flower's own processes (the integration tests, the benchmark
and :mod:`simulations.local_deployment` use it).

A caller starts every process (``flower-superlink``, ``flower-supernode``) with
:meth:`FlowerProcesses.start`, each in a new session with its output in a log file, and
:meth:`FlowerProcesses.stop` ends each one together with everything it spawned
(``flower-superexec``, ``flwr-serverapp``, ``flwr-clientapp``, ``flwr-simulation``,
Ray): ``flower-superexec`` opens a session of its own, so the process tree is collected
by parent PID before anything is signalled. Processes are signalled by PID or by the
process group of a PID in that tree, never by name. Failure messages carry the tail of
every log (:meth:`FlowerProcesses.logs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

BIN_DIR = Path(sys.executable).parent
HOST = "127.0.0.1"
STATUS_EVERY = 15.0  # seconds between two `flwr ls` while waiting for a run
T = TypeVar("T")


class DeploymentFailed(RuntimeError):
    """A started process exited, a wait timed out, or a run ended without its outputs;
    the message carries the tail of every log."""


def executable(name: str) -> str:
    """The console script ``name`` of this interpreter's environment (else from PATH)."""
    candidate = BIN_DIR / name
    if candidate.is_file():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed next to {sys.executable} nor on PATH")
    return found


def free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` distinct ports that are free on ``host`` right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def flower_env(flwr_home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for Flower's commands: our FLWR_HOME, no runtime installs."""
    env = dict(os.environ)
    env.update(
        {
            "FLWR_HOME": str(flwr_home),
            # Otherwise the SuperLink `uv sync`s the app's dependencies (torch) per run.
            "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "PATH": str(BIN_DIR) + os.pathsep + env.get("PATH", ""),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


def write_flower_config(
    flwr_home: Path, name: str, address: str, root_certificates: Path | None = None
) -> Path:
    """``$FLWR_HOME/config.toml`` naming one SuperLink connection ``name``: insecure, or
    over TLS trusting ``root_certificates``."""
    flwr_home.mkdir(parents=True, exist_ok=True)
    path = flwr_home / "config.toml"
    security = (
        "insecure = true"
        if root_certificates is None
        else f"root-certificates = {json.dumps(str(root_certificates))}"
    )
    path.write_text(
        f'[superlink]\ndefault = "{name}"\n\n[superlink.{name}]\naddress = "{address}"\n'
        f"{security}\n",
        encoding="utf-8",
    )
    return path


def wait_for_port(port: int, host: str = HOST, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


def started_run_id(output: str) -> int | None:
    """The run id in ``flwr run``'s output, if it started one."""
    found = re.search(r"Successfully started run (\d+)", output)
    return int(found.group(1)) if found else None


@dataclass
class FlowerProcess:
    """One process a test started (or found), with its log file."""

    name: str
    pid: int
    log_path: Path
    popen: subprocess.Popen | None = None

    def running(self) -> bool:
        """Whether the process has not exited."""
        if self.popen is not None:
            return self.popen.poll() is None
        return _alive(self.pid)


@dataclass
class ProcessInfo:
    """One line of the process table."""

    pid: int
    ppid: int
    pgid: int
    state: str
    args: str


def process_table() -> dict[int, ProcessInfo]:
    """Every process of this machine (``ps``; Linux and macOS)."""
    out = subprocess.run(
        ["ps", "-A", "-ww", "-o", "pid=,ppid=,pgid=,stat=,args="],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split(None, 4)
        if len(parts) < 4:
            continue
        pid, ppid, pgid = int(parts[0]), int(parts[1]), int(parts[2])
        table[pid] = ProcessInfo(pid, ppid, pgid, parts[3], parts[4] if len(parts) > 4 else "")
    return table


def descendants(roots: Iterable[int], table: Mapping[int, ProcessInfo] | None = None) -> set[int]:
    """``roots`` and every process below them (by parent PID)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    stack = [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, []))
    return found


def processes_with_env(name: str, value: str) -> set[int]:
    """PIDs whose environment holds ``name=value`` (Linux ``/proc``; empty elsewhere)."""
    needle = f"{name}={value}".encode()
    found: set[int] = set()
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.add(int(entry.name))
    found.discard(os.getpid())
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    info = process_table().get(pid)
    return info is not None and not info.state.startswith("Z")


def _signal_tree(pids: set[int], table: Mapping[int, ProcessInfo], sig: int) -> None:
    # A process group is signalled only when its leader is one of ours, so that nothing
    # outside the tree is touched; the others get the signal by PID.
    leaders = {pid for pid in pids if pid in table and table[pid].pgid == pid}
    for pgid in leaders:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@dataclass
class FlowerProcesses:
    """The processes of one test; :meth:`stop` ends all of them and their children."""

    log_dir: Path
    env_marker: tuple[str, str] | None = None
    """An environment entry every process of the test inherits (its FLWR_HOME): finds
    processes that lost their parent, e.g. Ray's agents."""
    processes: list[FlowerProcess] = field(default_factory=list)
    extra_logs: dict[str, Path] = field(default_factory=dict)
    seen: dict[int, str] = field(default_factory=dict)

    def start(
        self, name: str, args: list[str], env: Mapping[str, str], cwd: Path | None = None
    ) -> FlowerProcess:
        """Start ``args`` in a new session, stdout and stderr to ``<log_dir>/<name>.log``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        process = FlowerProcess(name, popen.pid, log_path, popen)
        self.processes.append(process)
        return process

    def adopt(self, name: str, pid: int, log_path: Path) -> FlowerProcess:
        """Take charge of a process someone else started (the managed local SuperLink)."""
        process = FlowerProcess(name, pid, log_path)
        self.processes.append(process)
        info = process_table().get(pid)
        if info is not None:
            self.seen[pid] = info.args
        return process

    def add_log(self, name: str, path: Path) -> None:
        """Show ``path`` in :meth:`logs` too."""
        self.extra_logs[name] = path

    def remember_children(self) -> None:
        """Record the current process tree, so that :meth:`stop` also ends processes
        that have lost their parent by then."""
        table = process_table()
        self.seen.update({pid: table[pid].args for pid in self._tree(table)})

    def check_running(self) -> None:
        """Fail, with the logs, if a process exited."""
        for process in self.processes:
            if not process.running():
                code = process.popen.returncode if process.popen is not None else "?"
                raise DeploymentFailed(
                    f"{process.name} (pid {process.pid}) exited with {code}\n{self.logs()}"
                )

    def logs(self, lines: int = 60) -> str:
        """The last ``lines`` lines of every log."""
        parts = []
        named = [(p.name, p.log_path) for p in self.processes] + list(self.extra_logs.items())
        for name, path in named:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                text = f"(cannot read: {exc})"
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"----- {name}: {path} (last {lines} lines) -----\n{tail}")
        return "\n".join(parts)

    def wait_until(
        self,
        probe: Callable[[], T | None],
        timeout: float,
        what: str,
        interval: float = 1.0,
        on_timeout: Callable[[], str] | None = None,
    ) -> T:
        """Poll ``probe`` until it returns something; fail with the logs after ``timeout``
        seconds or as soon as a started process exits."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value is not None:
                return value
            self.remember_children()
            self.check_running()
            if time.monotonic() > deadline:
                extra = on_timeout() if on_timeout is not None else ""
                raise DeploymentFailed(
                    f"timed out after {timeout:.0f}s waiting for {what}\n{extra}\n{self.logs()}"
                )
            time.sleep(interval)

    def stop(self, grace: float = 20.0) -> list[ProcessInfo]:
        """End every process and everything it spawned; returns what survived (empty
        when all ended).

        First SIGTERM to each started process alone, so that Flower shuts its children
        down and reaps them; after ``grace / 2`` seconds SIGTERM to every process group
        and process of the tree; after another ``grace / 2`` seconds SIGKILL.
        """
        deadline = time.monotonic() + grace / 2
        table = process_table()
        for pid in self._roots(table):
            if pid in {p.pid for p in self.processes}:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
        alive = self._wait_tree(deadline)
        if alive:
            _signal_tree(alive, process_table(), signal.SIGTERM)
            alive = self._wait_tree(time.monotonic() + grace / 2)
        if alive:
            _signal_tree(alive, process_table(), signal.SIGKILL)
            alive = self._wait_tree(time.monotonic() + 5.0)
        table = process_table()
        return [table[pid] for pid in sorted(alive) if pid in table]

    def _roots(self, table: Mapping[int, ProcessInfo]) -> list[int]:
        # A started process counts while Popen has not reaped it; a remembered PID only
        # while it still runs the same command line (a PID the system has reused for
        # something else is never ours).
        started = [p.pid for p in self.processes if p.popen is not None and p.running()]
        remembered = [
            pid for pid, args in self.seen.items() if pid in table and table[pid].args == args
        ]
        marked = (
            sorted(processes_with_env(*self.env_marker) & set(table)) if self.env_marker else []
        )
        return started + remembered + marked

    def _tree(self, table: Mapping[int, ProcessInfo]) -> set[int]:
        return descendants(self._roots(table), table)

    def _wait_tree(self, deadline: float) -> set[int]:
        """Wait until the tree has ended or ``deadline``; the PIDs still running."""
        while True:
            self._reap()
            table = process_table()
            tree = self._tree(table)
            self.seen.update({pid: table[pid].args for pid in tree})
            alive = {pid for pid in tree if not table[pid].state.startswith("Z")}
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.2)

    def _reap(self) -> None:
        for process in self.processes:
            if process.popen is not None:
                process.popen.poll()


def find_local_superlink(flwr_home: Path) -> list[int]:
    """PIDs of the managed local SuperLink that ``flwr run`` started for ``flwr_home``
    (it writes its database under ``$FLWR_HOME/local-superlink``)."""
    marker = str(flwr_home / "local-superlink")
    return sorted(
        info.pid
        for info in process_table().values()
        if "flower-superlink" in info.args and marker in info.args
    )


def flwr_cli(
    args: list[str], env: Mapping[str, str], log_path: Path, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one ``flwr`` CLI command to completion (its output also goes to ``log_path``)."""
    result = subprocess.run(
        [executable("flwr"), *args],
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(
            f"$ flwr {' '.join(args)}\n{result.stdout}{result.stderr}[exit {result.returncode}]\n"
        )
    return result


def run_status(
    run_id: int, superlink: str, env: Mapping[str, str], log_path: Path, cwd: Path | None = None
) -> str | None:
    """The status of a run (``flwr ls --run-id``), e.g. ``running`` or ``finished:failed``."""
    try:
        result = flwr_cli(
            ["ls", superlink, "--run-id", str(run_id), "--format", "json"],
            env,
            log_path,
            timeout=60,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired:
        return None
    try:
        runs = json.loads(result.stdout).get("runs", [])
    except (json.JSONDecodeError, AttributeError):
        return None
    return str(runs[0].get("status")) if runs else None


def fetch_run_log(
    run_id: int, superlink: str, env: Mapping[str, str], log_path: Path, cwd: Path | None = None
) -> None:
    """Write the run's log as the SuperLink keeps it (``flwr log --show``: the
    ServerApp's output) to ``log_path``."""
    try:
        result = subprocess.run(
            [executable("flwr"), "log", str(run_id), superlink, "--show"],
            capture_output=True,
            text=True,
            env=dict(env),
            cwd=cwd,
            timeout=60,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        text = result.stdout + result.stderr
    except subprocess.TimeoutExpired:
        text = "(flwr log timed out after 60 s)"
    log_path.write_text(text, encoding="utf-8")


def wait_for_run_metrics(
    processes: FlowerProcesses,
    run_id: int,
    superlink: str,
    run_dir: Path,
    *,
    env: Mapping[str, str],
    cli_log: Path,
    timeout: float,
    diagnostics: Callable[[], str],
    status_every: float = STATUS_EVERY,
    cwd: Path | None = None,
) -> None:
    """Wait until the run has written ``<run_dir>/metrics.json``.

    Asks the SuperLink for the run's status (:func:`run_status`) every ``status_every``
    seconds, so that a run that ended without its outputs fails at once rather than at
    ``timeout``. Fails with ``diagnostics()`` when the run ended without
    ``metrics.json``, on timeout, and (with the logs) as soon as a started process exits.
    """
    metrics = run_dir / "metrics.json"
    last_status = time.monotonic()

    def finished() -> str | None:
        nonlocal last_status
        if metrics.is_file():
            return "metrics"
        if time.monotonic() - last_status > status_every:
            last_status = time.monotonic()
            status = run_status(run_id, superlink, env, cli_log, cwd=cwd)
            if status is not None and status.startswith("finished"):
                return status
        return None

    outcome = processes.wait_until(finished, timeout, str(metrics), on_timeout=diagnostics)
    if outcome != "metrics":
        time.sleep(2)  # the status may change just before the outputs are renamed
        if not metrics.is_file():
            raise DeploymentFailed(f"run ended {outcome}\n{diagnostics()}")
