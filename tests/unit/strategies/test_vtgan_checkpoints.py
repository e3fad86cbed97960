"""Where a VT-GAN run is checkpointed: after the last generator step of each epoch."""

from __future__ import annotations

import pytest

from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.strategies.vtgan import checkpoint_due


def _due(schedule: Schedule) -> list[int]:
    return [
        step
        for step in range(schedule.total_steps)
        if schedule.kind(step) is StepKind.GENERATOR and checkpoint_due(schedule, step)
    ]


@pytest.mark.parametrize(
    ("batch", "max_steps", "expected"),
    [
        (64, None, [11, 23, 35]),  # 12-step epochs end on a generator step; none after the last
        (56, None, [11, 24, 37, 50]),  # 13-step epochs: one critic step after the checkpoint
        (56, 20, [11, 18]),  # cut short at step 20: the last generator step before the cut
    ],
)
def test_checkpoints_follow_each_epochs_last_generator_step(
    batch: int, max_steps: int | None, expected: list[int]
) -> None:
    assert _due(Schedule(640, batch, 5, 4, max_steps)) == expected
