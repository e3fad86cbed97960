"""The report's figures: which rows they show."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flwr_vflgan.evaluation import plots
from flwr_vflgan.metrics import images


def test_the_real_samples_are_spread_through_a_label_sorted_table(
    tmp_path: Path, monkeypatch
) -> None:
    shown: dict[str, np.ndarray] = {}
    grid = images.image_grid

    def recording(pixels, *args, **kwargs):
        shown.setdefault("real", pixels)
        shown["synthetic"] = pixels
        return grid(pixels, *args, **kwargs)

    monkeypatch.setattr(images, "image_grid", recording)
    # 1,000 images of 2 x 2 pixels whose value is their row number: a sorted table.
    real = np.repeat(np.arange(1000.0)[:, None], 4, axis=1)
    synthetic = np.random.default_rng(0).uniform(0, 999, (300, 4))
    path = plots.plot_image_samples(real, synthetic, (2, 2), tmp_path / "samples.png")
    assert path.stat().st_size > 0
    rows = shown["real"][:, 0]
    assert len(rows) == 64 and rows[0] == 0 and rows[-1] == 999
    assert np.all(np.diff(rows) >= 15)  # evenly spread, not the first 64 rows
    np.testing.assert_array_equal(shown["synthetic"], synthetic)
    few = plots.plot_image_samples(real[:10], synthetic, (2, 2), tmp_path / "few.png")
    assert few.stat().st_size > 0
