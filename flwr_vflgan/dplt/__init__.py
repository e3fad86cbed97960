"""DPLT, the differentially private latent tree for vertically partitioned data (Tang,
Cheng, Su, Chen and Shao, IEEE TDSC 2019), the pure epsilon-DP baseline of papers 000
(Table 1) and 004 (Section 3.3): ``algorithm=dplt``.

:mod:`~flwr_vflgan.dplt.model` holds the mathematics (bits, groups, latent attributes,
the tree, the budget), :mod:`~flwr_vflgan.dplt.local` one party's model and the whole
sequence without Flower, :mod:`~flwr_vflgan.dplt.messages` the wire messages.
"""

from flwr_vflgan.dplt.config import DPLTSettings
from flwr_vflgan.dplt.local import PartyLatentModel, party_bit_count, synthesize_locally
from flwr_vflgan.dplt.model import BudgetPlan, LatentGroup, LatentTree

__all__ = [
    "BudgetPlan",
    "DPLTSettings",
    "LatentGroup",
    "LatentTree",
    "PartyLatentModel",
    "party_bit_count",
    "synthesize_locally",
]
