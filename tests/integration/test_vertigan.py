"""VertiGAN through the real Flower paths: the in-process grid (Messages, Contexts and
records, state restored every message), the wire (what crosses it) and resumption; the
simulation engine's run is in tests/integration/test_simulation.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message
from interrupt import Interrupt, stop_in_epoch

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.exchanges import LocalVFLGAN, party_trainer, step_server
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.gan.vertigan import backbone_size
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.messages import PACKED
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.simulations.pipeline import Evaluator
from flwr_vflgan.strategies import InProcessGrid, VFLGANStrategy

SHARED = 4242


def _config(**train: object) -> VFLGANConfig:
    return VFLGANConfig.from_dict({"variant": "vertigan", "train": {"eval_rows": 200, **train}})


def _grid(n: int, observer=None) -> InProcessGrid:
    nodes = [{"partition-id": i, "shared-seed": SHARED} for i in range(n)]
    return InProcessGrid(make_client_app(), nodes, observer=observer)


def _strategy(spec: DataSpec, config: VFLGANConfig, **kwargs: object) -> VFLGANStrategy:
    return VFLGANStrategy(
        config,
        n_parties=spec.n_parties,
        seed=5,
        data_spec=spec,
        evaluate_fn=Evaluator(all_blocks(spec)).encoded_fd,
        publish_rows=150,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("k", [1, 4])
def test_the_grid_does_what_the_local_loop_does_bit_for_bit(adult_small: Path, k: int) -> None:
    """Messages, packing and the state restored every message change nothing, and the
    parties' backbones leave the run equal."""
    spec = DataSpec(source=str(adult_small), n_parties=3)
    config = _config(epochs=2, eval_every=0, steps_per_exchange=k)
    grid = _grid(3)
    result = VFLGANStrategy(config, n_parties=3, seed=5, data_spec=spec).start(grid)
    blocks = all_blocks(spec)
    parties = [
        party_trainer(config, b.encoder.spans, b.encoded, SHARED, i) for i, b in enumerate(blocks)
    ]
    local = LocalVFLGAN(
        parties, step_server(config, 3, 5), Schedule(len(blocks[0].frame), 64, 5, 2), k
    )
    exchanges = local.blocks()
    assert result.steps == 24 and result.exchanges == len(exchanges) + 3
    for block in exchanges:
        local.run_block(block)
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state["vflgan.flat"]["float32"], dtype=np.float32)
        np.testing.assert_array_equal(saved, parties[index].state.to_numpy())
    backbones = [np.concatenate([p.detach().numpy().ravel() for p in t.backbone]) for t in parties]
    for backbone in backbones[1:]:
        np.testing.assert_array_equal(backbone, backbones[0])
    assert list(result.synthetic.columns) == [c for b in blocks for c in b.schema.names]
    assert len(result.synthetic) == len(blocks[0].frame)


def _packed(message: Message) -> np.ndarray | None:
    config = message.content.get(P.CONFIG)
    if isinstance(config, ConfigRecord) and PACKED in config:
        raw = config[PACKED]
        assert isinstance(raw, bytes)
        return np.frombuffer(raw, "<f4")
    return None


def test_the_wire_carries_backbone_gradients_and_their_sum_only(adult_small: Path) -> None:
    """Eq. (5) on the wire: a party sends its backbone gradient (P values) for a generator
    step and nothing for a discriminator step; the server sends every party the sum of
    the parties' gradients. No real row, feature or row index crosses."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _config(epochs=1, max_steps=12)
    log: list[Message] = []
    _strategy(spec, config).start(_grid(2, log.append))
    size = backbone_size(config.model)
    replies = [
        m for m in log if m.metadata.reply_to_message_id and m.metadata.message_type == P.STEP
    ]
    asks = [
        m for m in log if not m.metadata.reply_to_message_id and m.metadata.message_type == P.STEP
    ]
    assert all(not m.has_error() for m in replies)
    packed = [p for p in map(_packed, replies) if p is not None]
    # 12 steps, a generator step after every 5 discriminator steps: 2 generator steps,
    # each sent by both parties as P float32 values; a discriminator step sends none.
    assert {len(p) for p in packed} == {0, size}
    sent = [p for p in packed if len(p)]
    assert len(sent) == 4
    summed = [p for p in map(_packed, asks) if p is not None and len(p)]
    assert [len(p) for p in summed] == [size] * 4
    for g in range(2):
        want = sent[2 * g].astype(np.float64) + sent[2 * g + 1]
        for got in summed[2 * g : 2 * g + 2]:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for message in replies:
        assert set(message.content[P.CONFIG]) <= {
            "batch_rows",
            "forward_count",
            "forward_start",
            PACKED,
        }
        for record in message.content.values():
            if isinstance(record, ArrayRecord):
                assert set(record) == {P.ROWS}  # the evaluation's synthetic rows only


def test_an_interrupted_run_resumes_to_the_same_result(adult_small: Path, tmp_path: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _config(epochs=4)
    reference = _strategy(spec, config).start(_grid(2))
    ckpt = tmp_path / "ckpt"
    kwargs = {"checkpoint_dir": ckpt, "party_checkpoint_root": ckpt}
    with pytest.raises(Interrupt):
        _strategy(spec, config, progress=stop_in_epoch(3), **kwargs).start(_grid(2))
    resumed = _strategy(spec, config, **kwargs).start(_grid(2))
    assert resumed.resumed_from_step == 24
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)
    assert [h["fd"] for h in resumed.history] == [h["fd"] for h in reference.history]
