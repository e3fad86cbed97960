"""The one-round latent diffusion family through the real Flower paths: the in-process
grid against the sequence without Flower, what crosses the wire, resumption at each
phase, refusals."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import ArrayRecord, Message
from wire import SETUP_FIELDS, check_listed_fields

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data.encoder import TabularEncoder
from flwr_vflgan.latent.local import synthesize_locally
from flwr_vflgan.latent.messages import DecodeRequest, EncodeRequest
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.runtime.rng import Stream, numpy_generator
from flwr_vflgan.strategies import InProcessGrid, LatentDiffusionStrategy, RunStopped

TINY = {
    "ae_min_steps": 1,
    "diffusion_min_steps": 1,
    "ae_epochs": 3,
    "ae_hidden": [32],
    "diffusion_epochs": 3,
    "diffusion_steps": 20,
    "denoiser_hidden": [32, 32],
}


def _config(**latent: object) -> VFLGANConfig:
    return VFLGANConfig.from_dict({"variant": "latent_diffusion", "latent": {**TINY, **latent}})


def _grid(n: int, observer=None, checkpoints: Path | None = None) -> InProcessGrid:
    nodes = []
    for i in range(n):
        node: dict[str, object] = {"partition-id": i}
        if checkpoints is not None:
            node[P.NODE_CHECKPOINT_DIR] = str(checkpoints / f"party-{i}")
        nodes.append(node)
    return InProcessGrid(make_client_app(), nodes, observer=observer)


def _strategy(spec: DataSpec, **kwargs: object) -> LatentDiffusionStrategy:
    return LatentDiffusionStrategy(
        _config(),
        n_parties=spec.n_parties,
        seed=9,
        data_spec=spec,
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_grid_publishes_what_the_sequence_without_flower_makes(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=3)
    result = _strategy(spec, publish_rows=150).start(_grid(3))
    # Setup, the latents up, the sampled latents down: three exchanges, whatever the epochs.
    assert result.exchanges == 3
    assert set(result.phases) == {"autoencoders", "diffusion", "sampling", "decoding"}
    blocks = all_blocks(spec)
    local = synthesize_locally(blocks, _config().latent, 9, 150)
    order = numpy_generator(9, Stream.PUBLISH).permutation(150)
    expected = local.iloc[order].reset_index(drop=True)
    pd.testing.assert_frame_equal(result.synthetic, expected)
    assert list(result.synthetic.columns) == [c for b in blocks for c in b.schema.names]
    for column in result.synthetic.columns:
        real = pd.concat([b.frame for b in blocks], axis=1)[column]
        if real.dtype.kind not in "iuf":
            assert set(result.synthetic[column].dropna()) <= set(real.dropna()), column


ALLOWED = {
    ("to_party", P.LD_SETUP): {P.CONFIG: set(SETUP_FIELDS)},
    ("to_party", P.LD_ENCODE): {P.CONFIG: {"checkpoint"}},
    ("to_party", P.LD_DECODE): {P.CONFIG: {"n_rows"}, P.FEATURES: {P.LATENTS}},
    ("to_server", P.LD_SETUP): {
        P.CONFIG: {"partition_id", "n_rows", "id_digest", "columns", "latent_width"}
    },
    ("to_server", P.LD_ENCODE): {P.FEATURES: {P.LATENTS}},
    ("to_server", P.LD_DECODE): {P.SYNTHETIC: {"n_rows", "parquet", "privacy"}},
}
"""Every record and field each message of the family may carry, per direction."""


def test_the_wire_carries_one_latent_row_per_real_row_and_nothing_else(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    log: list[Message] = []
    _strategy(spec, publish_rows=100).start(_grid(2, log.append))
    blocks = all_blocks(spec)
    width = [_config().latent.latent_width(len(b.schema.names)) for b in blocks]
    assert len(log) == 3 * 2 * 2  # three exchanges, two parties, out and back
    for message in log:
        assert not message.has_error()
        direction = "to_server" if message.metadata.reply_to_message_id else "to_party"
        check_listed_fields(message, direction, ALLOWED)
    uploads = [
        m for m in log if m.metadata.message_type == P.LD_ENCODE and m.metadata.reply_to_message_id
    ]
    encoded = [{r.tobytes() for r in b.encoded.numpy().astype(np.float32)} for b in blocks]
    for message in uploads:
        record = message.content[P.FEATURES]
        assert isinstance(record, ArrayRecord)
        latents = record[P.LATENTS].numpy()
        # The latents of every real row, once, narrower than the party's encoded rows.
        assert latents.shape[0] == 640 and latents.shape[1] in width
        party = width.index(latents.shape[1])
        assert latents.shape[1] < blocks[party].encoder.output_dim
        assert not any(r.tobytes() in encoded[party] for r in latents)
    decoded = [
        m for m in log if m.metadata.message_type == P.LD_DECODE and m.metadata.reply_to_message_id
    ]
    for message, block in zip(decoded, blocks, strict=True):
        table = pd.read_parquet(io.BytesIO(message.content[P.SYNTHETIC]["parquet"]))
        assert list(table.columns) == block.schema.names and len(table) == 100
    setups = [
        m for m in log if m.metadata.message_type == P.LD_SETUP and m.metadata.reply_to_message_id
    ]
    assert sorted(m.content[P.CONFIG]["latent_width"] for m in setups) == sorted(width)


def test_a_resumed_run_starts_at_the_last_phase_and_publishes_the_same_table(
    adult_small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    server, parties = tmp_path / "server", tmp_path / "parties"
    first = _strategy(spec, checkpoint_dir=server).start(_grid(2, checkpoints=parties))
    assert sorted(p.name for p in server.glob("server-*.npz")) == ["server-1.npz", "server-2.npz"]
    assert first.resumed_from_step is None
    # Killed after the diffusion model was trained: fresh processes, the same directories.
    # A party that only decodes (as in a stock SuperNode's decode process) fits its
    # encoder but never encodes its rows: they would only add to its peak memory.
    encoded: list[int] = []
    transform = TabularEncoder.transform

    def counted(self: TabularEncoder, frame: pd.DataFrame) -> np.ndarray:
        encoded.append(len(frame))
        return transform(self, frame)

    monkeypatch.setattr(TabularEncoder, "transform", counted)
    log: list[Message] = []
    again = _strategy(spec, checkpoint_dir=server).start(_grid(2, log.append, parties))
    assert again.resumed_from_step == 2
    assert P.LD_ENCODE not in {m.metadata.message_type for m in log}
    assert encoded == []
    monkeypatch.undo()
    pd.testing.assert_frame_equal(again.synthetic, first.synthetic)
    # Killed after the latents arrived, before the diffusion model was saved.
    (server / "server-2.npz").unlink()
    third = _strategy(spec, checkpoint_dir=server).start(_grid(2, checkpoints=parties))
    assert third.resumed_from_step == 1
    pd.testing.assert_frame_equal(third.synthetic, first.synthetic)
    # The first run's setup and latents (in the checkpoint), then setup and publication.
    assert third.exchanges == 4


def test_a_party_without_its_autoencoder_cannot_resume_and_says_why(
    adult_small: Path, tmp_path: Path
) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    server = tmp_path / "server"
    _strategy(spec, checkpoint_dir=server).start(_grid(2, checkpoints=tmp_path / "parties"))
    with pytest.raises(RunStopped, match="no checkpoint directory"):
        _strategy(spec, checkpoint_dir=server).start(_grid(2))


def test_a_party_refuses_out_of_order_and_malformed_messages(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = _grid(2)
    nodes = sorted(grid.get_node_ids())
    run = _strategy(spec).prepare(grid, nodes, 0.0)
    early = DecodeRequest(np.zeros((5, run.widths[0]), np.float32)).to_content()
    (answer,) = list(grid.send_and_receive([Message(early, nodes[0], P.LD_DECODE)]))
    assert answer.has_error() and "before the autoencoder was trained" in answer.error.reason
    encode = Message(EncodeRequest().to_content(), nodes[0], P.LD_ENCODE)
    (answer,) = list(grid.send_and_receive([encode]))
    assert not answer.has_error()
    wrong = DecodeRequest(np.zeros((5, run.widths[0] + 1), np.float32)).to_content()
    (answer,) = list(grid.send_and_receive([Message(wrong, nodes[0], P.LD_DECODE)]))
    assert answer.has_error() and "must have shape" in answer.error.reason


def test_a_party_sending_latents_of_the_wrong_shape_stops_the_run(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    grid = _grid(2)

    def shrink(message: Message) -> None:
        if message.metadata.message_type == P.LD_ENCODE and message.metadata.reply_to_message_id:
            record = message.content[P.FEATURES]
            assert isinstance(record, ArrayRecord)
            latents = record[P.LATENTS].numpy()[:-1]
            message.content[P.FEATURES] = ArrayRecord(
                {P.LATENTS: type(record[P.LATENTS])(np.ascontiguousarray(latents))}
            )

    grid._observer = shrink  # type: ignore[attr-defined]
    with pytest.raises(RunStopped, match=r"malformed latents.*must have shape"):
        _strategy(spec).start(grid)


def test_bad_settings_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="has no DP mode yet"):
        VFLGANConfig.from_dict(
            {"variant": "latent_diffusion", "dp": {"mechanism": "dpsgd", "target_epsilon": 1.0}}
        )
    with pytest.raises(ValueError, match="exchanges once each way"):
        VFLGANConfig.from_dict({"variant": "latent_diffusion", "train": {"steps_per_exchange": 4}})
    with pytest.raises(ValueError, match="trains latent_diffusion"):
        LatentDiffusionStrategy(VFLGANConfig(), n_parties=2)
    with pytest.raises(ValueError, match="latent"):
        VFLGANConfig.from_dict({"variant": "latent_diffusion", "latent": {"ae_epochs": 0}})
    summary = LatentDiffusionStrategy(
        VFLGANConfig.from_dict({"variant": "latent_diffusion"}), n_parties=2
    ).summary()
    assert "autoencoders 20 epochs (at least 1900 steps, raised to at most 200 epochs)" in summary
    assert "diffusion 150 epochs (at least 11000 steps, at most 500 epochs) of T=100" in summary


def test_one_party_holding_every_column_is_the_family_run_centralized(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=1)
    result = _strategy(spec, publish_rows=50).start(_grid(1))
    assert result.exchanges == 3 and len(result.synthetic) == 50
    (block,) = all_blocks(spec)
    assert list(result.synthetic.columns) == block.schema.names
