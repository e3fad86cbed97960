"""A run directory's outputs: one writer at a time, published whole, JSON that numpy
values do not break."""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from flwr_vflgan.atomic import write_atomically

from .config import RunSpec

__all__ = [
    "LOCK_NAME",
    "RunDirectoryBusy",
    "json_default",
    "published_outputs",
    "run_directory_lock",
]

log = logging.getLogger(__name__)


def json_default(value: Any) -> Any:
    """JSON for numpy scalars and arrays (metric functions may return them)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


LOCK_NAME = ".run.lock"


class RunDirectoryBusy(RuntimeError):
    """Another process holds the run directory (the message names it)."""


def write_json(path: Path, value: Any) -> None:
    """``value`` as indented JSON at ``path`` (numpy values and paths through
    :func:`json_default`), written beside it and renamed into place."""
    write_atomically(
        path, lambda p: p.write_text(json.dumps(value, indent=2, default=json_default))
    )


@contextmanager
def run_directory_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for this process: one writer at a time.

    An exclusive ``flock`` on ``<run_dir>/.run.lock``, which names its holder (pid and
    host). The operating system releases it when the holder exits, however it exits, so
    a killed run never leaves a stale lock and a rerun resumes at once.

    Raises
    ------
    RunDirectoryBusy
        Another process holds the directory; the message names its pid and host.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, as before
        log.warning(
            "no file locks on this platform: %s is not protected from a second run", run_dir
        )
        yield
        return
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise RunDirectoryBusy(
                f"run directory {run_dir} is in use by {holder}: wait for that run to end, "
                "or give this one another hydra.run.dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)


COMPLETION_MARK = "metrics.json"
"""Written last: a run directory without it holds no finished run."""


@contextmanager
def published_outputs(run_dir: Path) -> Iterator[Path]:
    """A hidden folder in ``run_dir`` to write a run's outputs into; when the block ends
    without an error they move into ``run_dir`` with ``metrics.json`` last, and on an
    error the folder is removed and ``run_dir`` keeps what it had.

    The previous run's ``metrics.json`` is removed before the first file moves, so a
    process killed while moving leaves a directory without ``metrics.json``, never a
    ``metrics.json`` beside another run's table. Folders left by a killed run are removed
    first (the caller holds :func:`run_directory_lock`, so no other run owns them).
    """
    for stale in run_dir.glob(".publish-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = run_dir / f".publish-{secrets.token_hex(6)}"
    staging.mkdir()
    try:
        yield staging
        names = sorted(p.name for p in staging.iterdir() if p.name != COMPLETION_MARK)
        (run_dir / COMPLETION_MARK).unlink(missing_ok=True)
        for name in names:
            os.replace(staging / name, run_dir / name)
        if (staging / COMPLETION_MARK).exists():
            os.replace(staging / COMPLETION_MARK, run_dir / COMPLETION_MARK)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def holding_run(spec: RunSpec) -> Iterator[None]:
    """What every family's ``run`` does around its work: hold ``spec.run_dir``
    (:func:`run_directory_lock`) with PyTorch at the run's thread count."""
    import torch

    with run_directory_lock(spec.run_dir):
        torch.set_num_threads(spec.runtime.torch_threads)
        yield
