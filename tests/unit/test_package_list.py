"""The wheel ships every package of the checkout.

``pip install -e .`` maps the folders by setuptools' ``package-dir`` and imports
whatever is on disk, so a package missing from ``[tool.setuptools] packages`` passes
every test of an editable checkout and fails only where the wheel is installed (a real
node, CI of a downstream project). These tests read pyproject.toml against the tree.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setuptools() -> dict:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["tool"]["setuptools"]


def _package_folders(package_dir: dict[str, str]) -> dict[str, Path]:
    """Every package of the checkout (a folder with ``__init__.py``) by its import name."""
    found: dict[str, Path] = {}
    for name, folder in package_dir.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            if "__pycache__" in parts or any(p.startswith(".") for p in parts):
                continue
            found[".".join((name, *parts))] = init.parent
    return found


def test_every_package_of_the_checkout_is_in_the_wheel() -> None:
    settings = _setuptools()
    on_disk = _package_folders(settings["package-dir"])
    listed = set(settings["packages"])
    missing = sorted(set(on_disk) - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    stale = sorted(listed - set(on_disk))
    assert not stale, f"{stale} are listed in pyproject.toml but have no __init__.py"


def test_every_package_data_pattern_ships_a_file() -> None:
    settings = _setuptools()
    folders = _package_folders(settings["package-dir"])
    for package, patterns in settings["package-data"].items():
        for pattern in patterns:
            assert list(folders[package].glob(pattern)), f"{package}: {pattern} matches nothing"


def test_bundled_data_files_are_all_shipped() -> None:
    settings = _setuptools()
    bundled = ROOT / "flwr_vflgan" / "data" / "bundled"
    patterns = settings["package-data"]["flwr_vflgan.data"]
    shipped = {p for pattern in patterns for p in (ROOT / "flwr_vflgan" / "data").glob(pattern)}
    unshipped = sorted(p.name for p in bundled.iterdir() if p.is_file() and p not in shipped)
    assert not unshipped, f"bundled files the wheel leaves out: {unshipped}"
