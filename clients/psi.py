"""A party's side of row alignment by ID (:mod:`flwr_vflgan.runtime.psi`).

Four messages before setup: ``psi_blind`` (blind this party's IDs in a secret order),
``psi_cross`` (blind the relayed lists again), ``psi_match`` (the leader: find the common
IDs, keep its rows, and say where they are in every other list) and ``psi_apply`` (keep
the rows at those positions). The secret scalar, the secret order and the rows kept stay
in ``context.state``; setup then reads only those rows
(:func:`~flwr_vflgan.clients.common.aligned_rows`).
"""

from __future__ import annotations

import json

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime import psi
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.party_data import party_file_ids

from .common import guarded, node_partition_id

LEADER = 0
"""The partition that matches the lists and orders the common rows."""


class PsiClient:
    """Message handlers of a party's row alignment (the VFLGAN family uses them)."""

    def blind(self, msg: Message, context: Context) -> Message:
        """Blind this party's IDs in a fresh secret order under a fresh secret."""
        return guarded(msg, context, _blind)

    def cross(self, msg: Message, context: Context) -> Message:
        """Blind the relayed lists with this party's secret."""
        return guarded(msg, context, _cross)

    def match(self, msg: Message, context: Context) -> Message:
        """The leader: the common IDs, its rows kept, the others' positions."""
        return guarded(msg, context, _match)

    def apply(self, msg: Message, context: Context) -> Message:
        """Keep the rows at the positions the leader found."""
        return guarded(msg, context, _apply)


def _blind(msg: Message, context: Context) -> RecordDict:
    start = psi.PsiBlind.from_content(msg.content)
    path = context.node_config.get(P.NODE_DATA_PATH)
    if not path:
        raise ValueError(
            f"runtime.align_ids aligns the parties' own files: set node_config "
            f"'{P.NODE_DATA_PATH}' (party {node_partition_id(context)} has none)"
        )
    ids = party_file_ids(str(path), start.series)
    order = psi.secret_order(len(ids))
    secret = psi.new_secret()
    blinded = psi.blind(secret, psi.hash_ids([ids[i] for i in order], start.salt))
    # A new alignment replaces an earlier one (its rows are kept only once it is applied).
    _save(context, {"secret": secret.hex(), "order": order.tolist(), "n": len(ids)})
    return psi.PsiBlind(partition_id=node_partition_id(context), blinded=blinded).to_content()


def _cross(msg: Message, context: Context) -> RecordDict:
    relay = psi.PsiLists.from_content(msg.content)
    secret = bytes.fromhex(_load(context)["secret"])
    return psi.PsiLists([psi.blind(secret, points) for points in relay.lists]).to_content()


def _match(msg: Message, context: Context) -> RecordDict:
    if node_partition_id(context) != LEADER:
        raise ProtocolError(f"only party {LEADER} matches the lists")
    relay = psi.PsiLists.from_content(msg.content)
    state = _load(context)
    order = np.asarray(state["order"])
    if len(relay.lists) != len(relay.own) or any(len(p) != len(order) for p in relay.lists):
        raise ProtocolError("the relayed lists do not match this party's blinded IDs")
    # relay.lists[j] = k_j k_0 H(own IDs), relay.own[j] = k_0 k_j H(party j's IDs).
    keep, positions = psi.common_positions(relay.lists, relay.own)
    rows = order[keep]
    common = np.argsort(rows, kind="stable")  # the common order: the leader's row order
    state["rows"] = rows[common].tolist()
    _save(context, state)
    return psi.PsiPositions([np.asarray(p)[common].tolist() for p in positions]).to_content()


def _apply(msg: Message, context: Context) -> RecordDict:
    state = _load(context)
    order = np.asarray(state["order"])
    [positions] = psi.PsiPositions.from_content(msg.content, bound=len(order)).positions
    state["rows"] = order[positions].tolist()
    _save(context, state)
    return psi.PsiKept(len(positions)).to_content()


def _save(context: Context, state: dict) -> None:
    context.state[P.STATE_PSI] = ConfigRecord({"json": json.dumps(state)})


def _load(context: Context) -> dict:
    if P.STATE_PSI not in context.state:
        raise ProtocolError("an alignment message came before psi_blind")
    return dict(json.loads(str(context.state[P.STATE_PSI]["json"])))
