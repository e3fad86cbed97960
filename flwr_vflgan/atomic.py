"""Write a file so that a reader sees the old file or the whole new one.

The new content goes to a file beside the target under a name no other writer uses
(a random token), which is then renamed over the target; a writer that fails leaves
the target as it was and removes its temporary file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any


def sibling_temp(path: Path, suffix: str = ".tmp") -> Path:
    """A new hidden name beside ``path``: ``.<name>.<random>`` plus ``suffix`` (give the
    target's extension where the writer picks its format by it, as matplotlib does)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}{suffix}")


def write_atomically(path: Path, write: Callable[[Path], Any], suffix: str = ".tmp") -> None:
    """Call ``write`` on :func:`sibling_temp` of ``path``, then rename it to ``path``.

    The writer creates the file itself, so it has the permissions the user's umask gives
    any output. If ``write`` raises, the temporary file is removed and ``path`` is left
    as it was.
    """
    tmp = sibling_temp(path, suffix)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
