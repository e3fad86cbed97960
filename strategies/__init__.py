"""Server-side strategies of flwr-vflgan and the in-process Grid."""

from .exchange import RunStopped, exchange
from .grid import InProcessGrid
from .latent import LatentDiffusionStrategy
from .vdgan import VDGANStrategy
from .vflgan import VFLGANResult, VFLGANStrategy
from .vtgan import VTGANStrategy

__all__ = [
    "InProcessGrid",
    "LatentDiffusionStrategy",
    "RunStopped",
    "VDGANStrategy",
    "VFLGANResult",
    "VFLGANStrategy",
    "VTGANStrategy",
    "exchange",
]
