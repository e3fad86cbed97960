"""A party's bookkeeping between messages: a dataclass kept in ``context.state`` as JSON
with a schema version (a deployment runs every message in a new process)."""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
from flwr.app import ConfigRecord, Context

from flwr_vflgan.config import settings_as_read_now
from flwr_vflgan.runtime.blocks import StepBlock
from flwr_vflgan.runtime.checkpoint import load_party_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.flat import FlatState

Meta = TypeVar("Meta", bound="BlockState")


class BlockState:
    """Mixin for a party's state dataclass; its JSON carries ``schema_version``
    (:data:`SCHEMA_VERSION`), and a ``pending: StepBlock`` field, if it has one, travels
    as ``[start, count]``.

    ``WHO`` names the holder in errors (``party``, ``client``).
    """

    WHO: ClassVar[str] = "party"
    SCHEMA_VERSION: ClassVar[int] = 1

    def to_json(self) -> str:
        """JSON for ``context.state``."""
        values: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        pending = getattr(self, "pending", None)
        if isinstance(pending, StepBlock):
            values["pending"] = [pending.start, pending.count]
        values["schema_version"] = self.SCHEMA_VERSION
        return json.dumps(values)

    @classmethod
    def from_json(cls: type[Meta], text: str) -> Meta:
        """Inverse of :meth:`to_json`.

        Raises
        ------
        ProtocolError
            The state was written by another schema version of this code.
        """
        values = json.loads(text)
        version = values.pop("schema_version", None)
        if version != cls.SCHEMA_VERSION:
            raise ProtocolError(
                f"{cls.WHO} state has schema {version}, this {cls.WHO} reads {cls.SCHEMA_VERSION}"
            )
        if "pending" in {f.name for f in fields(cls)}:  # type: ignore[arg-type]
            values["pending"] = StepBlock(*values["pending"])
        return cls(**values)

    @classmethod
    def stored(cls: type[Meta], context: Context, key: str) -> Meta:
        """The state :meth:`store` kept under ``key`` in ``context.state``.

        Raises
        ------
        ProtocolError
            There is none: a message came before setup.
        """
        if key not in context.state:
            raise ProtocolError("received a message before setup: no state for the run")
        return cls.from_json(str(context.state[key]["json"]))

    def store(self, context: Context, key: str) -> None:
        """Keep this state under ``key`` in ``context.state`` (JSON in a ConfigRecord)."""
        context.state[key] = ConfigRecord({"json": self.to_json()})


_SAVED: weakref.WeakKeyDictionary[FlatState, tuple[bytes, tuple[int, ...]]] = (
    weakref.WeakKeyDictionary()
)
"""Each in-memory state's last saved bytes and its :meth:`FlatState.fingerprint` then."""


def save_flat(context: Context, key: str, state: FlatState) -> list[int]:
    """Write ``state``'s flat buffer into ``context.state[key]`` as raw float32 bytes (the
    layout is fixed by the configuration, and :meth:`FlatState.load` checks its size);
    returns the optimizers' step counters, which travel in the holder's JSON state."""
    buffer = state.flat.numpy().tobytes()
    context.state[key] = ConfigRecord({"float32": buffer})
    _SAVED[state] = (buffer, state.fingerprint())
    return list(state.optimizer_steps())


def load_flat(
    context: Context, key: str, state: FlatState, optimizer_steps: list[int], who: str
) -> None:
    """Restore ``state`` from :func:`save_flat`'s record.

    Raises
    ------
    ProtocolError
        The record is missing or holds no float32 bytes (``who`` names the holder).
    """
    flat = context.state.get(key, None)
    buffer = flat.get("float32") if isinstance(flat, ConfigRecord) else None
    if not isinstance(buffer, bytes):
        raise ProtocolError(f"{who} state lacks its flat float32 buffer")
    if in_sync(state, buffer, optimizer_steps):
        return
    state.load(np.frombuffer(buffer, dtype=np.float32), optimizer_steps)


def in_sync(state: FlatState, buffer: bytes, optimizer_steps: Sequence[int]) -> bool:
    """Whether ``state`` (kept in memory) already holds ``buffer``: it is the very bytes
    object ``state`` saved last, and nothing has changed ``state`` since (its
    fingerprint and step counters are as they were). A party kept in memory then skips
    copying its models and Adam moments back (a new process, or Flower's simulation
    engine, which copies the context, always loads)."""
    saved = _SAVED.get(state)
    return (
        saved is not None
        and saved[0] is buffer
        and saved[1] == state.fingerprint()
        and state.optimizer_steps() == list(optimizer_steps)
    )


def restore_checkpoint(
    directory: str, step: int, config_json: str, state: FlatState, needs: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """Load a holder's checkpoint of ``step`` into ``state`` (its flat buffer and
    optimizer counters) and return its other arrays, which must include ``needs``.

    Raises
    ------
    FileNotFoundError, ValueError
        No checkpoint for that step, one written under another configuration, or one
        that lacks an array it needs.
    """
    arrays, opt_steps = load_party_checkpoint(
        Path(directory), step, config_json, settings_as_read_now
    )
    for key in ("flat", *needs):
        if key not in arrays:
            raise ValueError(f"the checkpoint of step {step} lacks {key!r}")
    state.load(arrays["flat"], opt_steps)
    return arrays
