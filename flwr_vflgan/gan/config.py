"""The VFLGAN family's settings: its models and its training schedule.

Every tunable is a field of a frozen dataclass, and every default is defined here once.
Hydra YAML (``conf/``) and Flower's ``run_config`` only override these values; the run's
umbrella :class:`~flwr_vflgan.config.VFLGANConfig` holds these with the other families'
settings.

Defaults follow paper 000 where it is explicit and the reference implementation's Adult
settings where it is silent (``adult/GAN_vfl_shadow.py``: latent 20, generator
20-32-64-128, BatchNorm eps 0.8, local discriminator first part 256-128, shared
discriminator 128-1, gradient-penalty weight 30, Adam 5e-4 with betas (0.5, 0.999),
batch 64, five critic steps per generator step, 75 epochs, hard Gumbel-softmax with
temperature 1).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from flwr_vflgan.checked import build_checked, is_finite_number, is_int
from flwr_vflgan.privacy.config import DPConfig


class GANSettings(Protocol):
    """What the VFLGAN family's trainers read of a run's settings (the umbrella
    :class:`~flwr_vflgan.config.VFLGANConfig` is one)."""

    @property
    def model(self) -> ModelConfig: ...

    @property
    def train(self) -> TrainConfig: ...

    @property
    def dp(self) -> DPConfig: ...

    @property
    def has_local_head(self) -> bool:
        """Whether local discriminators have a second part and their own loss (VFLGAN,
        not VFLGAN-base)."""
        ...

    @property
    def shares_backbone(self) -> bool:
        """Whether the parties share a generator backbone by summed gradients and the
        server holds no discriminator (VertiGAN, :mod:`flwr_vflgan.gan.vertigan`)."""
        ...


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def _check_widths(name: str, widths: tuple[int, ...], allow_empty: bool) -> None:
    if not allow_empty and len(widths) == 0:
        raise ValueError(f"{name} must list at least one layer width, got ()")
    for w in widths:
        if not is_int(w) or w <= 0:
            raise ValueError(f"{name} must contain positive integers, got {widths!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of the generators and discriminators (paper 000, Appendix A.4).

    Parameters
    ----------
    latent_dim
        Length of the shared noise vector ``z`` fed to every party's generator.
    generator_hidden
        Hidden widths of each party's generator; BatchNorm follows every hidden layer
        but the first.
    batchnorm_eps
        BatchNorm epsilon of the generator (0.8 in the reference implementation).
    leaky_slope
        Negative slope of every LeakyReLU.
    disc_hidden
        Hidden widths of the first part of a local discriminator, before the feature layer.
    feature_dim
        Width of the intermediate feature a local discriminator sends to the server.
    local_head_hidden
        Hidden widths of a local discriminator's second part ``D_i^2`` (VFLGAN, VertiGAN
        and VDGAN, whose local critics have one). Empty: one linear layer from the
        feature to the score, as the reference code's ``D_p`` (``128 -> 1``) and paper
        000's Figure 11. VFLGAN's command-line job sets ``[128]``
        (``conf/algorithm/vflgan.yaml``; docs/evaluation.md, "A deeper local head").
        Nothing new crosses the wire: the head stays with its party.
    shared_hidden
        Hidden widths of the shared discriminator on the concatenated features.
    gumbel_tau, gumbel_hard
        Gumbel-softmax temperature and straight-through switch for one-hot spans.
    """

    latent_dim: int = 20
    generator_hidden: tuple[int, ...] = (32, 64, 128)
    batchnorm_eps: float = 0.8
    leaky_slope: float = 0.2
    disc_hidden: tuple[int, ...] = (256,)
    feature_dim: int = 128
    local_head_hidden: tuple[int, ...] = ()
    shared_hidden: tuple[int, ...] = (128,)
    gumbel_tau: float = 1.0
    gumbel_hard: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "generator_hidden", tuple(self.generator_hidden))
        object.__setattr__(self, "disc_hidden", tuple(self.disc_hidden))
        object.__setattr__(self, "shared_hidden", tuple(self.shared_hidden))
        object.__setattr__(self, "local_head_hidden", tuple(self.local_head_hidden))
        if not is_int(self.latent_dim) or self.latent_dim <= 0:
            raise ValueError(f"latent_dim must be a positive integer, got {self.latent_dim!r}")
        if not is_int(self.feature_dim) or self.feature_dim <= 0:
            raise ValueError(f"feature_dim must be a positive integer, got {self.feature_dim!r}")
        _check_widths("generator_hidden", self.generator_hidden, allow_empty=False)
        _check_widths("disc_hidden", self.disc_hidden, allow_empty=True)
        _check_widths("shared_hidden", self.shared_hidden, allow_empty=True)
        _check_widths("local_head_hidden", self.local_head_hidden, allow_empty=True)
        _check_positive("batchnorm_eps", self.batchnorm_eps)
        _check_positive("gumbel_tau", self.gumbel_tau)
        if not 0 <= self.leaky_slope < 1:
            raise ValueError(f"leaky_slope must be in [0, 1), got {self.leaky_slope!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation schedule (paper 000, Algorithm 1).

    Parameters
    ----------
    epochs
        ``T_max``. One epoch is ``n_rows // batch_size`` discriminator steps. ``None``:
        automatic, the fewest whole epochs with at least ``min_steps`` steps.
    max_steps
        Optional cap on the total number of training steps (discriminator plus
        generator steps, i.e. exchanges); ``None`` means no cap.
    min_steps
        The length of an automatic run (``epochs=None``) in the same steps, rounded up to
        whole epochs; ignored when ``epochs`` is a number. The command line's VFLGAN,
        VFLGAN-base and WGAN-GP jobs are automatic, so that a small table gets as many
        steps as Adult's 30 epochs rather than a few thousand (docs/evaluation.md, "Job
        length across table sizes"); ``max_steps`` still caps.
    batch_size
        ``B``. Each discriminator step draws a fixed-size batch without replacement,
        the same rows at every party (a pseudorandom generator they share).
    n_critic
        ``T_d``: discriminator steps before each generator step.
    generator_steps
        Generator steps after each ``n_critic`` discriminator steps (1: Algorithm 1). A
        generator step reads no real row, so under DP the extra steps cost no privacy:
        the budget is spent on discriminator steps only. The schedule families read it
        (vflgan, vflgan_base, wgan_gp); the others refuse a value other than 1.
    lr, betas
        Adam settings for every generator and discriminator.
    generator_lr
        The generators' Adam learning rate when it should differ from the
        discriminators' (two time-scale updates, Heusel et al., 2017); ``None`` (the
        default): ``lr`` for both. Read by the families of ``flwr_vflgan.gan`` only.
    gp_weight
        ``lambda`` of the gradient penalty of every discriminator.
    shared_d_weight, shared_g_weight
        ``lambda_1`` (eq. 8) and ``lambda_2`` (eq. 9): weight of the shared
        discriminator in the discriminator and generator objectives.
    first_part_gp
        Also penalise each local first part ``D_i^1``: the gradient of the sum of its
        outputs with respect to its interpolated input is pushed to norm 1, as the
        reference implementation does. Algorithm 1 penalises ``D_s`` only with respect
        to the features, which leaves ``D_s(D_i^1(x))`` unconstrained in ``x``. On by
        default: over 3 seeds it lowers Adult's Total Difference from 0.82 to 0.27
        (VFLGAN) and from 1.28 to 0.26 (VFLGAN-base), and German credit's from 1.07 to
        0.72 (VFLGAN-base), VFLGAN's 0.87 -> 0.83 within its seed spread
        (docs/evaluation.md). ``False`` is
        Algorithm 1 as printed.
    generator_average
        Half-life, in epochs, of an exponential moving average of each generator's
        parameters (Yazici et al., 2019), kept by its party; the average is what is
        evaluated, kept as the best model and published (VFLGAN's family and
        VFLGAN-TS; an epoch has ``generator_steps ((n_rows // batch_size) // n_critic)``
        generator steps). ``None`` (the default): the trained generator itself, as the paper.
        Nothing new crosses the wire.
    eval_every
        Evaluate the Frechet distance every this many epochs (0 disables it).
    eval_rows
        Synthetic rows generated for each evaluation; ``None`` means as many as the
        training table has.
    steps_per_exchange
        ``K``: training steps carried by one exchange. Each party computes the features
        of ``K`` consecutive steps with the parameters it holds when it sends them, the
        server performs its ``K`` updates in order and returns the ``K`` gradients, and
        each party applies them in order (stale upstream gradients, as in FedBCD and
        CELU-VFL). 1 is Algorithm 1 exactly. An exchange never crosses an epoch's end,
        so evaluations and checkpoints fall on exchange boundaries.
    warmup_epochs
        VDGAN only (paper 004, Section 4.3.2): epochs each client first trains its critic
        with a local generator of its own columns by WGAN-GP, before the co-training (0:
        none, the default).
    """

    epochs: int | None = 75
    max_steps: int | None = None
    min_steps: int | None = None
    batch_size: int = 64
    n_critic: int = 5
    generator_steps: int = 1
    lr: float = 5e-4
    betas: tuple[float, float] = (0.5, 0.999)
    generator_lr: float | None = None
    gp_weight: float = 30.0
    shared_d_weight: float = 1.0
    shared_g_weight: float = 1.0
    first_part_gp: bool = True
    generator_average: float | None = None
    eval_every: int = 1
    eval_rows: int | None = None
    steps_per_exchange: int = 1
    warmup_epochs: int = 0

    @property
    def g_lr(self) -> float:
        """The generators' learning rate: ``generator_lr``, or ``lr`` when unset."""
        return self.lr if self.generator_lr is None else self.generator_lr

    def describe_lr(self) -> str:
        """``lr=0.0005``, or ``lr=0.0005 (generators 0.0001)`` with ``generator_lr`` set."""
        if self.generator_lr is None:
            return f"lr={self.lr}"
        return f"lr={self.lr} (generators {self.generator_lr})"

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        if self.epochs is None and self.min_steps is None:
            raise ValueError(
                "train.epochs=null (an automatic length) needs train.min_steps; set one of them"
            )
        for name in ("epochs", "batch_size", "n_critic", "generator_steps", "steps_per_exchange"):
            value = getattr(self, name)
            if name == "epochs" and value is None:
                continue
            if not is_int(value) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.batch_size < 2:
            raise ValueError(
                f"batch_size must be >= 2 (the generator's BatchNorm needs two rows), got {self.batch_size}"
            )
        for name in ("max_steps", "min_steps"):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value <= 0):
                raise ValueError(f"{name} must be a positive integer or null, got {value!r}")
        if self.eval_rows is not None and (not is_int(self.eval_rows) or self.eval_rows <= 1):
            raise ValueError(f"eval_rows must be an integer > 1 or null, got {self.eval_rows!r}")
        if not is_int(self.eval_every) or self.eval_every < 0:
            raise ValueError(f"eval_every must be a non-negative integer, got {self.eval_every!r}")
        if not is_int(self.warmup_epochs) or self.warmup_epochs < 0:
            raise ValueError(
                f"warmup_epochs must be a non-negative integer, got {self.warmup_epochs!r}"
            )
        if self.generator_average is not None:
            _check_positive("generator_average", self.generator_average)
        _check_positive("lr", self.lr)
        if self.generator_lr is not None:
            _check_positive("generator_lr", self.generator_lr)
        _check_positive("gp_weight", self.gp_weight)
        _check_positive("shared_d_weight", self.shared_d_weight)
        _check_positive("shared_g_weight", self.shared_g_weight)
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")


@dataclass(frozen=True)
class GSWGANSettings:
    """GS-WGAN's own settings (``gs_wgan.*``; read by ``algorithm=gs_wgan`` only).

    Parameters
    ----------
    discriminators
        ``K``: the training rows are split into ``K`` disjoint shards of (nearly) equal
        size, one discriminator each; every generator step reads one of them, drawn
        uniformly, so a row's shard is read with probability ``1 / K``. The authors use
        1000 on MNIST's 60,000 images (60 per shard); the default here, 100, keeps the
        critics of a run within about 300 MiB on Adult (each critic and its Adam state
        stays in memory).
    drift_weight
        Weight of the authors' drift penalty ``E[D(x)^2]`` on real rows in each
        discriminator's loss (``L_epsilon`` = 0.001 in their code); 0 turns it off.
    warmup_iterations
        The authors' warm start (``source/pretrain.py``, 2000 iterations on MNIST): before
        the run, each discriminator trains this many iterations (``n_critic`` steps on its
        shard and one step of a generator of its own, then discarded). It costs no
        privacy (the discriminators are never released) but ``K * warmup_iterations *
        (n_critic + 1)`` steps of time; 0 skips it.
    """

    discriminators: int = 100
    drift_weight: float = 0.001
    warmup_iterations: int = 0

    def __post_init__(self) -> None:
        if not is_int(self.discriminators) or self.discriminators < 1:
            raise ValueError(
                f"gs_wgan.discriminators must be an integer >= 1, got {self.discriminators!r}"
            )
        if not is_int(self.warmup_iterations) or self.warmup_iterations < 0:
            raise ValueError(
                f"gs_wgan.warmup_iterations must be an integer >= 0, got {self.warmup_iterations!r}"
            )
        weight = self.drift_weight
        if not is_finite_number(weight) or weight < 0:
            raise ValueError(f"gs_wgan.drift_weight must be a finite number >= 0, got {weight!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GSWGANSettings:
        """Inverse of :meth:`to_dict`; unknown keys are errors that list the valid ones."""
        return build_checked(cls, data, "gs_wgan")
