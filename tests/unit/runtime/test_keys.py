"""Shared-seed agreement (flwr_vflgan.runtime.keys): seals open only for their party, run
and leader."""

from __future__ import annotations

import pytest

from flwr_vflgan.runtime import keys as K


def _pair() -> tuple[bytes, bytes]:
    private = K.new_private_key()
    return private, K.public_key(private)


def test_a_sealed_seed_opens_for_its_party_only() -> None:
    leader, leader_public = _pair()
    party, party_public = _pair()
    other, _ = _pair()
    context = K.pair_context(7, 0, 1)
    seed = K.draw_seed()
    sealed = K.seal(seed, leader, party_public, context)
    assert K.open_seal(sealed, party, leader_public, context) == seed
    assert seed.to_bytes(8, "big") not in sealed  # encrypted, not encoded
    with pytest.raises(K.KeyAgreementError, match="does not open with this party's key"):
        K.open_seal(sealed, other, leader_public, context)
    with pytest.raises(K.KeyAgreementError, match="does not open"):
        K.open_seal(sealed, party, leader_public, K.pair_context(8, 0, 1))  # another run
    with pytest.raises(K.KeyAgreementError, match="does not open"):
        K.open_seal(sealed, party, leader_public, K.pair_context(7, 0, 2))  # another party
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(K.KeyAgreementError, match="does not open"):
        K.open_seal(tampered, party, leader_public, context)


def test_seals_of_one_seed_differ_and_seeds_are_fresh() -> None:
    leader, _ = _pair()
    _, party_public = _pair()
    context = K.pair_context(1, 0, 1)
    assert K.seal(5, leader, party_public, context) != K.seal(5, leader, party_public, context)
    assert len({K.draw_seed() for _ in range(50)}) == 50
    assert all(0 <= K.draw_seed() < K.SEED_BOUND for _ in range(50))


def test_malformed_keys_and_seals_are_named() -> None:
    private, public = _pair()
    context = K.pair_context(1, 0, 1)
    with pytest.raises(K.KeyAgreementError, match="private key has 32 bytes, got 3"):
        K.public_key(b"abc")
    with pytest.raises(K.KeyAgreementError, match="public key has 32 bytes, got 5"):
        K.seal(1, private, b"short", context)
    with pytest.raises(K.KeyAgreementError, match="sealed seed has 36 bytes, got 2"):
        K.open_seal(b"no", private, public, context)
    with pytest.raises(K.KeyAgreementError, match=r"seed must be in \[0, 2\*\*62\)"):
        K.seal(-1, private, public, context)
