"""Shared fixtures of the integration tests: small real tables and in-process runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flwr_vflgan.data import load_dataset

REPO = Path(__file__).resolve().parents[2]
SHARED_DATASETS = Path(
    os.environ.get("FLWR_VFLGAN_DATA_DIR") or REPO.parent / "shared" / "datasets"
)
"""The offline datasets: ``$FLWR_VFLGAN_DATA_DIR`` if set, else ../shared/datasets."""

FD_ONLY = (
    "evaluation.statistics=false evaluation.avd=false evaluation.ai_utility=false "
    "evaluation.ml_efficacy=false evaluation.privacy=false"
)
"""Overrides that leave the end-of-run suite the Frechet distance alone, which the run
also uses for model selection; the rest only re-reads the published table, which the
tests compare whole (it costs ~30 s a run here)."""


@pytest.fixture(scope="session")
def adult_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 640 rows of the bundled Adult table as a CSV (10 D steps per epoch at batch 64)."""
    path = tmp_path_factory.mktemp("data") / "adult640.csv"
    load_dataset("adult").frame.iloc[:640].to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def adult_4k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 4,000 rows of the bundled Adult table as a CSV."""
    path = tmp_path_factory.mktemp("data") / "adult4k.csv"
    load_dataset("adult").frame.iloc[:4000].to_csv(path, index=False)
    return path
