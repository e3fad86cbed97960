"""Row alignment by ID without showing IDs: Diffie-Hellman private set intersection
(Meadows 1986; Huberman, Franklin and Hogg 1999) on X25519, the server as relay.

Parties that hold different people (a bank's customers, a shop's) train on the people
they share. Each party knows its own IDs only; the protocol gives every party the common
IDs' rows in one order, and nothing else about the others' IDs:

1. **blind**: every party ``i`` draws a secret scalar ``k_i``, hashes each of its IDs to
   a curve point ``H(id)`` (SHA-256 with the run's salt, read as an X25519
   u-coordinate), and sends ``B_i = [k_i H(id)]`` in a random order only it knows;
2. **cross**: the leader (partition 0) receives every other party's ``B_j`` and returns
   ``k_0 B_j``; every other party ``j`` receives ``B_0`` and returns ``k_j B_0`` (same
   order). Scalar multiplication commutes, so ``k_0 k_j H(id)`` is the same for an ID
   either party holds;
3. **match**: the leader receives, for every ``j``, ``k_j B_0`` (party ``j``'s cross
   reply) and ``k_0 B_j`` (its own): both are ``k_0 k_j H(id)``, so the common IDs are
   its own IDs found in every list. It orders them by its own row order, keeps those
   rows, and tells each party ``j`` the positions in ``B_j`` of the same IDs, in that
   order;
4. **apply**: each party maps the positions through its secret order to its rows.

What each side learns (semi-honest parties and server; the Diffie-Hellman problem on
Curve25519 hard, SHA-256 a random oracle): the server sees how many IDs each party holds,
blinded points, and positions in randomly ordered lists; from the doubly blinded lists
it relays it can count each pairwise intersection, but not tell which rows. A party
other than the leader learns the common set (it must: it trains on those rows) and
nothing of the IDs it does not share. The leader also learns which of its IDs each
party shares (the pairwise intersections), more than the common set when there are
three or more parties. Not covered: parties or a server that deviate from the protocol
(a leader that lies about positions makes the parties train on misaligned rows, which
setup's ID digest check then catches; a party that blinds IDs it does not hold can test
whether someone holds them).

Pure functions over bytes and numpy arrays (the messages are below, the handlers in
``clients/psi.py``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from flwr.app import ConfigRecord, RecordDict

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError, get_config, get_field, get_int

POINT_BYTES = 32
_DOMAIN = b"flwr-vflgan psi v1\0"


def new_secret() -> bytes:
    """A fresh secret scalar (X25519 private key bytes; clamped when used)."""
    return os.urandom(POINT_BYTES)


def hash_ids(ids: Sequence[object], salt: bytes) -> list[bytes]:
    """Each ID as a point: SHA-256 of the domain, the run's salt and the ID's text."""
    prefix = _DOMAIN + len(salt).to_bytes(4, "big") + salt
    return [hashlib.sha256(prefix + str(i).encode("utf-8")).digest() for i in ids]


def blind(secret: bytes, points: Sequence[bytes]) -> list[bytes]:
    """``secret`` times every point (X25519). A point of small order, which a hash hits
    with negligible probability and only a cheating peer sends, is refused.

    Raises
    ------
    ProtocolError
        A point is not 32 bytes or has small order.
    """
    key = X25519PrivateKey.from_private_bytes(secret)
    out = []
    for point in points:
        if len(point) != POINT_BYTES:
            raise ProtocolError(f"a blinded ID has {POINT_BYTES} bytes, got {len(point)}")
        try:
            out.append(key.exchange(X25519PublicKey.from_public_bytes(point)))
        except ValueError as exc:  # cryptography refuses an all-zero result
            raise ProtocolError(f"a blinded ID is a point of small order: {exc}") from None
    return out


def common_positions(
    own_double: Sequence[Sequence[bytes]], others_double: Sequence[Sequence[bytes]]
) -> tuple[list[int], list[list[int]]]:
    """The leader's match.

    ``own_double[j]`` is ``k_0 k_j H`` of the leader's list (its positions), and
    ``others_double[j]`` is ``k_0 k_j H`` of party ``j``'s list (``j``'s positions), for
    every other party. Returns the positions in the leader's list of the IDs every list
    holds (ascending), and for each party the positions in its own list of the same IDs,
    in the same order.

    Raises
    ------
    ValueError
        A list repeats an ID (two equal points), or no ID is common to all.
    """
    if len(own_double) != len(others_double):
        raise ValueError(f"{len(own_double)} own lists but {len(others_double)} others'")
    where = []
    for j, theirs in enumerate(others_double):
        index = {point: pos for pos, point in enumerate(theirs)}
        if len(index) != len(theirs):
            raise ValueError(f"party {j + 1}'s blinded IDs repeat: every ID must be unique")
        where.append(index)
    n_own = len(own_double[0]) if own_double else 0
    keep = [
        p for p in range(n_own) if all(own_double[j][p] in where[j] for j in range(len(own_double)))
    ]
    if not keep:
        raise ValueError("the parties hold no ID in common: there is nothing to train on")
    return keep, [[where[j][own_double[j][p]] for p in keep] for j in range(len(own_double))]


# -- messages -----------------------------------------------------------------------------
def _points(record: ConfigRecord, key: str) -> list[bytes]:
    value = get_field(record, key, bytes)
    assert isinstance(value, bytes)  # checked by get_field
    if len(value) % POINT_BYTES:
        raise ProtocolError(f"field {key!r} holds {len(value)} bytes, not whole 32-byte points")
    return [value[i : i + POINT_BYTES] for i in range(0, len(value), POINT_BYTES)]


def _point_lists(record: ConfigRecord, key: str) -> list[list[bytes]]:
    values = get_field(record, key, list)
    assert isinstance(values, list)  # checked by get_field
    if not all(isinstance(v, bytes) and len(v) % POINT_BYTES == 0 for v in values):
        raise ProtocolError(f"field {key!r} must be a list of whole 32-byte point lists")
    return [[v[i : i + POINT_BYTES] for i in range(0, len(v), POINT_BYTES)] for v in values]


def _positions(record: ConfigRecord, key: str, bound: int | None = None) -> list[int]:
    values = get_field(record, key, list)
    assert isinstance(values, list)  # checked by get_field
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ProtocolError(f"field {key!r} must list non-negative integers")
    if bound is not None and any(v >= bound for v in values):
        raise ProtocolError(f"field {key!r} names a position beyond the {bound} IDs")
    if len(set(values)) != len(values):
        raise ProtocolError(f"field {key!r} repeats a position")
    return list(values)


@dataclass(frozen=True)
class PsiBlind:
    """Server -> party: start (``salt`` binds the hashes to this run; ``series``: the
    party's file holds series, whose IDs are its ``series`` column). Party -> server:
    its partition id and blinded IDs in its secret order."""

    salt: bytes = b""
    partition_id: int = -1
    blinded: Sequence[bytes] = ()
    series: bool = False

    def to_content(self) -> RecordDict:
        """The message content."""
        fields = {
            "salt": self.salt,
            "partition_id": self.partition_id,
            "blinded": b"".join(self.blinded),
            "series": self.series,
        }
        return RecordDict({P.PSI: ConfigRecord(fields)})  # type: ignore[arg-type]

    @classmethod
    def from_content(cls, content: RecordDict) -> PsiBlind:
        """Decode (ProtocolError if malformed)."""
        record = get_config(content, P.PSI)
        salt = get_field(record, "salt", bytes)
        series = get_field(record, "series", bool)
        assert isinstance(salt, bytes) and isinstance(series, bool)
        blinded = _points(record, "blinded")
        return cls(salt, get_int(record, "partition_id"), blinded, series)


@dataclass(frozen=True)
class PsiLists:
    """Lists of points by party: the cross round's instruction (lists to blind again) and
    reply (the same lists blinded), and the match round's instruction to the leader
    (``lists``: ``k_j B_0`` from each party; ``own``: ``k_0 B_j``, its cross reply)."""

    lists: Sequence[Sequence[bytes]]
    own: Sequence[Sequence[bytes]] = ()

    def to_content(self) -> RecordDict:
        """The message content."""
        fields = {
            "lists": [b"".join(points) for points in self.lists],
            "own": [b"".join(points) for points in self.own],
        }
        return RecordDict({P.PSI: ConfigRecord(fields)})  # type: ignore[arg-type]

    @classmethod
    def from_content(cls, content: RecordDict) -> PsiLists:
        """Decode (ProtocolError if malformed)."""
        record = get_config(content, P.PSI)
        return cls(_point_lists(record, "lists"), _point_lists(record, "own"))


@dataclass(frozen=True)
class PsiPositions:
    """Positions by party: the leader's match reply (for every other party, the common
    IDs' positions in its list, in the common order) and the apply instruction (one
    party's positions); the apply reply carries the rows kept."""

    positions: Sequence[Sequence[int]]

    def to_content(self) -> RecordDict:
        """The message content."""
        fields: dict[str, object] = {f"p{j}": list(p) for j, p in enumerate(self.positions)}
        fields["parties"] = len(self.positions)
        return RecordDict({P.PSI: ConfigRecord(fields)})  # type: ignore[arg-type]

    @classmethod
    def from_content(cls, content: RecordDict, bound: int | None = None) -> PsiPositions:
        """Decode (ProtocolError if malformed; ``bound``: the list length positions index)."""
        record = get_config(content, P.PSI)
        n = get_int(record, "parties")
        if n < 0:
            raise ProtocolError(f"field 'parties' must be >= 0, got {n}")
        positions = [_positions(record, f"p{j}", bound) for j in range(n)]
        if len({len(p) for p in positions}) > 1:
            raise ProtocolError("the parties' position lists differ in length")
        return cls(positions)


@dataclass(frozen=True)
class PsiKept:
    """Party -> server, after apply: how many of its rows it keeps."""

    kept: int

    def to_content(self) -> RecordDict:
        """The message content."""
        return RecordDict({P.PSI: ConfigRecord({"kept": self.kept})})

    @classmethod
    def from_content(cls, content: RecordDict) -> PsiKept:
        """Decode (ProtocolError if malformed)."""
        return cls(get_int(get_config(content, P.PSI), "kept"))


def secret_order(n: int) -> np.ndarray:
    """A random order of ``n`` rows from the operating system's generator (the positions
    the server sees must say nothing about which rows they are)."""
    return np.random.default_rng(int.from_bytes(os.urandom(16), "big")).permutation(n)
