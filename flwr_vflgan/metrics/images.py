"""Image metrics of paper 000, Section 5.1.3, for MNIST.

Pixels carry little meaning one by one, so the paper measures synthetic images with
two models trained on the real images:

* the Frechet distance of eq. 23 between the latent features that an autoencoder
  trained on real MNIST gives real and synthetic images, and
* the Inception Score of eq. 24, ``IS = exp(E_x KL(p(y|x) || p(y)))``, with the
  Inception network replaced by an MLP digit classifier trained on real MNIST.

:class:`ImageEvaluator` fits both models once on the real table and then scores any
number of synthetic tables. :func:`inception_score_from_probabilities` is the score
itself on given class probabilities, and :func:`image_grid` tiles images for a figure.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.special
import torch
from torch import nn

from flwr_vflgan.metrics.frechet import GaussianStats, frechet_distance
from flwr_vflgan.metrics.tables import MetricInputError
from flwr_vflgan.nn.models import eval_mode

__all__ = [
    "ImageEvaluator",
    "ImageMetricsConfig",
    "image_grid",
    "inception_score_from_probabilities",
]

logger = logging.getLogger(__name__)

_MIN_REAL_ROWS = 20
_INFERENCE_BATCH = 1024


@dataclass(frozen=True)
class ImageMetricsConfig:
    """How :class:`ImageEvaluator` trains its autoencoder and classifier.

    Parameters
    ----------
    latent_dim
        Size of the autoencoder's code, the features of the Frechet distance.
    autoencoder_hidden
        Widths of the autoencoder's hidden layers, from the pixels to the code (the
        decoder mirrors them).
    classifier_hidden
        Widths of the digit classifier's hidden layers.
    autoencoder_epochs, classifier_epochs
        Passes over the training images.
    batch_size
        Images per Adam step.
    lr
        Adam learning rate of both models.
    holdout_fraction
        Share of the real images kept out of training to report the classifier's
        accuracy and the autoencoder's reconstruction error.
    range_margin
        How far, as a share of the real pixel range, synthetic pixels may fall outside
        it before they are rejected as being on another scale.
    seed
        Seed of the hold-out split, the initial weights, the batch order and the
        shuffle of images before the Inception Score's splits.

    Raises
    ------
    ValueError
        If a field is out of range; the message names the field and the value.
    TypeError
        If a field has the wrong type.
    """

    latent_dim: int = 32
    autoencoder_hidden: tuple[int, ...] = (256,)
    classifier_hidden: tuple[int, ...] = (512, 256)
    autoencoder_epochs: int = 20
    classifier_epochs: int = 20
    batch_size: int = 128
    lr: float = 3e-3
    holdout_fraction: float = 0.1
    range_margin: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("latent_dim", "autoencoder_epochs", "classifier_epochs", "batch_size"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("seed", self.seed, minimum=0)
        for name in ("autoencoder_hidden", "classifier_hidden"):
            value = getattr(self, name)
            if isinstance(value, str | bytes) or not isinstance(value, Sequence):
                raise TypeError(f"{name} must be a sequence of ints, got {value!r}")
            for width in value:
                _check_int(f"{name} entries", width, minimum=1)
            # Hydra hands lists; store a tuple so the config stays hashable and frozen.
            object.__setattr__(self, name, tuple(value))
        if not isinstance(self.lr, int | float) or isinstance(self.lr, bool):
            raise TypeError(f"lr must be a float, got {self.lr!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr}")
        if not 0 < self.holdout_fraction < 1:
            raise ValueError(f"holdout_fraction must be in (0, 1), got {self.holdout_fraction}")
        if not (math.isfinite(self.range_margin) and self.range_margin >= 0):
            raise ValueError(f"range_margin must be a finite number >= 0, got {self.range_margin}")


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


# -- the score itself ------------------------------------------------------------------


def inception_score_from_probabilities(probs: np.ndarray, splits: int = 10) -> tuple[float, float]:
    """Inception Score (paper 000, eq. 24) of given class probabilities.

    Parameters
    ----------
    probs
        Array of shape ``(n, k)``: row ``i`` is ``p(y | x_i)``, non-negative and summing
        to 1.
    splits
        Number of consecutive, near-equal chunks (``numpy.array_split``) scored apart.

    Returns
    -------
    tuple[float, float]
        Mean and (population) standard deviation over the chunks of
        ``exp(mean_i KL(p(y | x_i) || p(y)))``, with ``p(y)`` the chunk's mean row.

    Raises
    ------
    ValueError
        If ``probs`` is not 2-D, has negative, non-finite or non-normalised rows, or has
        fewer rows than ``splits``; if ``splits < 1``.

    Notes
    -----
    As in the reference implementation (Salimans et al., 2016) the score is computed
    per chunk and averaged, so it depends on the chunk size; it lies in ``[1, k]``.
    ``0 * log 0`` counts as 0. Unlike that implementation, a remainder of ``n / splits``
    rows is spread over the chunks rather than dropped.
    """
    _check_int("splits", splits, minimum=1)
    array = np.asarray(probs, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] < 1:
        raise ValueError(f"probs must have shape (n, k) with k >= 1, got {array.shape}")
    if array.shape[0] < splits:
        raise ValueError(f"need at least splits={splits} rows of probs, got {array.shape[0]}")
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError("probs must be finite and non-negative")
    sums = array.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > 1e-4:
        raise ValueError(f"every row of probs must sum to 1; row {worst} sums to {sums[worst]}")
    scores = []
    for chunk in np.array_split(array, splits):
        marginal = chunk.mean(axis=0, keepdims=True)
        kl = scipy.special.rel_entr(chunk, marginal).sum(axis=1)
        scores.append(math.exp(float(kl.mean())))
    return float(np.mean(scores)), float(np.std(scores))


def _shuffled_inception_score(probs: np.ndarray, splits: int, seed: int) -> tuple[float, float]:
    """Inception Score over chunks of a seeded random order of the rows."""
    _check_int("splits", splits, minimum=1)
    order = np.random.default_rng(seed).permutation(len(probs))
    return inception_score_from_probabilities(probs[order], splits)


# -- networks --------------------------------------------------------------------------


def _mlp(widths: Sequence[int], generator: torch.Generator) -> nn.Sequential:
    """Linear layers with ReLU between them, initialised from ``generator``."""
    layers: list[nn.Module] = []
    for index, (width_in, width_out) in enumerate(itertools.pairwise(widths)):
        # skip_init: nn.Linear's own initialisation would draw from the global generator.
        layer = torch.nn.utils.skip_init(nn.Linear, width_in, width_out)
        # PyTorch's default initialisation, drawn from ``generator``.
        nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
        bound = 1.0 / math.sqrt(width_in)
        nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
        layers.append(layer)
        if index < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class _Autoencoder(nn.Module):
    """Pixels in [0, 1] -> code of ``latent_dim`` -> pixels (sigmoid output)."""

    def __init__(
        self, n_pixels: int, hidden: Sequence[int], latent_dim: int, generator: torch.Generator
    ) -> None:
        super().__init__()
        self.encoder = _mlp([n_pixels, *hidden, latent_dim], generator)
        self.decoder = _mlp([latent_dim, *reversed(hidden), n_pixels], generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.decoder(self.encoder(x)))


@contextmanager
def _single_thread() -> Iterator[None]:
    """One intra-op thread, so results do not depend on the machine's core count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _train(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: nn.Module,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
) -> None:
    """Adam on shuffled mini-batches; the order comes from ``generator``."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    n_rows = inputs.shape[0]
    for _ in range(epochs):
        order = torch.randperm(n_rows, generator=generator)
        for start in range(0, n_rows, batch_size):
            batch = order[start : start + batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(inputs[batch]), targets[batch])
            loss.backward()
            optimizer.step()
    model.eval()


def _fit_autoencoder(pixels: torch.Tensor, config: ImageMetricsConfig, seed: int) -> _Autoencoder:
    """Autoencoder trained to reconstruct ``pixels`` (in [0, 1]) under the MSE."""
    generator = torch.Generator().manual_seed(seed)
    model = _Autoencoder(pixels.shape[1], config.autoencoder_hidden, config.latent_dim, generator)
    _train(
        model,
        pixels,
        pixels,
        nn.MSELoss(),
        epochs=config.autoencoder_epochs,
        batch_size=config.batch_size,
        lr=config.lr,
        generator=generator,
    )
    return model


def _fit_classifier(
    pixels: torch.Tensor,
    targets: torch.Tensor,
    n_classes: int,
    config: ImageMetricsConfig,
    seed: int,
) -> nn.Sequential:
    """MLP classifier (logits) trained on ``pixels -> targets`` under the cross-entropy."""
    generator = torch.Generator().manual_seed(seed)
    model = _mlp([pixels.shape[1], *config.classifier_hidden, n_classes], generator)
    _train(
        model,
        pixels,
        targets,
        nn.CrossEntropyLoss(),
        epochs=config.classifier_epochs,
        batch_size=config.batch_size,
        lr=config.lr,
        generator=generator,
    )
    return model


def _batched(module: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """``module(inputs)`` in eval mode without autograd, in slices to bound memory."""
    with eval_mode(module):
        pieces = [
            module(inputs[start : start + _INFERENCE_BATCH])
            for start in range(0, inputs.shape[0], _INFERENCE_BATCH)
        ]
    return torch.cat(pieces) if pieces else inputs.new_zeros((0,))


# -- the evaluator ---------------------------------------------------------------------


class ImageEvaluator:
    """Frechet distance on autoencoder features and Inception Score with an MLP classifier.

    Build it with :meth:`fit`; the constructor is internal.

    Notes
    -----
    Pixels are mapped to [0, 1] with the real table's overall minimum and maximum
    (0 and 255 for ``mnist_5k``; -1 and 1 for a table already scaled for tanh outputs),
    so synthetic tables must be on the real table's pixel scale. Synthetic MNIST tables
    decoded by :class:`~flwr_vflgan.data.encoder.TabularEncoder` are: integer pixels
    in 0..255 and a ``label`` column, which the metrics ignore.
    """

    def __init__(
        self,
        *,
        config: ImageMetricsConfig,
        pixel_columns: tuple[str, ...],
        pixel_range: tuple[float, float],
        classes: tuple[object, ...],
        autoencoder: _Autoencoder,
        classifier: nn.Sequential,
        real_stats: GaussianStats,
        real_inception_score: float,
        classifier_accuracy: float,
        autoencoder_mse: float,
    ) -> None:
        self.config = config
        self.pixel_columns = pixel_columns
        self.pixel_range = pixel_range
        self.classes = classes
        self._autoencoder = autoencoder
        self._classifier = classifier
        self.real_stats = real_stats
        self.real_inception_score = real_inception_score
        self.classifier_accuracy = classifier_accuracy
        self.autoencoder_mse = autoencoder_mse

    def __repr__(self) -> str:
        return (
            f"ImageEvaluator(pixels={len(self.pixel_columns)}, classes={len(self.classes)}, "
            f"classifier_accuracy={self.classifier_accuracy:.3f}, "
            f"autoencoder_mse={self.autoencoder_mse:.4f})"
        )

    @classmethod
    def fit(
        cls,
        real: pd.DataFrame,
        *,
        pixel_columns: Sequence[str],
        label: str,
        config: ImageMetricsConfig = ImageMetricsConfig(),
    ) -> ImageEvaluator:
        """Train the autoencoder and the classifier on the real images.

        Parameters
        ----------
        real
            Real images, one per row, with the pixel columns and the label column.
        pixel_columns
            The pixel columns in image order (row-major), for example ``pixel_0`` ...
            ``pixel_783``.
        label
            The class column (the digit); any hashable values, at least two classes.
        config
            Network sizes, training schedule and seed.

        Returns
        -------
        ImageEvaluator
            Fitted evaluator holding the real latent statistics.

        Raises
        ------
        TypeError
            If ``real`` is not a DataFrame or ``config`` not an :class:`ImageMetricsConfig`.
        ValueError
            If columns are missing, pixels are non-numeric, non-finite or constant, labels
            are missing or of a single class, or there are fewer than 20 rows.

        Notes
        -----
        A random ``holdout_fraction`` of the rows (seeded) is kept out of training and
        gives :attr:`classifier_accuracy` and :attr:`autoencoder_mse` (mean squared
        error per pixel on the [0, 1] scale). The real feature statistics and
        :attr:`real_inception_score` use all rows. Training is deterministic: one CPU
        thread, weights and batch order drawn from ``torch.Generator`` seeded by
        ``config.seed``; the global random state is not touched.
        """
        if not isinstance(config, ImageMetricsConfig):
            raise TypeError(f"config must be an ImageMetricsConfig, got {type(config).__name__}")
        columns, raw, codes, classes, low, high = _real_table(real, pixel_columns, label)

        pixels = torch.from_numpy((raw - low) / (high - low)).float()
        targets = torch.from_numpy(codes)
        n_rows = len(pixels)
        holdout, train, autoencoder_seed, classifier_seed = _holdout_and_seeds(n_rows, config)

        with _single_thread():
            autoencoder = _fit_autoencoder(pixels[train], config, autoencoder_seed)
            classifier = _fit_classifier(
                pixels[train], targets[train], len(classes), config, classifier_seed
            )
            reconstruction = _batched(autoencoder, pixels[holdout])
            mse = float(torch.mean((reconstruction - pixels[holdout]) ** 2))
            logits = _batched(classifier, pixels)
            accuracy = float((logits[holdout].argmax(dim=1) == targets[holdout]).float().mean())
            latent = _batched(autoencoder.encoder, pixels)
        real_is, _ = _shuffled_inception_score(
            torch.softmax(logits.double(), dim=1).numpy(), min(10, n_rows), config.seed
        )
        logger.info(
            "image evaluator fitted on %d images: classifier accuracy %.3f, autoencoder "
            "MSE %.4f, real IS %.3f",
            n_rows,
            accuracy,
            mse,
            real_is,
        )
        return cls(
            config=config,
            pixel_columns=columns,
            pixel_range=(low, high),
            classes=classes,
            autoencoder=autoencoder,
            classifier=classifier,
            real_stats=GaussianStats.of(latent.double().numpy()),
            real_inception_score=real_is,
            classifier_accuracy=accuracy,
            autoencoder_mse=mse,
        )

    # -- scoring -----------------------------------------------------------------------

    def _scaled(self, synthetic: pd.DataFrame) -> torch.Tensor:
        """Synthetic pixels, checked and mapped to [0, 1] with the real scale."""
        raw = _pixel_matrix(synthetic, self.pixel_columns, "synthetic")
        low, high = self.pixel_range
        margin = self.config.range_margin * (high - low)
        found_low, found_high = float(raw.min()), float(raw.max())
        if found_low < low - margin or found_high > high + margin:
            raise MetricInputError(
                f"synthetic pixels lie in [{found_low:g}, {found_high:g}] but the real pixels "
                f"in [{low:g}, {high:g}] (margin {margin:g}): give the synthetic table on the "
                "real table's pixel scale"
            )
        return torch.from_numpy((raw - low) / (high - low)).float()

    def latent_features(self, synthetic: pd.DataFrame) -> np.ndarray:
        """Autoencoder codes of the table's images, shape ``(n, latent_dim)``."""
        pixels = self._scaled(synthetic)
        with _single_thread():
            return _batched(self._autoencoder.encoder, pixels).double().numpy()

    def class_probabilities(self, synthetic: pd.DataFrame) -> np.ndarray:
        """Classifier's ``p(y | x)`` for the table's images, columns in :attr:`classes` order."""
        pixels = self._scaled(synthetic)
        with _single_thread():
            logits = _batched(self._classifier, pixels)
        return torch.softmax(logits.double(), dim=1).numpy()

    def frechet(self, synthetic: pd.DataFrame) -> float:
        """Frechet distance (eq. 23) between real and synthetic autoencoder features.

        Parameters
        ----------
        synthetic
            Images on the real table's pixel scale, with every pixel column (other
            columns, such as the label, are ignored); at least 2 rows.

        Returns
        -------
        float
            The distance; 0 for the real table itself, larger is worse.

        Raises
        ------
        ValueError
            If pixel columns are missing, the table is empty or has 1 row, or pixels are
            non-numeric, non-finite or off the real pixel scale.

        Notes
        -----
        Like FID, the estimate is biased upwards for small tables: compare scores of
        tables with the same number of rows.
        """
        return frechet_distance(self.real_stats, self.latent_features(synthetic))

    def inception_score(self, synthetic: pd.DataFrame, splits: int = 10) -> tuple[float, float]:
        """Inception Score (eq. 24) of the synthetic images under the MLP classifier.

        Parameters
        ----------
        synthetic
            Images as for :meth:`frechet`; at least ``splits`` rows.
        splits
            Chunks scored apart, as in :func:`inception_score_from_probabilities`,
            after a shuffle of the images seeded by ``config.seed``.

        Returns
        -------
        tuple[float, float]
            Mean and standard deviation over the chunks; between 1 and the number of
            classes, higher is better; :attr:`real_inception_score` is the ceiling.

        Raises
        ------
        ValueError
            As for :meth:`frechet`, or if there are fewer rows than ``splits``.

        Notes
        -----
        The shuffle matters for tables sorted by class (``mnist_5k`` is): chunks of a
        single digit would each have a one-hot ``p(y)`` and score near 1.
        """
        return _shuffled_inception_score(
            self.class_probabilities(synthetic), splits, self.config.seed
        )

    def metrics(self, synthetic: pd.DataFrame) -> dict[str, float]:
        """All image metrics of one synthetic table.

        Returns
        -------
        dict[str, float]
            ``image_fd``, ``inception_score``, ``inception_score_std`` (10 splits, fewer
            if the table has fewer than 10 rows), and the references
            ``real_inception_score``, ``classifier_accuracy`` and ``autoencoder_mse``.

        Raises
        ------
        ValueError
            As for :meth:`frechet`.
        """
        fd = self.frechet(synthetic)
        score, score_std = self.inception_score(synthetic, splits=min(10, len(synthetic)))
        return {
            "image_fd": fd,
            "inception_score": score,
            "inception_score_std": score_std,
            "real_inception_score": self.real_inception_score,
            "classifier_accuracy": self.classifier_accuracy,
            "autoencoder_mse": self.autoencoder_mse,
        }


