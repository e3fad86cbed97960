"""flwr-vflgan: vertical federated GANs and label-protected split learning on Flower.

The strategy, client, simulation and configuration packages live in the repository's
top-level folders ``strategies/``, ``clients/``, ``simulations/`` and ``conf/``; the
installed project (``pip install -e .`` in a checkout, or the wheel) maps them into this
namespace through setuptools' ``package-dir``, so they are imported as::

    from flwr_vflgan.strategies import VFLGANStrategy
    from flwr_vflgan.clients import VFLGANClient
"""

from __future__ import annotations

__version__ = "0.1.0"
