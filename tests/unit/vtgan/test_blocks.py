"""VT-GAN's blocks of steps: boundaries worked by hand, the packing of a block's
tensors, and what a block computes against one step per exchange."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from flwr_vflgan.config import TrainConfig
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.schema import infer_schema
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.vtgan.blocks import (
    BlockForward,
    StepGrads,
    block_end,
    blocks,
    check_block,
    every_row_step,
    feature_sizes,
    pack_forward,
    pack_grads,
    sparse_rows,
    unpack_forward,
    unpack_grads,
)
from flwr_vflgan.vtgan.config import VTGANSettings
from flwr_vflgan.vtgan.local import train_local
from flwr_vflgan.vtgan.party import VTGANParty
from flwr_vflgan.vtgan.server import ClientShape, VTGANServer

# 640 rows at batch 64: 10 critic steps an epoch, a generator step after every 5:
# steps 0-4 D, 5 G, 6-10 D, 11 G.
TEN = Schedule(640, 64, 5, 3)
# 448 rows: 7 critic steps, one generator step (5), then 6 and 7 end the epoch.
SEVEN = Schedule(448, 64, 5, 2)


@pytest.mark.parametrize(
    ("schedule", "k", "expected"),
    [
        (TEN, 1, [[s] for s in range(36)]),
        (TEN, 3, [[0, 1, 2], [3, 4], [5], [6, 7, 8], [9, 10], [11]]),
        (TEN, 5, [[0, 1, 2, 3, 4], [5], [6, 7, 8, 9, 10], [11]]),
        (TEN, 100, [[0, 1, 2, 3, 4], [5], [6, 7, 8, 9, 10], [11]]),
        (SEVEN, 4, [[0, 1, 2, 3], [4], [5], [6, 7], [8, 9, 10, 11], [12], [13], [14, 15]]),
    ],
)
def test_blocks_by_hand(schedule: Schedule, k: int, expected: list[list[int]]) -> None:
    got = [list(b) for b in blocks(schedule, k)]
    assert got[: len(expected)] == expected
    # every step once, in order, and every epoch starts a block
    assert [s for b in got for s in b] == list(range(schedule.total_steps))
    starts = {b[0] for b in got}
    assert all(e * schedule.steps_per_epoch in starts for e in range(schedule.epochs))


def test_a_block_stops_at_the_end_of_training() -> None:
    assert [list(b) for b in blocks(Schedule(448, 64, 5, 2, max_steps=7), 3)] == [
        [0, 1, 2],
        [3, 4],
        [5],
        [6],
    ]


def test_block_checks_name_the_problem() -> None:
    check_block(TEN, 6, 5, 5)
    with pytest.raises(ValueError, match="steps 6-9 are not a block at steps_per_exchange=5"):
        check_block(TEN, 6, 4, 5)
    with pytest.raises(ValueError, match="steps 3-5 are not a block at steps_per_exchange=3"):
        check_block(TEN, 3, 3, 3)  # crosses the generator step
    with pytest.raises(ValueError, match=r"a block must hold steps of the schedule \(0 .. 35\)"):
        check_block(TEN, 36, 1, 1)
    with pytest.raises(ValueError, match="steps_per_exchange must be >= 1, got 0"):
        block_end(TEN, 0, 0)
    with pytest.raises(ValueError, match=r"start must be in \[0, 36\), got -1"):
        block_end(TEN, -1, 2)


def test_every_row_features_use_the_first_non_chosen_step() -> None:
    assert every_row_step([6, 7, 8], [True, False, False], private=False) == 7
    assert every_row_step([6, 7], [True, True], private=False) is None
    assert every_row_step([6, 7], [False, False], private=True) is None


def _t(rows: int, value: float, width: int = 3) -> torch.Tensor:
    return torch.full((rows, width), value)


def test_forward_packing_round_trips_and_checks_sizes() -> None:
    chosen = [False, True, False]
    forward = BlockForward(
        fake=[_t(4, 1.0), _t(4, 2.0), _t(4, 3.0)],
        real=[None, _t(4, 5.0), None],
        rows=[None, np.arange(4), None],
        every_row=_t(10, 9.0),
    )
    packed, rows = pack_forward(forward)
    # fake 0; real 1, fake 1; fake 2; every row
    assert feature_sizes(True, chosen, False, 4, 10) == [4, 4, 4, 4, 10]
    assert packed.shape == (26, 3) and rows is not None and rows.tolist() == [0, 1, 2, 3]
    back = unpack_forward(torch.from_numpy(packed), rows, True, chosen, False, 4, 10)
    assert [float(f[0, 0]) for f in back.fake] == [1.0, 2.0, 3.0]
    assert back.real[0] is None and float(back.real[1][0, 0]) == 5.0  # type: ignore[index]
    assert back.every_row is not None and back.every_row.shape == (10, 3)
    assert back.rows[1] is not None and back.rows[1].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="packed features have 25 rows, expected 26"):
        unpack_forward(torch.from_numpy(packed[:25]), rows, True, chosen, False, 4, 10)
    with pytest.raises(ValueError, match="expected 4 row indices, got 0"):
        unpack_forward(torch.from_numpy(packed), None, True, chosen, False, 4, 10)
    # under DP every step has its batch of real rows and nobody sends every row
    assert feature_sizes(True, chosen, True, 4, 10) == [4, 4, 4, 4, 4, 4]
    # a generator step: fake rows only
    assert feature_sizes(False, [True], False, 4, 10) == [4]


def test_gradient_packing_round_trips_and_checks_sizes() -> None:
    grads = [
        StepGrads(_t(4, 1.0), _t(2, 2.0), np.array([3, 7])),
        StepGrads(_t(4, 3.0), _t(4, 4.0)),
    ]
    packed, selected, counts = pack_grads(grads)
    assert packed.shape == (14, 3) and counts == [2, 0]
    assert selected is not None and selected.tolist() == [3, 7]
    back = unpack_grads(torch.from_numpy(packed), selected, counts, True, [False, True], False, 4)
    assert back[0].selected is not None and back[0].selected.tolist() == [3, 7]
    assert float(back[0].real[0, 0]) == 2.0 and float(back[1].real[0, 0]) == 4.0  # type: ignore[index]
    assert back[1].selected is None
    with pytest.raises(ValueError, match="packed gradients have 14 rows, expected 16"):
        unpack_grads(torch.from_numpy(packed), None, [], True, [True, True], False, 4)
    with pytest.raises(ValueError, match="selected rows sent for a step whose gradient"):
        unpack_grads(torch.from_numpy(packed), selected, [2, 0], True, [True, True], False, 4)
    with pytest.raises(ValueError, match="selected_counts has 1 entries for 2 steps"):
        unpack_grads(torch.from_numpy(packed), selected, [2], True, [False, True], False, 4)


def test_sparse_rows_keeps_the_rows_with_gradient() -> None:
    grad = torch.zeros(6, 2)
    grad[4] = torch.tensor([1.0, -1.0])
    grad[1] = torch.tensor([0.0, 2.0])
    rows, values = sparse_rows(grad)
    assert rows.tolist() == [1, 4] and values.tolist() == [[0.0, 2.0], [1.0, -1.0]]


def _parties(lr: float) -> tuple[VTGANServer, list[VTGANParty], Schedule]:
    rng = np.random.default_rng(0)
    n = 96
    frame = pd.DataFrame(
        {
            "a": rng.choice(["x", "y", "z"], size=n),
            "u": rng.normal(size=n),
            "b": rng.choice(["p", "q"], size=n),
            "v": rng.normal(size=n) * 2,
        }
    )
    settings = VTGANSettings(latent_dim=8, generator_width=16, discriminator_width=12)
    train = TrainConfig(batch_size=16, n_critic=2, lr=lr)
    encoded, encoders, shapes = [], [], []
    for cols in (["a", "u"], ["b", "v"]):
        part = frame[cols]
        encoder = ModeSpecificEncoder(max_modes=2, seed=0).fit(part, infer_schema(part))
        x = encoder.transform(part, np.random.default_rng(1))
        encoded.append(x)
        encoders.append(encoder)
        shapes.append(ClientShape(2, x.shape[1], sum(s.width for s in encoder.discrete_spans)))
    server = VTGANServer(settings, train, shapes, seed=2)
    parties = [
        VTGANParty(settings, train, x, e.spans, e.discrete_spans, server.layouts[i], 5, i)
        for i, (e, x) in enumerate(zip(encoders, encoded, strict=True))
    ]
    return server, parties, Schedule(n, 16, 2, 2)


def _train(k: int, lr: float) -> tuple[list[dict[str, float]], list[np.ndarray]]:
    server, parties, schedule = _parties(lr)
    history = train_local(schedule, server, parties, steps_per_exchange=k)
    return history, [server.state.to_numpy().copy(), *(p.state.to_numpy().copy() for p in parties)]


def test_a_block_computes_what_single_steps_compute_when_nothing_moves() -> None:
    """With a learning rate too small to move any parameter, stale features are fresh
    ones, so K = 4 must see exactly the losses of K = 1: the block hands every step its
    own chunks, conditions, rows and every-row features."""
    one, _ = _train(1, 1e-30)
    four, _ = _train(4, 1e-30)
    assert [h["step"] for h in one] == [h["step"] for h in four]
    for a, b in zip(one, four, strict=True):
        for key in ("d_loss", "g_loss", "cond_loss"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-7), key


def test_staleness_changes_the_trajectory_and_k1_is_repeatable() -> None:
    _, state_one = _train(1, 1e-3)
    _, state_again = _train(1, 1e-3)
    four, state_four = _train(4, 1e-3)
    assert all(np.array_equal(a, b) for a, b in zip(state_one, state_again, strict=True))
    # K = 4 applies gradients computed on features up to 3 critic updates old
    assert not np.array_equal(state_one[1], state_four[1])
    assert np.isfinite([v for h in four for v in h.values()]).all()


def test_a_non_chosen_client_recomputes_with_the_draw_its_features_were_sent_with() -> None:
    """With dropout in the client's critic (D1_1), the every-row features of a block are
    computed with one step's dropout draw; applying a later step must differentiate those
    same features (masks included), not a fresh draw of the later step."""
    server, parties, _ = _parties(1e-3)
    settings = VTGANSettings(
        latent_dim=8,
        generator_width=16,
        discriminator_width=12,
        d_server_blocks=1,
        d_client_blocks=1,
    )
    server = VTGANServer(settings, server.train, server.shapes, seed=2)
    party = parties[0]
    party = VTGANParty(
        settings,
        party.train,
        party.encoded.numpy(),
        party.spans,
        party.discrete_spans,
        server.layouts[0],
        5,
        0,
    )
    first, later = 6, 8
    chunk = torch.randn(16, party.layout.chunk_width, generator=torch.Generator().manual_seed(1))
    selected = np.array([2, 5, 11, 40])
    g_real = torch.randn(4, party.feature_dim, generator=torch.Generator().manual_seed(2))
    g_fake = torch.zeros(16, party.feature_dim)

    def expected(draw: int) -> list[torch.Tensor]:
        party.discriminator.zero_grad(set_to_none=True)
        everything = party.encoded[torch.from_numpy(party.order)]
        features = party._disc(everything, draw, 0)[torch.from_numpy(selected)]
        (features * g_real).sum().backward()
        return [p.grad.clone() for p in party.discriminator.parameters() if p.grad is not None]

    sent_with, fresh = expected(first), expected(later)
    assert not all(torch.equal(a, b) for a, b in zip(sent_with, fresh, strict=True))
    seen: list[torch.Tensor] = []
    party.d_opt.step = lambda *a, **k: seen.extend(  # type: ignore[method-assign]
        p.grad.clone() for p in party.discriminator.parameters() if p.grad is not None
    )
    party.apply_discriminator(later, chunk, False, g_real, g_fake, selected, real_step=first)
    assert len(seen) == len(sent_with)
    for got, want in zip(seen, sent_with, strict=True):
        torch.testing.assert_close(got, want)
