"""The server's side of row alignment by ID (:mod:`flwr_vflgan.runtime.psi`), in two
forms.

* :func:`relay_alignment`: the parties hold all the IDs and party 0 leads; the server
  relays blinded points and positions in secretly ordered lists (the GAN families).
* :func:`lead_alignment`: the server holds IDs of its own and leads (split
  classification, whose label party is the server): it learns the IDs every party holds,
  in its own order, and which of its IDs each party holds, as party 0 does when it leads;
  a party learns the common set and nothing of the IDs it does not share.

Both end with every party keeping the common rows in the leader's order; a party's
handlers are the same for both (``clients/psi.py``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from flwr.app import Message, RecordDict
from flwr.serverapp import Grid

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime import psi
from flwr_vflgan.runtime.codec import ProtocolError

from .exchange import RunStopped

log = logging.getLogger(__name__)


class Relay(Protocol):
    """What the alignment needs of a strategy: its exchange and its party names."""

    def exchange(
        self, grid: Grid, messages: Sequence[Message], describe: str
    ) -> dict[int, Message]: ...

    def party(self, node: int) -> str: ...


def _read(
    relay: Relay, reply: Message, decode: Callable[[RecordDict], Any], node: int, what: str
) -> Any:
    try:
        return decode(reply.content)
    except ProtocolError as exc:
        raise RunStopped(f"{relay.party(node)} sent malformed {what}: {exc}") from exc


def _blinded_lists(
    relay: Relay, grid: Grid, nodes: Sequence[int], salt: bytes, series: bool = False
) -> tuple[list[int], list[list[bytes]]]:
    """Every party's blinded IDs (in its secret order): the nodes by partition and their
    lists (``series``: the parties' files hold series)."""
    start = psi.PsiBlind(salt=salt, series=series).to_content()
    replies = relay.exchange(grid, [Message(start, n, P.PSI_BLIND) for n in nodes], "psi blind")
    blinded: dict[int, tuple[int, list[bytes]]] = {}
    for node, reply in replies.items():
        answer = _read(relay, reply, psi.PsiBlind.from_content, node, "blinded IDs")
        blinded[answer.partition_id] = (node, list(answer.blinded))
    if sorted(blinded) != list(range(len(nodes))):
        raise RunStopped(f"blinded IDs came from partitions {sorted(blinded)}")
    order = [blinded[p][0] for p in range(len(nodes))]
    return order, [blinded[p][1] for p in range(len(nodes))]


def _apply(
    relay: Relay, grid: Grid, nodes: Sequence[int], positions: Sequence[Sequence[int]]
) -> int:
    """Every party in ``nodes`` keeps the rows at its ``positions``; returns the common
    count, checked against each party's answer."""
    applies = [
        Message(psi.PsiPositions([list(p)]).to_content(), n, P.PSI_APPLY)
        for p, n in zip(positions, nodes, strict=True)
    ]
    kept = relay.exchange(grid, applies, "psi apply") if applies else {}
    common = len(positions[0]) if positions else 0
    for node, reply in kept.items():
        if _read(relay, reply, psi.PsiKept.from_content, node, "row count").kept != common:
            raise RunStopped(f"{relay.party(node)} kept other rows than the {common} common")
    return common


def relay_alignment(relay: Relay, grid: Grid, nodes: Sequence[int], series: bool = False) -> int:
    """Relay the parties' private set intersection of their IDs: blinded IDs from all,
    blinded again across, the leader's (party 0's) match, every other party's rows. The
    server sees blinded points and positions in secretly ordered lists. ``series``: the
    parties' files hold series (VFLGAN-TS). Returns the exchanges it took (4).

    Raises
    ------
    RunStopped
        A party refused or sent a malformed answer, or no ID is common to all.
    """
    order, lists = _blinded_lists(relay, grid, nodes, os.urandom(16), series)
    cross = [psi.PsiLists(lists[1:]), *[psi.PsiLists([lists[0]]) for _ in order[1:]]]
    crossed = relay.exchange(
        grid,
        [Message(c.to_content(), n, P.PSI_CROSS) for c, n in zip(cross, order, strict=True)],
        "psi cross",
    )
    again = [_read(relay, crossed[n], psi.PsiLists.from_content, n, "lists") for n in order]
    match = psi.PsiLists([a.lists[0] for a in again[1:]], own=again[0].lists)
    leader = relay.exchange(grid, [Message(match.to_content(), order[0], P.PSI_MATCH)], "psi match")
    found = _read(relay, leader[order[0]], psi.PsiPositions.from_content, order[0], "positions")
    common = _apply(relay, grid, order[1:], found.positions)
    log.info(
        "aligned by ID: %d rows common to all (the parties held %s)",
        common,
        ", ".join(str(len(x)) for x in lists),
    )
    return 4


def lead_alignment(
    relay: Relay, grid: Grid, nodes: Sequence[int], ids: Sequence[object]
) -> tuple[int, np.ndarray]:
    """The private set intersection led by the server, which holds ``ids`` itself:
    blinded IDs from every party, the server's own blinded list blinded again by each
    party, the server's match, every party's rows. Returns the exchanges it took (3) and
    the server's rows of the IDs every party holds, in its own order (the common order).

    Raises
    ------
    RunStopped
        A party refused or sent a malformed answer, an ID repeats, or no ID is common to
        all.
    """
    salt = os.urandom(16)
    order, lists = _blinded_lists(relay, grid, nodes, salt)
    secret, rank = psi.new_secret(), psi.secret_order(len(ids))
    own = psi.PsiLists([psi.blind(secret, psi.hash_ids([ids[i] for i in rank], salt))])
    crossed = relay.exchange(
        grid, [Message(own.to_content(), n, P.PSI_CROSS) for n in order], "psi cross"
    )
    own_double = [
        _read(relay, crossed[n], psi.PsiLists.from_content, n, "lists").lists[0] for n in order
    ]
    try:
        keep, positions = psi.common_positions(own_double, [psi.blind(secret, x) for x in lists])
    except ValueError as exc:
        raise RunStopped(f"aligning the rows by ID: {exc}") from exc
    rows = rank[keep]
    common = np.argsort(rows, kind="stable")  # the server's own row order
    _apply(relay, grid, order, [np.asarray(p)[common].tolist() for p in positions])
    log.info(
        "aligned by ID: %d rows common to all (the server held %d, the parties %s)",
        len(keep),
        len(ids),
        ", ".join(str(len(x)) for x in lists),
    )
    return 3, rows[common]
