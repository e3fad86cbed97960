"""VT-GAN's model settings (paper 001, Sections 3.1 and 4.1-4.3).

The schedule and the optimiser (epochs, batch size, critic steps, learning rate, betas,
gradient-penalty weight) come from the run's :class:`~flwr_vflgan.gan.config.TrainConfig`,
which ``conf/algorithm/vtgan.yaml`` sets to CTGAN's values (batch 500, Adam 2e-4 with
betas (0.5, 0.9), lambda 10, five critic steps per generator step as paper 001's
``e = 5``). This module holds what only VT-GAN has.

Partition notation (paper 001, Fig. 6): ``G^{n1}_{n2}`` has ``n1`` residual (RN) blocks
on the server and ``n2`` in each client; ``D^{n3}_{n4}`` has ``n3`` fully connected (FN)
blocks on the server and ``n4`` in each client. The paper's recommended setting
``D^2_0 G^0_2`` is the default.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from flwr_vflgan.checked import build_checked, is_int
from flwr_vflgan.gan.config import TrainConfig
from flwr_vflgan.privacy.config import DPConfig


class VTGANRunSettings(Protocol):
    """What VT-GAN's centralized baseline reads of a run's settings (the umbrella
    :class:`~flwr_vflgan.config.VFLGANConfig` is one)."""

    @property
    def train(self) -> TrainConfig: ...

    @property
    def dp(self) -> DPConfig: ...

    @property
    def vtgan(self) -> VTGANSettings: ...


@dataclass(frozen=True)
class VTGANSettings:
    """What VT-GAN adds to the shared training configuration.

    Parameters
    ----------
    g_server_blocks, g_client_blocks
        ``n1`` and ``n2`` of ``G^{n1}_{n2}``: residual blocks (Linear, BatchNorm, ReLU,
        output concatenated with the input, as CTGAN) on the server and in each client.
        With no server block the server's top generator is one Linear layer on the noise
        and the conditional vector (the paper's ``G^t`` always exists: it is what makes
        the clients' outputs depend on one shared noise vector).
    d_server_blocks, d_client_blocks
        ``n3`` and ``n4`` of ``D^{n3}_{n4}``: blocks of Linear, LeakyReLU(0.2),
        Dropout(0.5). With no client block a client's bottom discriminator is one
        Linear layer as wide as its encoded columns (the reference code's ``local_d``
        filter): raw data never goes to the server.
    latent_dim
        Length of the noise vector (CTGAN's ``embedding_dim``).
    generator_width, discriminator_width
        Output width of a block, summed over the clients for client blocks: a client
        gets a share proportional to its number of columns (paper 001, Section 4.3.2).
        The enlarged generator of Section 4.3.3 is ``generator_width=768``.
    dropout, leaky_slope, gumbel_tau
        CTGAN's discriminator dropout and slope and its Gumbel-softmax temperature
        (soft samples, ``hard=False``).
    weight_decay
        Adam weight decay of every generator and discriminator part (CTGAN: 1e-6).
    log_frequency
        Sample the category of a conditional vector by ``log(count + 1)`` (CTGAN) rather
        than by its count.
    shuffle
        Training-with-shuffling (Section 3.1.5): after every round the clients reorder
        their rows with a permutation from their shared seed. Turning it off exists only
        to demonstrate the attack it prevents; a run without it warns.
    max_modes, mode_weight_threshold
        Mode-specific normalisation: components of the Bayesian Gaussian mixture and the
        weight above which a mode is kept.
    point_mass_share
        The mixed-type encoder (paper 001, Section 3.1.4, after CTAB-GAN): a numeric value
        that makes up at least this share of a client's rows (``capital-gain`` at 0 on
        Adult) gets a one-hot slot of its own and is generated exactly. On by default at
        0.1: over 3 Adult seeds it cut k2-AVD from 0.20 to 0.12 (docs/vtgan.md). ``null``
        keeps CTGAN's mode-specific normalisation alone.
    dp_count_noise
        Under ``dp=dpsgd``: noise multiplier of each client's one release of its category
        counts (std over the histogram's L2 sensitivity), from which the fake rows'
        conditions are drawn (see :mod:`flwr_vflgan.vtgan.privacy`).
    """

    g_server_blocks: int = 0
    g_client_blocks: int = 2
    d_server_blocks: int = 2
    d_client_blocks: int = 0
    latent_dim: int = 128
    generator_width: int = 256
    discriminator_width: int = 256
    dropout: float = 0.5
    leaky_slope: float = 0.2
    gumbel_tau: float = 0.2
    weight_decay: float = 1e-6
    log_frequency: bool = True
    shuffle: bool = True
    max_modes: int = 10
    mode_weight_threshold: float = 0.005
    dp_count_noise: float = 5.0
    point_mass_share: float | None = 0.1

    def __post_init__(self) -> None:
        for name in ("g_server_blocks", "g_client_blocks", "d_server_blocks", "d_client_blocks"):
            value = getattr(self, name)
            if not is_int(value) or value < 0:
                raise ValueError(f"vtgan.{name} must be an integer >= 0, got {value!r}")
        for name in ("latent_dim", "generator_width", "discriminator_width", "max_modes"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"vtgan.{name} must be a positive integer, got {value!r}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"vtgan.dropout must be in [0, 1), got {self.dropout!r}")
        if not 0 <= self.leaky_slope < 1:
            raise ValueError(f"vtgan.leaky_slope must be in [0, 1), got {self.leaky_slope!r}")
        if not self.gumbel_tau > 0:
            raise ValueError(f"vtgan.gumbel_tau must be > 0, got {self.gumbel_tau!r}")
        if not self.weight_decay >= 0:
            raise ValueError(f"vtgan.weight_decay must be >= 0, got {self.weight_decay!r}")
        if not 0 <= self.mode_weight_threshold < 1:
            raise ValueError(
                f"vtgan.mode_weight_threshold must be in [0, 1), got {self.mode_weight_threshold!r}"
            )
        if not self.dp_count_noise > 0:
            raise ValueError(f"vtgan.dp_count_noise must be > 0, got {self.dp_count_noise!r}")
        share = self.point_mass_share
        if share is not None and (isinstance(share, bool) or not 0 < share < 1):
            raise ValueError(f"vtgan.point_mass_share must be null or in (0, 1), got {share!r}")
        for name in ("log_frequency", "shuffle"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"vtgan.{name} must be true or false, got {getattr(self, name)!r}")

    @property
    def partition_name(self) -> str:
        """The paper's notation, e.g. ``D2_0-G0_2``."""
        return (
            f"D{self.d_server_blocks}_{self.d_client_blocks}-"
            f"G{self.g_server_blocks}_{self.g_client_blocks}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VTGANSettings:
        """Inverse of :meth:`to_dict`; unknown keys are errors that list the valid ones."""
        return build_checked(cls, data, "vtgan")


def proportional_split(total: int, weights: list[int] | tuple[int, ...]) -> list[int]:
    """Split ``total`` into integer parts proportional to ``weights`` (largest remainder),
    every part at least 1 and the parts summing to ``total``.

    Raises
    ------
    ValueError
        If a weight is not positive or ``total`` is smaller than the number of parts.
    """
    if not weights or any(not is_int(w) or w <= 0 for w in weights):
        raise ValueError(f"weights must be positive integers, got {list(weights)}")
    if total < len(weights):
        raise ValueError(f"cannot split {total} into {len(weights)} parts of at least 1")
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    parts = [max(1, int(e)) for e in exact]
    # Hand out (or take back) the remainder by the largest (smallest) fractional part.
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - int(exact[i])), i))
    i = 0
    while sum(parts) < total:
        parts[order[i % len(order)]] += 1
        i += 1
    while sum(parts) > total:
        j = max((k for k in range(len(parts)) if parts[k] > 1), key=lambda k: parts[k] - exact[k])
        parts[j] -= 1
    return parts
