"""Conversions between tensors and Flower records, with validation on arrival.

This is the only core module that imports Flower (``flwr.app`` records). Every array that
arrives is checked for its dtype, its shape and finite values; a violation raises
:class:`ProtocolError`, which handlers turn into a Flower error reply.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from flwr_vflgan.runtime.errors import ProtocolError

__all__ = [
    "ProtocolError",
    "get_config",
    "get_field",
    "get_indices",
    "get_int",
    "get_positive_int",
    "get_str",
    "get_tensor",
    "indices_to_record",
    "tensors_to_record",
]


def tensors_to_record(tensors: Mapping[str, torch.Tensor | np.ndarray]) -> ArrayRecord:
    """Pack named tensors (converted to float32 NumPy arrays) into an ArrayRecord."""
    arrays = {}
    for key, value in tensors.items():
        data = value.detach().numpy() if isinstance(value, torch.Tensor) else value
        arrays[key] = Array(np.ascontiguousarray(data, dtype=np.float32))
    return ArrayRecord(arrays)


def get_config(content: RecordDict, name: str) -> ConfigRecord:
    """The ConfigRecord ``name`` of a message, or a ProtocolError naming what is missing."""
    record = content.get(name) if name in content else None
    if not isinstance(record, ConfigRecord):
        raise ProtocolError(
            f"message has no config record {name!r}; records present: {sorted(content)}"
        )
    return record


def get_field(record: ConfigRecord, key: str, kind: type | tuple[type, ...]) -> object:
    """A typed field of a ConfigRecord, or a ProtocolError naming the field and types."""
    if key not in record:
        raise ProtocolError(f"config record lacks field {key!r}; fields present: {sorted(record)}")
    value = record[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ProtocolError(f"field {key!r} must be {kind}, got bool")
    if not isinstance(value, kind):
        raise ProtocolError(f"field {key!r} must be {kind}, got {type(value).__name__}")
    return value


def get_int(record: ConfigRecord, key: str) -> int:
    """An int field of a ConfigRecord (not a bool), or a ProtocolError naming it."""
    value = get_field(record, key, int)
    assert isinstance(value, int)  # checked by get_field
    return value


def get_positive_int(record: ConfigRecord, key: str) -> int:
    """A positive int field of a ConfigRecord, or a ProtocolError naming it."""
    value = get_int(record, key)
    if value < 1:
        raise ProtocolError(f"{key} must be a positive integer, got {value}")
    return value


def get_str(record: ConfigRecord, key: str) -> str:
    """A str field of a ConfigRecord, or a ProtocolError naming it."""
    value = get_field(record, key, str)
    assert isinstance(value, str)  # checked by get_field
    return value


def _array(content: RecordDict, name: str, key: str) -> Array:
    """Entry ``key`` of ArrayRecord ``name``, or a ProtocolError naming what is missing."""
    record = content.get(name) if name in content else None
    if not isinstance(record, ArrayRecord):
        raise ProtocolError(
            f"message has no array record {name!r}; records present: {sorted(content)}"
        )
    if key not in record:
        raise ProtocolError(f"array record {name!r} lacks {key!r}; keys present: {sorted(record)}")
    return record[key]


def _values(array: Array, name: str, key: str) -> np.ndarray:
    """The array's values, or a ProtocolError if its payload does not deserialize (a
    truncated or foreign buffer)."""
    try:
        return array.numpy()
    except (ValueError, EOFError, TypeError, OSError) as exc:
        raise ProtocolError(f"{name}.{key} is not a readable array: {exc}") from None


def get_tensor(
    content: RecordDict,
    name: str,
    key: str,
    shape: tuple[int | None, ...],
) -> torch.Tensor:
    """A validated float32 tensor from ArrayRecord ``name``.

    ``shape`` may contain ``None`` for a free dimension. Non-float32 dtypes, other shapes
    and non-finite values raise :class:`ProtocolError` naming the record and key.
    """
    array = _array(content, name, key)
    if array.dtype not in ("float32", "<f4", np.dtype(np.float32).str):
        raise ProtocolError(f"{name}.{key} must be float32, got {array.dtype}")
    values = _values(array, name, key)
    if values.ndim != len(shape) or any(
        want is not None and got != want for got, want in zip(values.shape, shape, strict=True)
    ):
        raise ProtocolError(f"{name}.{key} must have shape {shape}, got {values.shape}")
    if not np.isfinite(values).all():
        raise ProtocolError(f"{name}.{key} contains non-finite values")
    return torch.from_numpy(np.array(values, dtype=np.float32, copy=True))


def indices_to_record(indices: Mapping[str, np.ndarray]) -> ArrayRecord:
    """Pack named integer index vectors (as int64) into an ArrayRecord."""
    return ArrayRecord(
        {key: Array(np.ascontiguousarray(value, dtype=np.int64)) for key, value in indices.items()}
    )


def get_indices(
    content: RecordDict, name: str, key: str, length: int | None, upper: int
) -> np.ndarray:
    """A validated int64 index vector from ArrayRecord ``name``: 1-D, ``length`` entries
    (``None``: any), every value in ``[0, upper)``."""
    array = _array(content, name, key)
    if array.dtype not in ("int64", "<i8", np.dtype(np.int64).str):
        raise ProtocolError(f"{name}.{key} must be int64, got {array.dtype}")
    values = _values(array, name, key)
    if values.ndim != 1 or (length is not None and values.shape[0] != length):
        raise ProtocolError(f"{name}.{key} must have shape ({length},), got {values.shape}")
    if values.size and (values.min() < 0 or values.max() >= upper):
        raise ProtocolError(f"{name}.{key} has indices outside [0, {upper})")
    return np.array(values, dtype=np.int64, copy=True)
