"""The command line's progress: a line per evaluation, a bar within a long epoch."""

from __future__ import annotations

import io
from pathlib import Path

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import OutputConfig, RunSpec, RuntimeConfig
from flwr_vflgan.simulations.reporting import Reporter


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _reporter(tmp_path: Path, stream: io.StringIO) -> Reporter:
    spec = RunSpec(
        VFLGANConfig(), DataSpec(source="adult", n_parties=2), RuntimeConfig(), OutputConfig(),
        0, tmp_path,
    )  # fmt: skip
    return Reporter(spec, stream)


EPOCH = {"epoch": 1, "step": 915, "total_steps": 27450, "fd": 3.2, "best_fd": 3.2, "elapsed": 12}


def test_a_terminal_gets_a_bar_redrawn_in_place_and_cleared_by_the_epoch_line(tmp_path):
    stream = _Terminal()
    reporter = _reporter(tmp_path, stream)
    reporter.progress({"tick": True, "step": 400, "total_steps": 1000, "elapsed": 8.0})
    reporter.progress({"tick": True, "step": 500, "total_steps": 1000, "elapsed": 10.0})
    text = stream.getvalue()
    assert text.count("\r[") == 2 and "\n" not in text  # redrawn, not scrolled
    assert "[###############...............] step     500/1000   50.0%  10s, about 10s left" in text
    reporter.progress(EPOCH)
    after = stream.getvalue()[len(text) :]
    assert after.startswith("\r\033[K") and "epoch    1  step     915/27450  FD 3.2000" in after


def test_a_log_gets_a_plain_line_at_most_every_minute(tmp_path):
    stream = io.StringIO()
    reporter = _reporter(tmp_path, stream)
    for elapsed in (5, 30, 65, 90, 130):
        reporter.progress({"tick": True, "step": elapsed, "total_steps": 200, "elapsed": elapsed})
    lines = stream.getvalue().splitlines()
    assert [line.split("%")[0].split()[-1] for line in lines] == ["32.5", "65.0"]
    assert all("\r" not in line for line in lines)


def test_the_avd_line_shows_every_order_and_its_part_across_parties(tmp_path):
    from flwr_vflgan.simulations.reporting import print_evaluation

    evaluation = {
        "avd": {
            "k2_avd": 0.1,
            "k2_avd_within": 0.05,
            "k2_avd_across": 0.15,
            "k4_avd": 0.2,
            "k4_avd_within": None,
            "k4_avd_across": 0.25,
            "k6_avd": None,
            "dcm": 0.01,
        },
        "seconds": {"avd": 1.25},
    }
    stream = io.StringIO()
    print_evaluation(evaluation, tmp_path, stream)
    first = stream.getvalue().splitlines()[0]
    assert first == (
        "avd          k2_avd 0.1  k2_avd_across 0.15  k4_avd 0.2  k4_avd_across 0.25  dcm 0.01  (1.2s)"
    )
    # Without a partition the line is the orders and the DCM.
    stream = io.StringIO()
    print_evaluation({"avd": {"k2_avd": 0.1, "k3_avd": 0.3, "dcm": 0.01}}, tmp_path, stream)
    assert stream.getvalue().startswith("avd          k2_avd 0.1  k3_avd 0.3  dcm 0.01  (0.0s)")
