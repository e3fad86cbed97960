"""The settings of the DPLT baseline (``dplt.*``; ``algorithm=dplt``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from flwr_vflgan.checked import build_checked, is_int


@dataclass(frozen=True)
class DPLTSettings:
    """What the differentially private latent tree (Tang et al., TDSC 2019; paper 004
    Section 3.3) reads.

    Parameters
    ----------
    bins
        Equal-width bins of a numeric column over its public bounds before the binary
        encoding (an integer column with at most this many values keeps one code per
        value), as AIM and MST code their columns.
    group_size
        Binary attributes (bits) per latent attribute: each party cuts its bits into
        groups of this many (the last group holds the rest), each group summarised by one
        latent attribute.
    latent_states
        States of a latent attribute (a group of ``s`` bits with ``2**s`` or fewer
        states keeps one state per joint value).
    em_iterations
        Iterations of the EM fit of each group's latent class model to its noisy
        histogram.
    budget_split
        Relative shares of the budget of the three steps that read the rows: the grouping
        (exponential mechanism), the pairwise mutual information (Laplace) and the tree's
        parameters (Laplace); paper 004 says only that the budget is divided into three
        portions, so the default is equal thirds.
    """

    bins: int = 16
    group_size: int = 3
    latent_states: int = 4
    em_iterations: int = 50
    budget_split: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        for name, least in (
            ("bins", 2),
            ("group_size", 1),
            ("latent_states", 2),
            ("em_iterations", 1),
        ):
            value = getattr(self, name)
            if not is_int(value) or value < least:
                raise ValueError(f"dplt.{name} must be an integer >= {least}, got {value!r}")
        if self.group_size > 16:
            raise ValueError(
                f"dplt.group_size must be at most 16 (a group's histogram has 2**group_size "
                f"cells), got {self.group_size}"
            )
        split = tuple(self.budget_split)
        numbers = all(not isinstance(w, bool) and isinstance(w, int | float) for w in split)
        if len(split) != 3 or not numbers or min(split) <= 0:
            raise ValueError(
                "dplt.budget_split must be three positive weights (grouping, mutual "
                f"information, parameters), got {self.budget_split!r}"
            )
        object.__setattr__(self, "budget_split", tuple(float(w) for w in split))

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form."""
        data = asdict(self)
        data["budget_split"] = list(self.budget_split)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DPLTSettings:
        """Inverse of :meth:`to_dict`; unknown keys are errors that list the valid ones."""
        return build_checked(cls, data, "dplt")
