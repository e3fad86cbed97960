"""Validation of tensors and fields arriving in Flower records."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from flwr_vflgan.runtime.codec import (
    ProtocolError,
    get_config,
    get_field,
    get_tensor,
    tensors_to_record,
)


def _content(**arrays: np.ndarray) -> RecordDict:
    return RecordDict(
        {
            "grads": ArrayRecord({k: Array(v) for k, v in arrays.items()}),
            "config": ConfigRecord({"step": 3}),
        }
    )


def test_protocol_error_is_a_value_error():
    assert issubclass(ProtocolError, ValueError)


def test_get_tensor_returns_a_float32_copy():
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    content = _content(real=values)
    tensor = get_tensor(content, "grads", "real", (4, 3))
    assert tensor.dtype == torch.float32
    assert torch.equal(tensor, torch.from_numpy(values))
    tensor[0, 0] = 99.0
    assert get_tensor(content, "grads", "real", (4, 3))[0, 0] == 0.0
    assert get_tensor(content, "grads", "real", (None, 3)).shape == (4, 3)
    assert get_tensor(content, "grads", "real", (None, None)).shape == (4, 3)


def test_tensors_to_record_round_trip():
    record = tensors_to_record({"a": torch.ones(2, 3), "b": np.zeros((5,), dtype=np.float64)})
    content = RecordDict({"features": record})
    assert torch.equal(get_tensor(content, "features", "a", (2, 3)), torch.ones(2, 3))
    # float64 NumPy input is converted to float32 on the way out.
    assert torch.equal(get_tensor(content, "features", "b", (5,)), torch.zeros(5))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32])
def test_get_tensor_rejects_other_dtypes(dtype):
    content = _content(real=np.zeros((4, 3), dtype=dtype))
    with pytest.raises(
        ProtocolError, match=rf"grads\.real must be float32, got {np.dtype(dtype).name}"
    ):
        get_tensor(content, "grads", "real", (4, 3))


@pytest.mark.parametrize("shape", [(4, 2), (3, 3), (12,), (4, 3, 1)])
def test_get_tensor_rejects_other_shapes(shape):
    content = _content(real=np.zeros(shape, dtype=np.float32))
    with pytest.raises(ProtocolError, match=r"grads\.real must have shape \(4, 3\), got "):
        get_tensor(content, "grads", "real", (4, 3))
    if len(shape) != 2:
        with pytest.raises(ProtocolError, match=r"must have shape \(None, 3\)"):
            get_tensor(content, "grads", "real", (None, 3))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_get_tensor_rejects_non_finite_values(bad):
    values = np.zeros((4, 3), dtype=np.float32)
    values[2, 1] = bad
    with pytest.raises(ProtocolError, match=r"grads\.real contains non-finite values"):
        get_tensor(_content(real=values), "grads", "real", (4, 3))


def test_get_tensor_rejects_missing_record_or_key():
    content = _content(real=np.zeros((4, 3), dtype=np.float32))
    with pytest.raises(
        ProtocolError,
        match=r"message has no array record 'features'; records present: \['config', 'grads'\]",
    ):
        get_tensor(content, "features", "real", (4, 3))
    with pytest.raises(ProtocolError, match=r"message has no array record 'config'"):
        get_tensor(content, "config", "real", (4, 3))  # a ConfigRecord is not an ArrayRecord
    with pytest.raises(
        ProtocolError, match=r"array record 'grads' lacks 'fake'; keys present: \['real'\]"
    ):
        get_tensor(content, "grads", "fake", (4, 3))


def test_get_config():
    content = _content(real=np.zeros((1, 1), dtype=np.float32))
    assert get_config(content, "config")["step"] == 3
    with pytest.raises(
        ProtocolError,
        match=r"message has no config record 'cfg'; records present: \['config', 'grads'\]",
    ):
        get_config(content, "cfg")
    with pytest.raises(ProtocolError, match=r"message has no config record 'grads'"):
        get_config(content, "grads")


RECORD = ConfigRecord({"step": 3, "flag": True, "rate": 0.5, "name": "x"})


@pytest.mark.parametrize(
    ("key", "kind", "value"),
    [
        ("step", int, 3),
        ("flag", bool, True),
        ("rate", float, 0.5),
        ("name", str, "x"),
        ("step", (int, float), 3),
    ],
)
def test_get_field_accepts_the_right_types(key, kind, value):
    assert get_field(RECORD, key, kind) == value


@pytest.mark.parametrize(
    ("key", "kind", "message"),
    [
        ("flag", int, r"field 'flag' must be <class 'int'>, got bool"),
        ("flag", (int, float), r"field 'flag' must be .*, got bool"),
        ("name", int, r"field 'name' must be <class 'int'>, got str"),
        ("step", float, r"field 'step' must be <class 'float'>, got int"),
        ("rate", int, r"field 'rate' must be <class 'int'>, got float"),
        ("step", str, r"field 'step' must be <class 'str'>, got int"),
        ("step", bool, r"field 'step' must be <class 'bool'>, got int"),
    ],
)
def test_get_field_rejects_wrong_types(key, kind, message):
    with pytest.raises(ProtocolError, match=message):
        get_field(RECORD, key, kind)


def test_get_field_rejects_a_missing_field():
    with pytest.raises(
        ProtocolError,
        match=r"config record lacks field 'epoch'; "
        r"fields present: \['flag', 'name', 'rate', 'step'\]",
    ):
        get_field(RECORD, "epoch", int)
