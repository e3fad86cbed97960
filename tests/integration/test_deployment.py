"""A real Flower deployment on this machine: a SuperLink, two SuperNodes that each read
their own party file, and ``flwr run`` (loopback and ``--insecure`` only), for VFLGAN
and VT-GAN; and the exporter that writes those party files (fast tests).

The party files and the SuperNode command lines come from
``python -m simulations.export_parties``, as a user would get them. The whole run has a
hard time limit; every process is stopped by PID in the fixture's teardown, and failure
messages carry the tail of every log plus the run's log from the SuperLink.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FD_ONLY, SHARED_DATASETS
from flwr.common.config import parse_config_args

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.data import load_dataset, load_party_file
from flwr_vflgan.runtime.faults import PAUSE_AT, PAUSE_DIR, PAUSE_SECONDS
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import ExportConfig, compose_run_config, to_run_spec
from flwr_vflgan.simulations.export_parties import export_parties, supernode_command
from flwr_vflgan.simulations.flower_processes import (
    HOST,
    STATUS_EVERY,
    DeploymentFailed,
    FlowerProcesses,
    executable,
    flower_env,
    free_ports,
    process_table,
    processes_with_env,
    write_flower_config,
)
from flwr_vflgan.simulations.gafm_pipeline import run_gafm
from flwr_vflgan.simulations.local_deployment import (
    launch_and_wait,
    launch_run,
    start_superlink,
)
from flwr_vflgan.simulations.pipeline import train_federated
from flwr_vflgan.strategies import InProcessGrid, VFLGANResult, VTGANStrategy

REPO = Path(__file__).resolve().parents[2]
FEDERATION = "testdeploy"
RUN_TIMEOUT = 300.0  # one exchange costs ~12-15 s in a deployment; this run needs six
VTGAN_RUN_TIMEOUT = 540.0  # the VT-GAN run needs ten exchanges (~21-29 s each here)
# UCI Adult's columns in the order of adult.names (the independent reference).
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
]  # fmt: skip
# One epoch is [discriminator step, generator step] when the batch holds more than half of
# the 48,842 rows with one critic step, so the 3-step run ends an epoch after step 1:
# every party and the server then write a checkpoint resuming at step 2.
# Two steps per exchange: the blocks are [0, 1] and [2] (an exchange never crosses an
# epoch's end), so stock SuperNodes restore a party mid-run with K > 1.
OVERRIDES = (
    "runtime=deployment train.max_steps=3 train.batch_size=24422 train.n_critic=1 "
    f"train.eval_rows=500 output.publish_rows=300 train.steps_per_exchange=2 {FD_ONLY}"
)
# Party nodes (flwr-vflgan-node) on the first 640 Adult rows: 3 epochs of 12 steps in
# blocks of 4 (9 training exchanges), last generator published, no FD selection.
NODE_OVERRIDES = (
    "runtime=deployment train.epochs=3 train.steps_per_exchange=4 train.eval_every=0 "
    "output.evaluate=false output.publish_rows=200"
)
NODE_RUN_TIMEOUT = 300.0
# VT-GAN on the first 640 Adult rows with batch 64 and two critic steps per generator
# step, at runtime=deployment's K = 4: steps 0-1 are one block of discriminator steps,
# step 2 is the generator step, so step 3 runs on rows shuffled once
# (training-with-shuffling), by clients restored in new processes.
VTGAN_ROWS = 200
VTGAN_OVERRIDES = (
    "runtime=deployment algorithm=vtgan train.max_steps=4 train.batch_size=64 train.n_critic=2 "
    "vtgan.latent_dim=16 vtgan.generator_width=32 vtgan.discriminator_width=32 "
    f"output.publish_rows={VTGAN_ROWS} output.evaluate=false runtime.poll_interval=0.05"
)
# Counted from the protocol (strategies/vtgan.py): setup, build, the conditions of
# steps 0-1, one exchange per block of discriminator steps (0-1 and 3), two for the
# generator step (2), the last block's update, and two for publication (conditions,
# then rows).
VTGAN_EXCHANGES = 2 + 1 + 2 * 1 + 2 + 1 + 2
# GAFM on Spambase with 2 non-label parties (the SuperNodes) and the label party as the
# ServerApp; 3 training steps at batch 256 stay inside epoch 1.
GAFM_DATA = (
    "algorithm=gafm",
    "dataset=spambase",
    f"dataset.data_dir={SHARED_DATASETS}",
    "partition.n_parties=2",
)
GAFM_OVERRIDES = (
    "algorithm=gafm dataset=spambase partition.n_parties=2 gafm.repetitions=1 "
    "gafm.max_steps=3 gafm.eval_every=0 gafm.batch_size=256 gafm.steps_per_exchange=1 "
    f"dataset.data_dir={SHARED_DATASETS}"
)
# Counted from the protocol (strategies/gafm.py, gafm/training.py): the seed's setup, one
# exchange per training step (it carries the previous step's gradients and asks for the
# next batch's cut values), the last step's gradients applied alone, one prediction.
GAFM_EXCHANGES = 1 + 3 + 1 + 1
GAFM_RUN_TIMEOUT = 300.0  # six exchanges, measured ~15 s each here (a ~90 s run)


# Every Flower process of these tests loads flower_site/sitecustomize.py, which sets
# Flower's heartbeat interval to its minimum, 10 s: the SuperLink notices a killed node
# after 2 missed intervals, about 20 s instead of 60 s with the default 30 s.
FLOWER_SITE = Path(__file__).resolve().parent / "flower_site"
TEST_HEARTBEAT = 10


def _flower_env(flwr_home: Path, extra: dict[str, str]) -> dict[str, str]:
    """``flower_env`` with this test file's heartbeat interval."""
    path = os.pathsep.join(p for p in (str(FLOWER_SITE), os.environ.get("PYTHONPATH")) if p)
    heartbeat = {"PYTHONPATH": path, "FLWR_VFLGAN_TEST_HEARTBEAT": str(TEST_HEARTBEAT)}
    return flower_env(flwr_home, {**heartbeat, **extra})


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[FlowerProcesses]:
    procs = FlowerProcesses(
        tmp_path / "logs", env_marker=("FLWR_HOME", str(tmp_path / "flwr-home"))
    )
    yield procs
    survivors = procs.stop()
    assert not survivors, f"processes survived the teardown: {survivors}\n{procs.logs()}"


def _export(
    out_dir: Path, superlink: str, *overrides: str, command: str = "flower-supernode"
) -> tuple[str, list[list[str]]]:
    """Run the exporter; its output and the argv of each printed ``command`` line."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "simulations.export_parties",
            f"export.out_dir={out_dir}",
            f"export.superlink={superlink}",
            *overrides,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"export failed:\n{result.stdout}\n{result.stderr}"
    commands = [
        shlex.split(line.strip())
        for line in result.stdout.splitlines()
        if line.strip().startswith(f"{command} ")
    ]
    return result.stdout, commands


def _supernode_args(command: list[str], port: int, checkpoint_dir: Path | None) -> list[str]:
    """A printed command with this test's ClientAppIo port (and a checkpoint directory)."""
    args = [executable("flower-supernode"), *command[1:]]
    args[args.index("--port") + 1] = str(port)
    if checkpoint_dir is not None:
        at = args.index("--node-config") + 1
        args[at] = f'{args[at]} checkpoint-dir="{checkpoint_dir}"'
    return [*args, "--host", HOST]


