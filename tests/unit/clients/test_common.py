"""A party node's integer options are read exactly or refused, never rounded; its party
file is encoded as the run says."""

from __future__ import annotations

import numpy as np
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


def test_a_party_file_is_encoded_as_the_runs_data_spec_says(tmp_path) -> None:
    """Deployment: the party reads its own file, in the numeric scaling the server's data
    spec names (dataset.numeric_scaling travels in the setup message); a standard run's
    key is the plain file key."""
    import json
    from collections import OrderedDict

    import pandas as pd

    from flwr_vflgan.clients.common import data_key, load_cached
    from flwr_vflgan.data.encoder import TabularEncoder
    from flwr_vflgan.data.modes import ModeSpecificEncoder
    from flwr_vflgan.runtime.party_data import DataSpec

    path = tmp_path / "party.csv"
    rng = np.random.default_rng(0)
    values = np.r_[rng.normal(20, 1, 150), rng.normal(60, 2, 150)].round()
    pd.DataFrame({"row_id": range(300), "x": values, "c": ["a", "b", "c"] * 100}).to_csv(
        path, index=False
    )
    context = _context(**{"data-path": str(path)})
    standard = data_key(context, DataSpec(source="adult").to_json(), 0)
    assert json.loads(standard) == {"file": str(path)}
    mode = data_key(context, DataSpec(source="adult", numeric_scaling="mode").to_json(), 0)
    assert json.loads(mode) == {"file": str(path), "numeric_scaling": "mode"}
    cache: OrderedDict = OrderedDict()
    fail = lambda spec, i: pytest.fail("a party file is not read from the spec")  # noqa: E731
    assert isinstance(load_cached(cache, standard, fail).encoder, TabularEncoder)
    data = load_cached(cache, mode, fail)
    assert isinstance(data.encoder, ModeSpecificEncoder)
    assert data.encoder.n_modes["x"] == 2 and data.encoded.shape == (300, 1 + 2 + 3)
