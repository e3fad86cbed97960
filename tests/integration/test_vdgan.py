"""VDGAN (paper 004, Algorithm 3) through the real Flower paths: the in-process grid
against the one-process loop, what crosses the wire, a bad message, publication."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.vd_messages import VDSetupReply, VDStep
from flwr_vflgan.gan.vdgan import LocalVDGAN, VDGANClient, VDGANServer, VDSchedule
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.simulations.pipeline import Evaluator
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VDGANStrategy

SHARED = 31337


def _config(**train: object) -> VFLGANConfig:
    return VFLGANConfig.from_dict({"variant": "vdgan", "train": {"eval_rows": 200, **train}})


def _grid(n: int, observer=None) -> InProcessGrid:
    nodes = [{"partition-id": i, "shared-seed": SHARED} for i in range(n)]
    return InProcessGrid(make_client_app(), nodes, observer=observer)


def _strategy(spec: DataSpec, config: VFLGANConfig, **kwargs: object) -> VDGANStrategy:
    return VDGANStrategy(config, n_parties=spec.n_parties, seed=9, data_spec=spec, **kwargs)  # type: ignore[arg-type]


def test_the_grid_does_what_the_one_process_loop_does_bit_for_bit(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=3)
    config = _config(epochs=2)
    grid = _grid(3)
    result = _strategy(spec, config, publish_rows=150).start(grid)
    blocks = all_blocks(spec)
    server = VDGANServer(config, [b.encoder.spans for b in blocks], 9)
    clients = [
        VDGANClient(config, b.encoder.spans, b.encoded, SHARED, i) for i, b in enumerate(blocks)
    ]
    schedule = VDSchedule.of(len(blocks[0].frame), config.train)
    assert (schedule.per_epoch, schedule.total) == (2, 4)  # 640 rows: 10 batches, 5 a step
    local = LocalVDGAN(server, clients)
    for iteration in range(schedule.total):
        local.iteration(iteration)
    assert result.steps == 4 and result.exchanges == 4 + 2  # setup, 4 iterations, publication
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state[P.VD_STATE_FLAT]["float32"], np.float32)
        np.testing.assert_array_equal(saved, clients[index].state.to_numpy())
    # The published table: every client's columns, decoded, the requested rows.
    assert list(result.synthetic.columns) == [c for b in blocks for c in b.schema.names]
    assert len(result.synthetic) == 150 and result.published == "last"
    real = pd.concat([b.frame for b in blocks], axis=1)
    for column in real.columns:
        if real[column].dtype.kind not in "iuf":
            assert set(result.synthetic[column].dropna()) <= set(real[column].dropna()), column


def test_the_wire_carries_synthetic_columns_and_their_gradients_only(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    log: list[Message] = []
    _strategy(spec, _config(epochs=1), publish_rows=100).start(_grid(2, log.append))
    blocks = all_blocks(spec)
    widths = [b.encoder.output_dim for b in blocks]
    encoded_rows = [{r.tobytes() for r in b.encoded.numpy().astype(np.float32)} for b in blocks]
    steps = [m for m in log if m.metadata.message_type == P.VD_STEP]
    assert len(steps) == 2 * 2 * 2  # 2 iterations x 2 clients, out and back
    for message in steps:
        assert not message.has_error()
        records = dict(message.content.items())
        assert set(records) == {P.CONFIG, P.FEATURES}
        sent = not message.metadata.reply_to_message_id
        expected = {"iteration", "checkpoint"} if sent else {"iteration"}
        assert set(records[P.CONFIG]) == expected
        arrays = records[P.FEATURES]
        assert isinstance(arrays, ArrayRecord) and len(arrays) == 1
        (array,) = [a.numpy() for a in arrays.values()]
        assert array.dtype == np.float32 and array.shape[0] == 64 and array.shape[1] in widths
        party = widths.index(array.shape[1])
        # Neither a real row nor anything but the batch's synthetic columns or gradients.
        assert not any(r.tobytes() in encoded_rows[party] for r in array)
    setups = [
        m for m in log if m.metadata.message_type == P.VD_SETUP and m.metadata.reply_to_message_id
    ]
    for message in setups:
        cfg = message.content[P.CONFIG]
        assert isinstance(cfg, ConfigRecord)
        assert sum(s.width for s in VDSetupReply.spans_of(cfg)) in widths
    decoded = [
        m for m in log if m.metadata.message_type == P.VD_DECODE and m.metadata.reply_to_message_id
    ]
    for message, block in zip(decoded, blocks, strict=True):
        table = pd.read_parquet(io.BytesIO(message.content[P.SYNTHETIC]["parquet"]))
        assert list(table.columns) == block.schema.names and len(table) == 100


def test_a_client_refuses_an_iteration_out_of_order(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = _grid(2)
    nodes = sorted(grid.get_node_ids())
    # Set the clients up through the grid, then send one of them iteration 3 first.
    _strategy(spec, _config(epochs=1)).prepare(grid, nodes, 0.0)
    fake = torch.zeros(64, all_blocks(spec)[0].encoder.output_dim).numpy()
    message = Message(VDStep(3, fake).to_content(), nodes[0], P.VD_STEP)
    (answer,) = list(grid.send_and_receive([message]))
    assert answer.has_error()
    assert "out-of-order message: iteration 3, expected 0" in answer.error.reason
    # A batch of the wrong width is refused before anything is trained.
    wrong = Message(VDStep(0, fake[:, :3]).to_content(), nodes[0], P.VD_STEP)
    (answer,) = list(grid.send_and_receive([wrong]))
    assert answer.has_error() and "must have shape" in answer.error.reason


def test_bad_settings_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="a VDGAN exchange is one iteration"):
        VFLGANConfig.from_dict({"variant": "vdgan", "train": {"steps_per_exchange": 4}})
    with pytest.raises(ValueError, match="VDGANStrategy trains vdgan"):
        VDGANStrategy(VFLGANConfig(), n_parties=2)


def test_a_run_that_is_too_small_for_one_iteration_stops_with_the_reason(
    adult_small: Path,
) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    with pytest.raises(RunStopped, match="has no VDGAN iteration"):
        _strategy(spec, _config(batch_size=200, epochs=1)).start(_grid(2))


def test_evaluation_keeps_the_best_epoch(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    evaluator = Evaluator(all_blocks(spec))
    result = _strategy(spec, _config(epochs=3), evaluate_fn=evaluator.encoded_fd).start(_grid(2))
    assert [h["epoch"] for h in result.history] == [1, 2, 3]
    assert result.best_fd == min(h["fd"] for h in result.history)
    assert result.published == "best_fd"


def _dp_config(**dp: object) -> VFLGANConfig:
    return VFLGANConfig.from_dict(
        {
            "variant": "vdgan",
            "train": {"epochs": 2},
            "dp": {"mechanism": "dpsgd", "target_epsilon": 2.0, "delta": 1e-4, **dp},
        }
    )


def test_vdgan_dpsgd_accounts_the_clients_jointly_and_reports_what_it_covers(
    adult_small: Path,
) -> None:
    """Every critic step is a DP-SGD update; the clients read the same batch rows, so
    their releases are one joint account (sqrt(N) times the noise of one)."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    result = _strategy(spec, _dp_config()).start(_grid(2))
    assert result.steps == 4 and result.budget_stop is None
    assert [p["party"] for p in result.privacy] == ["client 0", "client 1"]
    for spent in result.privacy:
        assert spent["mechanism"] == "dpsgd" and spent["parts"] == 2
        assert spent["steps"] == 4 * 5  # 4 iterations of n_critic = 5 critic steps
        assert 1.9 < spent["epsilon"] <= 2.0
    from flwr_vflgan.privacy import DPConfig, plan_privacy

    alone = plan_privacy(
        DPConfig(mechanism="dpsgd", target_epsilon=2.0, delta=1e-4),
        dataset_size=640,
        batch_size=64,
        planned_steps=20,
    )
    noise = result.privacy[0]["noise_multiplier"]
    assert noise == pytest.approx(alone.noise_multiplier * 2**0.5, rel=1e-6)