def _node_config(command: list[str]) -> dict[str, str]:
    text = command[command.index("--node-config") + 1]
    return dict(item.split("=", 1) for item in shlex.split(text))


def _checkpoint_meta(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as data:
        return json.loads(bytes(data["__meta__"]).decode())


@dataclass
class Deployment:
    """A finished deployment run: where its outputs are and what the parties were given."""

    run_dir: Path
    parties: Path
    shared_seed: str
    node_configs: list[dict]
    """Each SuperNode's node config as Flower parses it (typed values)."""
    diagnostics: Callable[[], str]
    """Every log's tail plus the run's log from the SuperLink."""
    export_output: str = ""
    """What the exporter printed (the party files, the SuperNode and ``flwr run`` commands)."""


def _deploy(
    tmp_path: Path,
    processes: FlowerProcesses,
    *,
    export_overrides: tuple[str, ...],
    run_overrides: str,
    checkpoints: list[Path] | None,
    timeout: float,
    party_nodes: bool = False,
    while_running: Callable[[list[list[str]], dict[str, str]], None] | None = None,
    edit_parties: Callable[[Path], None] | None = None,
    extra_env: dict[str, str] | None = None,
    relaunches: bool = False,
) -> Deployment:
    """Export the party files, start a SuperLink and two SuperNodes from the printed
    commands (or, with ``party_nodes``, two ``flwr-vflgan-node`` processes with the same
    node configs, and with ``checkpoints`` their checkpoint directories), launch ``flwr
    run`` and wait for ``metrics.json``. ``edit_parties`` may change the exported party
    files before any node starts; ``while_running`` is called in a thread of its own with
    the party nodes' commands and environment as the run starts. ``extra_env`` goes into
    every process's environment (the SuperLink's reaches the ServerApp). With
    ``relaunches`` (``while_running`` runs ``flwr run`` again after a fault) the wait is for
    the outputs alone, not for the first run's status."""
    started = time.monotonic()
    link_port, node_ports = free_ports(1)[0], free_ports(2)
    superlink = f"{HOST}:{link_port}"
    flwr_home, run_dir, parties = tmp_path / "flwr-home", tmp_path / "run", tmp_path / "parties"
    # One thread per process: the SuperNodes' ClientApps compute what the in-process
    # reference computes, in the same order.
    threads = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    env = _flower_env(flwr_home, {**threads, **(extra_env or {})})

    output, commands = _export(parties, superlink, *export_overrides)
    assert len(commands) == 2, output
    configs = [_node_config(c) for c in commands]
    shared_seed = configs[0]["shared-seed"]
    assert [c["partition-id"] for c in configs] == ["0", "1"], output
    assert {c["shared-seed"] for c in configs} == {shared_seed}, output
    assert f"  {shared_seed}\n" in output, output  # the seed is also printed on its own
    for i, config in enumerate(configs):
        assert config["data-path"] == str(parties / f"party-{i}.csv")
    if edit_parties is not None:
        edit_parties(parties)

    start_superlink(processes, link_port, env, tmp_path)
    if party_nodes:
        # The exporter's flwr-vflgan-node lines: the same node configs, other processes.
        _, node_commands = _export(
            tmp_path / "parties-again", superlink, *export_overrides, command="flwr-vflgan-node"
        )
        assert [_node_config(c)["partition-id"] for c in node_commands] == ["0", "1"]
        for i, command in enumerate(node_commands):
            again = _node_config(command)
            assert again.keys() == configs[i].keys() and again["data-path"].endswith(
                f"parties-again/party-{i}.csv"
            )
            # The party files and shared seed of the first export.
            at = command.index("--node-config") + 1
            command[at] = commands[i][commands[i].index("--node-config") + 1]
            if checkpoints:
                command[at] = f'{command[at]} checkpoint-dir="{checkpoints[i]}"'
            command[0] = executable(command[0])
            processes.start(f"party-node-{i}", command, env, cwd=tmp_path)
    for i, command in enumerate([] if party_nodes else commands):
        args = _supernode_args(command, node_ports[i], checkpoints[i] if checkpoints else None)
        processes.start(f"supernode-{i}", args, env, cwd=tmp_path)
    write_flower_config(flwr_home, FEDERATION, superlink)
    failed: list[str] = []
    if while_running is not None:

        def watched(given: list[list[str]]) -> None:
            """``while_running``; an error of its own ends the wait at once (the SuperLink
            is stopped) and is reported instead of a timeout."""
            try:
                while_running(given, env)
            except BaseException:
                failed.append(traceback.format_exc())
                link = next((p for p in processes.processes if p.name == "superlink"), None)
                if link is not None and link.popen is not None:
                    link.popen.kill()

        chosen = node_commands if party_nodes else commands
        threading.Thread(target=watched, args=(chosen,), daemon=True).start()

    try:
        diagnostics = launch_and_wait(
            processes,
            FEDERATION,
            run_overrides,
            run_dir,
            env=env,
            cwd=tmp_path,
            timeout=timeout - (time.monotonic() - started),
            status_every=math.inf if relaunches else STATUS_EVERY,
        )
    except DeploymentFailed:
        if failed:
            raise AssertionError(f"the fault thread failed:\n{failed[0]}") from None
        raise
    node_configs = [parse_config_args([c[c.index("--node-config") + 1]]) for c in commands]
    return Deployment(run_dir, parties, shared_seed, node_configs, diagnostics, output)


@pytest.mark.slow
def test_deployment_trains_and_publishes_from_party_files(
    tmp_path: Path, processes: FlowerProcesses
) -> None:
    checkpoints = [tmp_path / f"party-{i}-checkpoints" for i in range(2)]
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=(),
        run_overrides=OVERRIDES,
        checkpoints=checkpoints,
        timeout=RUN_TIMEOUT,
    )
    try:
        _check_outputs(
            deployment.run_dir, deployment.parties, checkpoints, deployment.shared_seed, processes
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{deployment.diagnostics()}") from None


def _check_outputs(
    run_dir: Path,
    parties: Path,
    checkpoints: list[Path],
    shared_seed: str,
    processes: FlowerProcesses,
) -> None:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 3, metrics
    assert metrics["runtime"] == "deployment" and metrics["n_parties"] == 2, metrics
    assert metrics["fd"] is not None and math.isfinite(metrics["fd"]) and metrics["fd"] > 0
    # Evaluated at the end of epoch 1 (after step 2) and at the end of the run.
    assert [h["step"] for h in metrics["history"]] == [2, 3], metrics["history"]

    synthetic = pd.read_csv(run_dir / "synthetic.csv")
    assert list(synthetic.columns) == ADULT_COLUMNS
    assert len(synthetic) == 300 and metrics["synthetic_rows"] == 300
    _check_own_columns(synthetic, parties)

    # Each party checkpointed into its own directory, resuming at step 2 under this
    # run's configuration; the server's run directory holds only the server's state.
    for i, directory in enumerate(checkpoints):
        files = sorted(p.name for p in directory.glob("*.npz"))
        assert files == ["step-2.npz"], f"party {i} checkpoints: {files}"
        meta = _checkpoint_meta(directory / "step-2.npz")
        assert meta["next_step"] == 2
        assert json.loads(meta["config"])["train"]["batch_size"] == 24422
    server_files = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert server_files == ["server-2.npz"], server_files
    _check_seed_stays_with_parties(run_dir, shared_seed, processes)


def _check_own_columns(synthetic: pd.DataFrame, parties: Path) -> None:
    """Every party decoded its own columns: categories come from that party's own file."""
    for i in range(2):
        real, _ = load_party_file(parties / f"party-{i}.csv")
        for column in real.schema.columns:
            values = synthetic[column.name]
            if column.kind.value == "categorical":
                unknown = set(values.dropna()) - set(real.frame[column.name].dropna())
                assert not unknown, f"party {i}, {column.name}: values not in its data {unknown}"
            else:
                assert np.isfinite(values.to_numpy(dtype=float)).all(), column.name


def _check_seed_stays_with_parties(
    run_dir: Path, shared_seed: str, processes: FlowerProcesses
) -> None:
    """The shared seed exists only at the parties: not in the server's outputs or the
    SuperLink's log."""
    server_side = [
        run_dir / "metrics.json",
        run_dir / "config.json",
        processes.log_dir / "superlink.log",
    ]
    for path in server_side:
        assert shared_seed not in path.read_text(errors="replace"), f"shared seed found in {path}"


def _same_table_as_inprocess(
    deployment: Deployment, overrides: str, tmp_path: Path
) -> tuple[VFLGANResult, pd.DataFrame]:
    """Train in process with the deployment's node configs and check that the deployment
    published the same table, bit for bit; returns the reference and the table."""
    spec = to_run_spec(compose_run_config(overrides), tmp_path / "inprocess")
    grid = InProcessGrid(make_client_app(), deployment.node_configs)
    reference = train_federated(spec, None, None, None, grid=grid)
    buffer = io.StringIO()
    reference.synthetic.to_csv(buffer, index=False)  # as the pipeline writes synthetic.csv
    buffer.seek(0)
    deployed = pd.read_csv(deployment.run_dir / "synthetic.csv")
    pd.testing.assert_frame_equal(deployed, pd.read_csv(buffer))
    return reference, deployed


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["vflgan", "vertigan"])
def test_party_nodes_train_k_steps_per_exchange_as_in_process(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path, algorithm: str
) -> None:
    """Two flwr-vflgan-node processes on an unmodified SuperLink publish exactly the table
    of an in-process run with the same party files and shared seed, at 4 steps per
    exchange, and spend far less than a stock SuperNode's seconds per exchange; VertiGAN
    (summed backbone gradients on the same step protocol) too."""
    dataset = ("dataset=csv", f"dataset.source={adult_small}")
    overrides = f"algorithm={algorithm} {' '.join(dataset)} {NODE_OVERRIDES}"
    started = time.monotonic()
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=dataset,
        run_overrides=overrides,
        checkpoints=None,
        timeout=NODE_RUN_TIMEOUT,
        party_nodes=True,
    )
    wall = time.monotonic() - started
    try:
        metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
        # 36 steps in blocks of 4: setup, 9 forwards, the last apply, publication.
        assert metrics["steps"] == 36 and metrics["exchanges"] == 12, metrics
        assert metrics["algorithm"] == algorithm
        reference, deployed = _same_table_as_inprocess(deployment, overrides, tmp_path)
        assert reference.exchanges == 12
        _check_own_columns(deployed, deployment.parties)
        _check_seed_stays_with_parties(deployment.run_dir, deployment.shared_seed, processes)
        # The training loop's 11 exchanges: a stock SuperNode needs 12-15 s each.
        assert metrics["train_seconds"] < 11 * 3.0, (metrics["train_seconds"], wall)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


