"""GAFM's settings (paper 002, Section 3, Appendices D-E; Tables D.1 and E.3).

Defaults are the paper's Spambase settings: ``sigma = 0.01``, ``Delta = 0.05``,
``gamma = 1`` (Table D.1), weight clipping ``c = 0.1``, Adam with learning rate 1e-4 for
every model, batch 1028, 300 epochs, a 70/30 train/test split (Appendix E.1, E.3), the
local model ``input -> 16 -> 1`` with LeakyReLU and a sigmoid output (Appendix E.2), a
generator (and vanilla head) ``d -> 16 -> 1`` with a sigmoid output and a discriminator
``1 -> 10 -> 10 -> 1`` with LeakyReLU after every layer (the reference implementation's
widths; the paper says "2-layer DNN" for both).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Literal

from flwr_vflgan.checked import build_checked, is_int

CutCombine = Literal["auto", "identity", "average", "concat"]
LocalOutput = Literal["sigmoid", "linear", "relu"]
LocalKind = Literal["mlp", "wide_deep", "cnn"]
UVChoice = Literal["uv", "same", "zero"]
Ablation = Literal["gan_only", "ce_only"]
ABLATIONS: tuple[str, ...] = ("gan_only", "ce_only")
"""Paper 002's ablations of GAFM (``gafm.ablation``)."""


class Method(StrEnum):
    """Which label-protection algorithm the label party runs."""

    GAFM = "gafm"
    """Generator and discriminator on the label party, GAN + randomized-response CE."""
    SPLITNN = "splitnn"
    """Vanilla split learning: a head ``h`` trained with cross-entropy on the labels."""
    MAXNORM = "maxnorm"
    """Vanilla split learning with Max Norm's gradient noise (Li et al. 2022)."""
    MARVELL = "marvell"
    """Vanilla split learning with Marvell's optimised gradient noise (Li et al. 2022)."""


