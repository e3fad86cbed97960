"""Tests for DPLT's settings and wire messages: round trips and refusals by name."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ConfigRecord

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.dplt.config import DPLTSettings
from flwr_vflgan.dplt.messages import DecodeRequest, DPLTSetupReply, LatentsReply, LatentsRequest
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError


def test_settings_round_trip_and_refuse_bad_values_by_name() -> None:
    settings = DPLTSettings(bins=8, group_size=4, budget_split=(1, 2, 3))
    assert settings.budget_split == (1.0, 2.0, 3.0)
    assert DPLTSettings.from_dict(settings.to_dict()) == settings
    for bad, name in (
        ({"bins": 1}, "dplt.bins"),
        ({"group_size": 0}, "dplt.group_size"),
        ({"group_size": 17}, "dplt.group_size"),
        ({"latent_states": 1}, "dplt.latent_states"),
        ({"budget_split": (1, 0, 1)}, "dplt.budget_split"),
        ({"budget_split": (1, 1)}, "dplt.budget_split"),
    ):
        with pytest.raises(ValueError, match=name):
            DPLTSettings(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="valid"):
        DPLTSettings.from_dict({"groups": 3})


def test_the_algorithm_config_carries_dplt_and_needs_a_budget() -> None:
    config = VFLGANConfig.from_dict(
        {
            "variant": "dplt",
            "dp": {"mechanism": "end_to_end", "target_epsilon": 5.0},
            "dplt": {"bins": 8},
        }
    )
    assert config.is_dplt and config.dplt.bins == 8
    assert VFLGANConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match=r"dp=end_to_end dp\.target_epsilon"):
        VFLGANConfig.from_dict({"variant": "dplt"})
    with pytest.raises(ValueError, match=r"dp\.noise_multiplier"):
        VFLGANConfig.from_dict(
            {
                "variant": "dplt",
                "dp": {"mechanism": "end_to_end", "target_epsilon": 5.0, "noise_multiplier": 1.0},
            }
        )


def test_messages_round_trip() -> None:
    request = LatentsRequest(3.5, 12, 7)
    assert LatentsRequest.from_content(request.to_content()) == request
    states = np.array([[0, 3], [1, 2], [1, 0]])
    reply = LatentsReply.from_content(LatentsReply([2, 4], states).to_content(), 3)
    assert list(reply.counts) == [2, 4]
    np.testing.assert_array_equal(reply.states, states)
    np.testing.assert_array_equal(
        DecodeRequest.from_content(DecodeRequest(states).to_content(), [2, 4]).states, states
    )
    content = DPLTSetupReply(0, 3, "d", ["a"], 5).to_content()
    assert DPLTSetupReply.bits_of(content[P.CONFIG]) == 5


def test_malformed_messages_are_refused() -> None:
    states = np.array([[0, 3], [1, 2]])
    with pytest.raises(ProtocolError, match="outside"):  # state 3 beyond a count of 3
        LatentsReply.from_content(LatentsReply([2, 3], states).to_content(), 2)
    with pytest.raises(ProtocolError, match="shape"):  # rows other than agreed
        LatentsReply.from_content(LatentsReply([2, 4], states).to_content(), 5)
    with pytest.raises(ProtocolError, match="outside"):  # a state the party does not have
        DecodeRequest.from_content(DecodeRequest(states).to_content(), [2, 2])
    with pytest.raises(ProtocolError, match="epsilon > 0"):
        LatentsRequest.from_content(LatentsRequest(0.0, 1, 1).to_content())
    with pytest.raises(ProtocolError, match="bits"):
        DPLTSetupReply.bits_of(ConfigRecord({"bits": 0}))
