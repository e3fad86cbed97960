"""What the reproduction tables share: dataset names and mean ± spread over seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from flwr_vflgan.data import list_datasets


def dataset_name(source: str) -> str:
    """A built-in dataset's name, or a file's stem (``data/loans.csv`` -> ``loans``)."""
    return source if source in list_datasets() else Path(source).name.split(".")[0]


def mean_spread(values: Sequence[float | None]) -> tuple[float, float]:
    """Mean and sample standard deviation, ignoring ``None`` and NaN.

    One value has spread 0.0; no value gives ``(nan, nan)``.
    """
    clean = [v for v in values if v is not None and not math.isnan(v)]
    if not clean:
        return math.nan, math.nan
    mean = sum(clean) / len(clean)
    spread = (
        (sum((v - mean) ** 2 for v in clean) / (len(clean) - 1)) ** 0.5 if len(clean) > 1 else 0.0
    )
    return mean, spread
