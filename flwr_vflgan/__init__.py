"""flwr-vflgan: vertical federated GANs and label-protected split learning on Flower.

The installed distribution ships the strategy, client, simulation and configuration
packages inside this namespace::

    from flwr_vflgan.strategies import VFLGANStrategy
    from flwr_vflgan.clients import VFLGANClient

In a source checkout those packages live in the top-level folders ``strategies/``,
``clients/``, ``simulations/`` and ``conf/``; the lines below make them importable
under the same ``flwr_vflgan.*`` names, so code and configuration are written once
for both layouts.
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

_checkout = Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and (_checkout / "strategies").is_dir():
    # Source checkout (or a Flower app bundle): let flwr_vflgan.<name> resolve to
    # <checkout>/<name>. The package's own folder stays first on the search path.
    __path__.append(str(_checkout))
del _checkout, Path
