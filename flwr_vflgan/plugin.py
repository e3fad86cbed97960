"""Name a plug-in's parts by where they live, import them when first used.

A family registers ``"package.module:attribute"`` strings rather than the objects, so
that naming a family costs no import: a GAN party never imports the split classifier's
scikit-learn and SciPy, and a benchmark of one family none of another's.
"""

from __future__ import annotations

import importlib
from typing import Any


def load_attribute(path: str) -> Any:
    """The object that ``path`` (``"package.module:attribute"``) names.

    Raises
    ------
    ValueError
        ``path`` has no ``:``, or its module lacks the attribute.
    """
    module, sep, attribute = path.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"a plug-in path is 'package.module:attribute', got {path!r}")
    found = getattr(importlib.import_module(module), attribute, None)
    if found is None:
        raise ValueError(f"{module} has no {attribute!r} (plug-in path {path!r})")
    return found