@dataclass(frozen=True)
class GAFMSettings:
    """Everything the label-protection algorithms (``gafm``, ``splitnn``, ``maxnorm``,
    ``marvell``) need besides the data and the runtime.

    Parameters
    ----------
    local_model
        Each non-label party's model ``f_p`` (paper 002, Table 1): ``mlp`` (Spambase's
        2-layer and IMDB's 3-layer DNN), ``wide_deep`` (Criteo's Wide & Deep over the
        party's fields) or ``cnn`` (ISIC's 6-layer CNN over the party's pixels); see
        :mod:`flwr_vflgan.gafm.models`.
    local_hidden, cut_dim, local_output, local_dropout
        ``f_p``'s hidden widths (the MLP's LeakyReLU layers, Wide & Deep's deep ReLU
        layers, the CNN's fully connected ReLU layers), output width ``d`` and output
        activation. ``sigmoid`` (Appendix E.2) makes the cut value a score in (0, 1), and
        that score is the ``sigma(f(X))`` of eq. 5, as in the reference code; ``linear``
        and ``relu`` (the reference's ISIC model) apply the sigmoid of eq. 5 at the label
        party, to the sum over the ``d`` columns. Dropout after each hidden layer (0.5 is
        the paper's IMDB model, 0.2 the reference's Criteo model).
    embed_dim
        ``wide_deep``: each field's embedding width (the reference's 16).
    image_width
        ``cnn``: the width in pixels of the party's image (its columns, row-major);
        ``null`` reads them as a square image.
    cut
        ``F``: ``identity`` (one party), ``average`` (eq. C.1) or ``concat``; ``auto``
        picks identity for one party and average for several.
    head_hidden
        Hidden widths of GAFM's generator ``G`` (and of vanilla split learning's head
        ``h``), sigmoid output.
    disc_hidden
        Hidden widths of the discriminator ``D`` (LeakyReLU after every layer, the output
        layer included, as the reference code).
    leaky_slope
        Negative slope of every LeakyReLU.
    gamma, delta, sigma, clip
        ``gamma`` (weight of the normalised GAN gradient, eq. 6 / Algorithm A.1),
        ``Delta`` (randomized response, eq. 4), ``sigma`` (noise on the labels, eq. 3) and
        the discriminator's weight clipping ``c``.
    normalize
        Normalise the GAN and CE cut gradients by their batch L2 norms (Section 3.3);
        off only for ablations.
    ablation
        Paper 002's ablations (Section 4.2.2, Figure 3), ``algorithm=gafm`` only:
        ``gan_only`` sends the parties the GAN term alone (``gamma`` times the normalised
        GAN gradient), ``ce_only`` the cross-entropy term alone (on the randomized-
        response labels); ``null`` is GAFM, both terms. The discriminator and generator
        still train in both, so the runs differ only in the gradient that leaves the
        label party.
    lr_local, lr_generator, lr_discriminator, betas
        Adam settings (``alpha_p``, ``alpha_g``, ``alpha_d``).
    batch_size, epochs, max_steps
        Mini-batches of the training rows, reshuffled every epoch; the last batch of an
        epoch keeps the remainder. ``max_steps`` caps the steps of one repetition.
    test_fraction
        Share of rows held out for the test AUC, drawn by the label party per seed.
    repetitions
        Independent runs (seeds ``seed .. seed + repetitions - 1``, each with its own
        split and initialisation), summarised as mean, worst and best (Table 2).
    marvell, marvell_scale, marvell_uv, marvell_sumkl_threshold
        Marvell's perturbation of the cut gradients: ``marvell`` adds it to GAFM (the
        G-M model of Appendix F; ``algorithm=marvell`` always uses it); the power budget
        is ``scale * ||mean_pos - mean_neg||^2``; ``uv`` / ``same`` / ``zero`` model the
        class covariances; a threshold on the sum of KL divergences enlarges the scale
        by 1.5 until it holds (the reference's dynamic mode).
    eval_every
        Epochs between test-AUC and leak-AUC records in the history (0: only the end).
    steps_per_exchange
        ``K``: training steps (batches) carried by one exchange, never across an epoch's
        end; 1 is Algorithm A.1 exactly (see :mod:`flwr_vflgan.gafm.training`).
    positive_label
        The label value of the positive class (default: ``1`` when the labels are 0/1,
        otherwise the rarer value).
    labels_path
        Deployment: a CSV with the ID column and the label, read by the label party
        (in simulation the label party takes the label column of the dataset spec).
    """

    local_model: LocalKind = "mlp"
    local_hidden: tuple[int, ...] = (16,)
    cut_dim: int = 1
    local_output: LocalOutput = "sigmoid"
    local_dropout: float = 0.0
    embed_dim: int = 16
    image_width: int | None = None
    cut: CutCombine = "auto"
    head_hidden: tuple[int, ...] = (16,)
    disc_hidden: tuple[int, ...] = (10, 10)
    leaky_slope: float = 0.01
    gamma: float = 1.0
    delta: float = 0.05
    sigma: float = 0.01
    clip: float = 0.1
    normalize: bool = True
    ablation: Ablation | None = None
    lr_local: float = 1e-4
    lr_generator: float = 1e-4
    lr_discriminator: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.999)
    batch_size: int = 1028
    epochs: int = 300
    max_steps: int | None = None
    test_fraction: float = 0.3
    repetitions: int = 10
    marvell: bool = False
    marvell_scale: float = 1.0
    marvell_uv: UVChoice = "uv"
    marvell_sumkl_threshold: float | None = None
    eval_every: int = 10
    steps_per_exchange: int = 1
    positive_label: str | None = None
    labels_path: str | None = None

    def __post_init__(self) -> None:
        self._check_sizes()
        self._check_values()
        if self.positive_label is not None:
            object.__setattr__(self, "positive_label", str(self.positive_label))

    def _check_sizes(self) -> None:
        """Normalise the widths and betas to tuples and check the integer settings."""
        for name in ("local_hidden", "head_hidden", "disc_hidden"):
            widths = tuple(getattr(self, name))
            object.__setattr__(self, name, widths)
            if any(not is_int(w) or w <= 0 for w in widths):
                raise ValueError(f"gafm.{name} must list positive integers, got {list(widths)}")
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        for name in ("cut_dim", "batch_size", "epochs", "repetitions", "embed_dim"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"gafm.{name} must be a positive integer, got {value!r}")
        if self.batch_size < 2:
            raise ValueError(f"gafm.batch_size must be >= 2, got {self.batch_size}")
        if self.max_steps is not None and (not is_int(self.max_steps) or self.max_steps < 1):
            raise ValueError(
                f"gafm.max_steps must be a positive integer or null, got {self.max_steps!r}"
            )
        if self.image_width is not None and (not is_int(self.image_width) or self.image_width < 1):
            raise ValueError(
                f"gafm.image_width must be a positive integer or null, got {self.image_width!r}"
            )
        if not is_int(self.steps_per_exchange) or self.steps_per_exchange < 1:
            raise ValueError(
                f"gafm.steps_per_exchange must be a positive integer, got {self.steps_per_exchange!r}"
            )
        if not is_int(self.eval_every) or self.eval_every < 0:
            raise ValueError(f"gafm.eval_every must be an integer >= 0, got {self.eval_every!r}")

    def _check_values(self) -> None:
        """Check the choices, rates, probabilities and flags (the non-integer settings)."""
        if self.ablation is not None and self.ablation not in ABLATIONS:
            raise ValueError(
                f"gafm.ablation must be one of {list(ABLATIONS)} or null, got {self.ablation!r}"
            )
        choices = {
            "local_model": ("mlp", "wide_deep", "cnn"),
            "local_output": ("sigmoid", "linear", "relu"),
            "cut": ("auto", "identity", "average", "concat"),
            "marvell_uv": ("uv", "same", "zero"),
        }
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ValueError(
                    f"gafm.{name} must be one of {list(valid)}, got {getattr(self, name)!r}"
                )
        for name in (
            "gamma",
            "clip",
            "lr_local",
            "lr_generator",
            "lr_discriminator",
            "marvell_scale",
        ):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"gafm.{name} must be > 0, got {getattr(self, name)!r}")
        if not 0 <= self.delta <= 0.5:
            raise ValueError(f"gafm.delta (Delta of eq. 4) must be in [0, 0.5], got {self.delta!r}")
        if not self.sigma >= 0:
            raise ValueError(f"gafm.sigma must be >= 0, got {self.sigma!r}")
        if not 0 <= self.local_dropout < 1:
            raise ValueError(f"gafm.local_dropout must be in [0, 1), got {self.local_dropout!r}")
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"gafm.test_fraction must be in (0, 1), got {self.test_fraction!r}")
        if not 0 <= self.leaky_slope < 1:
            raise ValueError(f"gafm.leaky_slope must be in [0, 1), got {self.leaky_slope!r}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"gafm.betas must be two numbers in [0, 1), got {list(self.betas)}")
        if self.marvell_sumkl_threshold is not None and not self.marvell_sumkl_threshold > 0:
            raise ValueError(
                f"gafm.marvell_sumkl_threshold must be > 0 or null, got {self.marvell_sumkl_threshold!r}"
            )
        for name in ("normalize", "marvell"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"gafm.{name} must be true or false, got {getattr(self, name)!r}")

    def combine(self, n_parties: int) -> Literal["identity", "average", "concat"]:
        """The cut-layer function ``F`` for ``n_parties`` non-label parties."""
        if self.cut == "auto":
            return "identity" if n_parties == 1 else "average"
        if self.cut == "identity" and n_parties != 1:
            raise ValueError(
                f"gafm.cut=identity needs exactly one non-label party, got {n_parties}: "
                "use average (eq. C.1) or concat"
            )
        return self.cut

    def head_input(self, n_parties: int) -> int:
        """Width of ``f(X)``, the input of the generator or head."""
        return self.cut_dim * n_parties if self.combine(n_parties) == "concat" else self.cut_dim

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form."""
        out = asdict(self)
        for name in ("local_hidden", "head_hidden", "disc_hidden", "betas"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GAFMSettings:
        """Inverse of :meth:`to_dict`; unknown keys are errors that list the valid ones."""
        return build_checked(cls, data, "gafm")