@pytest.mark.slow
def test_vdgan_on_party_nodes_publishes_what_the_in_process_run_publishes(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    """VDGAN's own protocol (synthetic columns down, their gradients up, decoding at
    publication) on two flwr-vflgan-node processes and an unmodified SuperLink: the
    table of an in-process run, bit for bit."""
    dataset = ("dataset=csv", f"dataset.source={adult_small}")
    overrides = (
        f"algorithm=vdgan {' '.join(dataset)} runtime=deployment train.epochs=3 "
        "output.evaluate=false output.publish_rows=200"
    )
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=dataset,
        run_overrides=overrides,
        checkpoints=None,
        timeout=NODE_RUN_TIMEOUT,
        party_nodes=True,
    )
    try:
        metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
        # 640 rows: 2 iterations an epoch; setup, 6 iterations, publication.
        assert metrics["algorithm"] == "vdgan" and metrics["steps"] == 6, metrics
        assert metrics["exchanges"] == 8, metrics
        reference, deployed = _same_table_as_inprocess(deployment, overrides, tmp_path)
        assert reference.exchanges == 8
        _check_own_columns(deployed, deployment.parties)
        _check_seed_stays_with_parties(deployment.run_dir, deployment.shared_seed, processes)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


LATENT_OVERRIDES = (
    "algorithm=latent_diffusion runtime=deployment output.evaluate=false "
    "output.publish_rows=200 latent.ae_epochs=2 latent.ae_hidden=[32] latent.ae_min_steps=1 "
    "latent.diffusion_min_steps=1 "
    "latent.diffusion_epochs=2 latent.diffusion_steps=20 latent.denoiser_hidden=[32,32]"
)


@pytest.mark.slow
def test_latent_diffusion_on_stock_supernodes_publishes_the_in_process_table(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    """The one-round family on an unmodified SuperLink and two stock ``flower-supernode``s
    (no party node): setup, the latents up, the sampled latents down, three exchanges
    whatever the epochs, and the table of an in-process run, bit for bit."""
    dataset = ("dataset=csv", f"dataset.source={adult_small}")
    overrides = f"{LATENT_OVERRIDES} {' '.join(dataset)}"
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=dataset,
        run_overrides=overrides,
        checkpoints=None,
        timeout=GAFM_RUN_TIMEOUT,
    )
    try:
        metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
        assert metrics["algorithm"] == "latent_diffusion" and metrics["exchanges"] == 3, metrics
        reference, deployed = _same_table_as_inprocess(deployment, overrides, tmp_path)
        assert reference.exchanges == 3
        _check_own_columns(deployed, deployment.parties)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


@pytest.mark.slow
def test_dplt_on_stock_supernodes_publishes_the_in_process_table(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    """DPLT on an unmodified SuperLink and two stock ``flower-supernode``s: each party
    codes its file's columns from the domain sidecar the export wrote beside it, three
    exchanges, and the table of an in-process run over the same files, bit for bit."""
    dataset = ("dataset=csv", f"dataset.source={adult_small}", "dataset.domain=adult")
    overrides = (
        "algorithm=dplt dp=end_to_end dp.target_epsilon=5 dplt.bins=8 runtime=deployment "
        f"output.evaluate=false output.publish_rows=200 {' '.join(dataset)}"
    )
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=dataset,
        run_overrides=overrides,
        checkpoints=None,
        timeout=GAFM_RUN_TIMEOUT,
    )
    try:
        assert (deployment.parties / "party-0.domain.json").is_file()
        metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
        assert metrics["algorithm"] == "dplt" and metrics["exchanges"] == 3, metrics
        assert metrics["privacy"]["epsilon"] == pytest.approx(5.0)
        reference, deployed = _same_table_as_inprocess(deployment, overrides, tmp_path)
        assert reference.exchanges == 3
        # Each party decoded its own columns, from the categories of its sidecar (the
        # public domain's, which may list some its 640 rows lack).
        for i in range(2):
            sidecar = json.loads((deployment.parties / f"party-{i}.domain.json").read_text())
            for name, entry in sidecar.items():
                if entry["kind"] == "categorical":
                    assert set(deployed[name].dropna()) <= set(entry["categories"]), name
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