def test_a_budget_too_small_for_the_schedule_cuts_it_and_the_clients_enforce_it(
    adult_small: Path,
) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _dp_config(noise_multiplier=5.0)  # 10 critic steps: 2 of the 4 iterations
    grid = _grid(2)
    result = _strategy(spec, config).start(grid)
    assert result.budget_stop is not None and "iterations" in result.budget_stop
    assert result.steps == 2
    assert all(p["epsilon"] <= 2.0 for p in result.privacy)
    # A client refuses an iteration its budget does not allow, whatever the server asks.
    nodes = sorted(grid.get_node_ids())
    fake = torch.zeros(64, all_blocks(spec)[0].encoder.output_dim).numpy()
    message = Message(VDStep(result.steps, fake).to_content(), nodes[0], P.VD_STEP)
    (answer,) = list(grid.send_and_receive([message]))
    assert answer.has_error() and "privacy budget" in answer.error.reason


def test_vdgan_refuses_the_mechanisms_it_does_not_have() -> None:
    with pytest.raises(ValueError, match="dp=vflgan_gaussian is not built for it"):
        VFLGANConfig.from_dict(
            {"variant": "vdgan", "dp": {"mechanism": "vflgan_gaussian", "target_epsilon": 1.0}}
        )
    with pytest.raises(ValueError, match=r"remove dp\.sampling=poisson"):
        VFLGANConfig.from_dict(
            {
                "variant": "vdgan",
                "dp": {"mechanism": "dpsgd", "target_epsilon": 1.0, "sampling": "poisson"},
            }
        )


def _pate_config(**dp: object) -> VFLGANConfig:
    settings = {"mechanism": "pate", "target_epsilon": 5.0, "delta": 1e-4, "pate_teachers": 2}
    return VFLGANConfig.from_dict(
        {"variant": "vdgan", "train": {"epochs": 2}, "dp": {**settings, "pate_top_k": 3, **dp}}
    )


