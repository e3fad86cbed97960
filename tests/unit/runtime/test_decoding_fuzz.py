"""Every typed message decoder, fed damaged messages (property-based, hypothesis): a
record or field missing, an unexpected field, a value of another type, an array of
another shape or dtype or with NaN/inf, a truncated payload. Decoding returns or raises
:class:`ProtocolError`, which a party turns into an error reply and the server into a
stopped run; never another exception (a traceback), never a hang."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flwr_vflgan.gafm.messages import CutValues, GAFMSetup, GAFMStep, PredictRows
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import (
    GenerateInstruction,
    GenerateReply,
    KeyOffer,
    KeyOpen,
    KeySeal,
    SetupInstruction,
)
from flwr_vflgan.vtgan.messages import (
    CONDITIONS,
    ROWS,
    VTBuild,
    VTBuildReply,
    VTGenerate,
    read_vt_setup,
    vt_setup,
)

Decoder = Callable[[RecordDict], object]

CASES: dict[str, tuple[Callable[[], RecordDict], Decoder]] = {
    "setup": (
        lambda: SetupInstruction('{"a": 1}', "", P.NO_STEP, 4, "/tmp/x", 2).to_content(),
        SetupInstruction.from_content,
    ),
    "vt_setup": (lambda: vt_setup("{}", "", 5).to_content(), read_vt_setup),
    "generate": (
        lambda: GenerateInstruction(10, 0, True, False).to_content(),
        GenerateInstruction.from_content,
    ),
    "generate_reply": (
        lambda: GenerateReply(b"PAR1", 10, '{"epsilon": 1.0}').to_content(),
        GenerateReply.from_content,
    ),
    "key_offer": (lambda: KeyOffer(1, bytes(32)).to_content(), KeyOffer.from_content),
    "key_seal": (lambda: KeySeal([bytes(32), bytes(32)], 7).to_content(), KeySeal.from_content),
    "key_seal_reply": (
        lambda: KeySeal.reply([b"", bytes(36)]),
        lambda content: KeySeal.read_reply(content, 2),
    ),
    "key_open": (lambda: KeyOpen(bytes(36)).to_content(), KeyOpen.from_content),
    "vt_build": (lambda: VTBuild(4, 8, 8, (2, 1)).to_content(), VTBuild.from_content),
    "vt_build_reply": (lambda: VTBuildReply(6).to_content(), VTBuildReply.from_content),
    "vt_generate_conditions": (
        lambda: VTGenerate(CONDITIONS, 3, 1).to_content(),
        lambda content: VTGenerate.from_content(content, 4),
    ),
    "vt_generate_rows": (
        lambda: VTGenerate(ROWS, 3, 1, np.ones((3, 4), np.float32)).to_content(),
        lambda content: VTGenerate.from_content(content, 4),
    ),
    "gafm_setup": (
        lambda: GAFMSetup(P.GF_PROTOCOL_VERSION, "{}", "", "label", 3).to_content(),
        GAFMSetup.from_content,
    ),
    "gafm_step": (
        lambda: GAFMStep(
            4,
            grads=np.ones((2, 3), np.float32),
            batch_rows=(2,),
            rows=np.array([0, 5]),
        ).to_content(),
        lambda content: GAFMStep.from_content(
            content, pending_rows=2, cut_dim=3, n_rows=10, limit=4
        ),
    ),
    "predict_rows": (
        lambda: PredictRows(np.array([1, 2, 3])).to_content(),
        lambda content: PredictRows.from_content(content, 10),
    ),
    "cut_values": (
        lambda: CutValues(np.ones((3, 2), np.float32)).to_content(),
        lambda content: CutValues.from_content(content, 3, 2),
    ),
}

_scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=40),
    st.booleans(),
)
CONFIG_VALUES = st.one_of(
    _scalars,
    st.lists(st.integers(min_value=-5, max_value=2**40), max_size=4),
    st.lists(st.floats(allow_nan=True), max_size=4),
    st.lists(st.text(max_size=4), max_size=3),
    st.lists(st.binary(max_size=40), max_size=3),
)
"""Whatever a ConfigRecord can carry: a damaged message is still a valid Flower record."""


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    """An array of any small shape and a common dtype, floats with NaN and infinities."""
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    size = math.prod(shape)
    kind = draw(st.sampled_from(["f32", "f64", "i64", "u8", "bool"]))
    if kind in ("f32", "f64"):
        floats = st.floats(allow_nan=True, allow_infinity=True, width=32)
        values = draw(st.lists(floats, min_size=size, max_size=size))
        return np.array(values, dtype=np.float32 if kind == "f32" else np.float64).reshape(shape)
    values = draw(st.lists(st.integers(0, 255), min_size=size, max_size=size))
    dtype = {"i64": np.int64, "u8": np.uint8, "bool": np.bool_}[kind]
    return np.array(values, dtype=dtype).reshape(shape)


@st.composite
def damage(draw: st.DrawFn, content: RecordDict) -> RecordDict:
    """One to three damages to a copy of ``content``."""
    records = {
        name: (dict(record.items()), isinstance(record, ConfigRecord))
        for name, record in content.items()
    }
    for _ in range(draw(st.integers(1, 3))):
        names = sorted(records)
        op = draw(st.sampled_from(["drop_record", "drop", "add", "replace", "truncate"]))
        if op == "drop_record" and names:
            del records[draw(st.sampled_from(names))]
            continue
        if not names:
            records["config"] = ({}, True)
            names = ["config"]
        name = draw(st.sampled_from(names))
        fields, is_config = records[name]
        keys = sorted(fields)
        if op == "drop" and keys:
            del fields[draw(st.sampled_from(keys))]
        elif op == "add" or not keys:
            fields[draw(st.text(min_size=1, max_size=6))] = (
                draw(CONFIG_VALUES) if is_config else Array(draw(arrays()))
            )
        elif op == "replace":
            fields[draw(st.sampled_from(keys))] = (
                draw(CONFIG_VALUES) if is_config else Array(draw(arrays()))
            )
        else:  # truncate a bytes value or an array's payload
            key = draw(st.sampled_from(keys))
            value = fields[key]
            if isinstance(value, bytes):
                fields[key] = value[: draw(st.integers(0, max(0, len(value) - 1)))]
            elif isinstance(value, Array):
                cut = draw(st.integers(0, max(0, len(value.data) - 1)))
                fields[key] = Array(
                    dtype=value.dtype, shape=value.shape, stype=value.stype, data=value.data[:cut]
                )
    out = RecordDict()
    for name, (fields, is_config) in records.items():
        out[name] = ConfigRecord(fields) if is_config else ArrayRecord(fields)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
@settings(
    max_examples=120,
    deadline=None,
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_damaged_message_decodes_or_raises_a_protocol_error(case: str, data) -> None:
    make, decode = CASES[case]
    decode(make())  # the undamaged message decodes
    damaged = data.draw(damage(make()))
    with contextlib.suppress(ProtocolError):
        decode(damaged)
