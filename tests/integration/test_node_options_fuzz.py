"""A party node's options, generated (property-based, hypothesis): any ``node_config``
values for the keys an operator sets (partition id, data path, shared seed, checkpoint
and noise seed, key file, pinned peer keys), of any type. A setup either succeeds or is
answered with an error reply naming what is wrong (a data or protocol error); never an
internal error, which would mean an unexpected exception and a traceback at the party."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from flwr.app import Message, RecordDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.clients.common import ERROR_DATA, ERROR_PROTOCOL
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import ExportConfig
from flwr_vflgan.simulations.export_parties import export_parties
from flwr_vflgan.strategies import InProcessGrid, VFLGANStrategy

# Its tests share a module fixture: one worker runs them all (pyproject: loadgroup).
pytestmark = pytest.mark.xdist_group("test_node_options_fuzz")

JUNK = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
    st.sampled_from(["", " ", "0", "1", "-1", "1e3", "0x10", "None", "[]", "{}", " 7 "]),
    st.sampled_from([float("inf"), float("-inf"), float("nan"), 1.5, 1.0, -0.0, True, 2**64]),
)


@pytest.fixture(scope="module")
def party_files(tmp_path_factory: pytest.TempPathFactory, adult_small: Path) -> list[Path]:
    out = tmp_path_factory.mktemp("parties")
    spec = DataSpec(source=str(adult_small), n_parties=2)
    return list(export_parties(spec, ExportConfig(out_dir=str(out))).data_files)


@st.composite
def node_configs(draw: st.DrawFn, files: list[str], directory: str) -> dict:
    """A node_config with each key absent, sensible or junk."""
    choices = {
        # Mostly sensible, so that the keys read after these are reached too.
        P.NODE_PARTITION_ID: st.one_of(
            st.integers(0, 1), st.integers(0, 1), st.integers(-2, 3), JUNK
        ),
        P.NODE_DATA_PATH: st.one_of(
            st.sampled_from(files),
            st.sampled_from(files),
            st.sampled_from([directory, f"{directory}/missing.csv", "/"]),
            JUNK,
        ),
        P.NODE_SHARED_SEED: st.one_of(st.integers(-5, 2**64), JUNK),
        P.NODE_CHECKPOINT_DIR: st.one_of(st.sampled_from([directory, files[0]]), JUNK),
        P.NODE_NOISE_SEED: st.one_of(st.integers(-5, 2**64), JUNK),
        P.NODE_KEY_FILE: st.one_of(st.sampled_from([files[0], f"{directory}/none.key"]), JUNK),
        P.NODE_PEER_KEYS: st.one_of(st.just(json.dumps(["ab" * 32])), JUNK),
    }
    config = {}
    for key, values in choices.items():
        wanted = key in (P.NODE_PARTITION_ID, P.NODE_DATA_PATH)
        if draw(st.integers(0, 9)) < (9 if wanted else 5):
            value = draw(values)
            config[key] = value if isinstance(value, bool | int | float | str) else str(value)
    return config


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "80")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_node_options_set_up_or_get_a_named_error(
    data: st.DataObject, party_files: list[Path], tmp_path: Path
) -> None:
    files = [str(p) for p in party_files]
    node_config = data.draw(node_configs(files, str(tmp_path)))
    grid = InProcessGrid(make_client_app(), [node_config])
    node = next(iter(grid.get_node_ids()))
    kind = data.draw(st.sampled_from(["setup", "dp setup", "key offer"]))
    if kind == "key offer":  # reads key-file and peer-keys
        message = Message(RecordDict(), node, P.KEY_OFFER)
    else:  # a DP setup also reads noise-seed
        dp = {"mechanism": "vflgan_gaussian", "target_epsilon": 10.0} if kind == "dp setup" else {}
        config = VFLGANConfig.from_dict({"train": {"epochs": 1}, "dp": dp})
        [message] = VFLGANStrategy(config, n_parties=2).configure_setup([node], P.NO_STEP)
    [message_id] = grid.push_messages([message])
    [reply] = grid.pull_messages([message_id])
    if reply.has_error():
        assert reply.error.code in (ERROR_DATA, ERROR_PROTOCOL), (node_config, reply.error.reason)
        assert reply.error.reason, node_config
    else:
        # What a party accepted it read exactly: no fraction rounded away.
        read = {
            "setup": (P.NODE_PARTITION_ID, P.NODE_SHARED_SEED),
            "dp setup": (P.NODE_PARTITION_ID, P.NODE_SHARED_SEED, P.NODE_NOISE_SEED),
            "key offer": (P.NODE_PARTITION_ID,),
        }[kind]
        for key in read:
            value = node_config.get(key)
            assert not isinstance(value, float) or value.is_integer(), (key, value)
