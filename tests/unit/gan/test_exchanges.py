"""K steps per exchange (flwr_vflgan.gan.exchanges) against the one-graph-per-step loop."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.gan.exchanges import (
    LocalVFLGAN,
    party_apply_block,
    party_forward_block,
    server_block,
)
from flwr_vflgan.gan.plain import PlainVFLGAN
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.gan.vflgan import PartyTrainer, ServerTrainer
from flwr_vflgan.runtime.blocks import StepBlock

N_ROWS = 40


def _local(config, spans, tables, k: int, steps: int) -> LocalVFLGAN:
    parties = [
        PartyTrainer(config, s, t, 1, i) for i, (s, t) in enumerate(zip(spans, tables, strict=True))
    ]
    schedule = Schedule(N_ROWS, 8, 2, epochs=3, max_steps=steps)
    return LocalVFLGAN(parties, ServerTrainer(config, len(parties), 2), schedule, k)


def _states(trainers) -> list[np.ndarray]:
    return [t.state.to_numpy() for t in trainers]


def _parameters(party: PartyTrainer) -> np.ndarray:
    """Trainable parameters only: a block's forwards move the generator's BatchNorm
    running statistics (used only for sampling) before its applies, by design."""
    tensors = [*party.generator.parameters(), *party.discriminator.parameters()]
    return np.concatenate([t.detach().numpy().ravel() for t in tensors])


@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base"])
def test_one_step_per_exchange_is_the_plain_loop_bit_for_bit(
    make_config, party_spans, party_tables, variant
):
    config = make_config(variant, first_part_gp=True)
    spans, tables = party_spans[:2], party_tables(2, N_ROWS)
    local = _local(config, spans, tables, 1, 12)
    for block in local.blocks():
        local.run_block(block)
    plain = PlainVFLGAN(config, spans, tables, shared_seed=1, server_seed=2)
    for step in range(12):
        plain.step(step, local.schedule.kind(step))
    got = _states([*local.parties, local.server])
    want = _states([*plain.parties, plain.server])
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_blocks_of_a_run_follow_the_schedule(make_config, party_spans, party_tables):
    local = _local(make_config(), party_spans[:2], party_tables(2, N_ROWS), 4, 20)
    # 5 D steps per epoch, a G step after every 2nd: 7 steps per epoch; K = 4.
    assert [(b.start, b.count) for b in local.blocks()] == [
        (0, 4),
        (4, 3),
        (7, 4),
        (11, 3),
        (14, 4),
        (18, 2),
    ]
    assert [(b.start, b.count) for b in local.blocks(7)] == [(7, 4), (11, 3), (14, 4), (18, 2)]


def test_a_block_sends_features_of_the_parameters_at_its_start(
    make_config, party_spans, party_tables
):
    """The first step of a block is exact; the later ones use stale features."""
    config = make_config()
    spans, tables = party_spans[:2], party_tables(2, N_ROWS)
    stale = _local(config, spans, tables, 2, 2)
    exact = _local(config, spans, tables, 1, 2)
    block = StepBlock(0, 2)
    features = [party_forward_block(p, stale.schedule, block) for p in stale.parties]
    grads = server_block(stale.server, stale.schedule, block, features)
    exact.run_block(StepBlock(0, 1))
    # Step 0's gradient is the one the one-step protocol computes...
    for party, party_grads in zip(stale.parties, grads, strict=True):
        party.apply(0, stale.schedule.kind(0), party_grads[0].real, party_grads[0].fake)
    for a, b in zip(stale.parties, exact.parties, strict=True):
        np.testing.assert_array_equal(_parameters(a), _parameters(b))
    # ... step 1's was computed on features of the parameters before step 0's update.
    exact_features = [
        party_forward_block(p, exact.schedule, StepBlock(1, 1)) for p in exact.parties
    ]
    assert not np.array_equal(exact_features[0][0].real.numpy(), features[0][1].real.numpy())


def test_longer_blocks_change_the_trajectory(make_config, party_spans, party_tables):
    spans, tables = party_spans[:2], party_tables(2, N_ROWS)
    runs = {}
    for k in (1, 7):
        local = _local(make_config(), spans, tables, k, 21)
        for block in local.blocks():
            local.run_block(block)
        runs[k] = _parameters(local.parties[0])
    assert not np.array_equal(runs[1], runs[7])
    assert np.isfinite(runs[7]).all()


def test_apply_counts_every_discriminator_step_once(make_config, party_spans, party_tables):
    local = _local(make_config(), party_spans[:2], party_tables(2, N_ROWS), 7, 7)
    block = StepBlock(0, 7)
    party = local.parties[0]
    features = [party_forward_block(p, local.schedule, block) for p in local.parties]
    grads = server_block(local.server, local.schedule, block, features)
    counted: list[int] = []
    party_apply_block(party, local.schedule, block, grads[0], counted.append)
    assert counted == [0, 1, 3, 4, 6]  # "ddgddgd": the G steps are not DP releases
    with pytest.raises(ValueError, match="steps 0-6 needs 7 gradients, got 6"):
        party_apply_block(party, local.schedule, block, grads[0][:6])
