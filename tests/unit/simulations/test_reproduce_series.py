"""The series rows of the reproduction harness: paper 003's sine runs with and without
the shared discriminator, and their table."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hydra import initialize_config_module

from flwr_vflgan.simulations import reproduce_series
from flwr_vflgan.simulations.config import ReproduceConfig, register_configs
from flwr_vflgan.simulations.reproduce import compose_per_algorithm, run_specs


def _grid(rc: ReproduceConfig):
    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        return run_specs(compose_per_algorithm(rc, []), rc)


def test_each_seed_trains_with_and_without_the_shared_discriminator():
    rc = ReproduceConfig(
        datasets=("sine6",), algorithms=("vflgan_ts",), seeds=(0, 1), out_dir="out", epochs={}
    )
    specs = _grid(rc)
    runs = [(s.algorithm.series.train.shared_discriminator, s.seed, s.run_dir) for s in specs]
    assert runs == [
        (True, 0, Path("out/sine6/vflgan_ts/seed0")),
        (True, 1, Path("out/sine6/vflgan_ts/seed1")),
        (False, 0, Path("out/sine6/vflgan_ts-without-sd/seed0")),
        (False, 1, Path("out/sine6/vflgan_ts-without-sd/seed1")),
    ]
    assert all(s.data.source == "sine6" for s in specs)
    # Counted in steps: 12,800 of them are the reference's 200 epochs of sine6.
    from flwr_vflgan.gan.schedule import Schedule

    train = specs[0].algorithm.train
    assert train.epochs is None and train.min_steps == 12800
    assert Schedule.of(2048, train).epochs == 200
    assert Schedule.of(80, train).epochs == 6400


def test_the_table_has_mean_and_sample_sd_per_method():
    rc = ReproduceConfig(
        datasets=("sine6",), algorithms=("vflgan_ts",), seeds=(0, 1), out_dir="out", epochs={}
    )
    specs = _grid(rc)
    scores = [0.9, 0.96, 0.1, 0.3]  # cross-party correlation: with SD seeds 0, 1; without
    rows = [
        (
            s,
            {
                "fd": 1.0,
                "series": {"cross_party_amplitude_correlation": c, "discriminative_score": 0.2},
            },
        )
        for s, c in zip(specs, scores, strict=True)
    ]
    text, table = reproduce_series.write(rows, rc)
    with_sd = table["sine6"]["VFLGAN-TS"]["cross_party_amplitude_correlation"]
    assert with_sd["mean"] == pytest.approx(0.93)
    assert with_sd["sd"] == pytest.approx(math.sqrt(2 * 0.03**2))
    without = table["sine6"]["VFLGAN-TS without shared discriminator"]
    assert without["cross_party_amplitude_correlation"]["mean"] == pytest.approx(0.2)
    assert "| sine6: VFLGAN-TS | 0.200 +- 0.000 | - | 0.930 +- 0.042 |" in text
