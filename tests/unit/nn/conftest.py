"""Single-threaded torch for the tiny networks of these tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread() -> Iterator[None]:
    """Tiny tensors: OpenMP threads only add contention (BatchNorm slows down 1000x)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
