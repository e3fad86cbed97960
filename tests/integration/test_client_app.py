"""The ClientApp as Flower's simulation engine ships it: pickled anew with every message.

Ray sends the ClientApp to its worker by value (cloudpickle) with each message. The
party's caches (its table, its models) must still be there for the next message, or
every message reloads the data: that cost most of an exchange in the simulation engine.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import cloudpickle
import pytest

from flwr_vflgan.clients import client_app as client_app_module
from flwr_vflgan.clients import make_client_app, vflgan
from flwr_vflgan.clients.client_app import PartyClients
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.strategies import InProcessGrid, VFLGANStrategy

CONFIG = VFLGANConfig.from_dict({"train": {"epochs": 1, "max_steps": 4, "eval_every": 0}})


def test_party_clients_unpickle_as_one_instance_per_token(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(client_app_module, "_RECEIVED", {})
    sent = PartyClients()
    first, second = pickle.loads(pickle.dumps(sent)), pickle.loads(pickle.dumps(sent))
    assert first is second and first is not sent
    assert first.token == sent.token
    assert first.client("vflgan") is second.client("vflgan")
    assert pickle.loads(pickle.dumps(PartyClients())) is not first


def _setup(app_copy: object, spec: DataSpec) -> None:
    nodes = [{"partition-id": i, "shared-seed": 7} for i in range(2)]
    grid = InProcessGrid(app_copy, nodes)  # type: ignore[arg-type]
    strategy = VFLGANStrategy(CONFIG, n_parties=2, data_spec=spec)
    ids = grid.push_messages(strategy.configure_setup(sorted(grid.get_node_ids()), P.NO_STEP))
    for reply in grid.pull_messages(list(ids)):
        assert not reply.has_error(), reply.error.reason


def test_a_pickled_client_app_keeps_the_party_data_between_messages(
    adult_small: Path, monkeypatch: pytest.MonkeyPatch
):
    loads: list[int] = []
    real_party_block = vflgan.party_block

    def counting_party_block(spec: DataSpec, partition_id: int) -> object:
        loads.append(partition_id)
        return real_party_block(spec, partition_id)

    monkeypatch.setattr(vflgan, "party_block", counting_party_block)
    monkeypatch.setattr(client_app_module, "_RECEIVED", {})  # this test's workers only
    spec = DataSpec(source=str(adult_small), n_parties=2)
    app = make_client_app()
    shipped = cloudpickle.dumps(app)
    _setup(cloudpickle.loads(shipped), spec)
    _setup(cloudpickle.loads(shipped), spec)
    assert sorted(loads) == [0, 1], "the second copy of the ClientApp reloaded the party's table"
    # A different ClientApp (another run) has clients of its own.
    _setup(cloudpickle.loads(cloudpickle.dumps(make_client_app())), spec)
    assert sorted(loads) == [0, 0, 1, 1]


def test_every_message_type_of_the_protocol_reaches_a_family_client_method():
    from flwr_vflgan.clients.client_app import CLIENT_FAMILIES
    from flwr_vflgan.plugin import load_attribute

    sent = {
        value
        for name, value in vars(P).items()
        if name.isupper()
        and isinstance(value, str)
        and value.split(".")[0] in ("query", "train", "evaluate")
        and "." in value
    }
    handled: list[str] = []
    for family, entry in CLIENT_FAMILIES.items():
        client = load_attribute(entry.client)()
        for message_type, method in entry.handlers.items():
            assert callable(getattr(client, method, None)), f"{family}: no method {method}"
            handled.append(message_type)
    assert len(handled) == len(set(handled)), "a message type is claimed by two families"
    assert set(handled) == sent
