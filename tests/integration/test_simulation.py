"""VFLGAN in Flower's simulation engine (Ray), launched by the Hydra entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import FD_ONLY, SHARED_DATASETS

from flwr_vflgan.gafm.attacks import ATTACKS

REPO = Path(__file__).resolve().parents[2]

OVERRIDES = [
    "train.epochs=1",
    "train.max_steps=20",
    "train.eval_rows=500",
    "output.publish_rows=300",
    "seed=11",
]


def _run(runtime: str, out: Path, *extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FLWR_VFLGAN_SHARED_SEED", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "simulations.run",
            f"runtime={runtime}",
            *OVERRIDES,
            *extra,
            f"hydra.run.dir={out}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"{runtime} run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(("k", "exchanges"), [(1, 23), (4, 8)])
def test_simulation_engine_gives_the_same_synthetic_table_as_in_process(
    tmp_path: Path, k: int, exchanges: int
) -> None:
    """Also at 4 steps per exchange: 20 steps in 5 blocks, plus setup, the last apply and
    publication."""
    blocks = (f"train.steps_per_exchange={k}", *FD_ONLY.split())
    simulated = _run("simulation", tmp_path / "sim", *blocks)
    local = _run("inprocess", tmp_path / "local", *blocks)
    assert simulated["runtime"] == "simulation" and simulated["steps"] == 20
    assert simulated["exchanges"] == local["exchanges"] == exchanges
    # The protocol does the same math whatever carries the messages: same seeds, same table.
    sim_table = pd.read_csv(tmp_path / "sim" / "synthetic.csv")
    local_table = pd.read_csv(tmp_path / "local" / "synthetic.csv")
    assert len(sim_table) == 300 and sim_table.shape[1] == 15
    pd.testing.assert_frame_equal(sim_table, local_table)
    assert simulated["fd"] == pytest.approx(local["fd"], rel=1e-9)


@pytest.mark.slow
def test_dp_run_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """Calibration, noise and budget accounting happen at the parties, whatever the runtime."""
    dp = (
        "dp=vflgan_gaussian",
        "dp.target_epsilon=3",
        "output.evaluate=false",
        "runtime.steps_per_exchange=4",  # both runtimes: 20 steps in 5 exchanges
    )
    simulated = _run("simulation", tmp_path / "sim", *dp)
    local = _run("inprocess", tmp_path / "local", *dp)
    privacy = simulated["privacy"]
    assert privacy["mechanism"] == "vflgan_gaussian" and 2.9 < privacy["epsilon"] <= 3.0
    assert [p["steps"] for p in privacy["parties"]] == [17, 17]  # 20 steps, 3 of them G steps
    assert privacy == local["privacy"]
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "sim" / "synthetic.csv"),
        pd.read_csv(tmp_path / "local" / "synthetic.csv"),
    )


@pytest.mark.slow
def test_vertigan_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """VertiGAN's summed backbone gradients and its parties' joint DP-SGD account give the
    same table whatever carries the messages."""
    extra = (
        "algorithm=vertigan",
        "dp=dpsgd",
        "dp.target_epsilon=3",
        "output.evaluate=false",
        "runtime.steps_per_exchange=4",
    )
    simulated = _run("simulation", tmp_path / "sim", *extra)
    local = _run("inprocess", tmp_path / "local", *extra)
    assert simulated["algorithm"] == "vertigan" and simulated["exchanges"] == 8
    privacy = simulated["privacy"]
    assert privacy["guarantee"] == "critic_updates" and 2.9 < privacy["epsilon"] <= 3.0
    # Both parties noise the same batch: one joint account of the two releases.
    assert [(p["parts"], p["steps"]) for p in privacy["parties"]] == [(2, 17), (2, 17)]
    assert privacy == local["privacy"]
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "sim" / "synthetic.csv"),
        pd.read_csv(tmp_path / "local" / "synthetic.csv"),
    )


@pytest.mark.slow
def test_vdgan_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """VDGAN-DPSGD's iterations (synthetic columns down, gradients up) and its clients'
    accounts are the same whatever carries the messages; train.max_steps caps the
    iterations."""
    extra = (
        "algorithm=vdgan",
        "train.max_steps=4",
        "dp=dpsgd",
        "dp.target_epsilon=3",
        "output.evaluate=false",
    )
    simulated = _run("simulation", tmp_path / "sim", *extra)
    local = _run("inprocess", tmp_path / "local", *extra)
    assert simulated["algorithm"] == "vdgan" and simulated["steps"] == 4
    assert simulated["exchanges"] == local["exchanges"] == 6  # setup, 4, publication
    privacy = simulated["privacy"]
    assert privacy["guarantee"] == "critic_updates" and privacy == local["privacy"]
    assert [p["steps"] for p in privacy["parties"]] == [20, 20]
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "sim" / "synthetic.csv"),
        pd.read_csv(tmp_path / "local" / "synthetic.csv"),
    )


@pytest.mark.slow
def test_vtgan_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """VT-GAN's messages (every-row features, row indices, conditions, chunk gradients)
    go through Ray unchanged, three critic steps per exchange: the same seeds give the
    same published table."""
    vtgan = (
        "algorithm=vtgan",
        "train.max_steps=8",
        "train.steps_per_exchange=3",
        "output.evaluate=false",
    )
    simulated = _run("simulation", tmp_path / "sim", *vtgan)
    local = _run("inprocess", tmp_path / "local", *vtgan)
    assert simulated["algorithm"] == "vtgan" and simulated["steps"] == 8
    # Blocks 0-2, 3-4, 5 (the G step, 2 exchanges) and 6-7; setup, build, the first
    # conditions, the last block's update and the 2 publication exchanges.
    assert simulated["exchanges"] == local["exchanges"] == 3 + 2 + 3 + 1 + 2
    sim_table = pd.read_csv(tmp_path / "sim" / "synthetic.csv")
    assert len(sim_table) == 300 and sim_table.shape[1] == 15
    pd.testing.assert_frame_equal(sim_table, pd.read_csv(tmp_path / "local" / "synthetic.csv"))
    # Same losses up to float summation order (a Ray worker's BLAS may split the every-row
    # matrix products differently from the in-process client): measured 8e-5 relative.
    assert simulated["history"][-1]["d_loss"] == pytest.approx(
        local["history"][-1]["d_loss"], rel=1e-3
    )


# GAFM on Spambase, 2 non-label parties (SuperNodes); the label party is the ServerApp.
GAFM = (
    "algorithm=gafm",
    "dataset=spambase",
    f"dataset.data_dir={SHARED_DATASETS}",
    "partition.n_parties=2",
    "gafm.repetitions=1",
    "gafm.max_steps=4",
    "gafm.eval_every=0",
    "gafm.batch_size=256",
    "gafm.steps_per_exchange=1",  # the in-process default; runtime=simulation's is larger
)


@pytest.mark.slow
def test_gafm_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """Split classification's messages (cut values, gradients, row indices) go through
    Ray unchanged: the same seed gives the same AUCs and leak AUCs."""
    simulated = _run("simulation", tmp_path / "sim", *GAFM)
    local = _run("inprocess", tmp_path / "local", *GAFM)
    assert simulated["algorithm"] == local["algorithm"] == "gafm"
    assert simulated["runtime"] == "simulation" and local["runtime"] == "inprocess"
    assert simulated["n_parties"] == local["n_parties"] == 2
    assert simulated["rows"] == local["rows"] == 4601
    # strategies/gafm.py and gafm/training.py: the setup of the seed (1), one exchange per
    # training step, each carrying the previous step's gradients and asking for the next
    # batch's cut values (4), the last step's gradients applied alone (1, the run stops
    # at max_steps inside epoch 1), one prediction of every row for the AUCs (1): 7.
    assert simulated["exchanges"] == local["exchanges"] == 1 + 4 + 1 + 1
    [sim], [ref] = simulated["repetitions"], local["repetitions"]
    assert sim["seed"] == ref["seed"] == 11 and sim["steps"] == ref["steps"] == 4
    assert sim["epochs"] == 1 and sim["flipped"] == ref["flipped"]
    # Measured: every AUC is bit-for-bit the same in both runtimes.
    for key in ("train_auc", "test_auc", "leak_auc", "leak_auc_per_party"):
        assert sim[key] == ref[key], f"{key}: simulation {sim[key]}, in-process {ref[key]}"
    assert len(sim["leak_auc_per_party"]) == 2
    assert tuple(sim["leak_auc"]) == ATTACKS
    assert simulated["summary"] == local["summary"]


@pytest.mark.slow
def test_vflgan_ts_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """The series family rides VFLGAN's strategy and party client: the simulated nodes
    load their channels of the sine data and publish the in-process series."""
    extra = (
        "algorithm=vflgan_ts",
        "dataset=sine6",
        "output.evaluate=false",
        "runtime.steps_per_exchange=4",
        "series.model.generator_hidden=16",
        "series.model.attribute_hidden=[8,4]",
        "series.model.extractor_hidden=[4]",
        "series.model.shared_hidden=[8,4]",
        "model.feature_dim=8",
    )
    simulated = _run("simulation", tmp_path / "sim", *extra)
    local = _run("inprocess", tmp_path / "local", *extra)
    assert simulated["algorithm"] == "vflgan_ts" and simulated["steps"] == 20
    assert simulated["exchanges"] == local["exchanges"] == 8
    sim_table = pd.read_csv(tmp_path / "sim" / "synthetic.csv")
    assert sim_table["series"].nunique() == 300 and len(sim_table) == 300 * 800
    pd.testing.assert_frame_equal(sim_table, pd.read_csv(tmp_path / "local" / "synthetic.csv"))


@pytest.mark.slow
def test_latent_diffusion_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """The one-round family's three exchanges (setup, latents up, sampled latents down)
    publish the same table whatever carries them; the epochs change nothing in the count."""
    extra = (
        "algorithm=latent_diffusion",
        "latent.ae_epochs=2",
        "latent.ae_min_steps=1",
        "latent.diffusion_min_steps=1",
        "latent.ae_hidden=[32]",
        "latent.diffusion_epochs=2",
        "latent.diffusion_steps=20",
        "latent.denoiser_hidden=[32,32]",
        "output.evaluate=false",
    )
    simulated = _run("simulation", tmp_path / "sim", *extra)
    local = _run("inprocess", tmp_path / "local", *extra)
    assert simulated["algorithm"] == "latent_diffusion"
    assert simulated["exchanges"] == local["exchanges"] == 3
    assert set(simulated["phases"]) == {"autoencoders", "diffusion", "sampling", "decoding"}
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "sim" / "synthetic.csv"),
        pd.read_csv(tmp_path / "local" / "synthetic.csv"),
    )


@pytest.mark.slow
def test_dplt_in_the_simulation_engine_matches_in_process(tmp_path: Path) -> None:
    """DPLT's three exchanges (setup, latent states up, sampled states down) publish the
    same table whatever carries them, with the same pure epsilon-DP account."""
    extra = (
        "algorithm=dplt",
        "dp=end_to_end",
        "dp.target_epsilon=2",
        "dplt.bins=8",
        "output.evaluate=false",
    )
    simulated = _run("simulation", tmp_path / "sim", *extra)
    local = _run("inprocess", tmp_path / "local", *extra)
    assert simulated["algorithm"] == "dplt"
    assert simulated["exchanges"] == local["exchanges"] == 3
    assert simulated["privacy"]["epsilon"] == local["privacy"]["epsilon"] == pytest.approx(2.0)
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "sim" / "synthetic.csv"),
        pd.read_csv(tmp_path / "local" / "synthetic.csv"),
    )
