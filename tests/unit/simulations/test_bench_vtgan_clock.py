"""The VT-GAN benchmark's step clock with several steps per exchange."""

from __future__ import annotations

import pytest

from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.simulations.bench_vtgan import StepClock


def test_an_exchange_of_k_steps_is_shared_by_its_steps() -> None:
    # 640 rows at batch 64: steps 0-4 D, 5 G, 6-10 D, 11 G; blocks of K = 3.
    schedule = Schedule(640, 64, 5, 1)
    clock = StepClock()
    starts = {0: 0.0, 3: 0.3, 5: 0.5, 6: 1.1, 9: 1.4, 11: 1.6, 12: 2.2}
    clock.starts = dict(starts)
    clock.cpu_starts = {step: t / 2 for step, t in starts.items()}
    for step in starts:
        clock.client[step] = 0.05
    split = clock.split(schedule, first=0)
    # D steps: 0.1 s each (0-2: 0.3 s / 3, 3-4: 0.2 s / 2, 6-8, 9-10); G steps: 0.6 s
    assert split["inprocess_d_step_ms"] == pytest.approx(100.0)
    assert split["inprocess_g_step_ms"] == pytest.approx(600.0)
    assert split["inprocess_cpu_step_ms"] == pytest.approx(2200.0 / 12 / 2)
    assert split["inprocess_client_share"] == pytest.approx(6 * 0.05 / 2.2)
