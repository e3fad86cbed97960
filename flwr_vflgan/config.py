"""The settings of a run's algorithm: which one (:class:`Variant`) and every family's
settings, validated.

Each family owns its settings in its own package (the VFLGAN family's models and
schedule in :mod:`flwr_vflgan.gan.config`, VT-GAN's in :mod:`flwr_vflgan.vtgan.config`,
split classification's in :mod:`flwr_vflgan.gafm.config`, DP in
:mod:`flwr_vflgan.privacy.config`); this umbrella sits above the families, which never
import it, and below the strategies, clients and simulations, which pass it around.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from flwr_vflgan.checked import build_checked
from flwr_vflgan.dplt.config import DPLTSettings
from flwr_vflgan.gafm.config import GAFMSettings
from flwr_vflgan.gan.config import GSWGANSettings, ModelConfig, TrainConfig
from flwr_vflgan.latent.config import LatentSettings
from flwr_vflgan.marginals.config import MarginalSettings
from flwr_vflgan.privacy.config import DPConfig, Mechanism
from flwr_vflgan.series.config import SeriesSettings
from flwr_vflgan.vtgan.config import VTGANSettings

__all__ = ["ModelConfig", "TrainConfig", "VFLGANConfig", "Variant", "parse_variant"]


class Variant(StrEnum):
    """Which algorithm to train (``algorithm=<name>``); each belongs to one family
    (``simulations/families.py``)."""

    VFLGAN = "vflgan"
    """Local discriminators with a local second part, plus the shared discriminator."""
    VFLGAN_BASE = "vflgan_base"
    """Paper 000, Appendix A.5: the local second parts and their losses are removed."""
    WGAN_GP = "wgan_gp"
    """Centralized WGAN-GP on the concatenated table: the quality upper bound."""
    GS_WGAN = "gs_wgan"
    """GS-WGAN (Chen et al. 2020) on the centralized WGAN-GP's networks, paper 000's DP
    baseline: discriminators on disjoint shards, sanitized gradients to the generator."""
    VERTIGAN = "vertigan"
    """VertiGAN (paper 000, Section 2.3): a generator backbone shared by summed gradients,
    a private head and a private WGAN-GP discriminator per party; no shared discriminator."""
    VDGAN = "vdgan"
    """VDGAN (paper 004, Algorithm 3): a global generator on the server, one critic per
    client; only synthetic columns and their gradients cross."""
    VFLGAN_TS = "vflgan_ts"
    """VFLGAN-TS (paper 003): VFLGAN's protocol for multivariate time series split by
    channel: channel generators on shared noise, attribute discriminators and a feature
    extractor per party, the shared discriminator on the server."""
    VTGAN = "vtgan"
    """VT-GAN (paper 001): conditional tabular GAN split between server and clients."""
    CTGAN = "ctgan"
    """VT-GAN's centralized baseline: the same conditional tabular GAN on the whole table."""
    GAFM = "gafm"
    """GAFM (paper 002): label-protected split classification."""
    SPLITNN = "splitnn"
    """Vanilla split learning (paper 002's Vanilla baseline)."""
    MAXNORM = "maxnorm"
    """Split learning with Max Norm's gradient noise (paper 002's baseline)."""
    MARVELL = "marvell"
    """Split learning with Marvell's gradient noise (paper 002's baseline)."""
    LATENT_DIFFUSION = "latent_diffusion"
    """One-round latent diffusion (SiloFuse-style): an autoencoder per party, the latents
    of its rows sent once, a diffusion model on the server, each party decoding its slice
    of the sampled latents."""
    AIM = "aim"
    """AIM (McKenna et al. 2022): centralized DP synthesis from noisy marginals."""
    MST = "mst"
    """MST (McKenna, Miklau and Sheldon 2021): centralized DP synthesis from a tree of
    noisy two-way marginals."""
    DPLT = "dplt"
    """DPLT (Tang et al. 2019; papers 000 and 004's pure epsilon-DP baseline): a latent
    tree over every party's grouped binary attributes, its statistics noised."""


