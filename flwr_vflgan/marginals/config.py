"""The settings of the marginal-based DP baselines, AIM and MST (``marginals.*``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from flwr_vflgan.checked import build_checked, is_int


@dataclass(frozen=True)
class MarginalSettings:
    """What AIM (McKenna et al. 2022) and MST (McKenna, Miklau and Sheldon 2021) read.

    Parameters
    ----------
    bins
        Equal-width bins of a numeric column over its public bounds (an integer column
        with at most this many values keeps one code per value).
    degree
        AIM's workload: every marginal of this many columns.
    max_cells
        AIM leaves out workload marginals with more cells than this (the reference
        code's 10,000).
    max_model_size
        AIM's cap on the graphical model, in megabytes of its junction tree's tables
        (the reference code's default is 80; 20 keeps a run on two CPU cores short).
    rounds
        AIM's planned selection rounds (``null``: 16 per column, the paper's).
    iterations
        Mirror-descent iterations of each estimate made while selecting (AIM's rounds,
        MST's selection model).
    final_iterations
        Mirror-descent iterations of the estimate the table is sampled from.
    """

    bins: int = 32
    degree: int = 2
    max_cells: int = 10_000
    max_model_size: float = 20.0
    rounds: int | None = None
    iterations: int = 300
    final_iterations: int = 1000

    def __post_init__(self) -> None:
        for name in ("bins", "degree", "max_cells", "iterations", "final_iterations"):
            value = getattr(self, name)
            least = 2 if name in ("bins",) else 1
            if not is_int(value) or value < least:
                raise ValueError(f"marginals.{name} must be an integer >= {least}, got {value!r}")
        if self.rounds is not None and (not is_int(self.rounds) or self.rounds < 1):
            raise ValueError(
                f"marginals.rounds must be a positive integer or null, got {self.rounds!r}"
            )
        size = self.max_model_size
        if isinstance(size, bool) or not isinstance(size, int | float) or not size > 0:
            raise ValueError(
                f"marginals.max_model_size must be a positive number (MB), got {size!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarginalSettings:
        """Inverse of :meth:`to_dict`; unknown keys are errors that list the valid ones."""
        return build_checked(cls, data, "marginals")
