"""Checkpoints that let an interrupted run resume exactly.

Each party writes its own checkpoint into its own directory (its models never leave it);
the server writes the shared discriminator and the run's bookkeeping. Files are written
to a temporary name and renamed, so a crash never leaves a half-written checkpoint. A
checkpoint stores arrays and JSON metadata only (``numpy.savez``, loaded without pickle),
with a schema version and the configuration it was written under.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from flwr_vflgan.atomic import write_atomically

CHECKPOINT_SCHEMA_VERSION = 1
_KEEP = 2


def _atomic_savez(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)

    def save(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, **dict(arrays))  # type: ignore[arg-type]

    write_atomically(path, save)


def _meta_array(meta: Mapping[str, object]) -> np.ndarray:
    return np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)


def _read_meta(data: Mapping[str, np.ndarray], path: Path) -> dict:
    if "__meta__" not in data:
        raise ValueError(f"{path} is not a flwr-vflgan checkpoint (no metadata)")
    meta = json.loads(bytes(data["__meta__"]).decode())
    if meta.get("schema_version") != CHECKPOINT_SCHEMA_VERSION:
        raise ValueError(
            f"{path} has checkpoint schema {meta.get('schema_version')}, "
            f"this version reads {CHECKPOINT_SCHEMA_VERSION}"
        )
    return meta


def _prune(directory: Path, prefix: str) -> None:
    files = sorted(directory.glob(f"{prefix}-*.npz"), key=lambda p: int(p.stem.split("-")[-1]))
    for old in files[:-_KEEP]:
        old.unlink(missing_ok=True)


def save_party_checkpoint(
    directory: Path,
    next_step: int,
    flat: np.ndarray,
    optimizer_steps: Sequence[int],
    extra: Mapping[str, np.ndarray],
    config_json: str,
) -> Path:
    """Write a party's state to resume at ``next_step``; keeps the last two."""
    meta = {
        "schema_version": CHECKPOINT_SCHEMA_VERSION,
        "next_step": next_step,
        "optimizer_steps": list(optimizer_steps),
        "config": config_json,
    }
    path = directory / f"step-{next_step}.npz"
    _atomic_savez(path, {"flat": flat, **extra, "__meta__": _meta_array(meta)})
    _prune(directory, "step")
    return path


def load_party_checkpoint(
    directory: Path, step: int, config_json: str
) -> tuple[dict[str, np.ndarray], list[int]]:
    """Arrays and optimizer step counters of the checkpoint for ``step``."""
    path = directory / f"step-{step}.npz"
    if not path.is_file():
        found = sorted(p.name for p in directory.glob("step-*.npz")) if directory.is_dir() else []
        raise FileNotFoundError(f"no checkpoint for step {step} at {path}; found {found}")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = _read_meta(arrays, path)
    if json.loads(meta["config"]) != json.loads(config_json):
        raise ValueError(f"{path} was written under a different algorithm configuration")
    arrays.pop("__meta__")
    return arrays, [int(s) for s in meta["optimizer_steps"]]


def save_server_checkpoint(
    directory: Path, next_step: int, arrays: Mapping[str, np.ndarray], meta: Mapping
) -> Path:
    """Write the server's state (shared discriminator and bookkeeping) for ``next_step``."""
    full = {"schema_version": CHECKPOINT_SCHEMA_VERSION, "next_step": next_step, **meta}
    path = directory / f"server-{next_step}.npz"
    _atomic_savez(path, {**arrays, "__meta__": _meta_array(full)})
    _prune(directory, "server")
    return path


def latest_server_checkpoint(directory: Path) -> tuple[dict[str, np.ndarray], dict] | None:
    """The newest server checkpoint in ``directory``, or ``None``."""
    return latest_checkpoint(directory, "server")


def latest_checkpoint(
    directory: Path, prefix: str = "step"
) -> tuple[dict[str, np.ndarray], dict] | None:
    """The arrays and metadata of the newest ``<prefix>-<step>.npz`` in ``directory`` (a
    party's are ``step``, the server's ``server``), or ``None``."""
    if not directory.is_dir():
        return None
    files = sorted(directory.glob(f"{prefix}-*.npz"), key=lambda p: int(p.stem.split("-")[-1]))
    if not files:
        return None
    with np.load(files[-1], allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = _read_meta(arrays, files[-1])
    arrays.pop("__meta__")
    return arrays, meta
