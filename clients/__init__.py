"""Party-side (ClientApp) classes of flwr-vflgan."""

from .client_app import make_client_app
from .vflgan import VFLGANClient
from .vtgan import VTGANClient

__all__ = ["VFLGANClient", "VTGANClient", "make_client_app"]
