"""VT-GAN over real Flower messages (in-process grid): training and publication, the
message audit, and the shuffling defence against the server's reconstruction attack."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from wire import SETUP_FIELDS, check_listed_fields

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data import load_dataset
from flwr_vflgan.metrics.similarity import jensen_shannon_divergences
from flwr_vflgan.privacy.updates import PerSampleUpdate
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec, party_block
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VTGANStrategy
from flwr_vflgan.vtgan.attacks import reconstruct_column, reconstruction_accuracy
from flwr_vflgan.vtgan.messages import PACKED, SELECTED

SHARED = 987654321123
SMALL = {"latent_dim": 16, "generator_width": 32, "discriminator_width": 32}


def _config(epochs: int = 2, batch: int = 64, lr: float = 2e-4, **vtgan: object) -> VFLGANConfig:
    return VFLGANConfig.from_dict(
        {
            "variant": "vtgan",
            "train": {
                "epochs": epochs,
                "batch_size": batch,
                "lr": lr,
                "betas": [0.5, 0.9],
                "gp_weight": 10.0,
                "n_critic": 5,
            },
            "vtgan": {**SMALL, **vtgan},
        }
    )


def _run(
    source: Path,
    n_parties: int,
    config: VFLGANConfig,
    log: list[Message] | None = None,
    rows: int = 200,
) -> tuple:
    spec = DataSpec(source=str(source), n_parties=n_parties)
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": SHARED} for i in range(n_parties)],
        observer=log.append if log is not None else None,
    )
    strategy = VTGANStrategy(config, n_parties=n_parties, seed=3, data_spec=spec, publish_rows=rows)
    return strategy.start(grid), strategy, spec


@pytest.mark.parametrize(("n_parties", "max_jsd"), [(2, 0.3), (3, 0.35)])
def test_vtgan_trains_and_publishes_a_table_with_real_marginals(
    adult_small: Path, n_parties: int, max_jsd: float
) -> None:
    result, strategy, _spec = _run(adult_small, n_parties, _config(epochs=25, lr=1e-3), rows=640)
    real = pd.read_csv(adult_small)
    table = result.synthetic
    assert list(table.columns) == list(real.columns)
    assert len(table) == 640
    # Adult's workclass, occupation and native-country have missing values, kept as a
    # category; every other column is complete in the real table and must be here.
    complete = [c for c in real.columns if real[c].notna().all()]
    assert table[complete].notna().all().all()
    # 25 epochs of 10 D steps and 2 G steps each (an epoch ends with a G step); 1
    # exchange per D step, 2 per G step, plus setup, build, the first conditions and the
    # 2 publication exchanges.
    assert result.steps == 25 * 12
    assert result.exchanges == 250 + 2 * 50 + 2 + 1 + 2
    assert [h["epoch"] for h in result.history] == [float(e) for e in range(1, 26)]
    # The generator learns its conditions: the chosen client's conditional loss falls.
    losses = [h["cond_loss"] for h in result.history]
    first, last = float(np.mean(losses[:5])), float(np.mean(losses[-5:]))
    assert last < 0.95 * first, (first, last)
    # An untrained generator's average JSD on this table is about 0.45 (measured); 25
    # epochs bring the categorical marginals much closer (a little less so with more
    # clients, as paper 001 Section 4.3.3 reports).
    jsd = float(np.mean(list(jensen_shannon_divergences(real, table).values())))
    assert jsd < max_jsd, jsd
    # every client's traffic was counted, and the non-chosen clients' every-row
    # features make the clients' uploads far larger than a batch.
    per_step = strategy.traffic.per_step()
    assert strategy.traffic.steps == {"d": 250, "g": 50}
    assert min(per_step["d"]["from_client"]) > 64 * 4


def _observations(log: list[Message], node: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(rows, permuted conditions) the server received from ``node`` in every D step."""
    requests = {m.metadata.message_id: m for m in log if m.metadata.reply_to_message_id == ""}
    replies = [m for m in log if m.metadata.reply_to_message_id != ""]
    conditions: dict[int, np.ndarray] = {}
    rows: dict[int, np.ndarray] = {}
    for reply in replies:
        request = requests[reply.metadata.reply_to_message_id]
        if reply.metadata.src_node_id != node or request.metadata.message_type != P.VT_STEP:
            continue
        cfg = request.content[P.CONFIG]
        # K = 1: each requested step's conditions are (cond, cond_real) for a D step,
        # (cond,) for a G step, stacked in step order.
        if P.CONDITION in reply.content:
            packed = reply.content[P.CONDITION][PACKED].numpy()
            offset = 0
            for step in cfg.get("condition_steps", []):
                offset += 64
                if _kind(int(step)) == "d":
                    conditions[int(step)] = packed[offset : offset + 64]
                    offset += 64
        if P.ROW_INDICES in reply.content:
            rows[int(cfg["forward_start"])] = reply.content[P.ROW_INDICES][P.ROW_INDICES].numpy()
    return [(rows[s], conditions[s]) for s in sorted(rows)]


