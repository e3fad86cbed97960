"""One AIM or MST run on a table: discretise, synthesise at the budget, decode."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.schema import Schema
from flwr_vflgan.marginals.config import MarginalSettings
from flwr_vflgan.marginals.discretize import Discretizer
from flwr_vflgan.marginals.mechanisms import Progress, aim, mst
from flwr_vflgan.privacy.config import check_delta
from flwr_vflgan.privacy.zcdp import zcdp_epsilon, zcdp_rho

__all__ = ["MECHANISMS", "MarginalOutcome", "synthesize"]

MECHANISMS = ("aim", "mst")
"""The algorithms this module runs (``algorithm=<name>``)."""


@dataclass
class MarginalOutcome:
    """The synthetic table and the privacy summary of its releases."""

    synthetic: pd.DataFrame
    privacy: dict[str, Any]
    seconds: float


def synthesize(
    mechanism: str,
    frame: pd.DataFrame,
    schema: Schema,
    domain: PublicDomain,
    *,
    epsilon: float,
    delta: float,
    settings: MarginalSettings,
    seed: int,
    rows: int | None = None,
    progress: Progress | None = None,
) -> MarginalOutcome:
    """``rows`` (default: as many as ``frame``) synthetic rows of ``frame`` by ``mechanism``
    (``aim`` or ``mst``) at ``(epsilon, delta)``-DP, the codes from ``domain`` alone.

    Raises
    ------
    ValueError
        An unknown mechanism, a bad budget, or a value the domain does not allow.
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown marginal mechanism {mechanism!r}; valid: {list(MECHANISMS)}")
    check_delta(delta, len(frame))
    started = time.monotonic()
    discretizer = Discretizer.from_domain(domain, schema, settings.bins)
    codes = discretizer.encode(frame)
    rho = zcdp_rho(epsilon, delta)
    rng = np.random.default_rng([seed, 0x4D42])  # "MB": the marginal baselines' stream
    count = rows or len(frame)
    if mechanism == "aim":
        result = aim(codes, discretizer.sizes, rho, settings, rng, count, progress)
    else:
        result = mst(codes, discretizer.sizes, rho, settings, rng, count)
    table = discretizer.decode(result.codes, rng, dtypes=frame.dtypes.to_dict())
    privacy = {
        "party": "centralized",
        "epsilon": zcdp_epsilon(result.rho_spent, delta),
        "target_epsilon": epsilon,
        "delta": delta,
        "rho": rho,
        "rho_spent": result.rho_spent,
        "accountant": "zcdp",
        "conversion": "zcdp-cks20",
        "neighbours": "add/remove one row",
        "mechanism": mechanism,
        "steps": len(result.measurements),
        "selections": result.selections,
        "noise_multiplier": min(m.sigma for m in result.measurements),
        "measurements": [m.to_dict() for m in result.measurements],
    }
    return MarginalOutcome(table[list(frame.columns)], privacy, time.monotonic() - started)
