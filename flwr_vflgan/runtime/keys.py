"""Shared-seed agreement among the parties: X25519 key agreement, the server as relay.

The parties of a run need one seed that the server does not know (the common noise of
VFLGAN, VT-GAN's shuffle). Instead of a person handing it to every party, they agree on
it at the start of the run, over the server:

1. every party draws an X25519 key pair and sends its public key;
2. the server relays all public keys to every party; the *leader* (partition 0) draws a
   random seed and seals it for each other party ``j`` under a key derived from the
   X25519 secret it shares with ``j`` (HKDF-SHA256, then ChaCha20-Poly1305);
3. the server relays each sealed seed to its party, which opens it.

The server sees public keys and ciphertexts only. Against a *passive* server the seed is
secret (computing it means solving the Diffie-Hellman problem); a server that swapped the
public keys could read the seed, which is why a party may pin its peers' public keys
(``node_config`` ``peer-keys``) and use a fixed key pair of its own (``key-file``):
a relayed key that differs from a pinned one stops the run at that party. Every party
then reports a commitment to the seed at setup, so parties that ended with different
seeds stop the run before training.

Pure functions over bytes: no Flower here (the messages are in
:mod:`flwr_vflgan.runtime.messages`, the party's handler in ``clients/keys.py``).
"""

from __future__ import annotations

import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_BYTES = 32
NONCE_BYTES = 12
SEED_BOUND = 2**62
"""Agreed seeds are drawn from ``[0, SEED_BOUND)``, the range of a node_config seed."""
_INFO = b"flwr-vflgan shared-seed agreement v1\0"


class KeyAgreementError(ValueError):
    """A key or a sealed seed is malformed, or a seal does not open with this key."""


def new_private_key() -> bytes:
    """A fresh X25519 private key (32 raw bytes), from the operating system's randomness."""
    return X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )


def public_key(private: bytes) -> bytes:
    """The raw 32-byte public key of ``private``."""
    return (
        _private(private)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def draw_seed() -> int:
    """The leader's seed: uniform in ``[0, SEED_BOUND)``."""
    return secrets.randbelow(SEED_BOUND)


def seal(seed: int, private: bytes, peer_public: bytes, context: bytes) -> bytes:
    """``seed`` encrypted for the holder of ``peer_public`` (nonce + ciphertext + tag).

    ``context`` binds the seal to its run and to the two parties (the additional data of
    the cipher and the key derivation's info): a seal moved to another run or pair fails
    to open.
    """
    if not 0 <= seed < SEED_BOUND:
        raise KeyAgreementError(f"a seed must be in [0, 2**62), got {seed}")
    nonce = os.urandom(NONCE_BYTES)
    cipher = ChaCha20Poly1305(_pair_key(private, peer_public, context))
    return nonce + cipher.encrypt(nonce, seed.to_bytes(8, "big"), _INFO + context)


def open_seal(sealed: bytes, private: bytes, leader_public: bytes, context: bytes) -> int:
    """The seed inside ``sealed``.

    Raises
    ------
    KeyAgreementError
        The seal is malformed, or was not made for this key, this leader and this context.
    """
    if len(sealed) != NONCE_BYTES + 8 + 16:
        raise KeyAgreementError(f"a sealed seed has {NONCE_BYTES + 24} bytes, got {len(sealed)}")
    cipher = ChaCha20Poly1305(_pair_key(private, leader_public, context))
    try:
        plain = cipher.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _INFO + context)
    except InvalidTag:
        raise KeyAgreementError(
            "the sealed seed does not open with this party's key: it was made for another "
            "party, run or leader key, or changed on the way"
        ) from None
    return int.from_bytes(plain, "big")


def pair_context(run_seed: int, leader: int, party: int) -> bytes:
    """The context of the seal from ``leader`` to ``party`` in the run of ``run_seed``."""
    return b"".join(v.to_bytes(8, "big", signed=True) for v in (run_seed, leader, party))


def _pair_key(private: bytes, peer_public: bytes, context: bytes) -> bytes:
    shared = _private(private).exchange(_public(peer_public))
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO + context).derive(
        shared
    )


def _private(raw: bytes) -> X25519PrivateKey:
    if len(raw) != KEY_BYTES:
        raise KeyAgreementError(f"an X25519 private key has {KEY_BYTES} bytes, got {len(raw)}")
    return X25519PrivateKey.from_private_bytes(raw)


def _public(raw: bytes) -> X25519PublicKey:
    if len(raw) != KEY_BYTES:
        raise KeyAgreementError(f"an X25519 public key has {KEY_BYTES} bytes, got {len(raw)}")
    return X25519PublicKey.from_public_bytes(raw)