def _kind(step: int) -> str:
    """Steps of the 640-row table at batch 64 and n_critic 5: 12 per epoch, G after 5 D."""
    return "g" if step % 12 in (5, 11) else "d"


def _contains_column(values: np.ndarray, column: np.ndarray) -> bool:
    """Whether some column of ``values`` holds ``column`` as consecutive rows."""
    n = len(column)
    for j in range(values.shape[1]):
        series = values[:, j]
        for start in np.flatnonzero(np.isclose(series[: len(series) - n + 1], column[0])):
            if np.allclose(series[start : start + n], column):
                return True
    return False


@pytest.mark.parametrize("shuffle", [False, True])
def test_shuffling_stops_the_server_rebuilding_a_column(adult_small: Path, shuffle: bool) -> None:
    """Paper 001, Figs. 4-5: without shuffling the server's (index, condition) pairs
    rebuild a client's categorical column; with it they are no better than a guess."""
    log: list[Message] = []
    _run(adult_small, 2, _config(epochs=8, shuffle=shuffle), log, rows=50)
    node = 1001  # partition 0: age, workclass, fnlwgt, education, education-num, ...
    observations = _observations(log, node)
    assert len(observations) > 20
    block = party_block(DataSpec(source=str(adult_small), n_parties=2), 0)
    # workclass is the first categorical column: its block starts the conditional vector.
    column = "workclass"
    values = block.frame[column]
    # The encoder's one-hot order: categories sorted by their string form, missing last.
    categories = sorted({str(v) for v in values.dropna()})
    truth = np.array([categories.index(str(v)) if pd.notna(v) else len(categories) for v in values])
    categories += ["<missing>"] if values.isna().any() else []
    guess = reconstruct_column(observations, 0, len(categories), len(truth))
    accuracy, baseline, seen = reconstruction_accuracy(guess, truth)
    assert seen > 50
    if shuffle:
        assert accuracy <= baseline + 0.05, (accuracy, baseline)
    else:
        assert accuracy == 1.0, (accuracy, baseline)
        assert baseline < 0.9


VT_ALLOWED: dict[tuple[str, str], dict[str, set[str]]] = {
    ("to_client", P.VT_SETUP): {P.CONFIG: set(SETUP_FIELDS)},
    ("to_client", P.VT_BUILD): {
        P.CONFIG: {"chunk_width", "count_columns", "d_block_width", "g_block_width"}
    },
    ("to_client", P.VT_STEP): {
        P.CONFIG: {
            "apply_count",
            "apply_start",
            "checkpoint",
            "chosen",
            "condition_steps",
            "forward_count",
            "forward_start",
            "selected_counts",
        },
        P.CHUNK: {P.CHUNK},
        P.GRADS: {PACKED, SELECTED},
    },
    ("to_client", P.VT_GENERATE): {P.CONFIG: {"draw", "n_rows", "phase"}, P.CHUNK: {P.CHUNK}},
    ("to_server", P.VT_SETUP): {
        P.CONFIG: {
            "columns",  # the client's column names (the published table has them too)
            "cond_columns",
            "cond_dim",
            "encoded_width",
            "id_digest",
            "n_columns",
            "n_rows",
            "partition_id",
            "seed_commitment",
        }
    },
    ("to_server", P.VT_BUILD): {P.CONFIG: {"feature_dim"}},
    ("to_server", P.VT_STEP): {
        P.CONFIG: {"cond_loss", "forward_count", "forward_start"},
        P.CONDITION: {PACKED},
        P.FEATURES: {PACKED},
        P.ROW_INDICES: {P.ROW_INDICES},
        P.CHUNK: {P.CHUNK},
    },
    ("to_server", P.VT_GENERATE): {
        P.CONDITION: {P.COND},
        P.SYNTHETIC: {"n_rows", "parquet", "privacy"},
    },
}
"""Every record and field of each VT-GAN message kind, per direction: a field added on
either side (a raw column in a step reply, say) fails the audit until it is listed."""


