"""GAFM's party state (GAFMPartyMeta): a typed, versioned JSON in ``context.state``."""

from __future__ import annotations

import json

import pytest

from flwr_vflgan.clients.gafm import GAFMPartyMeta
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError


def test_round_trip_keeps_every_field():
    meta = GAFMPartyMeta("{}", "key", 3, 1, last_step=7, last_sizes=[4, 4], opt_steps=[2])
    assert GAFMPartyMeta.from_json(meta.to_json()) == meta
    fresh = GAFMPartyMeta("{}", "key", 3, 1)
    assert (fresh.last_step, fresh.last_sizes) == (P.NO_STEP, [])


def test_state_of_another_schema_is_refused():
    values = json.loads(GAFMPartyMeta("{}", "key", 3, 1).to_json())
    values["schema_version"] = 99
    with pytest.raises(ProtocolError, match="schema 99"):
        GAFMPartyMeta.from_json(json.dumps(values))
