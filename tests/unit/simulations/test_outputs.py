"""One writer per run directory: a second run is refused at once, naming the holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flwr_vflgan.simulations.outputs import LOCK_NAME, RunDirectoryBusy, run_directory_lock

_HOLDER = """
import sys, time
from pathlib import Path
from flwr_vflgan.simulations.outputs import run_directory_lock
with run_directory_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path: Path):
    with (
        run_directory_lock(tmp_path / "run"),
        pytest.raises(RunDirectoryBusy, match=rf"in use by pid {os.getpid()} on "),
        run_directory_lock(tmp_path / "run"),
    ):
        pass
    with run_directory_lock(tmp_path / "run"):  # released on exit
        pass


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path: Path):
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(RunDirectoryBusy, match=rf"pid {holder.pid}"),
            run_directory_lock(tmp_path / "run"),
        ):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        deadline = time.monotonic() + 10
        while True:  # the kernel drops the lock with the process
            try:
                with run_directory_lock(tmp_path / "run"):
                    break
            except RunDirectoryBusy:
                assert time.monotonic() < deadline, "the killed holder's lock was not released"
                time.sleep(0.1)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert (tmp_path / "run" / LOCK_NAME).exists()
