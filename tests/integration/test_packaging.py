"""The wheel ships everything inside the flwr_vflgan namespace and works outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
from flwr_vflgan.strategies import VFLGANStrategy, InProcessGrid
from flwr_vflgan.clients import make_client_app
from flwr_vflgan.simulations.config import compose_run_config
from flwr_vflgan.data import load_dataset
from flwr_vflgan.clients.node import parse_args
import flwr_vflgan
assert parse_args(["--insecure"]).insecure
cfg = compose_run_config("algorithm=vflgan_base partition.n_parties=3")
assert cfg.algorithm.variant == "vflgan_base" and cfg.partition.n_parties == 3, cfg
assert len(load_dataset("adult").frame) == 48842
# Every package of the namespace imports from the wheel: the checkout's editable finder
# (on sys.meta_path of this interpreter) would otherwise stand in for a package the
# wheel left out, as it did for flwr_vflgan.latent and flwr_vflgan.series.
import importlib, pkgutil, sys
for info in pkgutil.walk_packages(flwr_vflgan.__path__, "flwr_vflgan."):
    if info.ispkg:
        importlib.import_module(info.name)
home = flwr_vflgan.__file__.rsplit("/", 1)[0]
outside = sorted(
    name for name, module in sys.modules.items()
    if name.startswith("flwr_vflgan.") and not (getattr(module, "__file__", None) or home).startswith(home)
)
assert not outside, f"imported from outside the wheel: {outside}"
import flwr_vflgan.latent, flwr_vflgan.series
print(flwr_vflgan.__file__)
"""


@pytest.mark.slow
def test_wheel_installs_no_generic_top_level_names_and_runs_outside_the_checkout(
    tmp_path: Path,
) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(REPO),
            "-w",
            str(tmp_path / "dist"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("flwr_vflgan-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"flwr_vflgan"}
    for package in ("strategies", "clients", "simulations", "conf"):
        assert f"flwr_vflgan/{package}/__init__.py" in names, package
    assert "flwr_vflgan/conf/algorithm/vflgan.yaml" in names
    assert "flwr_vflgan/data/bundled/adult.csv.gz" in names
    assert "flwr_vflgan/clients/node.py" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "flwr-vflgan-node = flwr_vflgan.clients.node:main" in scripts, scripts

    target = tmp_path / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert not any(
        (target / name).exists() for name in ("strategies", "clients", "simulations", "conf")
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.strip() == str(target / "flwr_vflgan" / "__init__.py")
