"""Evaluation metrics of vertically partitioned time series (VFLGAN-TS, paper 003).

Paper 003 (arXiv 2409.03612) follows TimeGAN's evaluation protocol (Yoon et al., 2019):

* :func:`discriminative_score`: a post-hoc classifier tells real from synthetic series;
  ``|test accuracy - 0.5|`` (0 = indistinguishable, 0.5 = perfectly separable).
* :func:`predictive_score`: train on synthetic, test on real; a model trained on the
  synthetic series predicts the next step of the last channel from the other channels,
  scored by its mean absolute error on the real series.

and adds checks of its own:

* :func:`amplitude_correlation`: paper 003's six-attribute sine data gives every channel
  of a sample one shared amplitude; a generator that learns the correlation across
  parties reproduces it (~1), one that ignores it does not (~0).
* :func:`channel_distances`: per channel, the Wasserstein-1 distance of the pooled values
  and the difference of the mean autocorrelation functions.

:func:`series_report` gathers them all in one flat dictionary. Series are arrays of shape
``(n_series, n_channels, length)``; parties hold disjoint groups of channels, given as
``parties`` (the channel indices of each party). Every random choice comes from an
explicit ``seed``: the same inputs and seed give the same scores, and neither numpy's nor
torch's global random state is changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

__all__ = [
    "amplitude_correlation",
    "channel_distances",
    "discriminative_score",
    "fit_amplitudes",
    "predictive_score",
    "series_report",
]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_REFINE_STEPS = 32
"""Golden-section steps refining a row's frequency (to ~1e-7 of a bin)."""
_RIDGE = 1e-12
"""Relative ridge of the 3x3 least-squares systems (keeps ``sin(pi t) = 0`` solvable)."""
_CONSTANT_SPREAD = 1e-6
"""A channel's amplitudes count as constant when their standard deviation is at most this
share of their mean magnitude (the fit itself is accurate to ~1e-8)."""
_MAX_LAG = 50
_TEST_SHARE = 0.2
_HIDDEN = 16


# --------------------------------------------------------------------------- validation


def _as_array(
    values: np.ndarray, name: str, *, ndim: int, min_length: int, min_rows: int = 2
) -> np.ndarray:
    """``values`` as a finite float64 array of ``ndim`` dimensions, at least ``min_rows``
    rows (series) and ``min_length`` steps."""
    if not isinstance(values, np.ndarray):
        raise ValueError(f"{name} must be a numpy array, got {type(values).__name__}")
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.number):
        raise ValueError(f"{name} must hold real numbers, got dtype {values.dtype}")
    if np.iscomplexobj(values):
        raise ValueError(f"{name} must hold real numbers, got dtype {values.dtype}")
    if values.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {values.shape}")
    if values.shape[0] < min_rows:
        raise ValueError(f"{name} must hold at least {min_rows} series, got {values.shape[0]}")
    if values.shape[-1] < min_length:
        raise ValueError(
            f"{name} must have at least {min_length} time steps, got {values.shape[-1]}"
        )
    if ndim == 3 and values.shape[1] < 1:
        raise ValueError(f"{name} must have at least 1 channel, got shape {values.shape}")
    out = values.astype(np.float64, copy=False)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} must be finite, got {int((~np.isfinite(out)).sum())} NaN/inf")
    return out


