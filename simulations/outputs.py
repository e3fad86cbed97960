"""Writing a run's outputs: atomically, and as JSON that numpy values do not break."""

from __future__ import annotations

from typing import Any

import numpy as np

from flwr_vflgan.atomic import write_atomically

__all__ = ["json_default", "write_atomically"]


def json_default(value: Any) -> Any:
    """JSON for numpy scalars and arrays (metric functions may return them)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
