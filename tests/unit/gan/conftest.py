"""Small configurations, spans and tables shared by the GAN tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch

from flwr_vflgan.config import ModelConfig, TrainConfig, VFLGANConfig
from flwr_vflgan.data import Span

SMALL_MODEL = ModelConfig(
    latent_dim=4, generator_hidden=(8, 8), disc_hidden=(8,), feature_dim=4, shared_hidden=(8,)
)

# One span list per party: standardised numbers, one-hot categories and [-1, 1] values.
PARTY_SPANS: list[list[Span]] = [
    [Span("a", 0, 1, "identity"), Span("b", 1, 3, "gumbel_softmax")],
    [Span("c", 0, 2, "tanh")],
    [Span("d", 0, 1, "identity"), Span("e", 1, 2, "gumbel_softmax")],
]


def _config(variant: str = "vflgan", **train: object) -> VFLGANConfig:
    values: dict[str, object] = {"batch_size": 8, "n_critic": 2, "epochs": 5}
    values.update(train)
    return VFLGANConfig(variant=variant, model=SMALL_MODEL, train=TrainConfig(**values))  # type: ignore[arg-type]


def _table(spans: Sequence[Span], n_rows: int, seed: int) -> torch.Tensor:
    """Encoded rows matching ``spans``: normal numbers, exact one-hots, values in [-1, 1]."""
    gen = torch.Generator().manual_seed(seed)
    blocks = []
    for span in spans:
        if span.activation == "identity":
            blocks.append(torch.randn(n_rows, span.width, generator=gen))
        elif span.activation == "tanh":
            blocks.append(torch.rand(n_rows, span.width, generator=gen) * 2 - 1)
        else:
            index = torch.randint(span.width, (n_rows,), generator=gen)
            blocks.append(torch.nn.functional.one_hot(index, span.width).float())
    return torch.cat(blocks, dim=1)


def _party_tables(n_parties: int, n_rows: int, seed: int = 0) -> list[torch.Tensor]:
    return [_table(PARTY_SPANS[i], n_rows, seed + i) for i in range(n_parties)]


@pytest.fixture
def make_config() -> Callable[..., VFLGANConfig]:
    """``make_config(variant, **train_overrides)`` with the small model."""
    return _config


@pytest.fixture
def party_tables() -> Callable[..., list[torch.Tensor]]:
    """``party_tables(n_parties, n_rows, seed=0)``: one encoded table per party."""
    return _party_tables


@pytest.fixture
def table() -> Callable[..., torch.Tensor]:
    """``table(spans, n_rows, seed)``: an encoded table matching ``spans``."""
    return _table


@pytest.fixture
def party_spans() -> list[list[Span]]:
    """Span lists of up to three parties."""
    return [list(spans) for spans in PARTY_SPANS]
