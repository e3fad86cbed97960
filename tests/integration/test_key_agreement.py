"""The parties agree on their shared seed over the server (runtime.key_agreement): no
seed in any node's settings, one seed at every party (setup's commitments agree), none
of it in what the server sees; pinned keys catch a relay that swaps them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flwr.app import ConfigRecord, Message

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import keys as K
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VFLGANStrategy, VTGANStrategy

TRAIN = {"epochs": 1, "max_steps": 6, "eval_rows": 100}


def _run(adult_small: Path, nodes: list[dict], config: VFLGANConfig | None = None):
    log: list[Message] = []
    grid = InProcessGrid(make_client_app(), nodes, observer=log.append)
    config = config or VFLGANConfig.from_dict({"train": TRAIN})
    cls = VTGANStrategy if config.is_vtgan else VFLGANStrategy
    strategy = cls(
        config,
        n_parties=len(nodes),
        seed=3,
        data_spec=DataSpec(source=str(adult_small), n_parties=len(nodes)),
        publish_rows=50,
        key_agreement=True,
    )
    return strategy.start(grid), grid, log


def _agreed(grid: InProcessGrid) -> list[int]:
    states = [c.state[P.STATE_KEYS] for c in grid._contexts.values()]
    return [json.loads(str(s["json"]))["seed"] for s in states]


@pytest.mark.parametrize("variant", ["vflgan", "vtgan"])
def test_parties_without_a_configured_seed_agree_on_one_the_server_never_sees(
    adult_small: Path, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(P.ENV_SHARED_SEED, raising=False)
    train = TRAIN if variant == "vflgan" else {"epochs": 1, "max_steps": 4, "batch_size": 64}
    config = VFLGANConfig.from_dict({"variant": variant, "train": train})
    nodes = [{P.NODE_PARTITION_ID: i} for i in range(3)]
    result, grid, log = _run(adult_small, nodes, config)
    seeds = _agreed(grid)
    assert len(set(seeds)) == 1 and len(result.synthetic) == 50
    kinds = [m.metadata.message_type for m in log if m.metadata.reply_to_message_id == ""]
    assert kinds[:3] == [P.KEY_OFFER] * 3 and kinds[6:8] == [P.KEY_OPEN] * 2
    # Nothing the server sent or received holds the seed, in any encoding.
    seed = seeds[0]
    needles = (seed.to_bytes(8, "big"), seed.to_bytes(8, "little"), str(seed).encode())
    for message in log:
        for record in message.content.values():
            blob = repr(dict(record)).encode() if isinstance(record, ConfigRecord) else b""
            if hasattr(record, "values") and not isinstance(record, ConfigRecord):
                blob = b"".join(a.data for a in record.values())
            assert not any(n in blob for n in needles), message.metadata.message_type


def test_a_second_run_agrees_on_another_seed(adult_small: Path) -> None:
    nodes = [{P.NODE_PARTITION_ID: i} for i in range(2)]
    first = _agreed(_run(adult_small, nodes)[1])
    second = _agreed(_run(adult_small, nodes)[1])
    assert first[0] != second[0]


def _key_files(tmp_path: Path, n: int) -> tuple[list[Path], list[str]]:
    paths, publics = [], []
    for i in range(n):
        private = K.new_private_key()
        path = tmp_path / f"party-{i}.key"
        path.write_text(private.hex())
        paths.append(path)
        publics.append(K.public_key(private).hex())
    return paths, publics


def test_pinned_keys_pass_and_a_swapped_key_stops_the_run(adult_small: Path, tmp_path: Path):
    paths, publics = _key_files(tmp_path, 2)
    pinned = [
        {P.NODE_PARTITION_ID: i, P.NODE_KEY_FILE: str(p), P.NODE_PEER_KEYS: ",".join(publics)}
        for i, p in enumerate(paths)
    ]
    assert len(set(_agreed(_run(adult_small, pinned)[1]))) == 1
    (tmp_path / "other").mkdir()
    _, impostor = _key_files(tmp_path / "other", 1)
    swapped = [dict(n) for n in pinned]
    swapped[1][P.NODE_PEER_KEYS] = ",".join([impostor[0], publics[1]])  # party 1 pins another key
    with pytest.raises(RunStopped, match="differs from the one pinned in node_config 'peer-keys'"):
        _run(adult_small, swapped)


def test_a_resumed_run_refuses_key_agreement(adult_small: Path, tmp_path: Path) -> None:
    nodes = [{P.NODE_PARTITION_ID: i, P.NODE_SHARED_SEED: 9} for i in range(2)]
    config = VFLGANConfig.from_dict({"train": {"epochs": 2, "eval_rows": 100}})
    spec = DataSpec(source=str(adult_small), n_parties=2)
    checkpoints = tmp_path / "ck"
    first = VFLGANStrategy(
        config, n_parties=2, data_spec=spec, checkpoint_dir=checkpoints,
        party_checkpoint_root=checkpoints,
    )  # fmt: skip
    first.start(InProcessGrid(make_client_app(), nodes))
    again = VFLGANStrategy(
        config, n_parties=2, data_spec=spec, checkpoint_dir=checkpoints,
        party_checkpoint_root=checkpoints, key_agreement=True,
    )  # fmt: skip
    with pytest.raises(RunStopped, match="a resumed run needs the seed of the run it resumes"):
        again.start(InProcessGrid(make_client_app(), nodes))


def test_split_classification_refuses_key_agreement() -> None:
    import numpy as np
    import pandas as pd

    from flwr_vflgan.gafm.config import GAFMSettings, Method
    from flwr_vflgan.strategies.gafm import GAFMStrategy

    with pytest.raises(ValueError, match="no shared seed to agree on"):
        GAFMStrategy(
            Method.GAFM,
            GAFMSettings(),
            labels=np.array([0, 1]),
            label_ids=pd.Series([1, 2]),
            label="y",
            n_parties=1,
            key_agreement=True,
        )
