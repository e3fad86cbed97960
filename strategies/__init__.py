"""Server-side strategies of flwr-vflgan and the in-process Grid."""

from .dplt import DPLTStrategy
from .exchange import RunStopped, exchange
from .grid import InProcessGrid
from .latent import LatentDiffusionStrategy
from .vdgan import VDGANStrategy
from .vflgan import VFLGANResult, VFLGANStrategy
from .vtgan import VTGANStrategy

__all__ = [
    "DPLTStrategy",
    "InProcessGrid",
    "LatentDiffusionStrategy",
    "RunStopped",
    "VDGANStrategy",
    "VFLGANResult",
    "VFLGANStrategy",
    "VTGANStrategy",
    "exchange",
]
