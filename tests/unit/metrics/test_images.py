"""Image metrics of paper 000, Section 5.1.3: FD on autoencoder codes and the Inception Score."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from flwr_vflgan.data import DatasetUnavailableError, load_dataset
from flwr_vflgan.metrics.images import (
    ImageEvaluator,
    ImageMetricsConfig,
    image_grid,
    inception_score_from_probabilities,
)

DATASETS = Path(
    os.environ.get("FLWR_VFLGAN_DATA_DIR")
    or Path(__file__).resolve().parents[4] / "shared" / "datasets"
)
PIXELS = [f"pixel_{i}" for i in range(784)]
# Cheaper than the defaults so the module stays fast; the full schedule is the slow test.
FAST = ImageMetricsConfig(autoencoder_epochs=5, classifier_hidden=(256,), classifier_epochs=8)
TINY = ImageMetricsConfig(
    latent_dim=4,
    autoencoder_hidden=(16,),
    classifier_hidden=(16,),
    autoencoder_epochs=1,
    classifier_epochs=1,
    batch_size=32,
)


@pytest.fixture(scope="module")
def mnist() -> pd.DataFrame:
    try:
        return load_dataset("mnist_5k", data_dir=str(DATASETS)).frame
    except DatasetUnavailableError as exc:
        pytest.fail(
            f"mnist_5k is not on this machine ({exc}); these tests need ../shared/datasets "
            "beside the checkout or FLWR_VFLGAN_DATA_DIR set to a folder holding mnist_5k/"
        )


@pytest.fixture(scope="module")
def evaluator(mnist: pd.DataFrame) -> ImageEvaluator:
    return ImageEvaluator.fit(mnist, pixel_columns=PIXELS, label="label", config=FAST)


def _noise(n: int, seed: int) -> pd.DataFrame:
    """Images of independent uniform pixels on mnist_5k's 0..255 scale."""
    values = np.random.default_rng(seed).integers(0, 256, size=(n, 784))
    return pd.DataFrame(values, columns=PIXELS)


# -- the pure Inception Score ----------------------------------------------------------


def test_uniform_predictions_score_one():
    # p(y|x) = p(y) for every x: every KL term is 0, exp(0) = 1.
    probs = np.full((50, 10), 0.1)
    assert inception_score_from_probabilities(probs, splits=10) == pytest.approx((1.0, 0.0))


@pytest.mark.parametrize("k", [2, 4, 10])
def test_confident_predictions_spread_evenly_score_k(k: int):
    # One-hot rows, each class equally often in every split: p(y) uniform,
    # KL(one-hot || uniform) = log k, so IS = k.
    probs = np.eye(k)[np.tile(np.arange(k), 5)]
    mean, std = inception_score_from_probabilities(probs, splits=5)
    assert mean == pytest.approx(k) and std == pytest.approx(0.0, abs=1e-12)


def test_score_by_hand():
    # p(y) = (0.75, 0.25); KL rows = 0.5 log(4/3) and log(4/3); mean 0.75 log(4/3).
    probs = np.array([[0.5, 0.5], [1.0, 0.0]])
    mean, std = inception_score_from_probabilities(probs, splits=1)
    assert mean == pytest.approx((4 / 3) ** 0.75, rel=1e-12) and std == 0.0


def test_mean_and_std_over_splits_by_hand():
    # First split uniform (IS 1), second split confident over 2 classes (IS 2).
    probs = np.vstack([np.full((2, 2), 0.5), np.eye(2)])
    assert inception_score_from_probabilities(probs, splits=2) == pytest.approx((1.5, 0.5))


