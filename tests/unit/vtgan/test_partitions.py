"""Every partition of paper 001's Fig. 6 (G and D blocks on the server and the clients),
the enlarged generator and 2 to 5 clients train through the step sequence, and the
published rows decode to the clients' columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from flwr_vflgan.config import TrainConfig
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.schema import infer_schema
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.vtgan.config import VTGANSettings
from flwr_vflgan.vtgan.local import generate_local, train_local
from flwr_vflgan.vtgan.party import VTGANParty
from flwr_vflgan.vtgan.server import ClientShape, VTGANServer

SPLITS = [(2, 0), (1, 1), (0, 2)]


def _table(n: int = 96) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    data = {}
    for j in range(5):
        data[f"c{j}"] = rng.choice(["a", "b", "c"], size=n)
        data[f"x{j}"] = rng.normal(size=n) + j
    return pd.DataFrame(data)


def _train(settings: VTGANSettings, n_clients: int, steps: int = 8) -> tuple:
    frame = _table()
    columns = np.array_split(np.array(frame.columns), n_clients)
    train = TrainConfig(batch_size=16, n_critic=2, lr=1e-3)
    encoders, encoded, shapes = [], [], []
    for cols in columns:
        part = frame[list(cols)]
        encoder = ModeSpecificEncoder(max_modes=2, seed=0).fit(part, infer_schema(part))
        x = encoder.transform(part, np.random.default_rng(1))
        encoders.append(encoder)
        encoded.append(x)
        shapes.append(
            ClientShape(len(cols), x.shape[1], sum(s.width for s in encoder.discrete_spans))
        )
    server = VTGANServer(settings, train, shapes, seed=2)
    parties = [
        VTGANParty(settings, train, x, e.spans, e.discrete_spans, server.layouts[i], 5, i)
        for i, (e, x) in enumerate(zip(encoders, encoded, strict=True))
    ]
    before = [p.state.to_numpy().copy() for p in parties]
    schedule = Schedule(len(frame), 16, 2, 1, steps)
    history = train_local(schedule, server, parties)
    return server, parties, encoders, before, history, columns


@pytest.mark.parametrize("g", SPLITS, ids=lambda s: f"G{s[0]}_{s[1]}")
@pytest.mark.parametrize("d", SPLITS, ids=lambda s: f"D{s[0]}_{s[1]}")
def test_every_partition_trains_and_generates(g: tuple[int, int], d: tuple[int, int]) -> None:
    settings = VTGANSettings(
        g_server_blocks=g[0],
        g_client_blocks=g[1],
        d_server_blocks=d[0],
        d_client_blocks=d[1],
        latent_dim=8,
        generator_width=24,
        discriminator_width=20,
    )
    server, parties, encoders, before, history, columns = _train(settings, 2)
    assert np.isfinite([v for h in history for v in h.values()]).all()
    # Every client's models moved (a part with no gradient would keep its initial values).
    for party, initial in zip(parties, before, strict=True):
        assert not np.array_equal(party.state.to_numpy(), initial)
    blocks = generate_local(server, parties, 40, 0)
    for encoder, block, cols in zip(encoders, blocks, columns, strict=True):
        table = encoder.inverse_transform(block)
        assert list(table.columns) == list(cols) and len(table) == 40
    # Client blocks get widths in proportion to their columns and sum to the block width.
    assert sum(lay.g_block_width for lay in server.layouts) == 24


@pytest.mark.parametrize("n_clients", [2, 3, 4, 5])
@pytest.mark.parametrize("width", [24, 72], ids=["default", "enlarged"])
def test_two_to_five_clients_and_the_enlarged_generator(n_clients: int, width: int) -> None:
    settings = VTGANSettings(latent_dim=8, generator_width=width, discriminator_width=20)
    server, parties, _, _, history, columns = _train(settings, n_clients, steps=6)
    assert len(parties) == n_clients
    assert sum(lay.g_block_width for lay in server.layouts) == width
    # chunks of G^t's output are proportional to the clients' column counts
    ratios = np.array([len(c) for c in columns]) / sum(len(c) for c in columns)
    chunks = np.array(server.chunk_widths) / sum(server.chunk_widths)
    assert np.abs(chunks - ratios).max() < 0.05
    # the client supplying the conditions is drawn in proportion to its columns
    picks = np.bincount([server.choose_client(s) for s in range(4000)], minlength=n_clients)
    assert np.abs(picks / 4000 - ratios).max() < 0.03
    assert torch.isfinite(torch.tensor([v for h in history for v in h.values()])).all()


def test_a_restored_client_draws_the_rows_a_client_in_memory_draws() -> None:
    """Deployment restores a client in a new process from its saved row order: after the
    same shuffles it must pick exactly the rows the in-memory client picks."""
    settings = VTGANSettings(latent_dim=8, generator_width=24, discriminator_width=20)
    _, parties, _, _, _, _ = _train(settings, 2, steps=9)  # 3 rounds of 2 D + 1 G steps
    live = parties[0]
    assert live.round == 3
    restored = VTGANParty(
        live.settings,
        live.train,
        live.encoded.numpy(),
        live.spans,
        live.discrete_spans,
        live.layout,
        live.shared_seed,
        live.party,
    )
    restored.set_order(live.order.copy(), live.round)
    for step in range(20, 30):
        np.testing.assert_array_equal(live.real_rows(step, 16), restored.real_rows(step, 16))


def test_training_with_shuffling_reorders_every_client_alike_and_keeps_rows_whole() -> None:
    """Paper 001, 3.1.5: after each round every client applies the same permutation (from
    the clients' shared seed), so row i is the same person at every client, and a
    client's sampler follows its rows: a row it draws for a category holds that category."""
    from flwr_vflgan.vtgan.party import shuffle_permutation

    settings = VTGANSettings(latent_dim=8, generator_width=24, discriminator_width=20)
    _, parties, _, _, _, _ = _train(settings, 2, steps=9)  # 3 rounds of 2 D + 1 G steps
    a, b = parties
    assert a.round == b.round == 3
    np.testing.assert_array_equal(a.order, b.order)  # aligned across clients
    assert sorted(a.order.tolist()) == list(range(a.n_rows))
    before = a.order.copy()
    a.shuffle()
    b.shuffle()
    expected = before[shuffle_permutation(a.shared_seed, 3, a.n_rows)]
    np.testing.assert_array_equal(a.order, expected)
    np.testing.assert_array_equal(a.order, b.order)
    assert a.round == 4 and not np.array_equal(a.order, before)
    assert not np.array_equal(
        shuffle_permutation(a.shared_seed, 3, a.n_rows),
        shuffle_permutation(a.shared_seed + 1, 3, a.n_rows),
    )
    span = a.discrete_spans[0]
    codes = a.encoded.numpy()[:, span.start : span.stop].argmax(axis=1)
    category = int(codes[0])
    rows = a.sampler.sample_rows(
        np.zeros(50, np.int64), np.full(50, category), np.random.default_rng(0)
    )
    assert (codes[a.order[rows]] == category).all()  # current index -> original row
