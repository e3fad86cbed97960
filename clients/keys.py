"""A party's side of the shared-seed agreement (:mod:`flwr_vflgan.runtime.keys`).

Three messages before setup: ``key_offer`` (answer with a public key), ``key_seal`` (the
relayed public keys: the leader seals a fresh seed for every other party, the others
remember the leader's key) and ``key_open`` (open the seed the leader sealed). The
private key and the agreed seed stay in ``context.state``; the family clients' setup then
takes the agreed seed (:func:`~flwr_vflgan.clients.common.node_shared_seed`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from flwr.app import ConfigRecord, Context, Message, RecordDict

from flwr_vflgan.runtime import keys as K
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import KeyOffer, KeyOpen, KeySeal

from .common import guarded, node_partition_id

LEADER = 0
"""The partition that draws and seals the seed."""


class KeyAgreementClient:
    """Message handlers of a party's shared-seed agreement (every GAN family uses them)."""

    def offer(self, msg: Message, context: Context) -> Message:
        """Draw (or load) this party's key pair; answer with the public key."""
        return guarded(msg, context, _offer)

    def seal(self, msg: Message, context: Context) -> Message:
        """Check the relayed keys; the leader seals a fresh seed for every other party."""
        return guarded(msg, context, _seal)

    def open(self, msg: Message, context: Context) -> Message:
        """Open the seed the leader sealed for this party."""
        return guarded(msg, context, _open)


def _offer(msg: Message, context: Context) -> RecordDict:
    path = context.node_config.get(P.NODE_KEY_FILE)
    private = _key_file(str(path)) if path else K.new_private_key()
    _save(context, {"private": private.hex()})
    return KeyOffer(node_partition_id(context), K.public_key(private)).to_content()


def _seal(msg: Message, context: Context) -> RecordDict:
    relay = KeySeal.from_content(msg.content)
    state = _load(context)
    private = bytes.fromhex(state["private"])
    me = node_partition_id(context)
    if me >= len(relay.public_keys) or relay.public_keys[me] != K.public_key(private):
        raise ProtocolError(f"the relayed public key of party {me} is not this party's")
    _check_pinned(context, relay.public_keys)
    state.update(leader=relay.public_keys[LEADER].hex(), run_seed=relay.run_seed)
    if me != LEADER:
        _save(context, state)
        return KeySeal.reply([])
    seed = K.draw_seed()
    sealed = [
        b"" if j == LEADER else K.seal(seed, private, key, K.pair_context(relay.run_seed, me, j))
        for j, key in enumerate(relay.public_keys)
    ]
    _save(context, {**state, "seed": seed})
    return KeySeal.reply(sealed)


def _open(msg: Message, context: Context) -> RecordDict:
    sealed = KeyOpen.from_content(msg.content).sealed
    state = _load(context)
    if "leader" not in state:
        raise ProtocolError("a sealed seed arrived before the relayed public keys")
    me = node_partition_id(context)
    try:
        seed = K.open_seal(
            sealed,
            bytes.fromhex(state["private"]),
            bytes.fromhex(state["leader"]),
            K.pair_context(int(state["run_seed"]), LEADER, me),
        )
    except K.KeyAgreementError as exc:
        raise ProtocolError(str(exc)) from None
    _save(context, {**state, "seed": seed})
    return RecordDict({P.KEYS: ConfigRecord({"opened": True})})


def _check_pinned(context: Context, relayed: Sequence[bytes]) -> None:
    """Stop unless every pinned peer key (``node_config`` ``peer-keys``) was relayed as is."""
    pinned = str(context.node_config.get(P.NODE_PEER_KEYS, "") or "")
    if not pinned:
        return
    expected = [k.strip() for k in pinned.split(",")]
    if len(expected) != len(relayed):
        raise ValueError(
            f"node_config '{P.NODE_PEER_KEYS}' pins {len(expected)} public keys, but the run "
            f"has {len(relayed)} parties"
        )
    for pid, (want, got) in enumerate(zip(expected, relayed, strict=True)):
        if want and want.lower() != got.hex():
            raise ValueError(
                f"the server relayed a public key for party {pid} that differs from the one "
                f"pinned in node_config '{P.NODE_PEER_KEYS}': refusing to seal or open a seed "
                "(a relay that swaps keys could read it)"
            )


def _key_file(path: str) -> bytes:
    try:
        text = Path(path).read_text().strip()
        key = bytes.fromhex(text)
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"node_config '{P.NODE_KEY_FILE}' {path!r} must be a readable file of 64 hex "
            f"digits (an X25519 private key): {exc}"
        ) from None
    if len(key) != K.KEY_BYTES:
        raise ValueError(f"the key file {path!r} holds {len(key)} bytes, an X25519 key has 32")
    return key


def _load(context: Context) -> dict:
    if P.STATE_KEYS not in context.state:
        raise ProtocolError("key agreement message before this party offered its key")
    return dict(json.loads(str(context.state[P.STATE_KEYS]["json"])))


def _save(context: Context, state: dict) -> None:
    context.state[P.STATE_KEYS] = ConfigRecord({"json": json.dumps(state)})
