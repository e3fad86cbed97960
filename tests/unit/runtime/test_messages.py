"""Typed wire messages and packed step blocks: layouts worked out by hand, round trips,
and every validation error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, RecordDict

from flwr_vflgan.runtime import messages
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.blocks import pack_steps, unpack_steps
from flwr_vflgan.runtime.codec import ProtocolError, tensors_to_record
from flwr_vflgan.runtime.messages import (
    NO_BLOCK,
    PACKED,
    GenerateInstruction,
    GenerateReply,
    SetupInstruction,
    StepBlock,
    StepInstruction,
    StepLayout,
    StepReply,
    StepTensors,
)


def _t(rows: int, value: float, width: int = 2) -> torch.Tensor:
    return torch.full((rows, width), value)


def test_packing_lays_steps_out_real_then_fake_in_step_order():
    steps = [StepTensors(_t(2, 1.0), _t(2, 2.0)), StepTensors(None, _t(3, 3.0))]
    packed = pack_steps(steps)
    assert packed.dtype == np.float32 and packed.shape == (7, 2)
    assert packed[:, 0].tolist() == [1, 1, 2, 2, 3, 3, 3]
    back = unpack_steps(torch.from_numpy(packed), [StepLayout(True, 2), StepLayout(False, 3)])
    assert back[0].real is not None and back[0].real[:, 0].tolist() == [1, 1]
    assert back[0].fake[:, 0].tolist() == [2, 2]
    assert back[1].real is None and back[1].fake[:, 0].tolist() == [3, 3, 3]


def test_unpacking_refuses_the_wrong_row_count():
    with pytest.raises(ProtocolError, match="packed block has 6 rows, its 2 steps need 7"):
        unpack_steps(torch.zeros(6, 2), [StepLayout(True, 2), StepLayout(False, 3)])


def test_step_blocks():
    block = StepBlock(7, 3)
    assert list(block.steps) == [7, 8, 9] and block.stop == 10
    assert block.describe() == "steps 7-9" and StepBlock(4, 1).describe() == "step 4"
    assert NO_BLOCK.empty and list(NO_BLOCK.steps) == [] and NO_BLOCK.describe() == "no step"
    for start, count in ((-1, 2), (3, -1)):
        with pytest.raises(ProtocolError, match="invalid step block"):
            StepBlock(start, count)


def test_step_instruction_round_trip_carries_the_block_in_its_config_record():
    grads = (StepTensors(_t(4, 0.5, 3), _t(4, -0.5, 3)), StepTensors(None, _t(4, 2.0, 3)))
    sent = StepInstruction(StepBlock(10, 2), StepBlock(12, 2), 3, 50, True, False, grads)
    content = sent.to_content()
    # One record, three objects on the wire; 12 rows x 3 little-endian float32 values.
    assert list(content) == [P.CONFIG]
    raw = content[P.CONFIG][PACKED]
    assert isinstance(raw, bytes) and len(raw) == 12 * 3 * 4
    assert np.frombuffer(raw, "<f4")[:3].tolist() == [0.5, 0.5, 0.5]
    seen: list[StepBlock] = []

    def layout(block: StepBlock) -> list[StepLayout]:
        seen.append(block)
        return [StepLayout(True, 4), StepLayout(False, 4)]

    got = StepInstruction.from_content(content, layout, 3)
    assert seen == [StepBlock(10, 2)]
    assert (got.apply, got.forward, got.eval_draw, got.eval_rows) == (
        StepBlock(10, 2),
        StepBlock(12, 2),
        3,
        50,
    )
    assert got.checkpoint and not got.promote_best
    assert torch.equal(got.grads[0].real, grads[0].real)  # type: ignore[arg-type]
    assert torch.equal(got.grads[1].fake, grads[1].fake) and got.grads[1].real is None


def test_step_instruction_needs_one_gradient_per_applied_step():
    with pytest.raises(ValueError, match="steps 0-1 needs 2 gradients, got 0"):
        StepInstruction(apply=StepBlock(0, 2))


def test_step_instruction_rejects_gradients_of_another_layout():
    grads = (StepTensors(None, _t(4, 1.0, 3)),)
    content = StepInstruction(StepBlock(0, 1), grads=grads).to_content()
    match = r"packed must hold \(8, 3\) float32 values \(96 bytes\) for 1 steps, got 48 bytes"
    with pytest.raises(ProtocolError, match=match):
        StepInstruction.from_content(content, lambda b: [StepLayout(True, 4)], 3)
    content[P.CONFIG][PACKED] = np.full((4, 3), np.inf, dtype="<f4").tobytes()
    with pytest.raises(ProtocolError, match="packed contains non-finite values"):
        StepInstruction.from_content(content, lambda b: [StepLayout(False, 4)], 3)
    content[P.CONFIG][PACKED] = "not bytes"
    with pytest.raises(ProtocolError, match="field 'packed' must be"):
        StepInstruction.from_content(content, lambda b: [StepLayout(False, 4)], 3)


def test_a_block_above_the_inline_limit_travels_as_an_array_record(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(messages, "INLINE_LIMIT", 40)  # bytes: the 48-byte block is larger
    grads = (StepTensors(None, _t(4, 1.5, 3)),)
    content = StepInstruction(StepBlock(0, 1), grads=grads).to_content()
    assert PACKED not in content[P.CONFIG] and content[P.GRADS][PACKED].shape == (4, 3)
    got = StepInstruction.from_content(content, lambda b: [StepLayout(False, 4)], 3)
    assert torch.equal(got.grads[0].fake, grads[0].fake)
    with pytest.raises(ProtocolError, match=r"grads.packed must have shape \(8, 3\)"):
        StepInstruction.from_content(content, lambda b: [StepLayout(True, 4)], 3)
    content[P.GRADS] = tensors_to_record({PACKED: np.full((4, 3), np.inf)})
    with pytest.raises(ProtocolError, match="non-finite"):
        StepInstruction.from_content(content, lambda b: [StepLayout(False, 4)], 3)


def test_step_reply_round_trip_and_checks():
    features = [StepTensors(_t(3, 1.0), _t(3, 2.0)), StepTensors(None, _t(4, 3.0))]
    content = StepReply(StepBlock(5, 2), [3, 4], features, np.zeros((6, 9))).to_content()
    rows, got = StepReply.read_features(content, StepBlock(5, 2), [True, False], None, 2)
    assert rows == [3, 4] and got[1].fake.shape == (4, 2)
    assert StepReply.read_eval_rows(content, 6).shape == (6, 9)
    with pytest.raises(ProtocolError, match="reply carries steps 5-6, expected step 5"):
        StepReply.read_features(content, StepBlock(5, 1), [True], None, 2)
    with pytest.raises(ProtocolError, match=r"every batch must have 3 rows, got \[3, 4\]"):
        StepReply.read_features(content, StepBlock(5, 2), [True, False], 3, 2)
    # Read as two discriminator steps, the block would need (3 + 3) + (4 + 4) rows.
    with pytest.raises(ProtocolError, match=r"must hold \(14, 2\) float32 values"):
        StepReply.read_features(content, StepBlock(5, 2), [True, True], None, 2)


def test_step_reply_without_a_block_has_no_arrays():
    content = StepReply().to_content()
    assert list(content) == [P.CONFIG]
    assert dict(content[P.CONFIG]) == {"forward_start": P.NO_STEP, "forward_count": 0}


def test_setup_instruction_round_trip_and_version_check():
    sent = SetupInstruction('{"a": 1}', "", P.NO_STEP, 4, "/tmp/x")
    assert SetupInstruction.from_content(sent.to_content()) == sent
    old = RecordDict(
        {P.CONFIG: ConfigRecord({**sent.to_content()[P.CONFIG], "protocol_version": 1})}
    )
    with pytest.raises(
        ProtocolError, match=f"server speaks protocol 1, this party {P.PROTOCOL_VERSION}"
    ):
        SetupInstruction.from_content(old)


def test_generate_messages_round_trip_and_checks():
    sent = GenerateInstruction(10, 0, True, False)
    assert GenerateInstruction.from_content(sent.to_content()) == sent
    with pytest.raises(ProtocolError, match="n_rows must be >= 1, got 0"):
        GenerateInstruction.from_content(GenerateInstruction(0, 0, True, False).to_content())
    reply = GenerateReply(b"PAR1", 10, '{"epsilon": 1.0}')
    assert GenerateReply.from_content(reply.to_content()) == reply
    with pytest.raises(ProtocolError, match="privacy account is not JSON"):
        GenerateReply.from_content(GenerateReply(b"x", 1, "{oops").to_content())
    with pytest.raises(ProtocolError, match="field 'n_rows' must be"):
        GenerateReply.from_content(
            RecordDict({P.SYNTHETIC: ConfigRecord({"parquet": b"", "n_rows": "1", "privacy": ""})})
        )
