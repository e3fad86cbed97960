"""Algorithm 1's schedule, worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flwr_vflgan.gan.config import TrainConfig
from flwr_vflgan.gan.schedule import Schedule, StepKind, announce_length, describe_length


def _kinds(schedule: Schedule, n: int) -> str:
    return "".join(schedule.kind(t).value for t in range(n))


def test_schedule_by_hand_fifty_rows_batch_ten_two_critic_steps():
    s = Schedule(n_rows=50, batch_size=10, n_critic=2, epochs=2)
    # S = 50 // 10 = 5 D steps per epoch; a G step after every 2nd: 5 + 2 = 7 steps.
    assert s.d_steps_per_epoch == 5
    assert s.steps_per_epoch == 7
    assert s.total_steps == 14
    assert _kinds(s, 14) == "ddgddgd" * 2
    assert [s.epoch_of(t) for t in range(14)] == [1] * 7 + [2] * 7
    assert [t for t in range(14) if s.ends_epoch(t)] == [6, 13]
    assert s.kind(2) is StepKind.GENERATOR
    assert s.kind(6) is StepKind.DISCRIMINATOR


@pytest.mark.parametrize(
    ("n_critic", "pattern"),
    [
        (1, "dgdgdgdgdg"),  # S = 5, 5 G steps
        (5, "dddddg"),  # S = 5, 1 G step
        (3, "dddgdd"),  # S = 5, 1 G step after the 3rd D step
    ],
)
def test_schedule_other_critic_ratios(n_critic, pattern):
    s = Schedule(n_rows=50, batch_size=10, n_critic=n_critic, epochs=3)
    assert s.steps_per_epoch == len(pattern)
    assert _kinds(s, 3 * len(pattern)) == pattern * 3
    assert s.total_steps == 3 * len(pattern)


def test_partial_last_batch_is_dropped():
    s = Schedule(n_rows=59, batch_size=10, n_critic=2, epochs=1)
    assert s.d_steps_per_epoch == 5
    assert s.steps_per_epoch == 7


def test_max_steps_caps_total_steps():
    assert Schedule(50, 10, 2, 2, max_steps=10).total_steps == 10
    assert Schedule(50, 10, 2, 2, max_steps=14).total_steps == 14
    assert Schedule(50, 10, 2, 2, max_steps=1000).total_steps == 14
    assert Schedule(50, 10, 2, 2, max_steps=None).total_steps == 14


def test_max_steps_does_not_change_the_step_kinds():
    capped = Schedule(50, 10, 2, 2, max_steps=9)
    assert _kinds(capped, 9) == "ddgddgd" + "dd"


def test_batch_larger_than_table_raises():
    with pytest.raises(ValueError, match=r"batch_size=51 is larger than the 50 training rows"):
        Schedule(n_rows=50, batch_size=51, n_critic=2, epochs=2)


def test_batch_equal_to_table_is_one_step_per_epoch():
    s = Schedule(n_rows=50, batch_size=50, n_critic=1, epochs=2)
    assert _kinds(s, 4) == "dgdg"


@pytest.mark.parametrize(("n_critic", "epochs"), [(0, 1), (-1, 1), (1, 0), (2, -3)])
def test_non_positive_critic_steps_or_epochs_raise(n_critic, epochs):
    with pytest.raises(ValueError, match=r"n_critic and epochs must be positive"):
        Schedule(n_rows=50, batch_size=10, n_critic=n_critic, epochs=epochs)


def test_negative_step_raises():
    with pytest.raises(ValueError, match=r"step must be >= 0, got -1"):
        Schedule(50, 10, 2, 2).kind(-1)


def test_every_run_updates_the_generator():
    # 300 rows at the default batch 64 and n_critic 5: S = 4 < 5 D steps per epoch. Algorithm 1
    # follows every T_d D steps with a G step; a schedule with no G step at all would
    # "train" for 300 exchanges and publish an untrained generator. Either such a schedule
    # is rejected, or the generator still gets its steps.
    try:
        schedule = Schedule(n_rows=300, batch_size=64, n_critic=5, epochs=75)
    except ValueError:
        return
    kinds = [schedule.kind(t) for t in range(schedule.total_steps)]
    assert StepKind.GENERATOR in kinds


def test_discriminator_steps_counted_by_hand():
    s = Schedule(n_rows=50, batch_size=10, n_critic=2, epochs=2)  # "ddgddgd" * 2
    assert [s.d_steps_before(t) for t in range(15)] == [
        0,
        1,
        2,
        2,
        3,
        4,
        4,
        5,
        6,
        7,
        7,
        8,
        9,
        9,
        10,
    ]
    # The most steps holding at most k D steps: trailing G steps are free.
    assert [s.last_step_within(k) for k in range(12)] == [0, 1, 3, 4, 6, 7, 8, 10, 11, 13, 14, 14]


@pytest.mark.parametrize(
    ("n_rows", "batch_size", "n_critic", "epochs", "max_steps"),
    [(1000, 64, 5, 3, None), (100, 10, 3, 4, 17), (70, 10, 5, 3, None), (48842, 64, 5, 2, None)],
)
def test_discriminator_step_count_matches_the_kinds(
    n_rows, batch_size, n_critic, epochs, max_steps
):
    s = Schedule(n_rows, batch_size, n_critic, epochs, max_steps)
    count = 0
    for step in range(s.total_steps):
        assert s.d_steps_before(step) == count
        count += s.kind(step) is StepKind.DISCRIMINATOR
    assert s.d_steps_before(s.total_steps) == count
    for k in (0, 1, count // 2, count - 1, count, count + 5):
        stop = s.last_step_within(k)
        assert s.d_steps_before(stop) <= k
        assert stop == s.total_steps or s.d_steps_before(stop + 1) > k


def test_discriminator_step_count_rejects_negative_arguments():
    s = Schedule(n_rows=50, batch_size=10, n_critic=2, epochs=2)
    with pytest.raises(ValueError, match="step must be >= 0, got -1"):
        s.d_steps_before(-1)
    with pytest.raises(ValueError, match="d_steps must be >= 0, got -2"):
        s.last_step_within(-2)


def test_budget_schedule_stops_after_the_tightest_partys_last_step():
    from flwr_vflgan.gan.schedule import budget_schedule

    s = Schedule(n_rows=50, batch_size=10, n_critic=2, epochs=2)  # 10 D steps in 14
    assert budget_schedule(s, {}) == (s, None)
    assert budget_schedule(s, {0: 10, 1: 12}) == (s, None)
    cut, reason = budget_schedule(s, {0: 7, 1: 4})
    assert cut.total_steps == 6 and cut.d_steps_before(cut.total_steps) == 4
    assert reason == (
        "party 1's privacy budget allows 4 discriminator steps of the 10 planned: "
        "training stops after step 6 of 14"
    )
    with pytest.raises(ValueError, match="allows 0 discriminator steps"):
        budget_schedule(s, {0: 0})


def test_exchange_blocks_by_hand_never_cross_an_epoch():
    s = Schedule(n_rows=50, batch_size=10, n_critic=2, epochs=2)  # 7 steps per epoch
    # K = 3: steps 0-2, 3-5, then 6 alone (the epoch ends), then the same in epoch 2.
    ends = []
    step = 0
    while step < s.total_steps:
        step = s.block_end(step, 3)
        ends.append(step)
    assert ends == [3, 6, 7, 10, 13, 14]
    assert [s.block_end(t, 1) for t in range(14)] == list(range(1, 15))
    # A block is counted from its epoch's first step, wherever the asked step lies.
    assert s.block_end(8, 3) == 10 and s.block_end(9, 3) == 10
    assert s.block_end(0, 100) == 7 and s.block_end(7, 100) == 14


def test_exchange_blocks_end_at_max_steps():
    s = Schedule(n_rows=50, batch_size=10, n_critic=2, epochs=2, max_steps=5)
    assert s.block_end(0, 4) == 4 and s.block_end(4, 4) == 5


@pytest.mark.parametrize(
    ("start", "k", "message"),
    [(-1, 2, r"start must be in \[0, 14\)"), (14, 2, "start must be"), (0, 0, ">= 1")],
)
def test_exchange_blocks_reject(start, k, message):
    s = Schedule(n_rows=50, batch_size=10, n_critic=2, epochs=2)
    with pytest.raises(ValueError, match=message):
        s.block_end(start, k)


def test_evaluation_due_at_every_kth_epoch_end_and_after_the_last_step():
    schedule = Schedule(n_rows=100, batch_size=10, n_critic=5, epochs=5)
    per_epoch = schedule.steps_per_epoch
    due = [s for s in range(schedule.total_steps) if schedule.evaluation_due(s, 2)]
    # Epochs 2 and 4 end; the last step (epoch 5's end) is always evaluated.
    assert due == [2 * per_epoch - 1, 4 * per_epoch - 1, schedule.total_steps - 1]
    assert not any(schedule.evaluation_due(s, 0) for s in range(schedule.total_steps))
    capped = Schedule(n_rows=100, batch_size=10, n_critic=5, epochs=5, max_steps=7)
    assert [s for s in range(capped.total_steps) if capped.evaluation_due(s, 1)] == [6]


def test_evaluations_keep_the_lowest_fd_the_earlier_on_a_tie():
    from flwr_vflgan.gan.schedule import Evaluations

    evaluations = Evaluations()
    assert not evaluations.publishes_best(dp_enabled=False, select_by_fd=False)
    improved = [
        evaluations.add(e, 10 * e, fd, 0.0)[1] for e, fd in [(1, 3.0), (2, 2.0), (3, 2.0), (4, 2.5)]
    ]
    assert improved == [True, True, False, False]
    assert (evaluations.best_epoch, evaluations.best_fd) == (2, 2.0)
    assert [r["epoch"] for r in evaluations.history] == [1, 2, 3, 4]
    assert evaluations.publishes_best(dp_enabled=False, select_by_fd=False)
    assert not evaluations.publishes_best(dp_enabled=True, select_by_fd=False)
    assert evaluations.publishes_best(dp_enabled=True, select_by_fd=True)


def test_an_automatic_length_is_the_fewest_whole_epochs_that_reach_min_steps(caplog):
    """50 rows, batch 10, n_critic 2: an epoch is 5 + 2 = 7 steps, so min_steps=30 takes
    ceil(30 / 7) = 5 epochs (35 steps) and min_steps=21 three; a table ten times larger
    reaches 30 steps in one epoch. A number in train.epochs is exact, and max_steps still
    caps an automatic length."""
    auto = TrainConfig(epochs=None, batch_size=10, n_critic=2, min_steps=30)
    assert (Schedule.of(50, auto).epochs, Schedule.of(50, auto).total_steps) == (5, 35)
    assert Schedule.of(50, replace(auto, min_steps=21)).epochs == 3
    assert Schedule.of(500, auto).epochs == 1
    assert Schedule.of(50, replace(auto, epochs=2)) == Schedule(50, 10, 2, 2)
    capped = Schedule.of(50, replace(auto, max_steps=25))
    assert (capped.epochs, capped.total_steps) == (5, 25)
    assert describe_length(auto) == "epochs=auto (min_steps=30)"
    assert describe_length(replace(auto, epochs=2)) == "epochs=2"
    with caplog.at_level("INFO", logger="flwr_vflgan.gan.schedule"):
        announce_length(Schedule.of(50, auto), auto)
        announce_length(Schedule(50, 10, 2, 2), replace(auto, epochs=2))
    assert [r.getMessage() for r in caplog.records] == [
        "50 rows give 7 steps an epoch: training 5 epochs, the fewest that reach "
        "train.min_steps=30 (train.epochs=N trains exactly N)"
    ]


def test_an_automatic_length_needs_min_steps():
    with pytest.raises(ValueError, match=r"train.epochs=null \(an automatic length\) needs"):
        TrainConfig(epochs=None)


@pytest.mark.parametrize("value", [0, -5, 2.5])
def test_min_steps_must_be_a_positive_integer(value):
    with pytest.raises(
        ValueError, match=rf"min_steps must be a positive integer or null, got {value}"
    ):
        TrainConfig(min_steps=value)


@pytest.mark.parametrize(
    ("n_critic", "generator_steps", "pattern"),
    [
        (1, 3, "dgggdgggdgggdgggdggg"),  # S = 5: five cycles of one D and three G steps
        (2, 2, "ddggddggd"),  # two cycles, then the fifth D step alone
        (5, 4, "dddddgggg"),
        (1, 1, "dgdgdgdgdg"),  # Algorithm 1
    ],
)
def test_several_generator_steps_after_each_critic_cycle(n_critic, generator_steps, pattern):
    s = Schedule(
        n_rows=50, batch_size=10, n_critic=n_critic, epochs=2, generator_steps=generator_steps
    )
    assert s.steps_per_epoch == len(pattern)
    assert _kinds(s, 2 * len(pattern)) == pattern * 2
    assert s.d_steps_per_epoch == 5 == pattern.count("d")
    assert s.g_steps_per_epoch == pattern.count("g")


@pytest.mark.parametrize(
    ("n_rows", "batch_size", "n_critic", "generator_steps", "max_steps"),
    [(1000, 64, 1, 3, None), (100, 10, 3, 2, 17), (70, 10, 5, 7, None), (1000, 16, 2, 5, 101)],
)
def test_discriminator_steps_are_counted_whatever_the_generator_steps(
    n_rows, batch_size, n_critic, generator_steps, max_steps
):
    """The accountant charges ``d_steps_before``: it must equal the discriminator steps
    the kinds say, with any number of generator steps between them."""
    s = Schedule(n_rows, batch_size, n_critic, 3, max_steps, generator_steps)
    count = 0
    for step in range(s.total_steps):
        assert s.d_steps_before(step) == count
        assert s.steps_before(step, StepKind.GENERATOR) == step - count
        count += s.kind(step) is StepKind.DISCRIMINATOR
    assert s.d_steps_before(s.total_steps) == count
    plain = Schedule(n_rows, batch_size, n_critic, 3, None)
    if max_steps is None:  # the same discriminator steps as one generator step each
        assert count == plain.d_steps_before(plain.total_steps)


def test_generator_steps_come_from_the_training_settings():
    train = TrainConfig(epochs=2, batch_size=10, n_critic=1, generator_steps=3)
    s = Schedule.of(50, train)
    assert s.generator_steps == 3 and s.steps_per_epoch == 20
    with pytest.raises(ValueError, match=r"generator_steps must be a positive integer, got 0"):
        TrainConfig(epochs=2, generator_steps=0)
    with pytest.raises(ValueError, match=r"generator_steps must be positive, got 0"):
        Schedule(50, 10, 1, 1, None, 0)