# VFLGAN-TS on the sine data with small models: 8 steps in blocks of 4, 40 series
# published, the last generators (no evaluation on the server, which reads no data).
SERIES_DATA = ("algorithm=vflgan_ts", "dataset=sine6")
SERIES_OVERRIDES = (
    "algorithm=vflgan_ts dataset=sine6 runtime=deployment train.max_steps=8 "
    "train.steps_per_exchange=4 output.evaluate=false output.publish_rows=40 "
    "series.model.generator_hidden=16 series.model.attribute_hidden=[8,4] "
    "series.model.extractor_hidden=[4] series.model.shared_hidden=[8,4] model.feature_dim=8"
)


@pytest.mark.slow
def test_series_party_nodes_publish_what_the_simulated_parties_publish(
    tmp_path: Path, processes: FlowerProcesses
) -> None:
    """VFLGAN-TS on real nodes: each flwr-vflgan-node reads the wide series file and
    public bounds export_parties wrote, and the run publishes, bit for bit, the series an
    in-process run publishes from the server's data spec with the same shared seed."""
    from flwr_vflgan.simulations.series_pipeline import run_series

    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=SERIES_DATA,
        run_overrides=SERIES_OVERRIDES,
        checkpoints=None,
        timeout=NODE_RUN_TIMEOUT,
        party_nodes=True,
    )
    try:
        metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
        # setup, 2 blocks of 4 steps, the last block's update, publication
        assert metrics["algorithm"] == "vflgan_ts" and metrics["steps"] == 8, metrics
        assert metrics["exchanges"] == 5, metrics
        assert metrics["runtime"] == "deployment" and metrics["fd"] is None, metrics
        assert "x11@0" in (deployment.parties / "party-0.csv").read_text()[:200]
        assert (deployment.parties / "party-1.domain.json").is_file()
        # The simulated parties: the deployment's nodes without their files.
        nodes = [{k: v for k, v in c.items() if k != "data-path"} for c in deployment.node_configs]
        spec = to_run_spec(
            compose_run_config(SERIES_OVERRIDES.replace("runtime=deployment", "")),
            tmp_path / "inprocess",
        )
        reference = run_series(spec, grid=InProcessGrid(make_client_app(), nodes))
        assert reference["exchanges"] == metrics["exchanges"], (reference, metrics)
        deployed = pd.read_csv(deployment.run_dir / "synthetic.csv")
        pd.testing.assert_frame_equal(deployed, pd.read_csv(spec.run_dir / "synthetic.csv"))
        assert len(deployed) == 40 * 800 and list(deployed.columns[:3]) == ["series", "t", "x11"]
        _check_seed_stays_with_parties(deployment.run_dir, deployment.shared_seed, processes)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


# The fault in training comes while the server pauses just after its first checkpoint
# (pause point server-checkpoint): the server writes it after every party wrote its own,
# so each holder has one to resume from, and no exchange runs before the fault is in. The
# run is then 3 epochs of 12 steps (checkpoints at steps 12, 24 and 36), on the first 640
# Adult rows, whatever the machine's load: waiting for the file instead needed a run long
# enough (30 epochs) to outlast the test thread's reaction.
CHECKPOINT_PAUSE_SECONDS = 10


def _checkpoint_pause(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The marker directory and environment of a pause after the server's first checkpoint."""
    return _pauses(tmp_path, "server-checkpoint", CHECKPOINT_PAUSE_SECONDS)


def _wait_for_server_checkpoint(markers: Path, timeout: float = 180.0) -> None:
    """Until the ServerApp pauses just after writing its first checkpoint (every party
    has written its own by then); it sends nothing while the pause lasts."""
    _paused(markers / "server-checkpoint", timeout=timeout)


REJOIN_EPOCHS = 3
# The SuperLink reports a silent node unavailable after two missed heartbeats; a node
# restarted later than that finds the run waiting for it at setup. That test keeps
# Flower's 30 s interval: the ServerApp must send its setup while the SuperLink still
# lists the killed node, and a ServerApp starting on a loaded machine (two test workers)
# took longer than the short window's 20 s.
SETUP_HEARTBEAT_WINDOW = 2 * 30.0
SETUP_RESTART_DELAY = SETUP_HEARTBEAT_WINDOW + 15.0
# The SuperLink reports a dead node unavailable once it misses its heartbeats (patience
# 2), then the run resumes: allow for that on top of the run.
REJOIN_RUN_TIMEOUT = 420.0


# VT-GAN's rejoin run: the 640 rows at batch 64 with 5 critic steps per generator step
# (12-step epochs, checkpointed after each epoch's last generator step), small models.
VTGAN_REJOIN = (
    "algorithm=vtgan train.batch_size=64 train.n_critic=5 vtgan.latent_dim=16 "
    "vtgan.generator_width=32 vtgan.discriminator_width=32"
)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["", VTGAN_REJOIN], ids=["party-node", "vtgan-party-node"])
def test_a_party_node_killed_mid_run_rejoins_and_the_table_is_unchanged(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path, algorithm: str
) -> None:
    """Party 1's process (a ``flwr-vflgan-node``) is killed (SIGKILL) while the server
    pauses after its first checkpoint, and started again with the same command; the run waits for it
    (runtime.rejoin_grace), every holder resumes from the last checkpoint, and the table
    is the in-process run's, bit for bit. VFLGAN, and VT-GAN's client."""
    markers, pause_env = _checkpoint_pause(tmp_path)
    killed: list[bool] = []

    def kill_and_restart(overrides: str, commands: list[list[str]], env: dict[str, str]) -> None:
        _wait_for_server_checkpoint(markers)
        _kill(processes, "party-node-1")
        killed.append(True)
        processes.start("party-node-1-restarted", commands[1], env, cwd=tmp_path)

    deployment = _resumed_deployment(
        tmp_path, processes, adult_small, kill_and_restart, algorithm=algorithm, extra_env=pause_env
    )
    run_log = deployment.diagnostics()
    assert killed, "the party node was not killed"
    assert "waiting up to 180 s for it to rejoin" in run_log, run_log


# Three losses of a stock SuperNode in one run of 3 epochs, each costing the SuperLink's
# heartbeat window before the run sees it: allow for them on top of the run.
STOCK_FAULTS_TIMEOUT = 900.0


