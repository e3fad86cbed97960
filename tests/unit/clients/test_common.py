"""A party node's integer options are read exactly or refused, never rounded."""

from __future__ import annotations

import pytest
from flwr.app import Context, RecordDict

from flwr_vflgan.clients.common import node_integer, node_partition_id, node_shared_seed
from flwr_vflgan.runtime import protocol as P


def _context(**node_config: object) -> Context:
    return Context(run_id=1, node_id=1, node_config=node_config, state=RecordDict(), run_config={})


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (3.0, 3), ("3", 3), (" 12 ", 12), (0, 0)])
def test_integers_in_any_of_flowers_forms_are_read(value: object, expected: int):
    assert node_integer(_context(**{"partition-id": value}), P.NODE_PARTITION_ID) == expected


@pytest.mark.parametrize(
    "value", [1.5, float("inf"), float("nan"), True, -1, "-1", "1e3", "0x10", "12a", "1.5"]
)
def test_anything_else_is_refused_naming_the_key(value: object):
    with pytest.raises(
        ValueError, match="node_config 'partition-id' must be a non-negative integer"
    ):
        node_partition_id(_context(**{"partition-id": value}))
    with pytest.raises(
        ValueError, match="node_config 'shared-seed' must be a non-negative integer"
    ):
        node_shared_seed(_context(**{"shared-seed": value}), run_seed=0)


def test_unset_and_empty_are_none_and_a_missing_partition_id_is_named():
    assert node_integer(_context(), P.NODE_NOISE_SEED) is None
    assert node_integer(_context(**{"noise-seed": ""}), P.NODE_NOISE_SEED) is None
    with pytest.raises(ValueError, match="node_config lacks 'partition-id'"):
        node_partition_id(_context())
