"""DPLT through the real Flower paths: the in-process grid against the sequence without
Flower, what crosses the wire, the privacy account in metrics.json, and refusals."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from flwr.app import Message
from wire import SETUP_FIELDS, check_listed_fields

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data.domain import bundled_domain
from flwr_vflgan.dplt.local import synthesize_locally
from flwr_vflgan.dplt.messages import STATES, LatentsRequest
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.runtime.rng import Stream, numpy_generator
from flwr_vflgan.strategies import DPLTStrategy, InProcessGrid, RunStopped
from flwr_vflgan.strategies import dplt as dplt_strategy

ROOT = Path(__file__).resolve().parents[2]


def _config(epsilon: float = 5.0) -> VFLGANConfig:
    return VFLGANConfig.from_dict(
        {
            "variant": "dplt",
            "dp": {"mechanism": "end_to_end", "target_epsilon": epsilon},
            "dplt": {"bins": 8},
        }
    )


def _spec(adult_small: Path, n: int, domain: bool = True) -> DataSpec:
    mapping = bundled_domain("adult").to_mapping() if domain else None  # type: ignore[union-attr]
    return DataSpec(source=str(adult_small), n_parties=n, domain=mapping)


def _grid(n: int, observer=None) -> InProcessGrid:
    return InProcessGrid(
        make_client_app(), [{"partition-id": i} for i in range(n)], observer=observer
    )


def _strategy(spec: DataSpec, **kwargs: object) -> DPLTStrategy:
    return DPLTStrategy(_config(), n_parties=spec.n_parties, seed=4, data_spec=spec, **kwargs)  # type: ignore[arg-type]


def test_the_grid_publishes_what_the_sequence_without_flower_makes(adult_small: Path) -> None:
    spec = _spec(adult_small, 3)
    result = _strategy(spec, publish_rows=200).start(_grid(3))
    assert result.exchanges == 3 and set(result.phases) == {"latents", "tree", "publication"}
    blocks = all_blocks(spec)
    local, plan, _ = synthesize_locally(
        blocks,
        spec.public_domain,
        _config().dplt,
        5.0,
        4,
        200,  # type: ignore[arg-type]
    )
    order = numpy_generator(4, Stream.PUBLISH).permutation(200)
    pd.testing.assert_frame_equal(result.synthetic, local.iloc[order].reset_index(drop=True))
    (account,) = result.privacy
    assert account["epsilon"] == pytest.approx(5.0) and account["delta"] == 0.0
    assert account["selections"] == plan.selections and account["steps"] == plan.latents
    # Each party's own releases as it reports them, and the server's, add up to the plan.
    holders = account["by_holder"]
    assert [h["party"] for h in holders] == [0, 1, 2, "server"]
    assert sum(h["epsilon"] for h in holders) == pytest.approx(5.0)
    assert all(h["epsilon"] > 0 for h in holders)
    # Categories and bounds come from the public domain (a category of the domain the
    # 640 rows lack may be drawn: its histogram cell is noise).
    for name, column in spec.public_domain.columns.items():  # type: ignore[union-attr]
        values = result.synthetic[name].dropna()
        if column.categories:
            assert set(values) <= set(column.categories), name
        else:
            assert values.between(column.minimum, column.maximum).all(), name


ALLOWED = {
    ("to_party", P.DL_SETUP): {P.CONFIG: set(SETUP_FIELDS)},
    ("to_party", P.DL_LATENTS): {P.CONFIG: {"epsilon", "selections", "latents"}},
    ("to_party", P.DL_DECODE): {P.CONFIG: {"n_rows"}, STATES: None},
    ("to_server", P.DL_SETUP): {
        P.CONFIG: {"partition_id", "n_rows", "id_digest", "columns", "bits"}
    },
    ("to_server", P.DL_LATENTS): {P.CONFIG: {"counts"}, STATES: None},
    ("to_server", P.DL_DECODE): {P.SYNTHETIC: {"n_rows", "parquet", "privacy"}},
}
"""Every record and field each message may carry, per direction (``None``: one vector
per latent attribute, ``g0``, ``g1``, ..., checked below)."""


def test_the_wire_carries_one_state_per_row_and_group_and_nothing_else(adult_small: Path) -> None:
    spec = _spec(adult_small, 2)
    log: list[Message] = []
    _strategy(spec, publish_rows=100).start(_grid(2, log.append))
    assert len(log) == 3 * 2 * 2  # three exchanges, two parties, out and back
    for message in log:
        assert not message.has_error()
        direction = "to_server" if message.metadata.reply_to_message_id else "to_party"
        listed = ALLOWED[(direction, message.metadata.message_type)]
        groups = {k: v for k, v in listed.items() if v is None}
        check_listed_fields(
            message,
            direction,
            {
                (direction, message.metadata.message_type): {
                    k: (set(message.content[k]) if k in groups and k in message.content else v)
                    for k, v in listed.items()
                }
            },
        )
        for name in groups:
            keys = sorted(message.content[name], key=lambda k: int(k[1:]))
            assert keys == [f"g{j}" for j in range(len(keys))]
    uploads = [
        m for m in log if m.metadata.message_type == P.DL_LATENTS and m.metadata.reply_to_message_id
    ]
    for message in uploads:
        counts = message.content[P.CONFIG]["counts"]
        record = message.content[STATES]
        assert len(record) == len(counts)
        for j, count in enumerate(counts):
            states = record[f"g{j}"].numpy()
            # One latent state per real row, of a group of at most 3 bits: at most 4 states.
            assert states.shape == (640,) and states.min() >= 0 and states.max() < count <= 4
    decoded = [
        m for m in log if m.metadata.message_type == P.DL_DECODE and m.metadata.reply_to_message_id
    ]
    for message, block in zip(decoded, all_blocks(spec), strict=True):
        table = pd.read_parquet(io.BytesIO(message.content[P.SYNTHETIC]["parquet"]))
        assert list(table.columns) == block.schema.names and len(table) == 100


@pytest.mark.parametrize(
    ("tamper", "refusal"),
    [
        # A plan that spends more than the run's budget.
        (lambda e, s, n: LatentsRequest(2 * e, s, n), r"budget is 5\.0: refused"),
        # Fewer latent attributes than the party alone has: its histograms' noise too small.
        (lambda e, s, n: LatentsRequest(e, s, 1), r"fewer than this party's own"),
    ],
    ids=["over-budget", "undercounted"],
)
def test_a_party_refuses_a_plan_it_can_see_is_wrong(
    adult_small: Path, monkeypatch: pytest.MonkeyPatch, tamper, refusal: str
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(dplt_strategy, "LatentsRequest", tamper)
    with pytest.raises(RunStopped, match=refusal):
        _strategy(_spec(adult_small, 2)).start(_grid(2))


def test_latents_of_other_state_counts_than_the_settings_make_stop_the_run(
    adult_small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server knows every party's groups and states from its bit count; a reply with
    other counts (settings that differ, or a count that would make huge tables) stops the
    run by name."""
    from flwr_vflgan.clients import dplt as dplt_client

    real = dplt_client.LatentsReply

    def inflated(counts, states):  # type: ignore[no-untyped-def]
        return real([c * 1000 for c in counts], states)

    monkeypatch.setattr(dplt_client, "LatentsReply", inflated)
    with pytest.raises(RunStopped, match=r"party 0 \(node \d+\) sent latent attributes of"):
        _strategy(_spec(adult_small, 2)).start(_grid(2))