@pytest.mark.parametrize(
    ("probs", "splits", "error", "match"),
    [
        (np.full(10, 0.1), 1, ValueError, r"shape \(n, k\)"),
        (np.full((5, 2), 0.4), 1, ValueError, "row 0 sums to 0.8"),
        (np.array([[1.5, -0.5]] * 3), 1, ValueError, "non-negative"),
        (np.array([[np.nan, 1.0]] * 3), 1, ValueError, "finite"),
        (np.full((3, 2), 0.5), 4, ValueError, "at least splits=4 rows"),
        (np.full((3, 2), 0.5), 0, ValueError, "splits must be >= 1"),
        (np.full((3, 2), 0.5), 1.5, TypeError, "splits must be an int"),
    ],
)
def test_score_rejects_bad_probabilities(probs, splits, error, match):
    with pytest.raises(error, match=match):
        inception_score_from_probabilities(probs, splits=splits)


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("latent_dim", 0, ValueError),
        ("autoencoder_epochs", 0, ValueError),
        ("classifier_epochs", -1, ValueError),
        ("batch_size", 2.0, TypeError),
        ("seed", -1, ValueError),
        ("seed", True, TypeError),
        ("autoencoder_hidden", (64, 0), ValueError),
        ("classifier_hidden", 64, TypeError),
        ("lr", 0.0, ValueError),
        ("lr", float("nan"), ValueError),
        ("holdout_fraction", 1.0, ValueError),
        ("range_margin", -0.1, ValueError),
    ],
)
def test_config_rejects_bad_fields_naming_them(field, value, error):
    with pytest.raises(error, match=field):
        ImageMetricsConfig(**{field: value})


def test_config_defaults_and_lists_become_tuples():
    config = ImageMetricsConfig(autoencoder_hidden=[128, 64])  # type: ignore[arg-type]
    assert config.autoencoder_hidden == (128, 64)
    assert ImageMetricsConfig().latent_dim == 32 and ImageMetricsConfig().seed == 0
    hash(config)


# -- fitted on real MNIST ----------------------------------------------------------------


def test_classifier_and_autoencoder_are_sound(evaluator: ImageEvaluator, mnist: pd.DataFrame):
    # MLPs trained on ~5k MNIST images reach 93-95% test accuracy; 90% on the 500
    # held-out images leaves about three standard errors (sqrt(.93 * .07 / 500) = 0.011).
    assert evaluator.classifier_accuracy > 0.9
    # Independent reference: predicting every image by the mean image.
    scaled = mnist[PIXELS].to_numpy() / 255.0
    mean_image_mse = float(np.mean((scaled - scaled.mean(axis=0)) ** 2))
    assert evaluator.autoencoder_mse < 0.5 * mean_image_mse
    assert evaluator.classes == tuple(range(10)) and evaluator.pixel_range == (0.0, 255.0)


def test_frechet_separates_real_from_noise(evaluator: ImageEvaluator, mnist: pd.DataFrame):
    order = np.random.default_rng(3).permutation(len(mnist))
    first, second = mnist.iloc[order[:2500]], mnist.iloc[order[2500:]]
    assert evaluator.frechet(mnist) == pytest.approx(0.0, abs=1e-6)
    real_vs_real = evaluator.frechet(second)
    noise = evaluator.frechet(_noise(2500, seed=4))
    assert 0 < real_vs_real < 5 and noise > 100 * real_vs_real
    assert evaluator.frechet(first) < 5


def test_inception_score_of_real_and_noise(evaluator: ImageEvaluator, mnist: pd.DataFrame):
    # mnist_5k is sorted by digit: unshuffled splits would each hold one digit and score ~1.
    assert mnist["label"].is_monotonic_increasing
    assert 0.8 * 10 < evaluator.real_inception_score <= 10
    real, _ = evaluator.inception_score(mnist)
    assert real == pytest.approx(evaluator.real_inception_score)
    # One split is order-free: compare with the score computed from the probabilities.
    probs = evaluator.class_probabilities(mnist)
    assert probs.shape == (5000, 10) and np.allclose(probs.sum(axis=1), 1)
    assert evaluator.inception_score(mnist, splits=1)[0] == pytest.approx(
        inception_score_from_probabilities(probs, splits=1)[0]
    )
    noise, noise_std = evaluator.inception_score(_noise(500, seed=5))
    assert 1 <= noise < 0.5 * real and noise_std >= 0


def test_metrics_keys_and_label_column_is_optional(evaluator: ImageEvaluator, mnist: pd.DataFrame):
    synthetic = mnist.iloc[:300][PIXELS]  # unlabeled, as the paper's synthetic MNIST
    out = evaluator.metrics(synthetic)
    assert set(out) == {
        "image_fd", "inception_score", "inception_score_std", "real_inception_score",
        "classifier_accuracy", "autoencoder_mse",
    }  # fmt: skip
    assert all(isinstance(v, float) and math.isfinite(v) for v in out.values())
    assert out["image_fd"] == pytest.approx(evaluator.frechet(synthetic))
    # Column order does not matter: pixels are picked by name.
    assert evaluator.frechet(synthetic[PIXELS[::-1]]) == pytest.approx(out["image_fd"])