def test_vdgan_pate_sends_only_voted_signs_and_matches_the_local_loop(adult_small: Path) -> None:
    """Each client trains its teachers on disjoint shards and sends the noisy vote of
    their top-K signs, scaled by the batch: entries in {-1, 0, 1} / m, nothing else."""
    from flwr_vflgan.gan.vdgan import PateClient
    from flwr_vflgan.privacy.pate import PatePlan

    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _pate_config()
    log: list[Message] = []
    grid = _grid(2, log.append)
    result = _strategy(spec, config).start(grid)
    assert result.steps == 4
    replies = [
        m for m in log if m.metadata.message_type == P.VD_STEP and m.metadata.reply_to_message_id
    ]
    for message in replies:
        (grad,) = [a.numpy() for a in message.content[P.FEATURES].values()]
        assert set(np.unique(grad * 64).tolist()) <= {-1.0, 0.0, 1.0}
    for spent in result.privacy:
        assert spent["mechanism"] == "pate" and spent["parts"] == 2 and spent["steps"] == 4
        assert spent["teachers"] == 2 and 4.9 < spent["epsilon"] <= 5.0
    plan = PatePlan.calibrate(config.dp, iterations=4, batch_size=64, parties=2)
    assert result.privacy[0]["noise_multiplier"] == pytest.approx(plan.sigma)
    # The same run in one process: the clients' teachers end bit for bit alike.
    blocks = all_blocks(spec)
    server = VDGANServer(config, [b.encoder.spans for b in blocks], 9)
    clients = [
        PateClient(config, b.encoder.spans, b.encoded, SHARED, i, plan.sigma)
        for i, b in enumerate(blocks)
    ]
    local = LocalVDGAN(server, clients)
    for iteration in range(4):
        local.iteration(iteration)
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state[P.VD_STATE_FLAT]["float32"], np.float32)
        np.testing.assert_array_equal(saved, clients[index].state.to_numpy())


def test_pate_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="dp=pate is VDGAN-PATE's mechanism"):
        VFLGANConfig.from_dict(
            {"variant": "vflgan", "dp": {"mechanism": "pate", "target_epsilon": 1.0}}
        )
    with pytest.raises(ValueError, match=r"dp\.pate_teachers must be an integer >= 1"):
        _pate_config(pate_teachers=0)
    with pytest.raises(ValueError, match=r"dp.pate_threshold must be in \[0, 1\]"):
        _pate_config(pate_threshold=1.5)


def test_too_many_teachers_for_the_rows_stop_the_run_with_the_reason(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    with pytest.raises(RunStopped, match="20 teachers leave 32 rows each"):
        _strategy(spec, _pate_config(pate_teachers=20)).start(_grid(2))


def test_the_warm_up_runs_at_setup_on_the_grid_as_in_the_one_process_loop(
    adult_small: Path,
) -> None:
    """train.warmup_epochs (paper 004, Section 4.3.2): each client's critic first trains
    against a local generator of its own columns; the grid's clients end a run with
    exactly the one-process loop's critics, and the warm-up changed them."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    warm, cold = _config(epochs=1, warmup_epochs=1), _config(epochs=1)
    blocks = all_blocks(spec)

    def local(config: VFLGANConfig) -> list[VDGANClient]:
        server = VDGANServer(config, [b.encoder.spans for b in blocks], 9)
        clients = [
            VDGANClient(config, b.encoder.spans, b.encoded, SHARED, i) for i, b in enumerate(blocks)
        ]
        loop = LocalVDGAN(server, clients)
        for iteration in range(VDSchedule.of(len(blocks[0].frame), config.train).total):
            loop.iteration(iteration)
        return clients

    grid = _grid(2)
    _strategy(spec, warm, publish_rows=50).start(grid)
    warmed, plain = local(warm), local(cold)
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state[P.VD_STATE_FLAT]["float32"], np.float32)
        np.testing.assert_array_equal(saved, warmed[index].state.to_numpy())
        assert not np.array_equal(saved, plain[index].state.to_numpy())
    # 640 rows at batch 64: 10 critic steps an epoch, as the co-training's epochs.
    assert VDGANClient(warm, blocks[0].encoder.spans, blocks[0].encoded, SHARED, 0).warm_up() == 10


def test_the_warm_up_is_vdgans_and_stays_out_of_dp_runs() -> None:
    with pytest.raises(ValueError, match=r"train\.warmup_epochs is VDGAN.s client warm-up"):
        VFLGANConfig.from_dict({"train": {"warmup_epochs": 1}})
    dp = {"mechanism": "dpsgd", "target_epsilon": 1.0, "delta": 1e-5}
    with pytest.raises(ValueError, match="outside the privacy account"):
        VFLGANConfig.from_dict({"variant": "vdgan", "train": {"warmup_epochs": 1}, "dp": dp})
    with pytest.raises(ValueError, match="warmup_epochs must be a non-negative integer"):
        _config(warmup_epochs=-1)
