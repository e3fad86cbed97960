"""ASIF's encoding of the whole table by a shadow trained without the target: a category
that shadow's encoder never saw becomes an all-zero one-hot block, every other value
encodes as the encoder itself encodes it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.encoder import TabularEncoder
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.simulations.shadow_audit import encode_leniently

SCHEMA = Schema((ColumnSpec("x", ColumnKind.CONTINUOUS), ColumnSpec("c", ColumnKind.CATEGORICAL)))
TRAIN = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0], "c": ["a", "b", "a", "b"]})


@pytest.mark.parametrize("encoder", [TabularEncoder(), ModeSpecificEncoder()])
def test_an_unseen_category_encodes_as_zeros_and_the_rest_as_the_encoder_does(encoder):
    encoder.fit(TRAIN, SCHEMA)
    table = pd.DataFrame({"x": [0.5, 9.0, 2.0], "c": ["b", "z", "a"]})
    got = encode_leniently(encoder, table)
    span = next(s for s in encoder.spans if s.column == "c")
    assert np.all(got[1, span.start : span.stop] == 0)
    known = table.drop(index=1)
    np.testing.assert_array_equal(got[[0, 2]], encoder.transform(known))
    # The unknown row's numbers are encoded as the encoder encodes them.
    numbers = [i for i in range(got.shape[1]) if not span.start <= i < span.stop]
    reference = encoder.transform(table.assign(c=["b", "a", "a"]))
    np.testing.assert_array_equal(got[1, numbers], reference[1, numbers])


def test_a_table_the_encoder_knows_is_encoded_unchanged():
    encoder = TabularEncoder().fit(TRAIN, SCHEMA)
    np.testing.assert_array_equal(encode_leniently(encoder, TRAIN), encoder.transform(TRAIN))
