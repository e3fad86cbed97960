"""Tables of multivariate series split by channel across parties, and the sine datasets.

A :class:`SeriesTable` holds ``n`` series of ``C`` channels and ``T`` steps as one
``(n, C, T)`` array, the channel names, and which channels each party holds. A party's
block is its channels laid end to end, ``(n, C_i * T)`` float32, channel after channel:
the layout its generators write and its discriminators read.

The sine datasets are paper 003's (Appendix III) and its reference code's: channel ``j``
of series ``k`` is ``A_k sin(2 pi f_j t)``, ``t = 0 .. T-1``, with one amplitude ``A_k``
shared by every channel of the series. A generator that does not learn the parties'
cross-correlation gives channels whose amplitudes disagree, which
:func:`flwr_vflgan.series.metrics.amplitude_correlation` measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .domain import PublicDomain
from .schema import ColumnKind
from .ts_format import read_ts

SINE6_FREQUENCIES: tuple[float, ...] = (0.01, 0.005, 0.0075, 0.0125, 0.015, 0.0175)
"""Channel frequencies (cycles per step) of the six-attribute sine data, from the
reference code's evaluation script (``code_sine_6/eval_mae.py``); the two-attribute data
uses the first two."""

SINE_AMPLITUDES: tuple[tuple[float, float], ...] = ((0.4, 0.05), (0.6, 0.05))
"""``(mean, standard deviation)`` of the amplitude of each class: a series' amplitude is
drawn from one of these normal distributions with equal probability. The extracted text
of paper 003 lost these values (its formula is garbled); the reference names its file
``data_frame_sine_normal`` and plots amplitudes in [0, 1]. Our choice, documented in
docs/series.md and overridable."""


@dataclass(frozen=True)
class SeriesTable:
    """Series split by channel across parties.

    Parameters
    ----------
    values
        ``(n_series, n_channels, length)`` float32, finite.
    channels
        One name per channel.
    parties
        The channel indices each party holds: every channel exactly once, no empty party.
    labels
        Optional class of each series (the sine data's amplitude class); never trained on.
    """

    values: np.ndarray
    channels: tuple[str, ...]
    parties: tuple[tuple[int, ...], ...]
    labels: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.values.ndim != 3 or self.values.dtype != np.float32:
            raise ValueError(
                f"series values must be a float32 array (series, channels, length), got "
                f"{self.values.dtype} of shape {self.values.shape}"
            )
        n, c, t = self.values.shape
        if n < 2 or t < 2:
            raise ValueError(f"a series table needs at least 2 series of 2 steps, got {n} of {t}")
        if len(self.channels) != c or len(set(self.channels)) != c:
            raise ValueError(f"{c} channels need {c} distinct names, got {list(self.channels)}")
        if not np.isfinite(self.values).all():
            raise ValueError("series values contain NaN or infinite values")
        check_parties(self.parties, c)
        if self.labels is not None and len(self.labels) != n:
            raise ValueError(f"{len(self.labels)} labels for {n} series")

    @property
    def n_series(self) -> int:
        """Number of series (the rows every party holds)."""
        return int(self.values.shape[0])

    @property
    def length(self) -> int:
        """Steps per series."""
        return int(self.values.shape[2])

    def party_channels(self, party: int) -> int:
        """How many channels party ``party`` holds."""
        return len(self.parties[party])

    def party_block(self, party: int) -> np.ndarray:
        """Party ``party``'s channels end to end: ``(n_series, C_i * length)`` float32."""
        picked = self.values[:, list(self.parties[party]), :]
        return np.ascontiguousarray(picked.reshape(self.n_series, -1))


def check_parties(parties: Sequence[Sequence[int]], n_channels: int) -> None:
    """Raise ``ValueError`` unless ``parties`` partitions ``range(n_channels)``."""
    if len(parties) < 1 or any(len(p) == 0 for p in parties):
        raise ValueError(f"every party must hold at least one channel, got {parties!r}")
    seen: dict[int, int] = {}
    for index, held in enumerate(parties):
        for channel in held:
            if not 0 <= channel < n_channels:
                raise ValueError(
                    f"party {index} holds channel {channel}; channels are 0..{n_channels - 1}"
                )
            if channel in seen:
                raise ValueError(
                    f"channel {channel} is held by parties {seen[channel]} and {index}"
                )
            seen[channel] = index
    missing = sorted(set(range(n_channels)) - set(seen))
    if missing:
        raise ValueError(f"channels {missing} are held by no party")


def even_parties(n_channels: int, n_parties: int) -> tuple[tuple[int, ...], ...]:
    """Channels ``0 .. n_channels - 1`` split evenly and in order over ``n_parties``
    (the first parties take one more when it does not divide)."""
    split = np.array_split(np.arange(n_channels), n_parties)
    return tuple(tuple(int(c) for c in held) for held in split)


def block_to_channels(block: np.ndarray, n_channels: int) -> np.ndarray:
    """Inverse of :meth:`SeriesTable.party_block` for one party: ``(n, C_i, T)``."""
    if block.ndim != 2 or block.shape[1] % n_channels:
        raise ValueError(
            f"a block of shape {block.shape} does not hold {n_channels} channels of equal length"
        )
    return block.reshape(block.shape[0], n_channels, -1)


def sine_table(
    n_channels: int = 6,
    *,
    per_class: int = 1024,
    length: int = 800,
    n_parties: int = 2,
    amplitudes: Sequence[tuple[float, float]] = SINE_AMPLITUDES,
    seed: int = 0,
) -> SeriesTable:
    """Paper 003's sine data: ``per_class`` series per amplitude class, channels split
    evenly and in order across ``n_parties`` (6 channels, 2 parties: 3 each).

    Raises
    ------
    ValueError
        More channels than :data:`SINE6_FREQUENCIES` has, fewer channels than parties,
        or non-positive sizes.
    """
    if not 1 <= n_channels <= len(SINE6_FREQUENCIES):
        raise ValueError(f"sine data has 1..{len(SINE6_FREQUENCIES)} channels, got {n_channels}")
    if not 1 <= n_parties <= n_channels:
        raise ValueError(f"{n_channels} channels cannot be split over {n_parties} parties")
    if per_class < 1 or length < 2 or not amplitudes:
        raise ValueError(
            f"per_class must be >= 1, length >= 2 and amplitudes non-empty, got "
            f"{per_class}, {length}, {list(amplitudes)}"
        )
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(amplitudes)), per_class)
    means = np.array([m for m, _ in amplitudes])[labels]
    stds = np.array([s for _, s in amplitudes])[labels]
    amplitude = rng.normal(means, stds)
    steps = np.arange(length)
    waves = np.sin(2 * np.pi * np.array(SINE6_FREQUENCIES[:n_channels])[:, None] * steps)
    values = (amplitude[:, None, None] * waves[None]).astype(np.float32)
    order = rng.permutation(len(labels))
    parties = even_parties(n_channels, n_parties)
    return SeriesTable(
        values[order],
        tuple(f"x{p + 1}{j + 1}" for p, held in enumerate(parties) for j in range(len(held))),
        parties,
        labels[order],
    )