def test_a_party_noise_seed_of_its_own_changes_its_draws_and_only_its(adult_small: Path) -> None:
    """With ``noise-seed`` in its node config a party's noise is its own (the run seed,
    which the server and config.json know, no longer gives it away); the same seed
    gives the same table."""
    spec = _spec(adult_small, 2)

    def run(seed: int | None) -> pd.DataFrame:
        nodes: list[dict[str, object]] = [{"partition-id": 0}, {"partition-id": 1}]
        if seed is not None:
            nodes[0][P.NODE_NOISE_SEED] = seed
        return _strategy(spec).start(InProcessGrid(make_client_app(), nodes)).synthetic

    plain, own, again = run(None), run(12345), run(12345)
    pd.testing.assert_frame_equal(own, again)
    assert not own.equals(plain)


def test_a_party_without_a_public_domain_is_refused_by_name(adult_small: Path) -> None:
    with pytest.raises(RunStopped, match=r"dplt needs dataset\.domain"):
        _strategy(_spec(adult_small, 2, domain=False)).start(_grid(2))


def _run(*overrides: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simulations.run", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_command_line_runs_dplt_and_reports_what_its_epsilon_covers(
    adult_small: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    done = _run(
        "algorithm=dplt",
        "dp=end_to_end",
        "dp.target_epsilon=3",
        "dataset=csv",
        f"dataset.source={adult_small}",
        "dataset.domain=adult",
        "output.evaluate=false",
        f"hydra.run.dir={out}",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    privacy = metrics["privacy"]
    assert metrics["algorithm"] == "dplt" and metrics["exchanges"] == 3
    assert privacy["guarantee"] == "end_to_end" and privacy["delta"] == 0.0
    assert privacy["epsilon"] == pytest.approx(3.0)
    assert any("latent state of every row" in n for n in privacy["not_covered"])
    assert "pure epsilon-DP" in done.stdout
    table = pd.read_csv(out / "synthetic.csv")
    assert len(table) == 640 and np.isfinite(table.select_dtypes("number")).all().all()


def test_the_command_line_refuses_dplt_without_a_budget(tmp_path: Path) -> None:
    done = _run("algorithm=dplt", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 2
    lines = [line for line in done.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and "dp=end_to_end dp.target_epsilon" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_sample_of_the_thesis_adult_is_the_same_table_in_process_and_in_simulation(
    tmp_path: Path,
) -> None:
    """dataset.rows reaches the simulated parties through the spec: each samples the same
    rows of paper 004's Adult, so both runtimes publish the same table of that size."""
    tables = []
    for runtime in ("inprocess", "simulation"):
        out = tmp_path / runtime
        done = _run(
            "algorithm=dplt",
            "dp=end_to_end",
            "dp.target_epsilon=2",
            "dataset=adult_thesis",
            "dataset.rows=400",
            f"runtime={runtime}",
            "output.evaluate=false",
            f"hydra.run.dir={out}",
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        config = json.loads((out / "config.json").read_text())
        assert config["data"]["rows"] == 400 and config["data"]["source"] == "adult_thesis"
        tables.append(pd.read_csv(out / "synthetic.csv", dtype=str))
    assert len(tables[0]) == 400 and tables[0].shape[1] == 14
    pd.testing.assert_frame_equal(tables[0], tables[1])
