"""Party-side (ClientApp) classes of flwr-vflgan."""

# First, before torch is imported: in a stock SuperNode's flwr-clientapp process (and
# only there), the party's memory set-up (see party_process).
from .party_process import prepare_if_flower_clientapp

prepare_if_flower_clientapp()

from .client_app import make_client_app  # noqa: E402
from .vflgan import VFLGANClient  # noqa: E402
from .vtgan import VTGANClient  # noqa: E402

__all__ = ["VFLGANClient", "VTGANClient", "make_client_app"]