SERIES_DATASETS: dict[str, int] = {"sine6": 6, "sine2": 2, "basic_motions": 6}
"""The built-in series datasets and their channel counts: paper 003's sine data (generated
with seed 0, 1,024 series per class, 800 steps) and BasicMotions (80 real series of a
smart watch's accelerometer and gyroscope, bundled; :func:`basic_motions_table`)."""

SCALED_SERIES: frozenset[str] = frozenset({"basic_motions"})
"""Built-in series whose parties scale each channel to [-1, 1] by its own minimum and
maximum, as for a user's file (the sine data trains unscaled, as the reference does)."""

BASIC_MOTIONS_CHANNELS: tuple[str, ...] = (
    "accel_x",
    "accel_y",
    "accel_z",
    "gyro_x",
    "gyro_y",
    "gyro_z",
)
"""BasicMotions' channels in file order: the header names the 3-D accelerometer, then the
3-D gyroscope (the gyroscope's channels average about 0 in every class)."""


def is_series_source(source: str) -> bool:
    """Whether ``source`` names a built-in series dataset."""
    return source in SERIES_DATASETS


def is_scaled_series(source: str) -> bool:
    """Whether the parties fit a per-channel min-max scaling on their series of
    ``source`` (a user's file or a real built-in; not the sine data)."""
    return source not in SERIES_DATASETS or source in SCALED_SERIES


