"""``python -m simulations.audit`` in a subprocess, as a user runs it (shared by the audit
tests)."""

from __future__ import annotations

import os
import subprocess
import sys
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