def test_synthetic_table_validation(evaluator: ImageEvaluator, mnist: pd.DataFrame):
    sample = mnist.iloc[:50]
    with pytest.raises(ValueError, match=r"lacks 2 of 784 pixel columns: 'pixel_3', 'pixel_700'"):
        evaluator.frechet(sample.drop(columns=["pixel_3", "pixel_700"]))
    with pytest.raises(ValueError, match="synthetic table is empty"):
        evaluator.metrics(sample.iloc[:0])
    with pytest.raises(ValueError, match=r"synthetic pixels lie in \[-128, 127\].*\[0, 255\]"):
        evaluator.frechet(sample[PIXELS] - 128)
    with pytest.raises(ValueError, match=r"\[0, 300\]"):
        evaluator.inception_score(sample.assign(pixel_5=300))
    with pytest.raises(ValueError, match="1 missing or infinite"):
        evaluator.frechet(sample.assign(pixel_9=[np.nan] + [0.0] * 49))
    with pytest.raises(ValueError, match="non-numeric pixel columns"):
        evaluator.frechet(sample.assign(pixel_9="x"))
    with pytest.raises(ValueError, match="at least 2 rows"):
        evaluator.frechet(sample.iloc[:1])
    with pytest.raises(ValueError, match="at least splits=10 rows"):
        evaluator.inception_score(sample.iloc[:5])
    with pytest.raises(TypeError, match="must be a pandas DataFrame"):
        evaluator.frechet(sample.to_numpy())
    # Slightly outside the real range (within the 5% margin) is accepted.
    assert math.isfinite(evaluator.frechet(sample.assign(pixel_5=260.0)))


# -- fitting: determinism, scale, errors -----------------------------------------------


def test_fit_is_deterministic_and_leaves_global_state(mnist: pd.DataFrame):
    subset = mnist.iloc[::25]  # 200 images, 20 per digit
    probe = _noise(30, seed=6)
    torch_state = torch.random.get_rng_state()
    threads = torch.get_num_threads()
    first = ImageEvaluator.fit(subset, pixel_columns=PIXELS, label="label", config=TINY)
    again = ImageEvaluator.fit(subset, pixel_columns=PIXELS, label="label", config=TINY)
    other = ImageEvaluator.fit(
        subset, pixel_columns=PIXELS, label="label", config=dataclasses.replace(TINY, seed=1)
    )
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert torch.get_num_threads() == threads
    assert first.metrics(probe) == again.metrics(probe)
    assert first.metrics(probe)["image_fd"] != other.metrics(probe)["image_fd"]


def test_real_table_scaled_to_minus_one_one_gives_the_same_metrics(mnist: pd.DataFrame):
    # Both scales map to the same [0, 1] pixels, so the models and scores agree.
    subset = mnist.iloc[::25]
    rescaled = subset.assign(**{c: subset[c] / 127.5 - 1 for c in PIXELS})
    probe = _noise(30, seed=7)
    on_255 = ImageEvaluator.fit(subset, pixel_columns=PIXELS, label="label", config=TINY)
    on_unit = ImageEvaluator.fit(rescaled, pixel_columns=PIXELS, label="label", config=TINY)
    assert on_unit.pixel_range == (-1.0, 1.0)
    scores = on_255.metrics(probe)
    scores_unit = on_unit.metrics(probe.assign(**{c: probe[c] / 127.5 - 1 for c in PIXELS}))
    assert scores_unit == pytest.approx(scores, rel=1e-3)
    with pytest.raises(ValueError, match=r"synthetic pixels lie in \[0, 255\] but the real"):
        on_unit.frechet(probe)


