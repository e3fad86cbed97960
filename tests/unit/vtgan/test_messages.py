"""VT-GAN's typed step messages: round trips through Flower records and every check on
arrival."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.blocks import StepBlock
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.vtgan.messages import PACKED, SELECTED, VTStepInstruction, VTStepReply

B, W, F, N, C = 4, 3, 2, 20, 5


def _instruction() -> VTStepInstruction:
    return VTStepInstruction(
        applied=StepBlock(6, 2),
        forward=StepBlock(8, 3),
        chosen=(True, False, False),
        condition_steps=(11,),
        grads=np.arange(2 * F * 11, dtype=np.float32).reshape(-1, F)[: B + 3 + B + B],
        selected=np.array([1, 4, 9]),
        selected_counts=(3, 0),
        chunks=np.ones((3 * B, W), np.float32),
    )


def test_instruction_round_trip() -> None:
    sent = _instruction()
    got = VTStepInstruction.from_content(sent.to_content(), B, W, F, N)
    assert got.applied == sent.applied and got.forward == sent.forward
    assert got.chosen == sent.chosen and got.condition_steps == (11,)
    assert got.selected is not None and got.selected.tolist() == [1, 4, 9]
    assert got.selected_counts == (3, 0)
    assert np.array_equal(got.grads, sent.grads) and np.array_equal(got.chunks, sent.chunks)


def test_an_instruction_without_blocks_carries_only_its_config() -> None:
    content = VTStepInstruction(condition_steps=(0, 3)).to_content()
    assert set(content) == {P.CONFIG}
    got = VTStepInstruction.from_content(content, B, W, F, N)
    assert got.applied.empty and got.forward.empty and got.condition_steps == (0, 3)


def test_a_checkpoint_request_travels_only_after_an_apply_with_no_forward() -> None:
    grads = np.zeros((B, F), np.float32)
    sent = VTStepInstruction(applied=StepBlock(5, 1), grads=grads, checkpoint=True)
    got = VTStepInstruction.from_content(sent.to_content(), B, W, F, N)
    assert got.checkpoint and not _instruction().checkpoint
    with pytest.raises(ProtocolError, match="after an applied block with no forward block"):
        VTStepInstruction(condition_steps=(0,), checkpoint=True)
    content = _instruction().to_content()
    content[P.CONFIG]["checkpoint"] = True
    with pytest.raises(ProtocolError, match="after an applied block with no forward block"):
        VTStepInstruction.from_content(content, B, W, F, N)
    content[P.CONFIG]["checkpoint"] = 1
    with pytest.raises(ProtocolError, match="checkpoint"):
        VTStepInstruction.from_content(content, B, W, F, N)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda c: c[P.CONFIG].__setitem__("forward_count", 2), r"chunk\.chunk must have shape"),
        (lambda c: c[P.CONFIG].__setitem__("chosen", [True]), "needs 3 chosen flags, got 1"),
        (lambda c: c[P.CONFIG].__setitem__("chosen", [1, 0, 0]), "must be a list of bool"),
        (
            lambda c: c[P.CONFIG].__setitem__("selected_counts", [2, 0]),
            r"grads\.selected must have shape \(2,\)",
        ),
        (lambda c: c[P.CONFIG].__setitem__("selected_counts", [3]), "one entry per applied step"),
        (
            lambda c: c[P.GRADS].__setitem__(SELECTED, Array(np.array([1, 4, 99]))),
            r"indices outside \[0, 20\)",
        ),
        (
            lambda c: c[P.GRADS].__setitem__(PACKED, Array(np.full((11, F), np.nan, np.float32))),
            "non-finite",
        ),
        (lambda c: c.__delitem__(P.CHUNK), "no array record 'chunk'"),
        (lambda c: c[P.CONFIG].__setitem__("apply_count", -1), "invalid step block"),
    ],
)
def test_instruction_checks_on_arrival(change, match: str) -> None:
    content = _instruction().to_content()
    change(content)
    with pytest.raises(ProtocolError, match=match):
        VTStepInstruction.from_content(content, B, W, F, N)


def _reply() -> VTStepReply:
    cond = np.zeros((3 * B, C), np.float32)
    cond[np.arange(3 * B), np.arange(3 * B) % C] = 1.0
    return VTStepReply(
        forward=StepBlock(8, 3),
        features=np.ones((3 * B + B + N, F), np.float32),
        rows=np.arange(B),
        conditions=cond,
        chunk_grad=None,
    )


def _decode(content, **changes):
    shapes = {
        "feature_rows": 3 * B + B + N,
        "feature_dim": F,
        "index_rows": B,
        "n_rows": N,
        "condition_rows": 3 * B,
        "cond_dim": C,
        "chunk_shape": None,
    }
    return VTStepReply.from_content(content, **{**shapes, **changes})


def test_reply_round_trip() -> None:
    sent = _reply()
    got = _decode(sent.to_content())
    assert got.forward == sent.forward and np.array_equal(got.features, sent.features)
    assert got.rows is not None and got.rows.tolist() == [0, 1, 2, 3]
    assert np.array_equal(got.conditions, sent.conditions) and got.chunk_grad is None


def test_reply_checks_on_arrival() -> None:
    content = _reply().to_content()
    with pytest.raises(ProtocolError, match=r"features\.packed must have shape \(40, 2\)"):
        _decode(content, feature_rows=40)
    with pytest.raises(ProtocolError, match="row indices sent where none were asked for"):
        _decode(content, index_rows=0)
    with pytest.raises(ProtocolError, match="no array record 'chunk'"):
        _decode(content, chunk_shape=(B, W))
    bad = np.full((3 * B, C), 0.2, np.float32)
    content[P.CONDITION] = ArrayRecord({PACKED: Array(bad)})
    with pytest.raises(ProtocolError, match="condition rows are not one-hot"):
        _decode(content)
    content = _reply().to_content()
    content[P.CONFIG] = ConfigRecord({"forward_start": 8, "forward_count": 3})
    with pytest.raises(ProtocolError, match="lacks field 'cond_loss'"):
        _decode(content)


def test_setup_round_trip_and_version_check() -> None:
    from dataclasses import replace

    from flwr_vflgan.vtgan.messages import read_vt_setup, vt_setup

    setup = vt_setup('{"variant": "vtgan"}', "", 7)
    assert setup.protocol_version == P.VT_PROTOCOL_VERSION and setup.resume_step == P.NO_STEP
    assert read_vt_setup(setup.to_content()) == setup
    resumed = vt_setup('{"variant": "vtgan"}', "", 7, resume_step=25, checkpoint_root="/ckpt")
    assert read_vt_setup(resumed.to_content()) == resumed
    assert (resumed.resume_step, resumed.checkpoint_root) == (25, "/ckpt")
    with pytest.raises(ProtocolError, match="VT-GAN protocol 999, this client"):
        read_vt_setup(replace(setup, protocol_version=999).to_content())


def test_setup_reply_carries_the_common_fields_and_the_shape() -> None:
    from flwr_vflgan.runtime.messages import SetupReply
    from flwr_vflgan.vtgan.messages import VTSetupReply

    reply = VTSetupReply(1, 100, "abc", "commit", ["a", "b"], 2, 9, 4, 1)
    cfg = reply.to_content()[P.CONFIG]
    assert SetupReply.common(cfg) == (1, 100, "abc")
    assert SetupReply.columns_of(cfg) == ["a", "b"]
    assert SetupReply.commitment_of(cfg) == "commit"
    assert VTSetupReply.shape_of(cfg) == (2, 9, 4, 1)


def test_build_round_trip_and_checks() -> None:
    from flwr_vflgan.vtgan.messages import VTBuild, VTBuildReply

    build = VTBuild(8, 16, 32, (2, 3))
    assert VTBuild.from_content(build.to_content()) == build
    with pytest.raises(ProtocolError, match="layout widths must be >= 1"):
        VTBuild.from_content(VTBuild(0, 16, 32, (2,)).to_content())
    content = build.to_content()
    content[P.CONFIG]["count_columns"] = [1.5]
    with pytest.raises(ProtocolError, match="count_columns must be a list of integers"):
        VTBuild.from_content(content)
    assert VTBuildReply.from_content(VTBuildReply(12).to_content()).feature_dim == 12


def test_generate_phases_round_trip_and_checks() -> None:
    from flwr_vflgan.vtgan.messages import CONDITIONS, ROWS, VTGenerate

    ask = VTGenerate(CONDITIONS, 0, 3)
    assert VTGenerate.from_content(ask.to_content(), chunk_width=4) == ask
    chunk = np.arange(8, dtype=np.float32).reshape(2, 4)
    rows = VTGenerate.from_content(VTGenerate(ROWS, 2, 3, chunk).to_content(), chunk_width=4)
    assert (rows.phase, rows.n_rows, rows.draw) == (ROWS, 2, 3)
    np.testing.assert_array_equal(rows.chunk, chunk)
    with pytest.raises(ProtocolError, match="must have shape"):
        VTGenerate.from_content(VTGenerate(ROWS, 2, 3, chunk).to_content(), chunk_width=5)
    with pytest.raises(ProtocolError, match="unknown generation phase 'all'"):
        VTGenerate("all", 2, 3)
    with pytest.raises(ProtocolError, match="n_rows must be >= 1, got 0"):
        VTGenerate(ROWS, 0, 3, np.zeros((0, 4), np.float32))
    cond = np.eye(3, dtype=np.float32)
    back = VTGenerate.read_conditions(VTGenerate.conditions_reply(cond), 3, 3)
    np.testing.assert_array_equal(back, cond)
