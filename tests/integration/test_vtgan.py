"""VT-GAN over real Flower messages (in-process grid): training and publication, the
message audit, and the shuffling defence against the server's reconstruction attack."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data import load_dataset
from flwr_vflgan.metrics.similarity import jensen_shannon_divergences
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import tensors_to_record
from flwr_vflgan.runtime.party_data import DataSpec, party_block
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VTGANStrategy
from flwr_vflgan.vtgan.attacks import reconstruct_column, reconstruction_accuracy
from flwr_vflgan.vtgan.server import ClientShape

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
        if P.CONDITION in reply.content and P.COND_REAL in reply.content[P.CONDITION]:
            conditions[int(cfg["condition_step"])] = reply.content[P.CONDITION][P.COND_REAL].numpy()
        if P.ROW_INDICES in reply.content:
            rows[int(cfg["forward_step"])] = reply.content[P.ROW_INDICES][P.ROW_INDICES].numpy()
    return [(rows[s], conditions[s]) for s in sorted(rows)]


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
        for record in message.content.values():
            if isinstance(record, ConfigRecord):
                assert SHARED not in list(record.values())
            if isinstance(record, ArrayRecord):
                assert set(record) <= {P.REAL, P.FAKE, P.CHUNK}
    n_rows = len(blocks[0].frame)
    for message in to_server:
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
                # no raw column values: features are not any client's numeric columns
                for raw in real_values:
                    numeric = raw[:, [isinstance(v, (int, float)) for v in raw[0]]].astype(float)
                    if values.shape[0] == numeric.shape[0]:
                        for j in range(numeric.shape[1]):
                            assert not np.any(
                                np.all(np.isclose(values, numeric[:, [j]]), axis=0)
                            ), f"{name}.{key} carries a raw column"
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


def test_dp_run_reports_the_joint_epsilon_and_sends_no_row_indices(adult_small: Path) -> None:
    """dp=dpsgd: uniform shared-seed batches, so every client sends its batch rows only and
    no index crosses the wire; every part reports its spend and the joint guarantee."""
    config = VFLGANConfig.from_dict(
        {
            **_config(epochs=1).to_dict(),
            "dp": {"mechanism": "dpsgd", "target_epsilon": 10.0, "delta": 1e-4},
        }
    )
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
    real = [
        m.content[P.FEATURES][P.REAL].numpy()
        for m in replies
        if P.FEATURES in m.content and P.REAL in m.content[P.FEATURES]
    ]
    assert len(real) == 2 * 10 and all(r.shape[0] == 64 for r in real)
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


def test_malformed_conditions_stop_the_run() -> None:
    strategy = VTGANStrategy(_config(), n_parties=2)
    shape = ClientShape(n_columns=2, encoded_width=5, cond_dim=3)
    cond = np.zeros((64, 3), dtype=np.float32)
    cond[:, 0] = 0.5  # not one-hot
    reply = Message(
        RecordDict({P.CONDITION: tensors_to_record({P.COND: cond, P.COND_REAL: cond})}),
        1001,
        P.VT_STEP,
    )
    with pytest.raises(RunStopped, match="node 1001 sent cond rows that are not one-hot"):
        strategy._conditions(reply, 1001, shape, discriminator=True)
    with pytest.raises(RunStopped, match=r"node 1001 sent malformed conditions: .*shape"):
        strategy._conditions(reply, 1001, ClientShape(2, 5, 4), discriminator=True)
