"""The benchmarks' party-memory probe measures the child, not the benchmark."""

from __future__ import annotations

import sys

import pytest

from flwr_vflgan.simulations.bench_vflgan import probe_peak_rss_mb


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (VmHWM)")
def test_the_probe_reports_the_childs_peak_not_the_parents() -> None:
    grown = bytearray(400 * 1024 * 1024)
    grown[::4096] = b"\1" * len(grown[::4096])  # touch every page: 400 MiB resident here
    small = probe_peak_rss_mb("x = 1")
    large = probe_peak_rss_mb("y = bytearray(200 * 1024 * 1024); y[::4096] = b'1' * len(y[::4096])")
    del grown
    assert small < 100  # a bare interpreter, not the 400 MiB parent (ru_maxrss read 400+)
    assert 200 < large < 300  # the child's own 200 MiB is seen
