"""Settings of VFLGAN-TS (paper 003 and its reference code): models and training.

Every default is the reference code's for the six-attribute sine data
(``code_sine_6/vfl.py`` of YuanXun2024/VFLGAN-TS, read, not copied): an LSTM generator
per channel fed the same noise, an MLP attribute discriminator per channel, one feature
extractor per party whose first hidden layer is the intermediate feature, a shared
discriminator on the server, binary cross-entropy, Adam ``(0.5, 0.9)``, batch 64.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from flwr_vflgan.checked import build_checked, is_finite_number, is_int


def _positive_ints(name: str, values: tuple[int, ...]) -> None:
    if not values or not all(is_int(v) and v > 0 for v in values):
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {values!r}")


@dataclass(frozen=True)
class SeriesModelConfig:
    """Network shapes.

    Parameters
    ----------
    noise_dim
        Length of the noise vector that every channel generator of every party reads
        (the same vector: the parties share its seed).
    generator_hidden
        Hidden width of each channel generator's LSTM cell (one step over the noise,
        then a linear map to the series length).
    generator_basis
        ``None`` (the reference): the linear map writes every step of the series on its
        own. ``K``: it writes the coefficients of the ``K`` slowest cosines of the
        series' orthonormal DCT-II basis instead, so the channel is smooth by
        construction (no content above ``K / (2 length)`` cycles per step). Must not
        exceed the series length (checked when the models are built).
    generator_smoothing
        ``None`` (the reference): no filter. ``s``: each channel generator's output goes
        through a fixed Gaussian filter of standard deviation ``s`` steps (truncated at
        ``4 s``, the series reflected at its ends), in training and in publication alike,
        so the discriminators judge the smoothed series and the generator learns what to
        write before the filter. The truncated kernel must be shorter than the series
        (checked when the models are built).
    attribute_hidden
        Hidden widths of each channel's attribute discriminator (``length -> ... -> 1``).
    extractor_hidden
        Hidden widths of the extractor's own head after its feature layer (whose width is
        the run's ``model.feature_dim``: the intermediate feature, read on the party's
        channels concatenated, is what the server sees); the head's score is a local loss
        only without the shared discriminator.
    shared_hidden
        Hidden widths of the server's shared discriminator on the parties' features.
    leaky_slope, dropout
        LeakyReLU slope and dropout rate of every discriminator's hidden layers.
    init_std
        Standard deviation of the normal initialisation of every discriminator's linear
        weights (biases start at zero); the generators keep PyTorch's initialisation.
    """

    noise_dim: int = 32
    generator_hidden: int = 256
    generator_basis: int | None = None
    generator_smoothing: float | None = None
    attribute_hidden: tuple[int, ...] = (128, 64)
    extractor_hidden: tuple[int, ...] = (128, 64)
    shared_hidden: tuple[int, ...] = (256, 64)
    leaky_slope: float = 0.2
    dropout: float = 0.3
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("noise_dim", "generator_hidden"):
            value = getattr(self, name)
            if not is_int(value) or value <= 0:
                raise ValueError(f"series.model.{name} must be a positive integer, got {value!r}")
        basis = self.generator_basis
        if basis is not None and (not is_int(basis) or basis <= 0):
            raise ValueError(
                f"series.model.generator_basis must be a positive integer or null, got {basis!r}"
            )
        smoothing = self.generator_smoothing
        if smoothing is not None and (not is_finite_number(smoothing) or smoothing <= 0):
            raise ValueError(
                "series.model.generator_smoothing must be a positive number of steps or "
                f"null, got {smoothing!r}"
            )
        for name in ("attribute_hidden", "extractor_hidden", "shared_hidden"):
            _positive_ints(f"series.model.{name}", getattr(self, name))
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"series.model.dropout must be in [0, 1), got {self.dropout}")
        if self.leaky_slope < 0 or self.init_std <= 0:
            raise ValueError(
                f"series.model.leaky_slope must be >= 0 and init_std > 0, got "
                f"{self.leaky_slope}, {self.init_std}"
            )


LOSSES = ("bce", "wgan_gp")
"""The discriminators' objectives: the reference's cross-entropy, or WGAN-GP."""


@dataclass(frozen=True)
class SeriesTrainConfig:
    """Learning rates and loss weights (the schedule, batch size and Adam's betas are the
    run's ``train`` settings: one discriminator step, then one generator step, per batch).

    Parameters
    ----------
    generator_lr, attribute_lr, extractor_lr, shared_lr
        Adam learning rates of the channel generators, the attribute discriminators, the
        feature extractors and the shared discriminator.
    shared_weight
        ``gamma_s``: weight of the shared discriminator in the generators' loss.
    local_weight
        ``gamma_c``: weight of each party's extractor head in the generators' loss,
        used only without the shared discriminator (the reference's ablation).
    shared_discriminator
        ``False`` trains without the server's discriminator: each party's extractor
        head then judges its own channels jointly, and nothing couples the parties but
        the shared noise (the reference's ``--withSD`` off).
    loss
        ``"bce"`` (the reference): binary cross-entropy, real labelled 1. ``"wgan_gp"``:
        every discriminator is a Wasserstein critic with a gradient penalty (Gulrajani
        et al., 2017) of weight ``train.gp_weight`` on its own interpolates: each
        attribute discriminator on its channel, ``D_s`` on the parties' features (its
        penalty's gradient reaches the features, as VFLGAN's Algorithm 1), and with
        ``train.first_part_gp`` each extractor's first part as VFLGAN's
        ``first_part_penalty`` (without ``D_s``: the whole extractor). The generators
        minimise ``-E[A_c(x~)] - gamma_s E[D_s(f~)]``. Nothing else crosses the wire.
    """

    generator_lr: float = 5e-4
    attribute_lr: float = 5e-4
    extractor_lr: float = 2e-4
    shared_lr: float = 2e-4
    shared_weight: float = 5.0
    local_weight: float = 5.0
    shared_discriminator: bool = True
    loss: str = "bce"

    @property
    def wasserstein(self) -> bool:
        """Whether the discriminators are WGAN-GP critics (``loss == "wgan_gp"``)."""
        return self.loss == "wgan_gp"

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"series.train.loss must be one of {list(LOSSES)}, got {self.loss!r}")
        for name in ("generator_lr", "attribute_lr", "extractor_lr", "shared_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"series.train.{name} must be > 0, got {getattr(self, name)}")
        if self.shared_weight < 0 or self.local_weight < 0:
            raise ValueError(
                f"series.train.shared_weight and local_weight must be >= 0, got "
                f"{self.shared_weight}, {self.local_weight}"
            )


@dataclass(frozen=True)
class SeriesSettings:
    """A VFLGAN-TS run's model and training settings (identical at every holder)."""

    model: SeriesModelConfig = field(default_factory=SeriesModelConfig)
    train: SeriesTrainConfig = field(default_factory=SeriesTrainConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SeriesSettings:
        """Inverse of :meth:`to_dict` (lists for tuples); unknown keys are errors that
        list the valid ones."""
        data = dict(data)
        model = {
            k: tuple(v) if isinstance(v, list) else v
            for k, v in (data.pop("model", {}) or {}).items()
        }
        train = dict(data.pop("train", {}) or {})
        if data:
            raise ValueError(
                f"unknown series config keys {sorted(data)}; valid: ['model', 'train']"
            )
        return cls(
            build_checked(SeriesModelConfig, model, "series.model"),
            build_checked(SeriesTrainConfig, train, "series.train"),
        )
