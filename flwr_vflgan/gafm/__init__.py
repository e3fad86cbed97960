"""GAFM (paper 002): label-protected split classification, its baselines and the
label-stealing attacks that measure it.

The label party (the server) holds the labels, the cut-layer combination ``F`` and the
top models (GAFM's generator and discriminator, or vanilla split learning's head); each
non-label party holds a local model ``f_p`` over its own columns. Everything here is
plain PyTorch/NumPy; the Flower protocol lives in ``strategies/gafm.py`` and
``clients/gafm.py``.
"""
