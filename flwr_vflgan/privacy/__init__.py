"""Differential privacy for the VFLGAN family: configuration, accounting, mechanisms.

`DPConfig` is what a user chooses and `plan_privacy` what it means for one data holder;
`GaussianSteps` describes releases of a subsampled Gaussian mechanism, `epsilon` and
`calibrate_noise` convert between noise and budget with ``dp_accounting``'s Rényi-DP
accountant, and `PrivacyLedger` tracks one party's budget. The mechanisms live in
`flwr_vflgan.privacy.mechanisms` and the discriminator updates that apply them in
`flwr_vflgan.privacy.updates`.
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
from flwr_vflgan.privacy.config import DPConfig, Mechanism, PrivacyPlan, plan_privacy

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "RDP_ORDERS",
    "BudgetExceededError",
    "Conversion",
    "DPConfig",
    "GaussianSteps",
    "Mechanism",
    "PrivacyLedger",
    "PrivacyPlan",
    "Sampling",
    "calibrate_noise",
    "composed_rdp",
    "epsilon",
    "plan_privacy",
]
