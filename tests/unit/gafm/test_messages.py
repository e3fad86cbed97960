"""GAFM's typed messages: round trips through Flower records and every check on arrival."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import Array

from flwr_vflgan.gafm.messages import CutValues, GAFMSetup, GAFMStep, PredictRows
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError

CUT, ROWS = 3, 50


def _decode(content, pending: int = 0, limit: int = 4) -> GAFMStep:
    return GAFMStep.from_content(
        content, pending_rows=pending, cut_dim=CUT, n_rows=ROWS, limit=limit
    )


def test_setup_round_trip_and_checks() -> None:
    sent = GAFMSetup(3, '{"a": 1}', "", "label", 7)
    assert GAFMSetup.from_content(sent.to_content()) == sent
    content = sent.to_content()
    content[P.CONFIG]["seed"] = -1
    with pytest.raises(ProtocolError, match="seed must be >= 0, got -1"):
        GAFMSetup.from_content(content)
    content[P.CONFIG]["seed"] = 7
    del content[P.CONFIG]["label"]
    with pytest.raises(ProtocolError, match="lacks field 'label'"):
        GAFMSetup.from_content(content)


def test_step_round_trip() -> None:
    sent = GAFMStep(
        step=4,
        grads=np.ones((5, CUT), np.float32),
        batch_rows=(2, 3),
        rows=np.array([1, 2, 10, 11, 12]),
    )
    got = _decode(sent.to_content(), pending=5)
    assert got.step == 4 and got.apply and got.forward and got.batch_rows == (2, 3)
    assert [b.tolist() for b in got.batches()] == [[1, 2], [10, 11, 12]]
    assert np.array_equal(got.grads, sent.grads)
    last = _decode(GAFMStep(step=9, grads=np.zeros((5, CUT), np.float32)).to_content(), 5)
    assert last.apply and not last.forward and last.batches() == []


@pytest.mark.parametrize(
    ("message", "pending", "match"),
    [
        (GAFMStep(0, grads=np.zeros((2, CUT), np.float32)), 0, "no pending forward pass"),
        (GAFMStep(0, grads=np.zeros((2, CUT), np.float32)), 3, r"grads\.cut must have shape"),
        (GAFMStep(1, batch_rows=(2,), rows=np.array([0, 1])), 2, "before the gradient"),
        (GAFMStep(-1, batch_rows=(2,), rows=np.array([0, 1])), 0, "step must be >= 0"),
        (GAFMStep(0, batch_rows=(1,) * 5, rows=np.arange(5)), 0, "1 to gafm.steps_per_exchange=4"),
        (GAFMStep(0, batch_rows=(2,), rows=np.array([0, 50])), 0, r"outside \[0, 50\)"),
        (GAFMStep(0, batch_rows=(3,), rows=np.array([0, 1])), 0, r"rows must have shape \(3,\)"),
    ],
)
def test_step_checks_on_arrival(message: GAFMStep, pending: int, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        _decode(message.to_content(), pending)


def test_empty_batches_and_non_finite_gradients_are_refused() -> None:
    content = GAFMStep(0, batch_rows=(2,), rows=np.array([0, 1])).to_content()
    content[P.CONFIG]["batch_rows"] = [2, 0]
    with pytest.raises(ProtocolError, match="every batch needs at least one row"):
        _decode(content)
    bad = GAFMStep(0, grads=np.zeros((2, CUT), np.float32)).to_content()
    bad[P.GRADS][P.CUT] = Array(np.full((2, CUT), np.inf, np.float32))
    with pytest.raises(ProtocolError, match="non-finite"):
        _decode(bad, pending=2)


def test_predict_and_cut_values() -> None:
    rows = PredictRows.from_content(PredictRows(np.array([3, 4])).to_content(), ROWS)
    assert rows.rows.tolist() == [3, 4]
    with pytest.raises(ProtocolError, match=r"outside \[0, 4\)"):
        PredictRows.from_content(PredictRows(np.array([3, 4])).to_content(), 4)
    cuts = CutValues(torch.arange(12, dtype=torch.float32).reshape(4, CUT))
    got = CutValues.from_content(cuts.to_content(), 4, CUT)
    assert torch.equal(got.cuts, cuts.cuts)
    assert [t.shape[0] for t in got.split([1, 3])] == [1, 3]
    with pytest.raises(ProtocolError, match=r"features\.cut must have shape \(5, 3\)"):
        CutValues.from_content(cuts.to_content(), 5, CUT)
