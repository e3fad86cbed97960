"""R²-scored TRTR/TSTS/TRTS/TSTR for a continuous label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.metrics.regression import regression_utility


def _price_table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """``price`` is a smooth function of ``x1`` plus a little noise; ``noise`` and
    ``colour`` carry no information."""
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(-2, 2, size=n)
    return pd.DataFrame(
        {
            "x1": x1,
            "noise": rng.normal(size=n),
            "colour": rng.choice(["red", "green", "blue"], size=n),
            "price": 3.0 * x1 + 0.2 * rng.normal(size=n),
        }
    )


def test_a_copy_of_the_real_table_has_no_difference() -> None:
    real = _price_table()
    scores = regression_utility(real, real.copy(), label="price", folds=0, n_estimators=20)
    assert scores["trtr_r2"] > 0.9  # the forest learns the signal
    assert scores["tsts_r2"] == pytest.approx(scores["trtr_r2"])
    assert scores["total_difference"] < 0.05
    assert set(scores) == {
        "trtr_r2", "tsts_r2", "trts_r2", "tstr_r2", "tsts_r2_difference",
        "trts_r2_difference", "tstr_r2_difference", "total_difference", "folds",
    }  # fmt: skip


def test_a_table_without_the_dependence_scores_far_from_trtr() -> None:
    real, fresh = _price_table(), _price_table(seed=1)
    broken = fresh.copy()
    broken["price"] = fresh["price"].to_numpy()[np.random.default_rng(2).permutation(len(fresh))]
    good = regression_utility(real, fresh, label="price", folds=3, n_estimators=20)
    bad = regression_utility(real, broken, label="price", folds=3, n_estimators=20)
    assert good["total_difference"] < 0.1
    assert bad["tstr_r2"] < 0.2 and bad["tsts_r2"] < 0.2
    assert bad["total_difference"] > 1.5  # three settings, each about 0.9 below TRTR
    assert bad["total_difference"] == pytest.approx(
        sum(bad[f"{s}_r2_difference"] for s in ("tsts", "trts", "tstr"))
    )


def test_same_inputs_and_seed_give_the_same_scores() -> None:
    real, synthetic = _price_table(), _price_table(seed=3)
    one = regression_utility(real, synthetic, label="price", folds=0, seed=4, n_estimators=10)
    two = regression_utility(real, synthetic, label="price", folds=0, seed=4, n_estimators=10)
    assert one == two


@pytest.mark.parametrize("folds", [1, -1])
def test_bad_folds_are_refused(folds: int) -> None:
    real = _price_table(50)
    with pytest.raises(ValueError, match="folds must be 0 or at least 2"):
        regression_utility(real, real, label="price", folds=folds)


def test_a_constant_real_label_is_refused() -> None:
    real = _price_table(50)
    real["price"] = 1.0
    with pytest.raises(ValueError, match="constant in the real table"):
        regression_utility(real, _price_table(50), label="price", folds=0)


def test_a_constant_synthetic_label_gives_nan_not_a_crash() -> None:
    real, synthetic = _price_table(100), _price_table(100, seed=1)
    synthetic["price"] = 0.5
    scores = regression_utility(real, synthetic, label="price", folds=0, n_estimators=5)
    assert np.isnan(scores["trts_r2"]) and np.isnan(scores["total_difference"])
    assert np.isfinite(scores["tstr_r2"])
