"""Appendix D's helpers: Delta by the leak/train-AUC ratio on subsets, gamma by balance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flwr_vflgan.gafm.config import GAFMSettings
from flwr_vflgan.gafm.plots import plot_delta_ratios
from flwr_vflgan.gafm.tuning import (
    RATIO_ATTACKS,
    balance_gamma,
    select_delta,
    smallest,
    subset_rows,
)

SETTINGS = GAFMSettings(epochs=3, batch_size=64, eval_every=0, lr_local=1e-2)


def _data(n: int = 600) -> tuple[list[torch.Tensor], np.ndarray]:
    gen = np.random.default_rng(0)
    labels = (gen.random(n) < 0.4).astype(np.int64)
    x = gen.normal(size=(n, 4)) + labels[:, None]
    return [
        torch.tensor(x[:, :2], dtype=torch.float32),
        torch.tensor(x[:, 2:], dtype=torch.float32),
    ], labels


def test_subset_rows_are_a_seeded_sample_without_replacement() -> None:
    rows = subset_rows(1000, 0.1, seed=3)
    assert len(rows) == 100 and len(np.unique(rows)) == 100 and rows.max() < 1000
    assert np.array_equal(rows, subset_rows(1000, 0.1, seed=3))
    assert not np.array_equal(rows, subset_rows(1000, 0.1, seed=4))
    with pytest.raises(ValueError, match="needs at least 10"):
        subset_rows(50, 0.1, seed=0)
    with pytest.raises(ValueError, match="fraction"):
        subset_rows(50, 0.0, seed=0)


def test_select_delta_picks_the_smallest_average_ratio() -> None:
    features, labels = _data()
    selection = select_delta(
        features, labels, SETTINGS, candidates=(0.05, 0.5), fraction=0.5, repeats=2
    )
    assert set(selection.ratios) == {0.05, 0.5}
    assert len(selection.runs) == 4
    for delta, ratio in selection.ratios.items():
        # The ratio is the mean over the three attacks of the mean over the repeats.
        runs = [r for r in selection.runs if r["delta"] == delta]
        by_hand = np.mean(
            [np.mean([r["leak_auc"][a] / r["train_auc"] for r in runs]) for a in RATIO_ATTACKS]
        )
        assert ratio == pytest.approx(by_hand)
    assert selection.best == min(selection.ratios, key=lambda d: selection.ratios[d])
    with pytest.raises(ValueError, match="at least one candidate"):
        select_delta(features, labels, SETTINGS, candidates=())


def test_balance_gamma_suggests_the_ratio_of_the_average_gradients() -> None:
    features, labels = _data()
    balance = balance_gamma(features, labels, SETTINGS)
    assert balance.suggested_gamma == pytest.approx(
        abs(balance.ce_gradient) / abs(balance.gan_gradient)
    )
    assert balance.gan_gradient != 0 and balance.ce_gradient != 0


def test_smallest_ranks_by_ratio_then_delta() -> None:
    ratios = {0.05: 0.9, 0.1: 0.8, 0.2: 0.9, 0.3: 1.1, 0.5: 0.7}
    assert smallest(ratios) == [0.5, 0.1, 0.05]
    assert smallest(ratios, k=1) == [0.5]


def test_figure_d1_is_drawn_with_and_without_the_whole_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    subset = {0.05: 0.85, 0.1: 0.86, 0.5: 1.04}
    for full, name in ((None, "subset.png"), ({0.05: 0.73, 0.1: 0.73, 0.5: 0.75}, "both.png")):
        path = plot_delta_ratios(subset, full, 0.05, tmp_path / name, "Delta")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