@dataclass(frozen=True)
class VFLGANConfig:
    """Everything a run's algorithm needs besides the data and the runtime: the variant
    and every family's settings (each family reads its own part)."""

    variant: Variant = Variant.VFLGAN
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    dp: DPConfig = field(default_factory=DPConfig)
    vtgan: VTGANSettings = field(default_factory=VTGANSettings)
    """VT-GAN's own settings (used by ``vtgan`` and ``ctgan`` only)."""
    gafm: GAFMSettings = field(default_factory=GAFMSettings)
    """Split classification's settings (used by ``gafm``, ``splitnn``, ``maxnorm`` and
    ``marvell`` only)."""
    marginals: MarginalSettings = field(default_factory=MarginalSettings)
    """The marginal baselines' settings (used by ``aim`` and ``mst`` only)."""
    series: SeriesSettings = field(default_factory=SeriesSettings)
    """VFLGAN-TS's models, learning rates and loss weights (used by ``vflgan_ts`` only)."""
    latent: LatentSettings = field(default_factory=LatentSettings)
    """The autoencoders' and the diffusion model's settings (``latent_diffusion`` only)."""
    gs_wgan: GSWGANSettings = field(default_factory=GSWGANSettings)
    """GS-WGAN's discriminator count and drift penalty (``gs_wgan`` only)."""
    dplt: DPLTSettings = field(default_factory=DPLTSettings)
    """The latent tree's coding, groups, latent states and budget split (``dplt`` only)."""

    def __post_init__(self) -> None:
        if not isinstance(self.variant, Variant):
            object.__setattr__(self, "variant", parse_variant(self.variant))
        if isinstance(self.dp, dict):
            object.__setattr__(self, "dp", DPConfig.from_dict(self.dp))
        if isinstance(self.vtgan, dict):
            object.__setattr__(self, "vtgan", VTGANSettings.from_dict(self.vtgan))
        if isinstance(self.gafm, dict):
            object.__setattr__(self, "gafm", GAFMSettings.from_dict(self.gafm))
        if isinstance(self.marginals, dict):
            object.__setattr__(self, "marginals", MarginalSettings.from_dict(self.marginals))
        if isinstance(self.series, dict):
            object.__setattr__(self, "series", SeriesSettings.from_dict(self.series))
        if isinstance(self.latent, dict):
            object.__setattr__(self, "latent", LatentSettings.from_dict(self.latent))
        if isinstance(self.gs_wgan, dict):
            object.__setattr__(self, "gs_wgan", GSWGANSettings.from_dict(self.gs_wgan))
        if isinstance(self.dplt, dict):
            object.__setattr__(self, "dplt", DPLTSettings.from_dict(self.dplt))
        self._check_series()
        self._check_marginal()
        self._check_vdgan()
        self._check_latent()
        self._check_gs_wgan()
        if self.variant is Variant.VERTIGAN and self.dp.mechanism is Mechanism.END_TO_END:
            raise ValueError(
                "dp=end_to_end accounts VFLGAN's shared discriminator with the parties' "
                "discriminators; vertigan has none: use dp=dpsgd (VertiGAN's own DP-SGD, one "
                "joint account over the parties) or dp=vflgan_gaussian (paper 000's Table 1)"
            )
        self._check_masking()
        if self.gafm.ablation is not None and self.variant is not Variant.GAFM:
            raise ValueError(
                f"gafm.ablation={self.gafm.ablation} ablates GAFM's gradient; "
                f"algorithm={self.variant.value} has none: remove it or use algorithm=gafm"
            )
        k = self.train.steps_per_exchange
        if k != 1 and self.variant is Variant.CTGAN:
            raise ValueError(
                f"train.steps_per_exchange={k}: ctgan trains in one process and exchanges "
                "nothing; set train.steps_per_exchange=1"
            )
        if k != 1 and self.is_gafm:
            raise ValueError(
                f"train.steps_per_exchange={k}: {self.variant.value} takes its steps per "
                "exchange from gafm.steps_per_exchange; set train.steps_per_exchange=1"
            )
        self._check_generator_options()

    def _check_generator_options(self) -> None:
        """Refuse the generator options of ``flwr_vflgan.gan`` for a family that ignores them."""
        schedule_families = (Variant.VFLGAN, Variant.VFLGAN_BASE, Variant.WGAN_GP)
        if self.train.generator_steps != 1 and self.variant not in schedule_families:
            raise ValueError(
                f"train.generator_steps={self.train.generator_steps}: several generator steps "
                f"per n_critic discriminator steps are built for vflgan, vflgan_base and "
                f"wgan_gp; {self.variant.value} takes one: remove it"
            )
        if self.train.generator_average is not None and not (
            self.is_vflgan_family or self.is_series
        ):
            raise ValueError(
                f"train.generator_average averages the generators of the VFLGAN family "
                f"(vflgan, vflgan_base, wgan_gp, gs_wgan, vertigan) and vflgan_ts; "
                f"{self.variant.value} does not use it: remove it"
            )
        if self.train.generator_lr is not None and not (self.is_vflgan_family or self.is_vdgan):
            raise ValueError(
                f"train.generator_lr sets the generators' learning rate of vflgan, "
                f"vflgan_base, wgan_gp, gs_wgan, vertigan and vdgan; {self.variant.value} "
                "does not use it: remove it"
            )

    def _check_masking(self) -> None:
        size = self.dp.masked_batch_size
        if size is None:
            return
        if self.variant not in (Variant.VFLGAN, Variant.VFLGAN_BASE):
            raise ValueError(
                f"dp.masked_batch_size is paper 000's batch masking for vflgan and "
                f"vflgan_base; algorithm={self.variant.value} does not take it: remove it"
            )
        if size <= self.train.batch_size:
            raise ValueError(
                f"dp.masked_batch_size={size} must exceed train.batch_size="
                f"{self.train.batch_size}: each party keeps train.batch_size of the "
                "masked_batch_size rows a step draws"
            )

    def _check_marginal(self) -> None:
        if not (self.is_marginal or self.is_dplt):
            return
        if self.dp.mechanism is not Mechanism.END_TO_END:
            raise ValueError(
                f"algorithm={self.variant.value} is differentially private by construction "
                "and needs a budget: add dp=end_to_end dp.target_epsilon=<epsilon>"
            )
        # The GANs' noise settings would be silently ignored: AIM and MST calibrate theirs.
        if self.dp.noise_multiplier is not None or self.dp.select_by_fd:
            raise ValueError(
                f"algorithm={self.variant.value} sets its own noise from dp.target_epsilon and "
                "dp.delta and publishes one table: remove dp.noise_multiplier and "
                "dp.select_by_fd"
            )
        if self.is_dplt and self.train.steps_per_exchange != 1:
            raise ValueError(
                f"train.steps_per_exchange={self.train.steps_per_exchange}: dplt exchanges "
                "once each way; remove it"
            )

    def _check_gs_wgan(self) -> None:
        gs = self.variant is Variant.GS_WGAN
        if gs and self.dp.enabled and self.dp.mechanism is not Mechanism.GS_WGAN:
            raise ValueError(
                f"algorithm=gs_wgan is made private by its own gradient sanitization: use "
                f"dp=gs_wgan (or dp=none), not dp={self.dp.mechanism.value}"
            )
        if not gs and self.dp.mechanism is Mechanism.GS_WGAN:
            raise ValueError(
                f"dp=gs_wgan sanitizes the gradients of GS-WGAN's shard discriminators "
                f"(algorithm=gs_wgan); algorithm={self.variant.value} has none"
            )

    def _check_series(self) -> None:
        if not self.is_series:
            return
        if self.dp.enabled and self.dp.mechanism is not Mechanism.VFLGAN_GAUSSIAN:
            raise ValueError(
                f"dp={self.dp.mechanism.value} is not built for vflgan_ts: DPVFLGAN-TS is "
                "paper 003's first-layer mechanism, dp=vflgan_gaussian"
            )

    def _check_latent(self) -> None:
        if not self.is_latent:
            return
        if self.dp.enabled:
            raise ValueError(
                "algorithm=latent_diffusion has no DP mode yet: its latents of real rows reach "
                "the server un-noised; use dp=none, or a DP algorithm (dp=end_to_end with "
                "vflgan, aim or mst)"
            )
        if self.train.steps_per_exchange != 1:
            raise ValueError(
                f"train.steps_per_exchange={self.train.steps_per_exchange}: latent_diffusion "
                "exchanges once each way whatever its epochs; remove it"
            )

    def _check_vdgan(self) -> None:
        if not self.is_vdgan:
            if self.dp.mechanism is Mechanism.PATE:
                raise ValueError(
                    f"dp=pate is VDGAN-PATE's mechanism (algorithm=vdgan); "
                    f"algorithm={self.variant.value} has no teachers to vote"
                )
            if self.train.warmup_epochs:
                raise ValueError(
                    f"train.warmup_epochs is VDGAN's client warm-up (algorithm=vdgan); "
                    f"algorithm={self.variant.value} has none: remove it"
                )
            return
        if self.train.warmup_epochs and self.dp.enabled:
            raise ValueError(
                "train.warmup_epochs trains the critics on the clients' rows outside the "
                "privacy account: with dp enabled, remove it"
            )
        if self.dp.enabled and self.dp.mechanism not in (Mechanism.DPSGD, Mechanism.PATE):
            raise ValueError(
                f"algorithm=vdgan trains its critics with dp=dpsgd (VDGAN-DPSGD) or dp=pate "
                f"(VDGAN-PATE); dp={self.dp.mechanism.value} is not built for it"
            )
        if self.dp.enabled and self.dp.poisson:
            raise ValueError(
                "VDGAN-DPSGD draws fixed-size batches against the server's fixed synthetic "
                "batch: remove dp.sampling=poisson"
            )
        if self.train.steps_per_exchange != 1:
            raise ValueError(
                f"train.steps_per_exchange={self.train.steps_per_exchange}: a VDGAN exchange "
                "is one iteration (n_critic critic steps and the generator's); set it to 1"
            )

    @property
    def is_latent(self) -> bool:
        """Whether this is the one-round latent diffusion family."""
        return self.variant is Variant.LATENT_DIFFUSION

    @property
    def is_vdgan(self) -> bool:
        """Whether this is VDGAN (a generator on the server, critics at the clients)."""
        return self.variant is Variant.VDGAN

    @property
    def is_series(self) -> bool:
        """Whether this is VFLGAN-TS (multivariate time series)."""
        return self.variant is Variant.VFLGAN_TS

    @property
    def is_dplt(self) -> bool:
        """Whether this is the DPLT baseline (a latent tree over the parties' bits)."""
        return self.variant is Variant.DPLT

    @property
    def is_marginal(self) -> bool:
        """Whether this is a marginal-based DP baseline (AIM or MST)."""
        return self.variant in (Variant.AIM, Variant.MST)

    @property
    def is_vflgan_family(self) -> bool:
        """Whether this is VFLGAN, VFLGAN-base, the centralized WGAN-GP, GS-WGAN or
        VertiGAN."""
        return self.variant in (
            Variant.VFLGAN,
            Variant.VFLGAN_BASE,
            Variant.WGAN_GP,
            Variant.GS_WGAN,
            Variant.VERTIGAN,
        )

    @property
    def is_vtgan(self) -> bool:
        """Whether this is VT-GAN or its centralized baseline."""
        return self.variant in (Variant.VTGAN, Variant.CTGAN)

    @property
    def is_gafm(self) -> bool:
        """Whether this is split classification (GAFM or one of its baselines)."""
        return self.variant in (Variant.GAFM, Variant.SPLITNN, Variant.MAXNORM, Variant.MARVELL)

    @property
    def has_local_head(self) -> bool:
        """Whether local discriminators have a second part and their own loss (VFLGAN's
        and VertiGAN's, whose whole objective it is)."""
        return self.variant in (Variant.VFLGAN, Variant.VERTIGAN)

    @property
    def shares_backbone(self) -> bool:
        """Whether the parties share a generator backbone and the server holds no
        discriminator (VertiGAN)."""
        return self.variant is Variant.VERTIGAN

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form (the inverse of :meth:`from_dict`)."""
        out = asdict(self)
        out["variant"] = self.variant.value
        out["dp"] = self.dp.to_dict()
        out["vtgan"] = self.vtgan.to_dict()
        out["gafm"] = self.gafm.to_dict()
        out["marginals"] = self.marginals.to_dict()
        out["series"] = self.series.to_dict()
        out["latent"] = self.latent.to_dict()
        out["gs_wgan"] = self.gs_wgan.to_dict()
        out["dplt"] = self.dplt.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VFLGANConfig:
        """Build from a plain mapping; unknown keys are errors that list the valid ones."""
        data = dict(data)
        model = build_checked(ModelConfig, data.pop("model", {}) or {}, "model")
        train = build_checked(TrainConfig, data.pop("train", {}) or {}, "train")
        dp = DPConfig.from_dict(dict(data.pop("dp", {}) or {}))
        vtgan = VTGANSettings.from_dict(dict(data.pop("vtgan", {}) or {}))
        gafm = GAFMSettings.from_dict(dict(data.pop("gafm", {}) or {}))
        marginals = MarginalSettings.from_dict(dict(data.pop("marginals", {}) or {}))
        series = SeriesSettings.from_dict(dict(data.pop("series", {}) or {}))
        latent = LatentSettings.from_dict(dict(data.pop("latent", {}) or {}))
        gs_wgan = GSWGANSettings.from_dict(dict(data.pop("gs_wgan", {}) or {}))
        dplt = DPLTSettings.from_dict(dict(data.pop("dplt", {}) or {}))
        variant = data.pop("variant", Variant.VFLGAN.value)
        if data:
            raise ValueError(
                f"unknown VFLGAN config keys {sorted(data)}; valid: "
                "['dp', 'dplt', 'gafm', 'gs_wgan', 'latent', 'marginals', 'model', 'series', 'train', "
                "'variant', 'vtgan']"
            )
        return cls(
            variant=parse_variant(variant),
            model=model,
            train=train,
            dp=dp,
            vtgan=vtgan,
            gafm=gafm,
            marginals=marginals,
            series=series,
            latent=latent,
            gs_wgan=gs_wgan,
            dplt=dplt,
        )


SETTINGS_ADDED_SINCE: dict[str, object] = {
    "train.generator_steps": 1,  # one generator step per n_critic steps before it was a setting
    "series.train.loss": "bce",  # VFLGAN-TS trained with cross-entropy before WGAN-GP was an option
    "series.model.generator_smoothing": None,
}
"""Settings added after runs were written whose value here reproduces those runs exactly
(dotted path in the algorithm configuration: value). A checkpoint or finished run
written before a listed setting existed is read as if it held that value, so it resumes
(or is reused) under a version that has the setting. A setting whose default changes what
old runs did (VT-GAN's ``point_mass_share``) is not listed: its absence is a difference,
and the run is refused. Adding a setting? List it here when its default is the old
behaviour."""


def settings_as_read_now(config_json: str) -> str:
    """A configuration written by an earlier version (a checkpoint's, a finished run's
    ``config.json``) with every setting of :data:`SETTINGS_ADDED_SINCE` it lacks filled in;
    anything that is not an algorithm configuration (no ``variant``) is returned as is."""
    data = json.loads(config_json)
    if not isinstance(data, dict) or "variant" not in data:
        return config_json
    for path, value in SETTINGS_ADDED_SINCE.items():
        *parents, leaf = path.split(".")
        node: object = data
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf not in node:
            node[leaf] = value
    return json.dumps(data, sort_keys=True)


def parse_variant(value: str | Variant) -> Variant:
    """Parse a variant name, listing the valid ones on error."""
    if isinstance(value, Variant):
        return value
    try:
        return Variant(value)
    except ValueError:
        valid = [v.value for v in Variant]
        raise ValueError(f"unknown algorithm variant {value!r}; valid: {valid}") from None
