"""Hydra entry points: run one experiment, reproduce the papers' tables, benchmarks.

Run from a checkout as ``python -m simulations.<command>`` once the project is installed
(``pip install -e .``), which maps this folder to ``flwr_vflgan.simulations``.
"""

from importlib.util import find_spec

if find_spec("flwr_vflgan") is None or find_spec("flwr_vflgan.simulations") is None:
    raise SystemExit(
        "flwr-vflgan is not installed: run `pip install -e .` in the checkout first "
        "(README.md), which maps simulations/, strategies/, clients/ and conf/ into the "
        "flwr_vflgan package"
    )