def load_series(source: str, n_parties: int) -> SeriesTable:
    """The built-in series dataset ``source`` with its channels split evenly, in order,
    across ``n_parties`` (sine6 over 2 parties: 3 channels each, as paper 003;
    basic_motions over 2: the accelerometer's party and the gyroscope's).

    Raises
    ------
    ValueError
        ``source`` is no built-in series dataset, or it has fewer channels than parties.
    """
    if source not in SERIES_DATASETS:
        raise ValueError(f"unknown series dataset {source!r}; built-in: {sorted(SERIES_DATASETS)}")
    channels = SERIES_DATASETS[source]
    if not 1 <= n_parties <= channels:
        raise ValueError(
            f"dataset {source!r} has {channels} channels: it splits over 1..{channels} "
            f"parties, not dataset.n_parties={n_parties}"
        )
    if source == "basic_motions":
        return basic_motions_table(n_parties)
    return sine_table(channels, n_parties=n_parties)


def basic_motions_table(n_parties: int = 2) -> SeriesTable:
    """BasicMotions from the UEA archive: 80 series (its TRAIN file's 40, then TEST's) of
    6 channels and 100 steps (10 s at 10 Hz) recorded by a smart watch while four people
    stood, walked, ran or played badminton; the channels split evenly over ``n_parties``
    and the activity kept as the label. The bundled files are sktime 1.2.0's copies,
    gzip-compressed (flwr_vflgan/data/bundled/README.md)."""
    bundled = resources.files("flwr_vflgan.data") / "bundled"
    parts = [read_ts(Path(str(bundled / f"BasicMotions_{s}.ts.gz"))) for s in ("TRAIN", "TEST")]
    values = np.concatenate([part.values for part in parts])
    names = np.concatenate([part.labels for part in parts if part.labels is not None])
    classes = sorted(set(names.tolist()))
    return SeriesTable(
        np.ascontiguousarray(values),
        BASIC_MOTIONS_CHANNELS,
        even_parties(len(BASIC_MOTIONS_CHANNELS), n_parties),
        np.asarray([classes.index(name) for name in names]),
    )


def wide_columns(channels: Sequence[str], length: int) -> list[str]:
    """Column names of series laid out wide: ``<channel>@<step>``, channel after channel."""
    return [f"{name}@{step}" for name in channels for step in range(length)]


@dataclass(frozen=True)
class ChannelSpan:
    """One channel's place in a party's block (the generators' output is linear)."""

    start: int
    width: int
    activation: str = "linear"


