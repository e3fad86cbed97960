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


@pytest.mark.parametrize(
    ("scheme", "dp", "claimed", "expected"),
    [
        (
            "assd",
            "none",
            None,
            "Record 1: 0.65 (0.09) (naive), 0.59 (0.05) (correlation); "
            "Record 2: 0.58 (0.10), 0.55 (0.11) (Adult, non-DP VFLGAN,",
        ),
        (
            "assd",
            "vflgan_gaussian",
            9.9997,
            "Record 2: 0.51 (0.12), 0.44 (0.10) (Adult, DP-VFLGAN at epsilon 10,",
        ),
        (
            "asif",
            "vflgan_gaussian",
            5.0,
            "Table 4, accuracy on Record 1: 0.49 (0.03) (naive), "
            "0.50 (0.12) (correlation); Record 2: 0.54 (0.09), 0.51 (0.10) (Adult, DP-VFLGAN at "
            "epsilon 5,",
        ),
        (
            "assd",
            "end_to_end",
            10.0,
            "Record 1: 0.65 (0.09) (naive), 0.59 (0.05) (correlation); "
            "Record 2: 0.58 (0.10), 0.55 (0.11) (Adult, non-DP VFLGAN; it has no row for "
            "dp=end_to_end at this epsilon,",
        ),
        (
            "assd",
            "vflgan_gaussian",
            1.0,
            "(Adult, non-DP VFLGAN; it has no row for dp=vflgan_gaussian at this epsilon,",
        ),
    ],
)
def test_the_report_compares_with_the_papers_row_of_the_same_privacy_setting(
    scheme, dp, claimed, expected
):
    """An audit of DP-VFLGAN at epsilon 10 is set beside the paper's epsilon-10 row, not
    beside its non-DP one; a setting the paper did not audit says so."""
    from flwr_vflgan.simulations.shadow_audit import paper_row

    line = paper_row({"scheme": scheme, "dp": dp, "claimed_epsilon": claimed})
    assert expected in line
