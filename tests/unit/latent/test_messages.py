"""The latent family's wire messages: round trips and what a malformed one is refused for."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ConfigRecord

from flwr_vflgan.latent.messages import (
    DecodeRequest,
    EncodeRequest,
    LatentSetupReply,
    LatentsReply,
)
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import SetupReply


def test_setup_reply_carries_the_common_facts_and_the_latent_width() -> None:
    reply = LatentSetupReply(1, 640, "ab" * 32, ["age", "sex"], 4)
    cfg = reply.to_content()[P.CONFIG]
    assert isinstance(cfg, ConfigRecord)
    assert SetupReply.common(cfg) == (1, 640, "ab" * 32)
    assert LatentSetupReply.width_of(cfg) == 4
    cfg["latent_width"] = 0
    with pytest.raises(ProtocolError, match="latent_width must be a positive integer, got 0"):
        LatentSetupReply.width_of(cfg)


def test_latents_round_trip_and_a_wrong_shape_or_value_is_refused() -> None:
    latents = np.arange(12, dtype=np.float32).reshape(4, 3)
    content = LatentsReply(latents).to_content()
    np.testing.assert_array_equal(LatentsReply.from_content(content, 4, 3).latents, latents)
    with pytest.raises(ProtocolError, match=r"must have shape \(5, 3\)"):
        LatentsReply.from_content(content, 5, 3)  # a party with a row missing
    bad = latents.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ProtocolError, match="non-finite"):
        LatentsReply.from_content(LatentsReply(bad).to_content(), 4, 3)


def test_decode_request_checks_its_announced_rows_and_the_width() -> None:
    latents = np.ones((6, 2), dtype=np.float32)
    content = DecodeRequest(latents).to_content()
    np.testing.assert_array_equal(DecodeRequest.from_content(content, 2).latents, latents)
    with pytest.raises(ProtocolError, match="must have shape"):
        DecodeRequest.from_content(content, 3)
    content[P.CONFIG] = ConfigRecord({"n_rows": 0})
    with pytest.raises(ProtocolError, match="n_rows must be a positive integer"):
        DecodeRequest.from_content(content, 2)


def test_encode_request_round_trips_its_checkpoint_flag() -> None:
    for flag in (False, True):
        assert EncodeRequest.from_content(EncodeRequest(flag).to_content()).checkpoint is flag
