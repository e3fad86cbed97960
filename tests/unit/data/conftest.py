"""Shared fixtures: the offline copies of the public datasets beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# $FLWR_VFLGAN_DATA_DIR if set; else ../shared/datasets beside the repository root
# (tests/unit/data/conftest.py -> parents[3] is the repository root).
SHARED_DATASETS = Path(
    os.environ.get("FLWR_VFLGAN_DATA_DIR")
    or Path(__file__).resolve().parents[3].parent / "shared" / "datasets"
)


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """The folder holding german_credit/, spambase/, mnist_5k/ and adult/."""
    if not (SHARED_DATASETS / "german_credit" / "german.data").is_file():
        pytest.fail(
            f"the shared datasets folder {SHARED_DATASETS} is missing or incomplete; these "
            f"tests need ../shared/datasets beside the repository root (see its README)"
        )
    return SHARED_DATASETS