def _check_pair(
    real: np.ndarray, synthetic: np.ndarray, *, min_length: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays validated as series, with the same channel count and length."""
    real = _as_array(real, "real", ndim=3, min_length=min_length)
    synthetic = _as_array(synthetic, "synthetic", ndim=3, min_length=min_length)
    if real.shape[1:] != synthetic.shape[1:]:
        raise ValueError(
            "real and synthetic must have the same (channels, length), got "
            f"{real.shape[1:]} and {synthetic.shape[1:]}"
        )
    return real, synthetic


def _is_sequence(value: object) -> bool:
    """A list-like of items (a sequence or a 1-D array), not a string."""
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _check_parties(parties: Sequence[Sequence[int]], n_channels: int) -> list[list[int]]:
    """``parties`` as lists of channel indices that partition ``range(n_channels)``."""
    if not _is_sequence(parties) or len(parties) == 0:
        raise ValueError(f"parties must be a non-empty sequence of channel lists, got {parties!r}")
    owner: dict[int, int] = {}
    groups: list[list[int]] = []
    for p, group in enumerate(parties):
        if not _is_sequence(group) or len(group) == 0:
            raise ValueError(
                f"parties[{p}] must be a non-empty sequence of channels, got {group!r}"
            )
        groups.append([])
        for channel in group:
            if isinstance(channel, bool) or not isinstance(channel, int | np.integer):
                raise ValueError(f"parties[{p}] holds channel {channel!r}, which is not an int")
            if not 0 <= channel < n_channels:
                raise ValueError(
                    f"parties[{p}] holds channel {channel}, outside range(0, {n_channels})"
                )
            if int(channel) in owner:
                raise ValueError(
                    f"channel {channel} is held by parties[{owner[int(channel)]}] and "
                    f"parties[{p}]: every channel must be held exactly once"
                )
            owner[int(channel)] = p
            groups[-1].append(int(channel))
    missing = sorted(set(range(n_channels)) - set(owner))
    if missing:
        raise ValueError(f"parties must hold every channel once; channel {missing[0]} is missing")
    return groups


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def _check_training(epochs: int, batch_size: int, learning_rate: float) -> None:
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be finite and > 0, got {learning_rate}")


def _seeds(seed: int, count: int) -> list[int]:
    """``count`` independent seeds derived from ``seed``."""
    return [int(word) for word in np.random.SeedSequence(int(seed)).generate_state(count)]


# --------------------------------------------------------------------------- amplitudes


def _dirichlet(theta: np.ndarray, length: int) -> np.ndarray:
    """``sum_t cos(theta t)`` over the centred steps ``t = j - (length - 1) / 2``."""
    half = theta / 2.0
    near_zero = np.abs(np.sin(half)) < 1e-6  # the ratio's removable singularities
    ratio = np.sin(length * half) / np.where(near_zero, 1.0, np.sin(half))
    limit = length * np.cos(length * half) / np.cos(half)
    return np.where(near_zero, limit, ratio)


def _fourier_sums(blocks: np.ndarray, omega: np.ndarray, length: int) -> np.ndarray:
    """``sum_t y_t exp(i omega t)`` of every row over the centred steps.

    ``blocks`` is the zero-padded rows reshaped to ``(n, q, b)``; the step ``j = b q + r``
    factors ``exp(i omega j)`` into ``exp(i omega b q) exp(i omega r)``, so only
    ``n (q + b)`` exponentials are computed and the rest is one batched product.
    """
    width = blocks.shape[2]
    inner_phase = omega[:, None] * np.arange(width)
    inner = blocks @ np.stack([np.cos(inner_phase), np.sin(inner_phase)], axis=2)
    outer = np.exp(1j * omega[:, None] * (width * np.arange(blocks.shape[1])))
    total = (outer * (inner[:, :, 0] + 1j * inner[:, :, 1])).sum(axis=1)
    return total * np.exp(-0.5j * (length - 1) * omega)


def _sinusoid_fit(
    blocks: np.ndarray, totals: np.ndarray, bins: np.ndarray, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares fit of ``a sin(w t) + b cos(w t) + c`` to every row.

    ``bins`` holds each row's frequency in FFT bins (``w = 2 pi bins / length``) and
    ``totals`` each row's sum. Over the centred steps ``sum sin = sum sin cos = 0`` and
    the other entries of the normal equations have closed forms (Dirichlet kernels), so
    the 3x3 system splits into ``a`` alone and a 2x2 system for ``(b, c)``. Returns the
    explained sum of squares (``beta . X'y``, maximal where the residual is minimal) and
    the amplitude ``sqrt(a^2 + b^2)`` of every row.
    """
    omega = (2.0 * np.pi / length) * bins
    sums = _fourier_sums(blocks, omega, length)
    ys, yc = sums.imag, sums.real
    ridge = _RIDGE * length
    kernel, kernel2 = _dirichlet(omega, length), _dirichlet(2.0 * omega, length)
    ss, cc, ones = (
        (length - kernel2) / 2.0 + ridge,
        (length + kernel2) / 2.0 + ridge,
        length + ridge,
    )
    a = ys / ss
    det = cc * ones - kernel**2
    b = (ones * yc - kernel * totals) / det
    c = (cc * totals - kernel * yc) / det
    return a * ys + b * yc + c * totals, np.hypot(a, b)


def _refine_bins(
    blocks: np.ndarray, totals: np.ndarray, peak: np.ndarray, length: int
) -> np.ndarray:
    """Best frequency of each row: a grid over a bin either side of ``peak``, then a
    golden-section search within a quarter bin of the grid's best point."""

    def explained(bins: np.ndarray) -> np.ndarray:
        return _sinusoid_fit(blocks, totals, bins, length)[0]

    nyquist = length / 2.0
    grid = np.clip(peak[:, None] + np.linspace(-1.0, 1.0, 9), 0.5, nyquist)
    scores = np.stack([explained(grid[:, k]) for k in range(grid.shape[1])], axis=1)
    best = grid[np.arange(grid.shape[0]), np.argmax(scores, axis=1)]
    lo, hi = np.clip(best - 0.25, 0.5, nyquist), np.clip(best + 0.25, 0.5, nyquist)
    x1, x2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    f1, f2 = explained(x1), explained(x2)
    for _ in range(_REFINE_STEPS):
        left = f1 >= f2  # the maximum lies in [lo, x2]
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        new = np.where(left, hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo))
        f_new = explained(new)
        x2, f2, x1, f1 = (
            np.where(left, x1, new),
            np.where(left, f1, f_new),
            np.where(left, new, x2),
            np.where(left, f_new, f2),
        )
    return (lo + hi) / 2.0


