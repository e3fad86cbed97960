"""The single-process trainers: PlainVFLGAN and the centralized WGAN-GP baseline."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from flwr_vflgan.data import Span
from flwr_vflgan.gan.plain import CentralizedWGANGP, PlainVFLGAN
from flwr_vflgan.gan.schedule import Schedule

N_ROWS = 40


def _train(plain, steps: int = 14) -> None:
    schedule = Schedule(N_ROWS, 8, 2, epochs=2, max_steps=steps)
    for step in range(schedule.total_steps):
        loss = plain.step(step, schedule.kind(step))
        assert np.isfinite(loss)


def _state(plain: PlainVFLGAN) -> list[np.ndarray]:
    return [p.state.to_numpy() for p in plain.parties] + [plain.server.state.to_numpy()]


def _equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_plain_vflgan_is_reproducible_and_seed_dependent(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    spans, tables = party_spans[:2], party_tables(2, N_ROWS)
    runs = {}
    for name, shared, server in [("a", 1, 2), ("b", 1, 2), ("shared", 3, 2), ("server", 1, 4)]:
        plain = PlainVFLGAN(config, spans, tables, shared_seed=shared, server_seed=server)
        _train(plain)
        runs[name] = _state(plain)
    assert _equal(runs["a"], runs["b"])
    assert not _equal(runs["a"], runs["shared"])
    # The server seed only draws D_s's initialisation and penalty weights, which reach
    # every party through the gradients.
    assert not _equal(runs["a"][:2], runs["server"][:2])


def test_plain_vflgan_generate_gives_each_party_its_columns(make_config, party_spans, party_tables):
    plain = PlainVFLGAN(make_config("vflgan"), party_spans, party_tables(3, N_ROWS), 1, 2)
    blocks = plain.generate(25, draw=0)
    assert [b.shape for b in blocks] == [(25, 4), (25, 2), (25, 3)]
    assert torch.all(blocks[1].abs() < 1)  # tanh columns


def test_plain_vflgan_validates_its_inputs(make_config, party_spans, party_tables):
    config = make_config("vflgan")
    tables = party_tables(2, N_ROWS)
    with pytest.raises(ValueError, match=r"2 span lists but 1 data blocks"):
        PlainVFLGAN(config, party_spans[:2], tables[:1], 1, 2)
    with pytest.raises(ValueError, match=r"parties hold different row counts: \[39, 40\]"):
        PlainVFLGAN(config, party_spans[:2], [tables[0], tables[1][:39]], 1, 2)


# -- centralized WGAN-GP --------------------------------------------------------------
WHOLE_SPANS = [
    Span("a", 0, 1, "identity"),
    Span("b", 1, 3, "gumbel_softmax"),
    Span("c", 4, 2, "tanh"),
    Span("e", 6, 2, "gumbel_softmax"),
]


def _linear_widths(module: nn.Module) -> list[tuple[int, int]]:
    return [(m.in_features, m.out_features) for m in module.modules() if isinstance(m, nn.Linear)]


@pytest.mark.parametrize("n_parties", [1, 2, 3])
def test_centralized_capacity_is_per_party_widths_times_parties(make_config, table, n_parties):
    # Small model: latent 4, generator (8, 8), local disc (8,), features 4, shared (8,).
    m = n_parties
    model = CentralizedWGANGP(
        make_config("wgan_gp"), WHOLE_SPANS, table(WHOLE_SPANS, N_ROWS, 0), m, 0
    )
    assert _linear_widths(model.generator) == [(4, 8 * m), (8 * m, 8 * m), (8 * m, 8)]
    norms = [x for x in model.generator.modules() if isinstance(x, nn.BatchNorm1d)]
    assert [(x.num_features, x.eps) for x in norms] == [(8 * m, 0.8)]
    # Critic: features 8 -> 8m -> 4m, then the shared head 4m -> 8 -> 1.
    assert _linear_widths(model.critic) == [(8, 8 * m), (8 * m, 4 * m), (4 * m, 8), (8, 1)]


def test_centralized_trains_without_nans_and_generates_exact_one_hots(make_config, table):
    config = make_config("wgan_gp")
    model = CentralizedWGANGP(config, WHOLE_SPANS, table(WHOLE_SPANS, N_ROWS, 1), 2, seed=5)
    before = [p.detach().clone() for p in model.generator.parameters()]
    schedule = Schedule(N_ROWS, 8, 2, epochs=2)
    for step in range(schedule.total_steps):
        assert np.isfinite(model.step(step, schedule.kind(step)))
    for module in (model.generator, model.critic):
        assert all(torch.isfinite(p).all() for p in module.parameters())
        assert all(torch.isfinite(b).all() for b in module.buffers())
    assert any(
        not torch.equal(a, p) for a, p in zip(before, model.generator.parameters(), strict=True)
    )

    rows = model.generate(30, draw=0)
    assert rows.shape == (30, 8)
    assert model.generator.training
    for start, width in [(1, 3), (6, 2)]:
        block = rows[:, start : start + width]
        assert set(block.unique().tolist()) <= {0.0, 1.0}
        assert torch.equal(block.sum(dim=1), torch.ones(30))
    assert torch.all(rows[:, 4:6].abs() < 1)
    assert torch.equal(model.generate(30, draw=0), rows)


def test_centralized_is_reproducible(make_config, table):
    config = make_config("wgan_gp")
    data = table(WHOLE_SPANS, N_ROWS, 2)
    outputs = []
    for seed in (7, 7, 8):
        model = CentralizedWGANGP(config, WHOLE_SPANS, data, 2, seed=seed)
        _train(model)
        outputs.append(model.generate(20, draw=1))
    assert torch.equal(outputs[0], outputs[1])
    assert not torch.equal(outputs[0], outputs[2])


def test_centralized_rejects_no_parties(make_config, table):
    with pytest.raises(ValueError, match=r"n_parties must be >= 1, got 0"):
        CentralizedWGANGP(make_config("wgan_gp"), WHOLE_SPANS, table(WHOLE_SPANS, N_ROWS, 0), 0, 0)


def test_centralized_generator_lr_reaches_its_generator_only(make_config, table):
    config = make_config("wgan_gp", lr=3e-4, generator_lr=1e-4)
    model = CentralizedWGANGP(config, WHOLE_SPANS, table(WHOLE_SPANS, N_ROWS, 1), 2, seed=5)
    rates = [[g["lr"] for g in opt.param_groups] for opt in (model.g_opt, model.d_opt)]
    assert rates == [[1e-4], [3e-4]]
