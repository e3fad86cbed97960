"""One way to build a settings dataclass from a plain mapping (Hydra, JSON, run config)."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, TypeGuard, TypeVar

T = TypeVar("T")


def build_checked(cls: type[T], values: dict[str, Any], section: str) -> T:
    """``cls(**values)``, where an unknown key is an error naming ``section`` and the valid keys."""
    valid = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - valid)
    if unknown:
        raise ValueError(f"unknown {section} config keys {unknown}; valid: {sorted(valid)}")
    return cls(**values)


def is_int(value: object) -> bool:
    """Whether ``value`` is an integer (``True`` and ``False`` are not, though Python's
    ``bool`` is an ``int``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a finite ``int`` or ``float`` (not a ``bool``, NaN or infinity)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
