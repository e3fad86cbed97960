"""Shared fixtures: the offline copies of the public datasets beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

# tests/unit/data/conftest.py -> parents[3] is the repository root; ../shared sits beside it.
SHARED_DATASETS = Path(__file__).resolve().parents[3].parent / "shared" / "datasets"


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """The folder holding german_credit/, spambase/, mnist_5k/ and adult/."""
    if not (SHARED_DATASETS / "german_credit" / "german.data").is_file():
        pytest.fail(
            f"the shared datasets folder {SHARED_DATASETS} is missing or incomplete; these "
            f"tests need ../shared/datasets beside the repository root (see its README)"
        )
    return SHARED_DATASETS
