"""Protocol audit: record every message of a run and check what crosses the wire.

Raw data never leaves a party; the server sees intermediate features, synthetic rows
and the parties' row count and ID digest, and never the shared noise seed, row indices
or real rows; what the server sends holds configuration and feature gradients only.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message
from wire import SETUP_FIELDS, check_listed_fields

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.messages import PACKED
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.simulations.pipeline import Evaluator
from flwr_vflgan.strategies import InProcessGrid, VFLGANStrategy

SHARED = 987654321123
NOISE_SEED = 555666777888
BATCH, FEATURE = 64, 128
DP = {"mechanism": "vflgan_gaussian", "target_epsilon": 10.0, "delta": 1e-5}


def _record_run(
    adult_small: Path, dp: dict | None = None, steps_per_exchange: int = 1
) -> tuple[list[Message], list[Message], list]:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    train = {"epochs": 2, "eval_rows": 100, "steps_per_exchange": steps_per_exchange}
    config = VFLGANConfig.from_dict({"train": train, "dp": dp or {}})
    blocks = all_blocks(spec)
    log: list[Message] = []
    grid = InProcessGrid(
        make_client_app(),
        [
            {"partition-id": i, "shared-seed": SHARED, P.NODE_NOISE_SEED: NOISE_SEED + i}
            for i in range(2)
        ],
        observer=log.append,
    )
    strategy = VFLGANStrategy(
        config,
        n_parties=2,
        seed=1,
        data_spec=spec,
        evaluate_fn=Evaluator(blocks).encoded_fd,
        publish_rows=120,
    )
    strategy.start(grid)
    to_parties = [m for m in log if m.metadata.reply_to_message_id == ""]
    to_server = [m for m in log if m.metadata.reply_to_message_id != ""]
    return to_parties, to_server, blocks


ALLOWED: dict[tuple[str, str], dict[str, set[str]]] = {
    # Server -> party: configuration and the gradients w.r.t. the party's features.
    ("to_party", P.SETUP): {P.CONFIG: set(SETUP_FIELDS)},
    ("to_party", P.STEP): {
        P.CONFIG: {
            "apply_count",
            "apply_start",
            "checkpoint",
            "eval_draw",
            "eval_rows",
            "forward_count",
            "forward_start",
            PACKED,
            "promote_best",
        }
    },
    ("to_party", P.GENERATE): {P.CONFIG: {"draw", "n_rows", "promote_best", "use_best"}},
    # Party -> server: setup facts, features (packed), evaluation rows, the publication.
    ("to_server", P.SETUP): {
        P.CONFIG: {
            "partition_id",
            "n_rows",
            "id_digest",
            "dp_allowed_steps",  # a count of steps; -1 without DP
            "seed_commitment",  # a hash of the shared seed, the same from every party
            "columns",  # the party's column names (the published table has them too)
        }
    },
    ("to_server", P.STEP): {
        P.CONFIG: {"batch_rows", "forward_count", "forward_start", PACKED},
        P.FEATURES: {P.ROWS},
    },
    ("to_server", P.GENERATE): {P.SYNTHETIC: {"n_rows", "parquet", "privacy"}},
}
"""Every record and field each kind of message may carry, per direction: a field added on
either side (a raw column in a step reply, say) fails the audit until it is listed here."""


def _check_fields(message: Message, direction: str) -> None:
    """The message's records and fields are the listed ones (at most), and a party's
    step-reply config fields besides the packed features are step bookkeeping: integers
    or lists of integers (batch sizes), never floats or text that could carry a column."""
    check_listed_fields(message, direction, ALLOWED)
    if direction == "to_server" and message.metadata.message_type == P.STEP:
        for key, value in message.content[P.CONFIG].items():
            if key == PACKED:
                continue
            items = value if isinstance(value, list) else [value]
            assert all(isinstance(v, int) and not isinstance(v, bool) for v in items), key
            if key == "batch_rows":
                assert all(0 < v <= BATCH for v in items), value


def _config_values(message: Message) -> list[object]:
    """Config values, without a packed block's float32 bytes (the features and gradients,
    checked on their own; their repr could spell any digits)."""
    values: list[object] = []
    for record in message.content.values():
        if isinstance(record, ConfigRecord):
            values += [v for k, v in record.items() if k != PACKED]
    return values


@pytest.mark.parametrize(
    ("dp", "k"), [(None, 1), (DP, 1), (DP, 4)], ids=["no-dp", "dp", "dp-4-steps-per-exchange"]
)
def test_every_message_carries_only_what_the_protocol_allows(
    adult_small: Path, dp: dict | None, k: int
) -> None:
    to_parties, to_server, blocks = _record_run(adult_small, dp, k)
    # A block of k steps packs at most k x (real + fake) rows of B features each.
    packed_rows = set(range(BATCH, 2 * BATCH * k + 1, BATCH))
    secrets = (SHARED, NOISE_SEED, NOISE_SEED + 1)
    assert len(to_parties) == len(to_server) > 20 // k
    assert all(not m.has_error() for m in to_server)

    # Server -> parties: configuration and gradients w.r.t. the parties' features only.
    for message in to_parties:
        kind = message.metadata.message_type
        assert kind in (P.SETUP, P.STEP, P.GENERATE)
        _check_fields(message, "to_party")
        # A block this small travels inside the config record (no array record at all).
        assert set(message.content) == {P.CONFIG}
        if PACKED in message.content[P.CONFIG]:
            # Float32 gradients w.r.t. the FEATURE-wide features: per step of the block,
            # real (D steps) then fake rows.
            raw = message.content[P.CONFIG][PACKED]
            assert isinstance(raw, bytes) and len(raw) % (FEATURE * 4) == 0
            assert len(raw) // (FEATURE * 4) in packed_rows
            assert np.isfinite(np.frombuffer(raw, "<f4")).all()
        # The server never knows, so never sends, the parties' shared or noise seeds.
        for value in _config_values(message):
            assert all(value != seed and str(seed) not in str(value) for seed in secrets)

    # Parties -> server: row count and ID digest, features, encoded synthetic rows, and the
    # decoded synthetic publication. Every array is float32: no integer row indices.
    widths = {b.encoder.output_dim for b in blocks}
    for message in to_server:
        kind = message.metadata.message_type
        _check_fields(message, "to_server")
        config = message.content.get(P.CONFIG)
        if isinstance(config, ConfigRecord) and PACKED in config:
            # The block's features: float32, FEATURE wide, the rows of the block's steps.
            raw = config[PACKED]
            assert isinstance(raw, bytes) and len(raw) % (FEATURE * 4) == 0
            assert len(raw) // (FEATURE * 4) in packed_rows
        if kind == P.SETUP:
            assert set(message.content[P.CONFIG]) == ALLOWED[("to_server", P.SETUP)][P.CONFIG]
            assert (message.content[P.CONFIG]["dp_allowed_steps"] == -1) == (dp is None)
            # SHA-256 of the tag, the run seed (the strategy's, 1) and the shared seed.
            tag = b"flwr-vflgan shared-seed commitment v1\0"
            payload = tag + (1).to_bytes(8, "big") + SHARED.to_bytes(8, "big")
            expected = hashlib.sha256(payload).hexdigest()
            assert message.content[P.CONFIG]["seed_commitment"] == expected
            pid = int(message.content[P.CONFIG]["partition_id"])  # type: ignore[call-overload]
            assert message.content[P.CONFIG]["columns"] == list(blocks[pid].schema.names)
        for record in message.content.values():
            if not isinstance(record, ArrayRecord):
                continue
            for key, array in record.items():
                assert array.dtype in ("float32", "<f4"), key
                if key == PACKED:
                    assert array.shape[1] == FEATURE and array.shape[0] in packed_rows
                else:
                    assert key == P.ROWS and array.shape[1] in widths
        for value in _config_values(message):
            assert all(value != seed and str(seed) not in str(value) for seed in secrets)
        if kind == P.GENERATE:
            # The party's own account of what it spent (a JSON summary, no seed).
            assert bool(message.content[P.SYNTHETIC]["privacy"]) == (dp is not None)


def test_no_real_row_reaches_the_server(adult_small: Path) -> None:
    """Neither encoded real rows nor real column blocks appear in any party's message."""
    _, to_server, blocks = _record_run(adult_small)
    encoded_rows = [{row.tobytes() for row in b.encoded.numpy().astype(np.float32)} for b in blocks]
    for message in to_server:
        for record in message.content.values():
            if isinstance(record, ArrayRecord) and P.ROWS in record:
                rows = record[P.ROWS].numpy()
                party = [b.encoder.output_dim for b in blocks].index(rows.shape[1])
                leaked = sum(r.tobytes() in encoded_rows[party] for r in rows.astype(np.float32))
                assert leaked == 0
            if isinstance(record, ArrayRecord) and PACKED in record:
                # Features are D_i^1 outputs, not the (narrower) encoded rows themselves.
                assert (
                    record[PACKED].shape[1] == FEATURE != min(b.encoder.output_dim for b in blocks)
                )
    publications = [m for m in to_server if m.metadata.message_type == P.GENERATE]
    assert len(publications) == 2
    for message, block in zip(publications, blocks, strict=True):
        table = pd.read_parquet(io.BytesIO(message.content[P.SYNTHETIC]["parquet"]))
        # A party publishes its own columns only, synthetic and of the requested size.
        assert list(table.columns) == block.schema.names and len(table) == 120
        # ... and not its training rows: each block has a continuous column, so an exact
        # copy of a training row is rare by chance (none in the measured runs).
        training = set(map(tuple, block.frame[block.schema.names].astype(str).values.tolist()))
        copies = sum(row in training for row in map(tuple, table.astype(str).values.tolist()))
        assert copies <= 0.05 * len(table), f"{copies} of {len(table)} published rows are real"


def test_the_server_strategy_holds_no_party_seed_or_data(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    strategy = VFLGANStrategy(VFLGANConfig(), n_parties=2, seed=1, data_spec=spec)
    setup = strategy.configure_setup([1001, 1002], P.NO_STEP)
    for message in setup:
        assert str(SHARED) not in repr(dict(message.content[P.CONFIG]))
    assert not any(isinstance(v, (np.ndarray, pd.DataFrame)) for v in vars(strategy).values())