def _check_vt_fields(message: Message, direction: str) -> None:
    """Listed fields only, and a client's step-reply bookkeeping typed as the protocol has it."""
    check_listed_fields(message, direction, VT_ALLOWED)
    if direction == "to_server" and message.metadata.message_type == P.VT_STEP:
        cfg = message.content[P.CONFIG]
        assert all(isinstance(cfg[k], int) for k in ("forward_count", "forward_start"))
        assert "cond_loss" not in cfg or isinstance(cfg["cond_loss"], float)


def test_audit_what_crosses_the_wire(adult_small: Path) -> None:
    log: list[Message] = []
    result, _strategy, spec = _run(adult_small, 2, _config(epochs=2), log, rows=100)
    to_clients = [m for m in log if m.metadata.reply_to_message_id == ""]
    to_server = [m for m in log if m.metadata.reply_to_message_id != ""]
    assert all(not m.has_error() for m in to_server)
    blocks = [party_block(spec, i) for i in range(2)]
    real_values = [b.frame.to_numpy() for b in blocks]
    for message in to_clients:
        assert message.metadata.message_type in (P.VT_SETUP, P.VT_BUILD, P.VT_STEP, P.VT_GENERATE)
        _check_vt_fields(message, "to_client")
        for record in message.content.values():
            if isinstance(record, ConfigRecord):
                assert SHARED not in list(record.values())
            if isinstance(record, ArrayRecord):
                assert set(record) <= {PACKED, SELECTED, P.CHUNK}
    n_rows = len(blocks[0].frame)
    for message in to_server:
        _check_vt_fields(message, "to_server")
        for name, record in message.content.items():
            if isinstance(record, ConfigRecord):
                assert SHARED not in list(record.values())
                continue
            assert isinstance(record, ArrayRecord)
            assert name in (P.FEATURES, P.ROW_INDICES, P.CONDITION, P.CHUNK)
            for key, array in record.items():
                values = array.numpy()
                if name == P.ROW_INDICES:
                    assert values.dtype == np.int64 and values.max() < n_rows
                    continue
                assert values.dtype == np.float32
                # no raw column values: no array holds a client's numeric column as
                # consecutive rows (the every-row features are N of a packed array's rows)
                for raw in real_values:
                    numeric = raw[:, [isinstance(v, (int, float)) for v in raw[0]]].astype(float)
                    if values.shape[0] >= numeric.shape[0]:
                        for j in range(numeric.shape[1]):
                            assert not _contains_column(values, numeric[:, j]), (
                                f"{name}.{key} carries a raw column"
                            )
    # Row indices come only from the client chosen for the step, once per D step.
    index_replies = [m for m in to_server if P.ROW_INDICES in m.content]
    assert len(index_replies) == 20
    assert len(result.synthetic) == 100


def test_a_client_with_a_wrong_row_count_stops_the_run(adult_small: Path, tmp_path: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    short = tmp_path / "short.csv"
    load_dataset("adult").frame.iloc[:600].to_csv(short, index=False)
    # Party 1 reads a 600-row table: the setup's alignment check names the mismatch.
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": 0, "shared-seed": SHARED}, {"partition-id": 1, "shared-seed": SHARED}],
    )
    strategy = VTGANStrategy(_config(), n_parties=2, seed=0, data_spec=spec)
    bad = DataSpec(source=str(short), n_parties=2)
    messages = strategy.configure_setup([1001, 1002])
    messages[1].content[P.CONFIG]["data_spec"] = bad.to_json()
    from flwr_vflgan.strategies.exchange import exchange

    replies = exchange(grid, messages)
    with pytest.raises(RunStopped, match="do not line up"):
        strategy.aggregate_setup(replies)


