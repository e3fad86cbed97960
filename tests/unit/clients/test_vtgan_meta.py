"""A VT-GAN client's bookkeeping survives ``context.state`` as versioned JSON."""

from __future__ import annotations

import json

import pytest

from flwr_vflgan.clients.vtgan import VTPartyMeta
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime.blocks import StepBlock
from flwr_vflgan.runtime.codec import ProtocolError


def test_meta_round_trips_through_json() -> None:
    config = json.dumps(VFLGANConfig.from_dict({"variant": "vtgan"}).to_dict())
    meta = VTPartyMeta(config, "adult#0", 12, 1, layout=[8, 4, 4])
    meta.pending, meta.pending_chosen, meta.round = StepBlock(6, 3), [True, False, False], 2
    back = VTPartyMeta.from_json(meta.to_json())
    assert back == meta and back.pending == StepBlock(6, 3)
    assert back.algorithm.is_vtgan


def test_meta_of_another_schema_is_refused() -> None:
    text = json.loads(VTPartyMeta("{}", "k", 1, 0).to_json())
    text["schema_version"] = 2
    with pytest.raises(ProtocolError, match="client state has schema 2, this client reads 1"):
        VTPartyMeta.from_json(json.dumps(text))
