"""The memory set-up of a process that serves a party, wherever Flower starts it.

A party process holds its columns, a few small models and, at generation and
publication, a full table; two things of the process itself cost more than that:

- glibc keeps the pages of freed heap blocks (:func:`return_freed_memory`), so the peak
  of each generated table stays resident;
- every ``torch.optim`` step imports TorchDynamo and sympy, about 60-70 MiB, for models
  that are never compiled (:mod:`flwr_vflgan.clients.lean_torch`).

:func:`prepare_party_process` applies both. ``flwr-vflgan-node`` calls it before it loads
anything; a stock ``flower-supernode`` starts a ``flwr-clientapp`` process per message,
which imports this package to load the ClientApp, and :func:`prepare_if_flower_clientapp`
(run by ``flwr_vflgan.clients`` on import, before anything else of the package) applies it
there. Everywhere else (the in-process runtime, Ray's simulation actors, tests, a user's
own script) nothing changes: those processes are not only a party's, and the set-up is a
process-wide choice. Neither part changes a single number of a run (tests pin training
bit for bit and the same table on every runtime).
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass

HEAP_MMAP_THRESHOLD = 1 << 20
"""Bytes from which glibc serves an allocation from its own mapping (see
:func:`return_freed_memory`)."""
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)

FLOWER_CLIENTAPP_COMMAND = "flwr-clientapp"
"""The command a stock SuperNode (Flower's SuperExec) runs for each message's ClientApp."""


@dataclass(frozen=True)
class PartySetup:
    """What :func:`prepare_party_process` applied in this process."""

    freed_memory_returned: bool
    """glibc now returns freed blocks of ``HEAP_MMAP_THRESHOLD`` bytes or more."""
    dynamo_deferred: bool
    """``torch._dynamo`` is the stand-in (it was not loaded before)."""


APPLIED: PartySetup | None = None
"""The set-up applied in this process, or ``None`` where none was."""


def return_freed_memory(threshold: int = HEAP_MMAP_THRESHOLD) -> bool:
    """Have glibc serve allocations of ``threshold`` bytes or more from their own memory
    mappings, which go back to the system when freed; returns whether it applied.

    glibc raises its mapping threshold to the size of the largest block freed (up to
    32 MiB), so after a whole table has been generated and decoded the same sizes come
    from the heap, whose freed pages stay with the process. A party node generates a
    full table for every evaluation and for the publication and would keep the peak of
    each: measured on Adult, a fixed 1 MiB threshold lowers a party's peak by about
    40 MiB and its resident memory after a publication by about 50 MiB. Elsewhere than
    glibc (musl, macOS) this does nothing.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))


def prepare_party_process() -> PartySetup:
    """Apply the party's memory set-up to this process (idempotent) and record it in
    :data:`APPLIED`. Call it before the ClientApp is imported: the allocator setting
    then covers every table, and TorchDynamo is not loaded yet."""
    global APPLIED
    if APPLIED is None:
        from flwr_vflgan.clients.lean_torch import defer_torch_dynamo

        APPLIED = PartySetup(return_freed_memory(), defer_torch_dynamo())
    return APPLIED


def is_flower_clientapp_process(argv0: str | None = None) -> bool:
    """Whether this process is a ``flwr-clientapp`` started by a stock SuperNode."""
    command = sys.argv[0] if argv0 is None else argv0
    name = os.path.basename(command)
    return name.removesuffix(".exe") == FLOWER_CLIENTAPP_COMMAND


def prepare_if_flower_clientapp() -> PartySetup | None:
    """:func:`prepare_party_process` in a ``flwr-clientapp`` process; elsewhere nothing
    is applied, and the result is :data:`APPLIED` as it stands (``None`` unless the
    process applied the set-up itself, as ``flwr-vflgan-node`` does)."""
    return prepare_party_process() if is_flower_clientapp_process() else APPLIED