def test_fit_validation(mnist: pd.DataFrame):
    subset = mnist.iloc[::100]
    fit = ImageEvaluator.fit
    with pytest.raises(ValueError, match="label column 'digit' is not in the real table"):
        fit(subset, pixel_columns=PIXELS, label="digit", config=TINY)
    with pytest.raises(ValueError, match="at least 2 classes, got 1"):
        fit(subset.assign(label=3), pixel_columns=PIXELS, label="label", config=TINY)
    with pytest.raises(ValueError, match="1 missing values"):
        fit(
            subset.assign(label=[np.nan, *subset["label"][1:]]), pixel_columns=PIXELS, label="label"
        )
    with pytest.raises(ValueError, match="at least 20 rows, got 10"):
        fit(subset.iloc[:10], pixel_columns=PIXELS, label="label", config=TINY)
    with pytest.raises(ValueError, match="same value 0"):
        fit(subset.assign(**dict.fromkeys(PIXELS, 0)), pixel_columns=PIXELS, label="label")
    with pytest.raises(ValueError, match="real table lacks 1 of 785 pixel columns: 'pixel_x'"):
        fit(subset, pixel_columns=[*PIXELS, "pixel_x"], label="label", config=TINY)
    with pytest.raises(ValueError, match=r"duplicates: \['pixel_0'\]"):
        fit(subset, pixel_columns=[*PIXELS, "pixel_0"], label="label", config=TINY)
    with pytest.raises(ValueError, match="pixel_columns is empty"):
        fit(subset, pixel_columns=[], label="label", config=TINY)
    with pytest.raises(TypeError, match="pixel_columns must be a sequence"):
        fit(subset, pixel_columns="pixel_0", label="label", config=TINY)
    with pytest.raises(TypeError, match="config must be an ImageMetricsConfig"):
        fit(subset, pixel_columns=PIXELS, label="label", config={"seed": 0})  # type: ignore[arg-type]


@pytest.mark.slow
def test_default_schedule_on_mnist_5k(mnist: pd.DataFrame):
    """The configuration the report uses (10-15 s on one thread)."""
    evaluator = ImageEvaluator.fit(mnist, pixel_columns=PIXELS, label="label")
    assert evaluator.classifier_accuracy > 0.9
    assert evaluator.real_inception_score > 9
    order = np.random.default_rng(8).permutation(len(mnist))
    assert evaluator.frechet(_noise(2500, seed=9)) > 100 * evaluator.frechet(
        mnist.iloc[order[:2500]]
    )


# -- image grid ------------------------------------------------------------------------


def test_image_grid_places_and_scales_images_by_hand():
    images = np.array([[0, 0, 0, 0], [255, 255, 255, 255], [0, 255, 255, 0]])
    grid = image_grid(images, image_shape=(2, 2), n=3, columns=2, value_range=(0, 255))
    expected = np.array(
        [
            [0, 0, 1, 1],
            [0, 0, 1, 1],
            [0, 1, 0, 0],  # third image, then an empty cell
            [1, 0, 0, 0],
        ],
        dtype=float,
    )
    np.testing.assert_array_equal(grid, expected)


def test_image_grid_defaults_to_the_images_own_range_and_takes_the_first_n():
    images = np.arange(5 * 4, dtype=float).reshape(5, 2, 2) - 3.0
    grid = image_grid(images, image_shape=(2, 2), n=2, columns=2)
    # First two images hold -3..4; the minimum maps to 0 and the maximum to 1.
    np.testing.assert_allclose(grid, (np.array([[-3, -2, 1, 2], [-1, 0, 3, 4]]) + 3) / 7)
    assert image_grid(np.zeros((70, 784))).shape == (8 * 28, 8 * 28)


@pytest.mark.parametrize(
    ("pixels", "kwargs", "match"),
    [
        (np.zeros((3, 5)), {"image_shape": (2, 2)}, r"shape \(N, 4\) or \(N, 2, 2\)"),
        (np.zeros((0, 4)), {"image_shape": (2, 2)}, "no images"),
        (np.full((1, 4), np.inf), {"image_shape": (2, 2)}, "infinite"),
        (np.zeros((1, 4)), {"image_shape": (2, 2), "columns": 0}, "columns must be >= 1"),
        (np.zeros((1, 4)), {"image_shape": (2, 2), "value_range": (1, 1)}, "increasing"),
    ],
)
def test_image_grid_rejects_bad_input(pixels, kwargs, match):
    with pytest.raises(ValueError, match=match):
        image_grid(pixels, **kwargs)
