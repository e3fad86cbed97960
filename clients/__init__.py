"""Party-side (ClientApp) classes of flwr-vflgan."""

from .client_app import make_client_app
from .vflgan import VFLGANClient

__all__ = ["VFLGANClient", "make_client_app"]