def fit_amplitudes(series: np.ndarray) -> np.ndarray:
    """Amplitude of the best-fitting sinusoid of every row.

    Parameters
    ----------
    series
        Array of shape ``(n, length)``: ``n >= 1`` rows of ``length >= 4`` finite values.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``: ``sqrt(a^2 + b^2)`` of the least-squares fit of
        ``a sin(w t) + b cos(w t) + c`` to each row; 0 for a constant row.

    Raises
    ------
    ValueError
        If ``series`` is not a finite, real 2-D array with at least 1 row and 4 steps.

    Notes
    -----
    ``w`` starts at the row's dominant non-zero FFT frequency (the largest ``|rfft|`` of
    the de-meaned row, the zero bin excluded) and is refined by a golden-section search
    of the least-squares residual within half a bin of it, so a frequency between two
    bins is fitted as well as one on a bin. At each candidate ``w`` the fit is an exact
    linear least-squares solve (a 3x3 system per row, all rows at once), so 2,048 rows
    of 800 steps take a fraction of a second.
    """
    y = _as_array(series, "series", ndim=2, min_length=4, min_rows=1)
    n, length = y.shape
    y = y - y.mean(axis=1, keepdims=True)
    peak = 1.0 + np.argmax(np.abs(np.fft.rfft(y, axis=1))[:, 1:], axis=1)
    width = math.isqrt(length - 1) + 1
    blocks = np.zeros((n, -(-length // width) * width))
    blocks[:, :length] = y
    blocks = blocks.reshape(n, -1, width)
    totals = y.sum(axis=1)
    bins = _refine_bins(blocks, totals, peak, length)
    amplitude = _sinusoid_fit(blocks, totals, bins, length)[1]
    constant = np.ptp(series, axis=1) == 0
    amplitude[constant] = 0.0
    return amplitude


def _correlations(values: np.ndarray) -> np.ndarray:
    """Pearson correlations of the columns of ``values``; 0 for a constant column."""
    centred = values - values.mean(axis=0)
    spread = centred.std(axis=0)
    constant = spread <= _CONSTANT_SPREAD * np.abs(values).mean(axis=0)
    scaled = centred / np.where(constant, 1.0, spread)
    corr = (scaled.T @ scaled) / values.shape[0]
    corr[constant, :] = 0.0
    corr[:, constant] = 0.0
    return np.clip(corr, -1.0, 1.0)


def amplitude_correlation(series: np.ndarray, parties: Sequence[Sequence[int]]) -> dict[str, float]:
    """Mean correlation of the channels' fitted amplitudes, across and within parties.

    Parameters
    ----------
    series
        Array of shape ``(n_series, n_channels, length)``, ``n_series >= 2``,
        ``length >= 4``, finite.
    parties
        The channel indices of each party; together they must hold every channel of
        ``series`` exactly once, and no party may be empty.

    Returns
    -------
    dict of str to float
        ``"cross_party"``: the mean Pearson correlation (over samples) of the amplitudes
        of channels ``i`` and ``j``, over all pairs held by different parties (NaN with a
        single party); ``"within_party"``: the same over the pairs held by one party (NaN
        if no party holds two channels).

    Raises
    ------
    ValueError
        If ``series`` is not a valid 3-D array or ``parties`` does not partition its
        channels (the message names the offending channel).

    Notes
    -----
    Amplitudes come from :func:`fit_amplitudes`, one per sample and channel. A channel
    whose amplitudes are constant (standard deviation at most ``1e-6`` of their mean
    magnitude: a constant channel, or a sinusoid of the same amplitude in every sample) gives
    correlation 0, not NaN, with every other channel. On paper 003's six-attribute sine
    data every channel of a sample shares one amplitude, so real data gives ~1; a
    generator that draws each party's channels independently gives ~0.
    """
    values = _as_array(series, "series", ndim=3, min_length=4)
    groups = _check_parties(parties, values.shape[1])
    n, channels, length = values.shape
    amplitudes = fit_amplitudes(values.reshape(n * channels, length)).reshape(n, channels)
    corr = _correlations(amplitudes)
    owner = np.empty(channels, dtype=int)
    for p, group in enumerate(groups):
        owner[group] = p
    upper = np.triu(np.ones((channels, channels), dtype=bool), k=1)
    same = owner[:, None] == owner[None, :]
    cross, within = corr[upper & ~same], corr[upper & same]
    return {
        "cross_party": float(cross.mean()) if cross.size else math.nan,
        "within_party": float(within.mean()) if within.size else math.nan,
    }


# --------------------------------------------------------------------------- training


def _standardiser(train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and std (1 where 0) of ``train``, shaped to broadcast on it."""
    mean = train.mean(axis=(0, 2), keepdims=True)
    std = train.std(axis=(0, 2), keepdims=True)
    return mean, np.where(std > 0, std, 1.0)


def _tensor(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))


def _build(factory: type[nn.Module], seed: int, *args: int) -> nn.Module:
    """``factory(*args)`` initialised from ``seed`` without changing torch's global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory(*args)


def _fit(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss: nn.Module,
    *,
    seed: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
) -> None:
    """Adam on ``loss(model(inputs), targets)``, batches shuffled from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(inputs.shape[0], generator=generator)
        for start in range(0, inputs.shape[0], batch_size):
            batch = order[start : start + batch_size]
            optimiser.zero_grad()
            loss(model(inputs[batch]), targets[batch]).backward()
            optimiser.step()
    model.eval()


# --------------------------------------------------------------------------- discriminative


class _MeanMaxPool(nn.Module):
    """Global mean and max over time, concatenated: ``(n, c, t) -> (n, 2c)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.mean(dim=2), x.amax(dim=2)], dim=1)


class _Discriminator(nn.Sequential):
    """Small strided 1-D CNN giving one logit per series."""

    def __init__(self, channels: int) -> None:
        super().__init__(
            nn.Conv1d(channels, _HIDDEN, kernel_size=9, stride=4, padding=4),
            nn.LeakyReLU(0.2),
            nn.Conv1d(_HIDDEN, _HIDDEN, kernel_size=9, stride=4, padding=4),
            nn.LeakyReLU(0.2),
            _MeanMaxPool(),
            nn.Linear(2 * _HIDDEN, 1),
        )


def _balanced_split(
    real: np.ndarray, synthetic: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Equal numbers of real (label 1) and synthetic (label 0) series, each split 80/20.

    Returns ``(x_train, y_train, x_test, y_test)``.
    """
    count = min(real.shape[0], synthetic.shape[0])
    n_test = max(1, round(_TEST_SHARE * count))
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for values, label in ((real, 1.0), (synthetic, 0.0)):
        rows = values[rng.choice(values.shape[0], size=count, replace=False)]
        parts.append((rows, np.full(count, label)))
    x_train = np.concatenate([rows[n_test:] for rows, _ in parts])
    y_train = np.concatenate([labels[n_test:] for _, labels in parts])
    x_test = np.concatenate([rows[:n_test] for rows, _ in parts])
    y_test = np.concatenate([labels[:n_test] for _, labels in parts])
    return x_train, y_train, x_test, y_test


def discriminative_score(
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    seed: int,
    epochs: int = 20,
    batch_size: int = 128,
    learning_rate: float = 1e-3,
) -> float:
    """TimeGAN's post-hoc discriminative score: ``|test accuracy - 0.5|``.

    Parameters
    ----------
    real, synthetic
        Arrays of shape ``(n, n_channels, length)``, each with at least 2 finite series
        and the same ``(n_channels, length)``.
    seed
        Non-negative int; the sample, the split, the initialisation and the batches all
        derive from it, so the same seed gives the same score.
    epochs, batch_size, learning_rate
        Training of the classifier (Adam, binary cross-entropy on logits).

    Returns
    -------
    float
        ``|accuracy - 0.5|`` on the held-out 20 %: 0 when the classifier cannot tell real
        from synthetic, 0.5 when it separates them perfectly.

    Raises
    ------
    ValueError
        If the arrays are invalid or differ in shape, ``seed`` is negative, or a training
        setting is out of range.
    TypeError
        If ``seed``, ``epochs`` or ``batch_size`` is not an int.

    Notes
    -----
    Real series are labelled 1 and synthetic 0; ``min(n_real, n_synthetic)`` of each are
    drawn without replacement (a numpy ``Generator`` seeded from ``seed``) and each class
    is split 80/20, so train and test sets are balanced. Inputs are standardised with
    the training split's per-channel mean and std.

    TimeGAN classifies with a GRU; over series of hundreds of steps a GRU is too slow on
    a CPU, so this uses a small 1-D CNN instead: ``Conv1d(channels -> 16, kernel 9,
    stride 4) + LeakyReLU(0.2)``, ``Conv1d(16 -> 16, kernel 9, stride 4) + LeakyReLU``,
    global mean and max pooling concatenated, ``Linear(32 -> 1)``. The initialisation is
    seeded inside ``torch.random.fork_rng`` and the batches come from a private
    ``torch.Generator``: the global random state is left unchanged.
    """
    real, synthetic = _check_pair(real, synthetic)
    _check_seed(seed)
    _check_training(epochs, batch_size, learning_rate)
    sample_seed, init_seed, batch_seed = _seeds(seed, 3)
    x_train, y_train, x_test, y_test = _balanced_split(
        real, synthetic, np.random.default_rng(sample_seed)
    )
    mean, std = _standardiser(x_train)
    model = _build(_Discriminator, init_seed, real.shape[1])
    _fit(
        model,
        _tensor((x_train - mean) / std),
        _tensor(y_train[:, None]),
        nn.BCEWithLogitsLoss(),
        seed=batch_seed,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
    )
    with torch.no_grad():
        logits = model(_tensor((x_test - mean) / std))[:, 0].numpy()
    accuracy = float(((logits > 0) == (y_test > 0.5)).mean())
    return abs(accuracy - 0.5)


# --------------------------------------------------------------------------- predictive


class _CausalPredictor(nn.Sequential):
    """Causal dilated 1-D CNN: output step ``t`` sees inputs at steps ``<= t`` only."""

    def __init__(self, channels: int) -> None:
        super().__init__(
            nn.ConstantPad1d((4, 0), 0.0),
            nn.Conv1d(channels, _HIDDEN, kernel_size=5),
            nn.LeakyReLU(0.2),
            nn.ConstantPad1d((16, 0), 0.0),
            nn.Conv1d(_HIDDEN, _HIDDEN, kernel_size=5, dilation=4),
            nn.LeakyReLU(0.2),
            nn.Conv1d(_HIDDEN, 1, kernel_size=1),
        )


def _next_step_pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TimeGAN's task: channels ``[:-1]`` at ``t = 0..T-2`` -> channel ``-1`` at ``1..T-1``."""
    return values[:, :-1, :-1], values[:, -1:, 1:]


def predictive_score(
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    seed: int,
    epochs: int = 20,
    batch_size: int = 128,
    learning_rate: float = 1e-3,
) -> float:
    """TimeGAN's predictive score: train on synthetic, test on real (mean absolute error).

    Parameters
    ----------
    real, synthetic
        Arrays of shape ``(n, n_channels, length)`` with ``n_channels >= 2``, at least 2
        finite series each and the same ``(n_channels, length)``.
    seed
        Non-negative int; initialisation and batches derive from it.
    epochs, batch_size, learning_rate
        Training of the predictor (Adam on the mean absolute error).

    Returns
    -------
    float
        The mean absolute error of the next-step predictions on every real series and
        step, in the real data's own units (not standardised): lower is better.

    Raises
    ------
    ValueError
        If the arrays are invalid, differ in shape or have fewer than 2 channels, ``seed``
        is negative, or a training setting is out of range.
    TypeError
        If ``seed``, ``epochs`` or ``batch_size`` is not an int.

    Notes
    -----
    As in TimeGAN, the model reads channels ``[:-1]`` at steps ``0..T-2`` and predicts
    the last channel at steps ``1..T-1``, i.e. output ``t`` is the prediction of the last
    channel at ``t + 1`` from the other channels up to ``t``. It is trained on all the
    synthetic series and evaluated on all the real ones.

    TimeGAN predicts with a GRU, too slow on a CPU over hundreds of steps; this uses a
    causal dilated CNN instead (``Conv1d(channels-1 -> 16, kernel 5)``, LeakyReLU(0.2),
    ``Conv1d(16 -> 16, kernel 5, dilation 4)``, LeakyReLU, ``Conv1d(16 -> 1, kernel 1)``,
    each convolution left-padded so output ``t`` sees inputs ``<= t``; a receptive field
    of 21 steps). Inputs and target are standardised with the synthetic series'
    per-channel mean and std (part of the model fitted on synthetic data), and the
    predictions are mapped back to the data's units before scoring on real series.
    """
    real, synthetic = _check_pair(real, synthetic)
    if real.shape[1] < 2:
        raise ValueError(
            f"predictive_score needs at least 2 channels (inputs and a target), got {real.shape[1]}"
        )
    _check_seed(seed)
    _check_training(epochs, batch_size, learning_rate)
    init_seed, batch_seed = _seeds(seed, 2)
    mean, std = _standardiser(synthetic)
    inputs, targets = _next_step_pairs((synthetic - mean) / std)
    model = _build(_CausalPredictor, init_seed, real.shape[1] - 1)
    _fit(
        model,
        _tensor(inputs),
        _tensor(targets),
        nn.L1Loss(),
        seed=batch_seed,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
    )
    real_inputs, real_targets = _next_step_pairs((real - mean) / std)
    with torch.no_grad():
        predicted = model(_tensor(real_inputs)).numpy().astype(np.float64)
    scale, centre = std[0, -1, 0], mean[0, -1, 0]
    return float(np.abs(predicted * scale + centre - (real_targets * scale + centre)).mean())


# --------------------------------------------------------------------------- distances


def _mean_autocorrelation(values: np.ndarray, lags: int) -> np.ndarray:
    """Mean over rows of the autocorrelation at lags ``1..lags`` (0 for a constant row)."""
    length = values.shape[1]
    centred = values - values.mean(axis=1, keepdims=True)
    size = 1 << (2 * length - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    autocov = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, : lags + 1]
    variance = autocov[:, :1]
    constant = np.ptp(values, axis=1) == 0
    acf = autocov[:, 1:] / np.where(constant[:, None], 1.0, variance)
    acf[constant] = 0.0
    return acf.mean(axis=0)


def channel_distances(real: np.ndarray, synthetic: np.ndarray) -> dict[str, list[float]]:
    """Per-channel distances between real and synthetic series.

    Parameters
    ----------
    real, synthetic
        Arrays of shape ``(n, n_channels, length)`` with ``length >= 2``, at least 2
        finite series each and the same ``(n_channels, length)``.

    Returns
    -------
    dict of str to list of float
        ``"wasserstein"``: per channel, the Wasserstein-1 distance between all real and
        all synthetic values of the channel (pooled over series and steps);
        ``"autocorrelation"``: per channel, the mean over lags ``1..min(50, length-1)``
        of ``|acf_real(lag) - acf_synthetic(lag)|``, where ``acf`` is the mean over series
        of each series' autocorrelation function.

    Raises
    ------
    ValueError
        If the arrays are invalid or differ in shape.

    Notes
    -----
    A series' autocorrelation at lag ``k`` is ``sum_t x_t x_{t+k} / sum_t x_t^2`` for the
    de-meaned series (the usual biased estimator); a constant series counts as 0 at
    every lag.
    """
    from scipy.stats import wasserstein_distance

    real, synthetic = _check_pair(real, synthetic)
    lags = min(_MAX_LAG, real.shape[2] - 1)
    wasserstein, autocorrelation = [], []
    for channel in range(real.shape[1]):
        a, b = real[:, channel, :], synthetic[:, channel, :]
        wasserstein.append(float(wasserstein_distance(a.ravel(), b.ravel())))
        difference = _mean_autocorrelation(a, lags) - _mean_autocorrelation(b, lags)
        autocorrelation.append(float(np.abs(difference).mean()))
    return {"wasserstein": wasserstein, "autocorrelation": autocorrelation}


def series_report(
    real: np.ndarray,
    synthetic: np.ndarray,
    parties: Sequence[Sequence[int]],
    *,
    seed: int,
    epochs: int = 20,
) -> dict[str, float | list[float]]:
    """All the series metrics of this module in one flat dictionary.

    Parameters
    ----------
    real, synthetic
        Arrays of shape ``(n, n_channels, length)`` with ``length >= 4``, at least 2
        finite series each and the same ``(n_channels, length)``.
    parties
        The channel indices of each party (a partition of the channels).
    seed
        Non-negative int seeding the discriminative and predictive models.
    epochs
        Training epochs of both models.

    Returns
    -------
    dict
        ``discriminative_score``, ``predictive_score`` (absent with fewer than 2
        channels), ``cross_party_amplitude_correlation`` and
        ``within_party_amplitude_correlation`` (of the synthetic series), the same of the
        real series (``real_cross_party_amplitude_correlation``,
        ``real_within_party_amplitude_correlation``),
        ``channel_wasserstein`` and ``channel_autocorrelation_difference`` (lists, one
        value per channel) and ``mean_channel_wasserstein``.

    Raises
    ------
    ValueError
        If any input is invalid (see the individual metrics).
    TypeError
        If ``seed`` or ``epochs`` is not an int.

    Notes
    -----
    The amplitude correlations describe the synthetic series: compare them with
    :func:`amplitude_correlation` of the real ones.
    """
    real, synthetic = _check_pair(real, synthetic, min_length=4)
    _check_parties(parties, real.shape[1])
    _check_seed(seed)
    correlation = amplitude_correlation(synthetic, parties)
    real_correlation = amplitude_correlation(real, parties)
    distances = channel_distances(real, synthetic)
    report: dict[str, float | list[float]] = {
        "discriminative_score": discriminative_score(real, synthetic, seed=seed, epochs=epochs)
    }
    if real.shape[1] >= 2:
        report["predictive_score"] = predictive_score(real, synthetic, seed=seed, epochs=epochs)
    report.update(
        {
            "cross_party_amplitude_correlation": correlation["cross_party"],
            "within_party_amplitude_correlation": correlation["within_party"],
            "real_cross_party_amplitude_correlation": real_correlation["cross_party"],
            "real_within_party_amplitude_correlation": real_correlation["within_party"],
            "channel_wasserstein": distances["wasserstein"],
            "channel_autocorrelation_difference": distances["autocorrelation"],
            "mean_channel_wasserstein": float(np.mean(distances["wasserstein"])),
        }
    )
    return report