@pytest.mark.parametrize("k", [1, 5])
def test_dp_run_reports_the_joint_epsilon_and_sends_no_row_indices(
    adult_small: Path, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dp=dpsgd: uniform shared-seed batches, so every client sends its batch rows only and
    no index crosses the wire; every part reports its spend and the joint guarantee. With
    K = 5 every part applies its noised update once per critic step, as with K = 1."""
    config = VFLGANConfig.from_dict(
        {
            **_config(epochs=1).to_dict(),
            "train": {**_config(epochs=1).to_dict()["train"], "steps_per_exchange": k},
            "dp": {"mechanism": "dpsgd", "target_epsilon": 10.0, "delta": 1e-4},
        }
    )
    calls: list[int] = []
    original = PerSampleUpdate.__call__

    def counted(self: PerSampleUpdate, *args: object, **kwargs: object) -> object:
        calls.append(id(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PerSampleUpdate, "__call__", counted)
    log: list[Message] = []
    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": SHARED, "noise-seed": 4242 + i} for i in range(2)],
        observer=log.append,
    )
    result = VTGANStrategy(config, n_parties=2, seed=3, data_spec=spec, publish_rows=50).start(grid)
    assert [p["party"] for p in result.privacy] == ["server", "client 0", "client 1"]
    for spent in result.privacy:
        assert 9.9 <= spent["joint_epsilon"] <= 10.0
        assert spent["steps"] == 10 and spent["mechanism"] == "dpsgd"
        assert 0 < spent["epsilon"] < spent["joint_epsilon"]
    # The clients also released their category counts: they spent more than the server.
    assert result.privacy[1]["epsilon"] > result.privacy[0]["epsilon"]
    replies = [m for m in log if m.metadata.reply_to_message_id != ""]
    assert not any(P.ROW_INDICES in m.content for m in replies)
    # Every D step's features are the batch's real rows and the fake rows (2 x 64); a G
    # step's only the fake ones: no client sends every row.
    rows = sum(
        m.content[P.FEATURES][PACKED].numpy().shape[0] for m in replies if P.FEATURES in m.content
    )
    assert rows == 2 * (10 * 2 * 64 + 2 * 64)
    # three parts (server, two clients), one noised update each per critic step
    assert len(calls) == 3 * 10 and len(set(calls)) == 3
    assert all(calls.count(part) == 10 for part in set(calls))
    for message in log:
        for record in message.content.values():
            if isinstance(record, ConfigRecord):
                assert not {4242, 4243, SHARED} & set(
                    v for v in record.values() if isinstance(v, int)
                )
    assert len(result.synthetic) == 50


@pytest.mark.parametrize(
    ("dp", "match"),
    [
        (
            {"mechanism": "vflgan_gaussian", "target_epsilon": 5.0},
            "trains its discriminators with dp=dpsgd",
        ),
        (
            {"mechanism": "dpsgd", "target_epsilon": 5.0, "sampling": "poisson"},
            "dp.sampling=poisson is not supported for algorithm=vtgan",
        ),
    ],
)
def test_unsupported_dp_settings_are_refused_at_construction(dp: dict, match: str) -> None:
    config = VFLGANConfig.from_dict({**_config().to_dict(), "dp": dp})
    with pytest.raises(ValueError, match=match):
        VTGANStrategy(config, n_parties=2)


def test_strategy_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="VTGANStrategy trains vtgan, got variant 'vflgan'"):
        VTGANStrategy(VFLGANConfig(), n_parties=2)
    with pytest.raises(ValueError, match="publish_rows must be >= 1, got 0"):
        VTGANStrategy(_config(), n_parties=2, publish_rows=0)
    with pytest.raises(ValueError, match="n_parties must be an integer >= 1"):
        VTGANStrategy(_config(), n_parties=0)


def test_a_step_before_setup_gets_an_error_reply() -> None:
    grid = InProcessGrid(make_client_app(), [{"partition-id": 0, "shared-seed": SHARED}])
    message = Message(
        RecordDict({P.CONFIG: ConfigRecord({"apply_step": -1, "forward_step": 0})}),
        1001,
        P.VT_STEP,
    )
    (reply,) = grid.send_and_receive([message])
    assert reply.has_error()
    assert "received a VT-GAN message before setup" in reply.error.reason


def test_malformed_conditions_stop_the_run(adult_small: Path) -> None:
    def tamper(message: Message) -> None:
        if message.metadata.reply_to_message_id and P.CONDITION in message.content:
            packed = message.content[P.CONDITION][PACKED].numpy()
            message.content[P.CONDITION] = ArrayRecord({PACKED: Array(np.full_like(packed, 0.5))})

    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": SHARED} for i in range(2)],
        observer=tamper,
    )
    strategy = VTGANStrategy(_config(), n_parties=2, seed=3, data_spec=spec)
    with pytest.raises(
        RunStopped,
        match=r"client [01] \(node 100[12]\) sent a malformed step reply: condition rows are not one-hot",
    ):
        strategy.start(grid)


def _k_config(k: int, lr: float = 2e-4, epochs: int = 2) -> VFLGANConfig:
    plain = _config(epochs=epochs, lr=lr).to_dict()
    return VFLGANConfig.from_dict({**plain, "train": {**plain["train"], "steps_per_exchange": k}})


def test_k_steps_per_exchange_over_flower_messages(adult_small: Path) -> None:
    """K = 5: a round's five critic steps travel in one exchange, each client sends its
    every-row features once per exchange, and with nothing moving (a learning rate far
    below float32's resolution) the losses are exactly those of one step per exchange."""
    log: list[Message] = []
    five, strategy, _ = _run(adult_small, 2, _k_config(5, lr=1e-30), log, rows=50)
    one, _, _ = _run(adult_small, 2, _k_config(1, lr=1e-30), rows=50)
    # per epoch: blocks 0-4, 5, 6-10, 11 and the two generator updates; then the first
    # conditions, setup, build and the two publication exchanges
    assert five.steps == one.steps == 24
    assert five.exchanges == 2 * 6 + 1 + 2 + 2
    assert one.exchanges == 2 * (10 + 2 * 2) + 1 + 2 + 2
    for a, b in zip(one.history, five.history, strict=True):
        for key in ("d_loss", "g_loss", "cond_loss"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-7), key
    assert strategy.traffic.steps == {"d": 20, "g": 4}
    # a D block's reply: 5 x 64 fake rows, 64 real rows per step the client was chosen
    # in, and all 640 rows once if it was not chosen in some step
    requests = {m.metadata.message_id: m for m in log if not m.metadata.reply_to_message_id}
    for reply in log:
        request = requests.get(reply.metadata.reply_to_message_id)
        if request is None or request.metadata.message_type != P.VT_STEP:
            continue
        cfg = request.content[P.CONFIG]
        if int(cfg["forward_count"]) != 5:  # type: ignore[arg-type]
            continue
        chosen = [bool(c) for c in cfg["chosen"]]  # type: ignore[union-attr]
        rows = reply.content[P.FEATURES][PACKED].numpy().shape[0]
        assert rows == 5 * 64 + 64 * sum(chosen) + (640 if not all(chosen) else 0)


def test_a_block_longer_than_the_clients_k_is_refused(adult_small: Path) -> None:
    def stretch(message: Message) -> None:
        if message.metadata.reply_to_message_id or message.metadata.message_type != P.VT_STEP:
            return
        cfg = message.content[P.CONFIG]
        if int(cfg["forward_start"]) == 0:  # type: ignore[arg-type]
            cfg["forward_count"] = 2
            cfg["chosen"] = [*cfg["chosen"], *cfg["chosen"]]  # type: ignore[misc]
            chunk = message.content[P.CHUNK][P.CHUNK].numpy()
            message.content[P.CHUNK] = ArrayRecord({P.CHUNK: Array(np.concatenate([chunk] * 2))})

    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": SHARED} for i in range(2)],
        observer=stretch,
    )
    strategy = VTGANStrategy(_k_config(1), n_parties=2, seed=3, data_spec=spec)
    with pytest.raises(RunStopped, match="steps 0-1 are not a block at steps_per_exchange=1"):
        strategy.start(grid)