@dataclass(frozen=True)
class SeriesEncoder:
    """A party's series block: its channels end to end, each channel scaled to [-1, 1]
    by its own minimum and maximum (a user's file), by public bounds (``dataset.domain``
    or a party file's domain sidecar: :meth:`from_domain`, values outside clipped), or as
    they are (``low`` and ``high`` empty: the built-in sine data, which the reference
    trains on unscaled in [-0.8, 0.8]).

    A fitted scaling is fitted by the party on its own channels (:meth:`fitted`) and
    never leaves it: the server sees features, and publication decodes at the party.
    """

    channels: tuple[str, ...]
    length: int
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    public: bool = False
    """Built from public metadata (``dp=end_to_end`` asks): not claimed."""

    def __post_init__(self) -> None:
        if len(self.low) != len(self.high) or len(self.low) not in (0, len(self.channels)):
            raise ValueError(
                f"series scaling needs a low and a high per channel ({len(self.channels)}), "
                f"got {len(self.low)} and {len(self.high)}"
            )

    @classmethod
    def fitted(cls, channels: Sequence[str], values: np.ndarray) -> SeriesEncoder:
        """Min-max scaling of each channel of ``values`` ``(n, C_i, T)``."""
        low = values.min(axis=(0, 2)).astype(np.float64)
        high = values.max(axis=(0, 2)).astype(np.float64)
        return cls(tuple(channels), int(values.shape[2]), tuple(low), tuple(high))

    @classmethod
    def from_domain(
        cls, channels: Sequence[str], length: int, domain: PublicDomain
    ) -> SeriesEncoder:
        """Scaling by each channel's public ``min`` and ``max`` in ``domain``: nothing is
        read from the rows (a value outside the bounds is clipped when encoded).

        Raises
        ------
        ValueError
            A channel has no numeric entry in ``domain``.
        """
        bounds = []
        for name in channels:
            entry = domain.columns.get(name)
            if entry is None or entry.kind is ColumnKind.CATEGORICAL:
                raise ValueError(
                    f"the public domain has no numeric bounds for channel {name!r}: give it "
                    "{kind: continuous, min: ..., max: ...}"
                )
            bounds.append((entry.minimum, entry.maximum))
        low, high = zip(*bounds, strict=True)
        return cls(tuple(channels), length, tuple(low), tuple(high), public=True)

    @property
    def reads_private(self) -> bool:
        """Whether the scaling was fitted on the party's private series."""
        return bool(self.low) and not self.public

    def domain(self) -> PublicDomain:
        """The scaling as public bounds (:meth:`from_domain` reads it back); the sine
        data's identity scaling is the bounds [-1, 1]."""
        low = self.low or (-1.0,) * len(self.channels)
        high = self.high or (1.0,) * len(self.channels)
        return PublicDomain.from_mapping(
            {
                name: {"kind": "continuous", "min": float(lo), "max": float(hi)}
                for name, lo, hi in zip(self.channels, low, high, strict=True)
            }
        )

    def _affine(self) -> tuple[np.ndarray, np.ndarray]:
        """Per block column: the midpoint and half range (0 and 1 without scaling)."""
        if not self.low:
            return np.zeros(1), np.ones(1)
        low, high = np.asarray(self.low), np.asarray(self.high)
        half = np.where(high > low, (high - low) / 2, 1.0)
        return np.repeat((high + low) / 2, self.length), np.repeat(half, self.length)

    def encode(self, values: np.ndarray) -> np.ndarray:
        """``(n, C_i, T)`` series as the party's scaled block ``(n, C_i * T)`` float32."""
        mid, half = self._affine()
        block = (values.reshape(len(values), -1).astype(np.float64) - mid) / half
        if self.public and self.low:
            block = np.clip(block, -1.0, 1.0)
        return np.ascontiguousarray(block.astype(np.float32))

    @property
    def output_dim(self) -> int:
        """Width of the party's block: its channels times the length."""
        return len(self.channels) * self.length

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """A wide table's scaled block (the inverse of :meth:`inverse_transform`)."""
        return self.encode(wide_to_series(frame, self.channels, self.length))

    @property
    def spans(self) -> list[ChannelSpan]:
        """One span per channel, ``length`` wide."""
        return [ChannelSpan(i * self.length, self.length) for i in range(len(self.channels))]

    def inverse_transform(self, block: np.ndarray) -> pd.DataFrame:
        """A scaled block ``(n, C_i * length)`` as a wide table in the data's units
        (:func:`wide_columns`)."""
        width = self.output_dim
        if block.ndim != 2 or block.shape[1] != width:
            raise ValueError(
                f"a block of {len(self.channels)} channels x {self.length} steps has {width} "
                f"columns, got shape {block.shape}"
            )
        mid, half = self._affine()
        values = (np.asarray(block, dtype=np.float64) * half + mid).astype(np.float32)
        return pd.DataFrame(values, columns=wide_columns(self.channels, self.length))


def wide_to_series(frame: pd.DataFrame, channels: Sequence[str], length: int) -> np.ndarray:
    """The ``(n, C, T)`` array of a wide table, channels in the order given.

    Raises
    ------
    ValueError
        A channel's column is missing.
    """
    names = wide_columns(channels, length)
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise ValueError(
            f"the wide table lacks {len(missing)} series columns, first {missing[0]!r}"
        )
    values = frame[names].to_numpy(dtype=np.float32)
    return values.reshape(len(frame), len(channels), length)


def series_long_frame(values: np.ndarray, channels: Sequence[str]) -> pd.DataFrame:
    """Series in long format: one row per series and step, ``series``, ``t`` and one column
    per channel (the layout a user's series table has)."""
    n, c, t = values.shape
    frame = pd.DataFrame(values.transpose(0, 2, 1).reshape(n * t, c), columns=list(channels))
    frame.insert(0, "t", np.tile(np.arange(t), n))
    frame.insert(0, "series", np.repeat(np.arange(n), t))
    return frame
