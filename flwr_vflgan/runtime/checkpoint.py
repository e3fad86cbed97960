"""Checkpoints that let an interrupted run resume exactly.

Each party writes its own checkpoint into its own directory (its models never leave it);
the server writes the shared discriminator and the run's bookkeeping. Files are written
to a temporary name and renamed, so a crash never leaves a half-written checkpoint. A
checkpoint stores arrays and JSON metadata only (``numpy.savez``, loaded without pickle),
with a schema version and the configuration it was written under.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from flwr_vflgan.atomic import write_atomically

from .faults import pause_point

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


def config_differences(saved: object, current: object, at: str = "") -> list[str]:
    """Where two configurations (parsed JSON) differ, one entry per leaf:
    ``train.batch_size: 56 in the checkpoint, 64 now``."""
    if isinstance(saved, dict) and isinstance(current, dict):
        out = []
        for key in sorted(set(saved) | set(current), key=str):
            path = f"{at}.{key}" if at else str(key)
            if key not in saved:
                out.append(f"{path}: absent in the checkpoint, {current[key]!r} now")
            elif key not in current:
                out.append(f"{path}: {saved[key]!r} in the checkpoint, absent now")
            else:
                out.extend(config_differences(saved[key], current[key], path))
        return out
    if saved != current:
        return [f"{at or 'the configuration'}: {saved!r} in the checkpoint, {current!r} now"]
    return []


# Settings sections that only one algorithm family reads: another family's checkpoint
# resumes whatever they hold (a VFLGAN run must not be refused because latent diffusion's
# or VT-GAN's defaults changed since it was written).
_ONLY_READ_BY = {
    "latent": ("latent_diffusion",),
    "vtgan": ("vtgan", "ctgan"),
    "gs_wgan": ("gs_wgan",),
}


def read_settings(config: object) -> object:
    """``config`` without the sections its algorithm never reads, at any depth: a mapping
    with a ``variant`` key is an algorithm configuration."""
    if isinstance(config, list):
        return [read_settings(item) for item in config]
    if not isinstance(config, dict):
        return config
    variant = config.get("variant")
    return {
        key: read_settings(value)
        for key, value in config.items()
        if not (isinstance(variant, str) and variant not in _ONLY_READ_BY.get(key, (variant,)))
    }


def refuse_other_config(
    where: Path,
    saved_json: str,
    current_json: str,
    read_saved: Callable[[str], str] | None = None,
) -> None:
    """Raise unless a checkpoint's configuration is this run's. ``read_saved`` turns the
    checkpoint's configuration into the form this version writes (settings added since it
    was written take their defaults: ``flwr_vflgan.config.settings_as_read_now``).

    Raises
    ------
    ValueError
        Naming every key that differs (the first five) and what to do.
    """
    if read_saved is not None:
        saved_json = read_saved(saved_json)
    differences = config_differences(
        read_settings(json.loads(saved_json)), read_settings(json.loads(current_json))
    )
    if differences:
        shown = "; ".join(differences[:5])
        more = f" (and {len(differences) - 5} more)" if len(differences) > 5 else ""
        raise ValueError(
            f"the checkpoint in {where} was written for a different configuration: "
            f"{shown}{more}; rerun with the checkpoint's settings to resume, or use a new run "
            "directory to start afresh"
        )


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
    directory: Path,
    step: int,
    config_json: str,
    read_saved: Callable[[str], str] | None = None,
) -> tuple[dict[str, np.ndarray], list[int]]:
    """Arrays and optimizer step counters of the checkpoint for ``step`` (its configuration
    checked against ``config_json`` by :func:`refuse_other_config`)."""
    path = directory / f"step-{step}.npz"
    if not path.is_file():
        found = sorted(p.name for p in directory.glob("step-*.npz")) if directory.is_dir() else []
        raise FileNotFoundError(f"no checkpoint for step {step} at {path}; found {found}")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = _read_meta(arrays, path)
    refuse_other_config(path, meta["config"], config_json, read_saved)
    arrays.pop("__meta__")
    return arrays, [int(s) for s in meta["optimizer_steps"]]


def save_server_checkpoint(
    directory: Path, next_step: int, arrays: Mapping[str, np.ndarray], meta: Mapping
) -> Path:
    """Write the server's state (shared discriminator and bookkeeping) for ``next_step``.

    The server writes after every party wrote its own, so the fault tests' pause point
    ``server-checkpoint`` (:mod:`~flwr_vflgan.runtime.faults`) follows it: a holder killed
    there resumes from this checkpoint."""
    full = {"schema_version": CHECKPOINT_SCHEMA_VERSION, "next_step": next_step, **meta}
    path = directory / f"server-{next_step}.npz"
    _atomic_savez(path, {**arrays, "__meta__": _meta_array(full)})
    _prune(directory, "server")
    pause_point("server-checkpoint")
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
