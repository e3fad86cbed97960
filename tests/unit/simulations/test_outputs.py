"""One writer per run directory: a second run is refused at once, naming the holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flwr_vflgan.simulations.outputs import (
    LOCK_NAME,
    RunDirectoryBusy,
    published_outputs,
    run_directory_lock,
)

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


def test_published_outputs_move_in_on_success_and_vanish_on_failure(tmp_path: Path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".publish-0123").mkdir()  # left by a killed run
    with published_outputs(run_dir) as out:
        (out / "synthetic.csv").write_text("new table")
        (out / "metrics.json").write_text("{}")
        assert not (run_dir / "synthetic.csv").exists()  # nothing visible before the end
    assert sorted(p.name for p in run_dir.iterdir()) == ["metrics.json", "synthetic.csv"]

    with pytest.raises(RuntimeError, match="evaluation failed"), published_outputs(run_dir) as out:
        (out / "synthetic.csv").write_text("half a run")
        raise RuntimeError("evaluation failed")
    assert (run_dir / "synthetic.csv").read_text() == "new table"
    assert sorted(p.name for p in run_dir.iterdir()) == ["metrics.json", "synthetic.csv"]


def test_the_previous_completion_mark_goes_before_the_first_file_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Killed while moving (here: the second move fails), the directory must not hold the
    # old run's metrics.json beside the new run's table.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text("old run")
    real_replace = os.replace
    moves: list[str] = []

    def replace_then_die(src: object, dst: object) -> None:
        moves.append(Path(str(dst)).name)
        if len(moves) == 2:
            raise OSError("killed")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace_then_die)
    with pytest.raises(OSError, match="killed"), published_outputs(run_dir) as out:
        for name in ("config.json", "synthetic.csv", "metrics.json"):
            (out / name).write_text("new run")
    assert moves == ["config.json", "synthetic.csv"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.json"]
