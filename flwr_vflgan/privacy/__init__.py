"""Differential-privacy accounting for the VFLGAN family.

`GaussianSteps` describes releases of a subsampled Gaussian mechanism, `epsilon` and
`calibrate_noise` convert between noise and budget with ``dp_accounting``'s Rényi-DP
accountant, and `PrivacyLedger` tracks one party's budget.
"""

from flwr_vflgan.privacy.accounting import (
    LEDGER_SCHEMA_VERSION,
    RDP_ORDERS,
    BudgetExceededError,
    Conversion,
    GaussianSteps,
    PrivacyLedger,
    Sampling,
    calibrate_noise,
    composed_rdp,
    epsilon,
)

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "RDP_ORDERS",
    "BudgetExceededError",
    "Conversion",
    "GaussianSteps",
    "PrivacyLedger",
    "Sampling",
    "calibrate_noise",
    "composed_rdp",
    "epsilon",
]