def _real_table(
    real: pd.DataFrame, pixel_columns: Sequence[str], label: str
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, tuple[object, ...], float, float]:
    """Checked real pixels and labels: (columns, raw pixels, class codes, classes, low, high)."""
    columns = _check_pixel_columns(pixel_columns)
    raw = _pixel_matrix(real, columns, "real")
    if len(real) < _MIN_REAL_ROWS:
        raise MetricInputError(
            f"the real table needs at least {_MIN_REAL_ROWS} rows, got {len(real)}"
        )
    codes, classes = _label_codes(real, label)
    low, high = float(raw.min()), float(raw.max())
    if not high > low:
        raise ValueError(f"every real pixel has the same value {low}; cannot scale pixels")
    return columns, raw, codes, classes, low, high


def _holdout_and_seeds(
    n_rows: int, config: ImageMetricsConfig
) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Seeded held-out and training rows, and the autoencoder's and classifier's seeds."""
    n_holdout = max(1, round(config.holdout_fraction * n_rows))
    # Independent streams, so the autoencoder's schedule does not move the classifier.
    split_seed, autoencoder_seed, classifier_seed = (
        int(s.generate_state(1)[0]) for s in np.random.SeedSequence(config.seed).spawn(3)
    )
    order = np.random.default_rng(split_seed).permutation(n_rows)
    holdout, train = torch.from_numpy(order[:n_holdout]), torch.from_numpy(order[n_holdout:])
    return holdout, train, autoencoder_seed, classifier_seed


def _label_codes(real: pd.DataFrame, label: str) -> tuple[np.ndarray, tuple[object, ...]]:
    """Class indices (int64) of the real rows and the sorted classes."""
    if label not in real.columns:
        raise MetricInputError(f"label column {label!r} is not in the real table")
    n_missing = int(real[label].isna().sum())
    if n_missing:
        raise MetricInputError(f"label column {label!r} has {n_missing} missing values")
    codes, uniques = pd.factorize(real[label], sort=True)
    if len(uniques) < 2:
        raise MetricInputError(
            f"label column {label!r} needs at least 2 classes, got {len(uniques)}"
        )
    return codes.astype(np.int64), tuple(uniques.tolist())


def _check_pixel_columns(pixel_columns: Sequence[str]) -> tuple[str, ...]:
    if isinstance(pixel_columns, str) or not isinstance(pixel_columns, Sequence):
        raise TypeError(f"pixel_columns must be a sequence of column names, got {pixel_columns!r}")
    columns = tuple(pixel_columns)
    if not columns:
        raise MetricInputError("pixel_columns is empty")
    if len(set(columns)) != len(columns):
        duplicated = sorted({c for c in columns if columns.count(c) > 1})
        raise MetricInputError(f"pixel_columns has duplicates: {duplicated}")
    return columns


def _pixel_matrix(table: pd.DataFrame, columns: tuple[str, ...], role: str) -> np.ndarray:
    """The pixel columns of ``table`` as a float64 matrix, with clear errors."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"the {role} table must be a pandas DataFrame, got {type(table).__name__}")
    if len(table) == 0:
        raise MetricInputError(f"the {role} table is empty")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        shown = ", ".join(repr(c) for c in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise MetricInputError(
            f"the {role} table lacks {len(missing)} of {len(columns)} pixel columns: {shown}{more}"
        )
    block = table.loc[:, list(columns)]
    non_numeric = [c for c in columns if not pd.api.types.is_numeric_dtype(block[c].dtype)]
    if non_numeric:
        raise MetricInputError(
            f"the {role} table has non-numeric pixel columns: {non_numeric[:10]}"
        )
    matrix = block.to_numpy(dtype=np.float64)
    if not np.isfinite(matrix).all():
        raise MetricInputError(
            f"the {role} table has {int((~np.isfinite(matrix)).sum())} missing or infinite pixels"
        )
    return matrix


# -- figures ---------------------------------------------------------------------------


def image_grid(
    pixels: np.ndarray,
    image_shape: tuple[int, int] = (28, 28),
    n: int = 64,
    columns: int = 8,
    *,
    value_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """Tile the first ``n`` images into one 2-D array for a figure.

    Parameters
    ----------
    pixels
        Images as rows, shape ``(N, height * width)`` (row-major pixels), or
        ``(N, height, width)``.
    image_shape
        ``(height, width)`` of one image.
    n
        How many images to show (fewer if ``N < n``).
    columns
        Images per grid row.
    value_range
        The pixels' scale, mapped to [0, 1] (for example ``(0, 255)``); by default the
        shown images' own minimum and maximum. Values outside are clipped.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(ceil(k / columns) * height, columns * width)`` with
        ``k = min(n, N)``, values in [0, 1]; cells without an image are 0.

    Raises
    ------
    ValueError
        If shapes do not match, ``n`` or ``columns`` is below 1, there are no images,
        values are non-finite, or ``value_range`` is not increasing.
    """
    _check_int("n", n, minimum=1)
    _check_int("columns", columns, minimum=1)
    height, width = image_shape
    _check_int("image height", height, minimum=1)
    _check_int("image width", width, minimum=1)
    array = np.asarray(pixels, dtype=np.float64)
    if array.ndim == 3 and array.shape[1:] == (height, width):
        array = array.reshape(array.shape[0], height * width)
    if array.ndim != 2 or array.shape[1] != height * width:
        raise ValueError(
            f"pixels must have shape (N, {height * width}) or (N, {height}, {width}) for "
            f"image_shape {image_shape}, got {array.shape}"
        )
    if array.shape[0] == 0:
        raise ValueError("pixels holds no images")
    shown = array[:n]
    if not np.isfinite(shown).all():
        raise ValueError("pixels has missing or infinite values")
    low, high = value_range if value_range is not None else (shown.min(), shown.max())
    if value_range is not None and not high > low:
        raise ValueError(f"value_range must be increasing, got {value_range}")
    scaled = np.clip((shown - low) / (high - low), 0.0, 1.0) if high > low else np.zeros_like(shown)
    n_rows = math.ceil(len(scaled) / columns)
    grid = np.zeros((n_rows * height, columns * width))
    for index, image in enumerate(scaled):
        row, column = divmod(index, columns)
        grid[row * height : (row + 1) * height, column * width : (column + 1) * width] = (
            image.reshape(height, width)
        )
    return grid