@pytest.mark.slow
def test_a_stock_supernode_killed_at_setup_in_training_and_at_publication_rejoins_each_time(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    """The fault matrix's stock-SuperNode row, in one run: a ``flower-supernode`` is
    killed (SIGKILL) while its ClientApp handles the setup message, then party 1's while
    the server pauses after its first checkpoint, then the one whose ClientApp handles the
    publication message; each is started again with the exporter's printed command (a fresh
    ClientAppIo port). The run waits for each (runtime.rejoin_grace): from the start after
    the first, from the last checkpoint after the others, and the table is the in-process
    run's, bit for bit. The orphaned ClientApp of a killed SuperNode wakes from its
    pause, finds no SuperNode and exits."""
    points = "party-setup,server-checkpoint,party-publication"
    markers, pause_env = _pauses(tmp_path, points, 5)
    killed: list[str] = []
    current = {0: "supernode-0", 1: "supernode-1"}

    def restart(index: int, commands: list[list[str]], env: dict[str, str]) -> None:
        _kill(processes, current[index])
        killed.append(current[index])
        current[index] = f"supernode-{index}-{len(killed)}"
        args = _supernode_args(
            commands[index], free_ports(1)[0], tmp_path / f"party-{index}-checkpoints"
        )
        processes.start(current[index], args, env, cwd=tmp_path)

    def paused_supernode(point: str) -> int:
        """The party whose SuperNode started the ClientApp paused at ``point``."""
        app = _paused(markers / point, timeout=STOCK_FAULTS_TIMEOUT)
        table, ancestors, pid = process_table(), set(), app
        while pid in table and pid not in ancestors:
            ancestors.add(pid)
            pid = table[pid].ppid
        found = [i for i, name in current.items() if _pid_of(processes, name) in ancestors]
        assert len(found) == 1, (app, [(p, table[p].args) for p in ancestors if p in table])
        return found[0]

    def three_faults(overrides: str, commands: list[list[str]], env: dict[str, str]) -> None:
        restart(paused_supernode("party-setup"), commands, env)
        _wait_for_server_checkpoint(markers, timeout=STOCK_FAULTS_TIMEOUT)
        restart(1, commands, env)
        restart(paused_supernode("party-publication"), commands, env)

    deployment = _resumed_deployment(
        tmp_path,
        processes,
        adult_small,
        three_faults,
        party_nodes=False,
        steps_per_exchange=12,  # one exchange an epoch: a stock SuperNode's costs ~12 s
        extra_env=pause_env,
        timeout=STOCK_FAULTS_TIMEOUT,
    )
    assert len(killed) == 3, killed
    assert deployment.diagnostics().count("waiting up to 180 s for it to rejoin") >= 3


def _pid_of(processes: FlowerProcesses, name: str) -> int | None:
    found = next((p for p in processes.processes if p.name == name), None)
    return found.popen.pid if found is not None and found.popen is not None else None


@pytest.mark.slow
def test_a_party_node_lost_at_setup_rejoins_and_the_table_is_unchanged(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    """Party 1's node is killed (SIGKILL) as the run is launched, while the SuperLink still
    lists it: the setup sent to it is never answered, the ServerApp finds it unavailable
    at setup and waits; the node started again with the same command is set up from the
    start, and the table is the in-process run's, bit for bit. The restart comes after the
    SuperLink's heartbeat window: a node back sooner would be waited for at the run's
    start (wait_for_nodes), and nothing would be lost at setup."""
    restarted: list[bool] = []

    def kill_then_restart(overrides: str, commands: list[list[str]], env: dict[str, str]) -> None:
        # Registered (so the SuperLink lists it), and killed before the ServerApp, which
        # takes seconds to start, sends its setup.
        node_log, deadline = processes.log_dir / "party-node-1.log", time.monotonic() + 60
        while time.monotonic() < deadline and "registered with the SuperLink" not in (
            node_log.read_text(errors="replace") if node_log.exists() else ""
        ):
            time.sleep(0.05)
        _kill(processes, "party-node-1")
        time.sleep(SETUP_RESTART_DELAY)
        processes.start("party-node-1-restarted", commands[1], env, cwd=tmp_path)
        restarted.append(True)

    deployment = _resumed_deployment(
        tmp_path,
        processes,
        adult_small,
        kill_then_restart,
        epochs=3,
        resumed=False,
        extra_env={"FLWR_VFLGAN_TEST_HEARTBEAT": ""},  # Flower's own interval
    )
    run_log = deployment.diagnostics()
    assert restarted, "the party node was not restarted"
    # Named by its node id: a party's index is known once its setup reply arrives.
    assert re.search(r"setup: node \d+ is unavailable", run_log), run_log
    assert "waiting up to 180 s for it to rejoin" in run_log, run_log


def _resumed_deployment(
    tmp_path: Path,
    processes: FlowerProcesses,
    adult_small: Path,
    fault: Callable[[str, list[list[str]], dict[str, str]], None],
    party_nodes: bool = True,
    epochs: int | None = None,
    steps_per_exchange: int = 4,
    resumed: bool = True,
    algorithm: str = "",
    extra_env: dict[str, str] | None = None,
    relaunches: bool = False,
    timeout: float = REJOIN_RUN_TIMEOUT,
) -> Deployment:
    """Party nodes (or, without ``party_nodes``, stock SuperNodes) train ``epochs`` (by
    default the REJOIN_EPOCHS run, ``steps_per_exchange`` steps an exchange) while ``fault(overrides, commands, env)`` runs in a
    thread; the run must have resumed from a checkpoint (or, without ``resumed``, started
    from scratch) and published the in-process run's table, bit for bit. ``algorithm``:
    overrides that choose another family than VFLGAN (12-step epochs too)."""
    dataset = ("dataset=csv", f"dataset.source={adult_small}")
    epochs = REJOIN_EPOCHS if epochs is None else epochs
    rejoin = NODE_OVERRIDES.replace("train.epochs=3", f"train.epochs={epochs}").replace(
        "train.steps_per_exchange=4", f"train.steps_per_exchange={steps_per_exchange}"
    )
    overrides = f"{' '.join(dataset)} {rejoin} {algorithm}".strip()
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=dataset,
        run_overrides=overrides,
        checkpoints=[tmp_path / f"party-{i}-checkpoints" for i in range(2)],
        timeout=timeout,
        party_nodes=party_nodes,
        while_running=lambda commands, env: fault(overrides, commands, env),
        extra_env=extra_env,
        relaunches=relaunches,
    )
    try:
        metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
        assert metrics["steps"] == 12 * epochs, metrics
        assert bool(metrics["resumed_from_step"]) is resumed, metrics
        _same_table_as_inprocess(deployment, overrides, tmp_path)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None
    return deployment


def _kill_serverapp(
    tmp_path: Path, processes: FlowerProcesses, env: dict[str, str], commands: list[list[str]]
) -> None:
    """SIGKILL the run's ServerApp process (``flwr-serverapp``, started by the SuperLink)."""
    table = process_table()
    apps = [
        pid
        for pid in processes_with_env("FLWR_HOME", str(tmp_path / "flwr-home"))
        if pid in table
        and any(Path(word).name == "flwr-serverapp" for word in table[pid].args.split()[:2])
    ]
    assert len(apps) == 1, [table[p].args for p in apps if p in table]
    os.kill(apps[0], signal.SIGKILL)


def _kill(processes: FlowerProcesses, name: str) -> None:
    victim = next(p for p in processes.processes if p.name == name)
    processes.processes.remove(victim)  # its exit is this test's doing
    assert victim.popen is not None
    victim.popen.kill()
    victim.popen.wait(30)


def _restart_superlink(
    tmp_path: Path, processes: FlowerProcesses, env: dict[str, str], commands: list[list[str]]
) -> None:
    """SIGKILL the SuperLink and start a new one on the same port. Its runs and node
    registrations lived in its memory: the party nodes, answered 401, register again."""
    _kill(processes, "superlink")
    config = (tmp_path / "flwr-home" / "config.toml").read_text()
    port = int(config.split('address = "', 1)[1].split('"', 1)[0].rpartition(":")[2])
    start_superlink(processes, port, env, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault", [_kill_serverapp, _restart_superlink], ids=["serverapp", "superlink"]
)
def test_a_run_whose_serverapp_or_superlink_dies_is_resumed_by_the_next_flwr_run(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path, fault: Callable
) -> None:
    """The run's ServerApp process is killed (SIGKILL), or the SuperLink is killed and
    started again (the party nodes register again), once every holder has written a
    checkpoint.
    Flower cannot continue that run, but ``flwr run`` again with the same ``run-dir``
    resumes it from the checkpoints, and the table is the in-process run's, bit for bit."""
    markers, pause_env = _checkpoint_pause(tmp_path)
    relaunched: list[int] = []

    def fault_then_run_again(
        overrides: str, commands: list[list[str]], env: dict[str, str]
    ) -> None:
        _wait_for_server_checkpoint(markers)
        fault(tmp_path, processes, env, commands)
        # The stopped run never writes metrics.json; the run launched now does, resuming.
        run_overrides = shlex.join(["runtime=deployment", *shlex.split(overrides)])
        relaunched.append(
            launch_run(
                processes, FEDERATION, run_overrides, tmp_path / "run", env=env, cwd=tmp_path
            )
        )

    _resumed_deployment(
        tmp_path,
        processes,
        adult_small,
        fault_then_run_again,
        extra_env=pause_env,
        relaunches=True,
    )
    assert relaunched, "the fault was not injected"
    if fault is _restart_superlink:  # the same node processes served both runs
        for i in range(2):
            node_log = (processes.log_dir / f"party-node-{i}.log").read_text()
            assert "registering again" in node_log, node_log[-2000:]


def _pauses(tmp_path: Path, points: str, seconds: float) -> tuple[Path, dict[str, str]]:
    """The marker directory and environment of the pause points ``points``
    (:mod:`flwr_vflgan.runtime.faults`)."""
    markers = tmp_path / "pauses"
    markers.mkdir()
    env = {PAUSE_AT: points, PAUSE_DIR: str(markers), PAUSE_SECONDS: str(seconds)}
    return markers, env


def _paused(marker: Path, timeout: float = 180.0) -> int:
    """The pid of the process paused at ``marker``'s point, once one is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = marker.read_text() if marker.is_file() else ""
        if text.endswith("\n"):
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"no process paused at {marker.name} within {timeout:.0f} s")


def _exits_within(pid: int, seconds: float) -> float:
    """Seconds until process ``pid`` has exited (fails past ``seconds``)."""
    started = time.monotonic()
    # A killed child its parent has not reaped yet stays in the table as a zombie.
    while (info := process_table().get(pid)) is not None and not info.state.startswith("Z"):
        if time.monotonic() - started > seconds:
            raise AssertionError(f"process {pid} still runs {seconds:.0f} s after the fault")
        time.sleep(0.2)
    return time.monotonic() - started


def _relaunch(processes: FlowerProcesses, overrides: str, env: dict[str, str], tmp_path: Path):
    run_overrides = shlex.join(["runtime=deployment", *shlex.split(overrides)])
    launch_run(processes, FEDERATION, run_overrides, tmp_path / "run", env=env, cwd=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["serverapp", "superlink"])
def test_a_run_stopped_at_setup_and_again_at_publication_is_resumed_by_flwr_run(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path, fault: str
) -> None:
    """The fault matrix's setup and publication cells for the ServerApp and the
    SuperLink, in one deployment. The ServerApp pauses at setup (its nodes connected, no
    message sent) and is killed (SIGKILL), or the SuperLink is killed and started again,
    after which the paused ServerApp fails on its own and exits within 60 s. ``flwr
    run`` again starts afresh (no checkpoint yet), trains, and is stopped the same way
    at publication; ``flwr run`` a third time resumes from the last checkpoint and
    publishes the in-process run's table, bit for bit. Nothing is published before."""
    markers, pause_env = _pauses(
        tmp_path, "server-setup,server-publication", 300 if fault == "serverapp" else 3
    )
    stopped: list[tuple[str, float]] = []

    def stop_twice(overrides: str, commands: list[list[str]], env: dict[str, str]) -> None:
        for point in ("server-setup", "server-publication"):
            app = _paused(markers / point)
            assert not (tmp_path / "run" / "synthetic.csv").exists()
            if fault == "serverapp":
                _kill_serverapp(tmp_path, processes, env, commands)
            else:
                _restart_superlink(tmp_path, processes, env, commands)
            stopped.append((point, _exits_within(app, 60.0)))
            _relaunch(processes, overrides, env, tmp_path)

    _resumed_deployment(
        tmp_path, processes, adult_small, stop_twice, epochs=3, extra_env=pause_env, relaunches=True
    )
    assert [p for p, _ in stopped] == ["server-setup", "server-publication"], stopped


@pytest.mark.slow
def test_a_party_node_killed_at_publication_rejoins_and_the_table_is_unchanged(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    """The fault matrix's publication cell for a party's process: the first party node
    to receive the publication message pauses there and is killed (SIGKILL), then started
    again with the same command; the run waits for it, resumes every holder from the
    last checkpoint, trains the last epoch again and publishes the in-process run's
    table, bit for bit."""
    markers, pause_env = _pauses(tmp_path, "party-publication", 300)
    killed: list[str] = []

    def kill_and_restart(overrides: str, commands: list[list[str]], env: dict[str, str]) -> None:
        pid = _paused(markers / "party-publication", timeout=REJOIN_RUN_TIMEOUT)
        victim = next(p for p in processes.processes if p.popen and p.popen.pid == pid)
        _kill(processes, victim.name)
        killed.append(victim.name)
        index = int(victim.name.rsplit("-", 1)[1])
        processes.start(f"{victim.name}-restarted", commands[index], env, cwd=tmp_path)

    deployment = _resumed_deployment(
        tmp_path, processes, adult_small, kill_and_restart, epochs=3, extra_env=pause_env
    )
    assert killed, "no party node paused at publication"
    assert "waiting up to 180 s for it to rejoin" in deployment.diagnostics()


@pytest.mark.slow
def test_party_nodes_with_different_rows_align_them_by_id(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    """Party 0 holds rows 0-499, party 1 rows 100-639 shuffled: with runtime.align_ids the
    run trains on the 400 people both hold (the setup digest confirms one order) and
    publishes the in-process run's table over the same files, bit for bit."""
    dataset = ("dataset=csv", f"dataset.source={adult_small}")
    overrides = f"{' '.join(dataset)} {NODE_OVERRIDES} runtime.align_ids=true"
    keep = [np.arange(0, 500), np.random.default_rng(5).permutation(np.arange(100, 640))]

    def drop_rows(parties: Path) -> None:
        for i, rows in enumerate(keep):
            path = parties / f"party-{i}.csv"
            pd.read_csv(path).iloc[rows].to_csv(path, index=False)

    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=dataset,
        run_overrides=overrides,
        checkpoints=None,
        timeout=NODE_RUN_TIMEOUT,
        party_nodes=True,
        edit_parties=drop_rows,
    )
    try:
        metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
        assert metrics["train_rows"] == 400, metrics
        _same_table_as_inprocess(deployment, overrides, tmp_path)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


# -- VT-GAN ------------------------------------------------------------------------------
def _inprocess_vtgan(overrides: str, node_configs: list[dict], run_dir: Path) -> VFLGANResult:
    """The same run as the ServerApp's (config composed the same way, same server seed)
    over an in-process grid whose nodes get the SuperNodes' node configs: same party
    files, same shared seed. Its clients stay in memory between messages."""
    spec = to_run_spec(compose_run_config(overrides), run_dir)
    strategy = VTGANStrategy(
        spec.algorithm,
        n_parties=spec.data.n_parties,
        seed=spec.seed,
        data_spec=None,
        publish_rows=spec.output.publish_rows,
    )
    return strategy.start(InProcessGrid(make_client_app(), node_configs))


@pytest.mark.slow
def test_vtgan_deployment_publishes_what_the_in_process_run_publishes(
    tmp_path: Path, processes: FlowerProcesses, adult_small: Path
) -> None:
    dataset = ("dataset=csv", f"dataset.source={adult_small}")
    overrides = f"{' '.join(dataset)} {VTGAN_OVERRIDES}"
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=dataset,
        run_overrides=overrides,
        checkpoints=None,
        timeout=VTGAN_RUN_TIMEOUT,
    )
    try:
        _check_vtgan_outputs(deployment, adult_small, processes)
        reference = _inprocess_vtgan(overrides, deployment.node_configs, tmp_path / "inprocess")
        _check_same_as_inprocess(deployment.run_dir, reference)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


def _check_vtgan_outputs(deployment: Deployment, source: Path, processes: FlowerProcesses) -> None:
    metrics = json.loads((deployment.run_dir / "metrics.json").read_text())
    assert metrics["algorithm"] == "vtgan", metrics
    assert metrics["runtime"] == "deployment" and metrics["n_parties"] == 2, metrics
    assert metrics["steps"] == 4 and metrics["exchanges"] == VTGAN_EXCHANGES, metrics
    assert metrics["steps_per_exchange"] == 4, metrics
    assert metrics["train_rows"] == 640 and metrics["fd"] is None, metrics
    assert metrics["published_generator"] == "last", metrics
    # One epoch holds 10 D and 5 G steps: the run ends inside epoch 1.
    assert [(h["epoch"], h["step"]) for h in metrics["history"]] == [(1, 4)], metrics
    assert all(math.isfinite(metrics["history"][0][k]) for k in ("d_loss", "g_loss", "cond_loss"))

    synthetic = pd.read_csv(deployment.run_dir / "synthetic.csv")
    assert list(synthetic.columns) == list(pd.read_csv(source, nrows=0).columns) == ADULT_COLUMNS
    assert len(synthetic) == VTGAN_ROWS and metrics["synthetic_rows"] == VTGAN_ROWS
    _check_own_columns(synthetic, deployment.parties)
    _check_seed_stays_with_parties(deployment.run_dir, deployment.shared_seed, processes)


def _check_same_as_inprocess(run_dir: Path, reference: VFLGANResult) -> None:
    """Clients restored from ``context.state`` in a new process for every message train
    and publish exactly what clients kept in memory do."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert reference.steps == 4 and reference.exchanges == VTGAN_EXCHANGES
    losses = ("d_loss", "g_loss", "cond_loss")
    deployed = [h[k] for h in metrics["history"] for k in losses]
    expected = [h[k] for h in reference.history for k in losses]
    assert deployed == pytest.approx(expected, rel=1e-6), (
        f"training losses {losses} differ: deployment {deployed}, in-process {expected}"
    )
    buffer = io.StringIO()
    reference.synthetic.to_csv(buffer, index=False)  # as the pipeline writes synthetic.csv
    buffer.seek(0)
    pd.testing.assert_frame_equal(pd.read_csv(run_dir / "synthetic.csv"), pd.read_csv(buffer))


# -- GAFM (split classification) ---------------------------------------------------------
@pytest.mark.slow
def test_gafm_deployment_matches_the_in_process_run(
    tmp_path: Path, processes: FlowerProcesses
) -> None:
    """The label party (ServerApp) reads the exported labels.csv, each SuperNode its own
    feature file; the AUCs and leak AUCs are those of an in-process run whose parties and
    label party take the same data from the dataset spec."""
    labels_path = tmp_path / "parties" / "labels.csv"
    overrides = f"runtime=deployment {GAFM_OVERRIDES} gafm.labels_path={labels_path}"
    deployment = _deploy(
        tmp_path,
        processes,
        export_overrides=GAFM_DATA,
        run_overrides=overrides,
        checkpoints=None,
        timeout=GAFM_RUN_TIMEOUT,
    )
    try:
        _check_gafm_exports(deployment, labels_path)
        reference = run_gafm(
            to_run_spec(
                compose_run_config(f"runtime=inprocess {GAFM_OVERRIDES}"), tmp_path / "inprocess"
            )
        )
        _check_gafm_same_as_inprocess(deployment.run_dir, reference)
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n{deployment.diagnostics()}") from None


def _check_gafm_exports(deployment: Deployment, labels_path: Path) -> None:
    """The non-label parties' files hold no label; the label party's file holds it, and
    the printed ``flwr run`` command names it."""
    output = deployment.export_output
    assert f"gafm.labels_path={labels_path}" in output, output
    spambase = load_dataset("spambase", data_dir=str(SHARED_DATASETS)).frame
    assert "spam" in spambase.columns
    features = []
    for i in range(2):
        header = list(pd.read_csv(deployment.parties / f"party-{i}.csv", nrows=0).columns)
        assert header[0] == "row_id" and "spam" not in header, header
        features += header[1:]
    assert sorted(features) == sorted(c for c in spambase.columns if c != "spam")
    labels = pd.read_csv(labels_path)
    assert list(labels.columns) == ["row_id", "spam"]
    assert list(labels["row_id"]) == list(range(len(spambase)))
    assert (labels["spam"].to_numpy() == spambase["spam"].astype(int).to_numpy()).all()


def _check_gafm_same_as_inprocess(run_dir: Path, reference: dict) -> None:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["algorithm"] == reference["algorithm"] == "gafm", metrics
    assert metrics["runtime"] == "deployment" and reference["runtime"] == "inprocess"
    assert metrics["n_parties"] == 2 and metrics["rows"] == reference["rows"] == 4601
    assert metrics["label"] == "spam" and metrics["positive_rate"] == reference["positive_rate"]
    assert metrics["exchanges"] == reference["exchanges"] == GAFM_EXCHANGES, metrics
    [deployed], [expected] = metrics["repetitions"], reference["repetitions"]
    assert deployed["steps"] == expected["steps"] == 3 and deployed["epochs"] == 1
    assert deployed["flipped"] == expected["flipped"]
    # The parties encode features read back from CSV instead of the dataset's table, in
    # new processes that restore their models from context.state for every message.
    # Measured: every AUC and leak AUC is bit-for-bit the in-process one (the CSV round
    # trip is exact and the parties compute in the same order), so no tolerance.
    for key in ("train_auc", "test_auc", "leak_auc", "leak_auc_per_party", "last_stats"):
        assert deployed[key] == expected[key], (
            f"{key}: deployment {deployed[key]}, in-process {expected[key]}"
        )
    # With F = average every party receives the same gradient, g_cut / 2.
    assert len(deployed["leak_auc_per_party"]) == 2
    assert metrics["summary"] == reference["summary"]


# -- the exporter ------------------------------------------------------------------------
def test_the_deployment_tests_flower_processes_use_the_short_heartbeat(tmp_path: Path) -> None:
    """Every module that copies Flower's heartbeat interval sees the test's 10 s in a
    process started with this file's environment, and Flower's 30 s without it."""
    probe = (
        "from flwr.common import constant as c; "
        "from flwr.supernode import fleet_http_connection as f; "
        "from flwr.supercore import heartbeat as h; "
        "print(c.HEARTBEAT_DEFAULT_INTERVAL, f.HEARTBEAT_DEFAULT_INTERVAL, "
        "h.HEARTBEAT_DEFAULT_INTERVAL)"
    )
    env = _flower_env(tmp_path / "flwr-home", {})
    seen = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert seen.stdout.split() == [str(TEST_HEARTBEAT)] * 3, seen.stderr
    del env["FLWR_VFLGAN_TEST_HEARTBEAT"]
    stock = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert stock.stdout.split() == ["30"] * 3, stock.stderr


def test_export_writes_the_even_split_with_aligned_row_ids(tmp_path: Path) -> None:
    result = export_parties(DataSpec(), ExportConfig(out_dir=str(tmp_path / "parties")))
    # Even split of Adult's 15 columns between 2 parties: contiguous blocks of 8 and 7.
    assert result.columns == [ADULT_COLUMNS[:8], ADULT_COLUMNS[8:]]
    manifest = json.loads(result.manifest.read_text())
    assert [p["columns"] for p in manifest["parties"]] == result.columns
    table = load_dataset("adult").frame
    for i, path in enumerate(result.data_files):
        party, ids = load_party_file(path)
        assert list(ids) == list(range(len(table)))
        pd.testing.assert_frame_equal(party.frame, table[result.columns[i]], check_dtype=False)


def test_export_hands_each_party_its_public_domain_for_end_to_end_dp(tmp_path: Path) -> None:
    """dataset.domain travels to a deployed party as party-<i>.domain.json, its encoder is
    built from it, and such a party trains under dp=end_to_end (one without it refuses)."""
    from flwr_vflgan.config import VFLGANConfig
    from flwr_vflgan.data.domain import bundled_domain
    from flwr_vflgan.data.files import domain_sidecar
    from flwr_vflgan.runtime.party_data import party_file
    from flwr_vflgan.strategies import RunStopped, VFLGANStrategy

    domain = bundled_domain("adult")
    assert domain is not None
    public = export_parties(
        DataSpec(domain=domain.to_mapping()), ExportConfig(out_dir=str(tmp_path / "public"))
    )
    private = export_parties(DataSpec(), ExportConfig(out_dir=str(tmp_path / "private")))
    for i, path in enumerate(public.data_files):
        entries = json.loads(domain_sidecar(path).read_text())
        assert list(entries) == public.columns[i]
        assert party_file(path).encoder.public
        assert not domain_sidecar(private.data_files[i]).exists()
        assert not party_file(private.data_files[i]).encoder.public
    config = VFLGANConfig.from_dict(
        {
            "train": {"max_steps": 12, "eval_every": 0},
            "dp": {"mechanism": "end_to_end", "target_epsilon": 10.0},
        }
    )

    def run(files: list[Path]) -> VFLGANResult:
        nodes = [
            {"partition-id": i, "shared-seed": 77, "data-path": str(path)}
            for i, path in enumerate(files)
        ]
        strategy = VFLGANStrategy(config, n_parties=2, seed=0, publish_rows=20)
        return strategy.start(InProcessGrid(make_client_app(), nodes))

    result = run(public.data_files)
    assert [p["party"] for p in result.privacy] == ["party 0", "party 1", "server"]
    assert all(p["parts"] == 3 for p in result.privacy)
    with pytest.raises(RunStopped, match=r"put party-\d\.domain\.json beside the party's file"):
        run(private.data_files)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"format": "xls"}, r"unknown export.format 'xls'; valid: \['csv', 'parquet'\]"),
        ({"superlink": "8000"}, r"export.superlink must be host:port, got '8000'"),
        ({"out_dir": ""}, r"export.out_dir must be a non-empty path, got ''"),
        ({"overwrite": "yes"}, r"export.overwrite must be true or false, got 'yes'"),
    ],
)
def test_export_config_rejects_bad_settings(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ExportConfig(**settings)


def test_export_needs_an_out_dir_and_keeps_a_non_empty_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"export.out_dir is required"):
        export_parties(DataSpec(), ExportConfig())
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"is not empty; .* export.overwrite=true"):
        export_parties(DataSpec(), ExportConfig(out_dir=str(tmp_path)))
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dataset.source=nosuch"], "is neither a registered dataset"),
        ([], "export.out_dir is required"),
    ],
)
def test_export_command_reports_bad_input_in_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = [f"export.out_dir={tmp_path / 'out'}"] if args else []
    result = subprocess.run(
        [sys.executable, "-m", "simulations.export_parties", *args, *out],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("export_parties: error: ") and message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (tmp_path / "out").exists()


def test_printed_node_config_survives_the_shell_and_flowers_parser(tmp_path: Path) -> None:
    path = tmp_path / "party files" / "it's party-0.csv"
    line = supernode_command(0, 2, path, 2**62 - 1, "10.0.0.5:8000")
    argv = shlex.split(line)
    assert argv[:6] == [
        "flower-supernode",
        "--insecure",
        "--superlink",
        "10.0.0.5:8000",
        "--port",
        "9094",
    ]
    config = parse_config_args([argv[argv.index("--node-config") + 1]])
    assert config == {
        "partition-id": 0,
        "num-partitions": 2,
        "data-path": str(path),
        "shared-seed": 2**62 - 1,
    }


def test_local_deployment_refuses_a_used_work_dir_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flwr_vflgan.simulations.local_deployment import main

    (tmp_path / "left-over.txt").write_text("x")
    assert main(["--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"local_deployment: error: --work-dir {tmp_path} is not empty; give a new folder"
    ]


@pytest.mark.slow
def test_a_deployment_over_tls_with_node_authentication_and_agreed_seeds(
    tmp_path: Path, adult_small: Path
) -> None:
    """SuperLink over TLS (a CA made for the test), SuperNode authentication with each
    party's key registered through `flwr supernode register`, and no shared seed in any
    node's settings: the parties agree on one (runtime.key_agreement)."""
    from flwr_vflgan.simulations.local_deployment import deploy

    overrides = ["runtime.key_agreement=true", "train.epochs=1", "train.max_steps=8"]
    overrides += ["output.evaluate=false", "output.publish_rows=100"]
    data = DataSpec(source=str(adult_small), n_parties=2)
    result = deploy(overrides, tmp_path / "work", timeout=RUN_TIMEOUT, data=data, secure=True)
    assert result.metrics["steps"] == 8 and result.metrics["runtime"] == "deployment"
    synthetic = pd.read_csv(result.run_dir / "synthetic.csv")
    assert len(synthetic) == 100 and list(synthetic.columns) == ADULT_COLUMNS
    superlink = (result.log_dir / "superlink.log").read_text(errors="replace")
    assert "running on https://" in superlink  # TLS, not plain HTTP
    cli = (result.log_dir / "flwr-cli.log").read_text(errors="replace")
    assert cli.count("registered successfully") == 2
    for i in range(2):
        node = (result.log_dir / f"party-node-{i}.log").read_text(errors="replace")
        assert "shared-seed" not in node and "Traceback" not in node


@pytest.mark.slow
def test_an_unregistered_node_is_refused(tmp_path: Path, processes: FlowerProcesses) -> None:
    from flwr_vflgan.simulations.local_deployment import node_args
    from flwr_vflgan.simulations.tls import make_local_pki

    pki = make_local_pki(tmp_path / "tls", 1)
    link_port, node_port = free_ports(2)
    env = _flower_env(tmp_path / "flwr-home", {})
    start_superlink(processes, link_port, env, tmp_path, pki.superlink_args())
    args = node_args("party", f"{HOST}:{link_port}", "partition-id=0", node_port, pki.node_args(0))
    node = processes.start("party-node-unregistered", args, env, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while node.running() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert node.popen is not None and node.popen.poll() not in (None, 0), processes.logs()
    log = (processes.log_dir / "party-node-unregistered.log").read_text(errors="replace")
    assert "Failed to activate SuperNode" in log, processes.logs()
