"""``python -m simulations.audit`` in a subprocess, as a user runs it (shared by the audit
tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_audit(out: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """The command with ``hydra.run.dir=out`` and ``args``; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "simulations.audit", f"hydra.run.dir={out}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


# The module's ``__main__`` (``run_hydra_main(..., main)``) once per command, in one
# process: a refused command fails in well under a second, its imports cost ~6 s.
_SEVERAL = """
import contextlib, io, json, sys
from flwr_vflgan.simulations.audit import main
from flwr_vflgan.simulations.cli import run_hydra_main
results = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["simulations.audit", *argv]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = run_hydra_main("simulations.audit", main)
    results.append([status, err.getvalue()])
print(json.dumps(results))
"""


def run_refused_audits(
    out: Path, commands: Sequence[Sequence[str]], timeout: float = 400
) -> list[tuple[int, str]]:
    """Each of ``commands`` (the arguments after ``hydra.run.dir=out``) as the command
    runs it, one after another in one process; the exit status and stderr of each. For
    settings refused before any training: a test of each also through ``run_audit``
    checks the real command line."""
    argvs = [[f"hydra.run.dir={out}", *command] for command in commands]
    done = subprocess.run(
        [sys.executable, "-c", _SEVERAL, json.dumps(argvs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [(int(status), err) for status, err in json.loads(done.stdout.splitlines()[-1])]
