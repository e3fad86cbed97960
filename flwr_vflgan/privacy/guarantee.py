"""What a run's epsilon covers, named, so that no number is quoted for more than it proves.

Every DP run reports one :class:`Guarantee` beside its epsilon (``metrics.json``'s
``privacy.guarantee``, the printed privacy line and report.md):

* ``first_layer`` (``dp=vflgan_gaussian``): paper 000's argument (Theorem 1; paper
  003's Theorem 1 for VFLGAN-TS, whose parties noise the first layer of every attribute
  discriminator and feature extractor). Only the
  first linear layer of each discriminator is clipped and noised; the later layers, the
  shared discriminator ``D_s`` and the encoders read the real rows un-noised. The paper
  holds that the generators are post-processing of the noised layer; that is its claim,
  not something this project proves.
* ``local_discriminators`` (``dp=dpsgd`` on VFLGAN and VFLGAN-base): every update of each
  party's whole local discriminator is a per-row clipped Gaussian update, but the server's
  ``D_s`` is trained un-noised on the real rows' features, and the generators learn from
  ``D_s``: the epsilon bounds what the parties' discriminators release, not the table.
* ``critic_updates`` (``dp=dpsgd`` on the centralized WGAN-GP, VT-GAN and CTGAN): every
  parameter update that reads real rows is clipped and noised (VT-GAN: every critic part,
  server and clients, plus the category counts, in one joint account). What is left out
  is preprocessing: the encoders' statistics (means, deviations, modes, category lists)
  were fitted on the private rows.

* ``end_to_end`` (``dp=end_to_end`` on VFLGAN, VFLGAN-base and WGAN-GP; AIM and MST
  always, their releases being noisy marginals accounted in zCDP): every update
  that reads real rows is a per-row clipped Gaussian update, the server's ``D_s``
  included, the releases of one step are accounted as one mechanism, and the encoders
  come from public metadata, so the published table is post-processing. What the parties
  and the server observe while training is outside it.

* ``sanitized_gradients`` (``dp=gs_wgan`` on GS-WGAN): the only release that reaches the
  generator is the gradient each synthetic sample receives from one of ``K`` shard
  discriminators, clipped and noised (:mod:`flwr_vflgan.gan.gs_wgan`); the discriminators
  read their shards un-noised and are never published.

* ``noisy_votes`` (``dp=pate`` on VDGAN): the only release that depends on real rows is
  each client's noisy, thresholded vote of its teachers' gradient signs (thesis
  Algorithm 4), accounted with :mod:`flwr_vflgan.privacy.pate`; the teachers stay at the
  client, and the generator and the table are post-processing.

Whatever the guarantee, choosing the published epoch by its Frechet distance to the
real table (``dp.select_by_fd=true``) reads the data outside the mechanism, and it is
listed among what is not covered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from flwr_vflgan.privacy.config import DPConfig, Mechanism


class Guarantee(StrEnum):
    """What the reported epsilon is a bound for."""

    FIRST_LAYER = "first_layer"
    """Paper 000's first-layer argument; later layers and ``D_s`` are not noised."""
    LOCAL_DISCRIMINATORS = "local_discriminators"
    """Each party's whole discriminator is DP-SGD; the server's ``D_s`` is not noised."""
    CRITIC_UPDATES = "critic_updates"
    """Every update that reads real rows is noised; preprocessing is not covered."""
    END_TO_END = "end_to_end"
    """Every update that reads real rows is noised and the encoders are public: the
    published table is post-processing of the accounted releases."""
    NOISY_VOTES = "noisy_votes"
    """VDGAN-PATE: the teachers read real rows un-noised but never leave their client;
    only their noisy, thresholded votes do, and everything after is post-processing."""
    SANITIZED_GRADIENTS = "sanitized_gradients"
    """GS-WGAN: the shard discriminators read real rows un-noised and are never
    published; only the clipped, noised gradients they pass to the generator reach it."""


_ENCODERS = "the encoders (numeric statistics, modes and category lists fitted on the private rows)"
_SELECTION = "the choice of the published epoch by its Frechet distance to the real table"
SERIES_SCALING = (
    "each party's per-channel minimum and maximum (the scaling to [-1, 1] is fitted on its "
    "private series, and the published series are decoded with it)"
)
"""Not covered for VFLGAN-TS on data its parties scale (a user's file, a real built-in)."""


@dataclass(frozen=True)
class GuaranteeStatement:
    """A guarantee, what it covers and what it does not, in words.

    Parameters
    ----------
    guarantee
        The name reported in ``metrics.json``.
    covers
        One sentence: which updates the epsilon bounds.
    not_covered
        What reads the real rows outside the accounted mechanism.
    """

    guarantee: Guarantee
    covers: str
    not_covered: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """``metrics.json``'s ``privacy.guarantee``, ``covers`` and ``not_covered``."""
        return {
            "guarantee": self.guarantee.value,
            "covers": self.covers,
            "not_covered": list(self.not_covered),
        }

    def sentence(self) -> str:
        """One line for the console and report.md."""
        return f"{self.guarantee.value}: {self.covers}; not covered: {'; '.join(self.not_covered)}"


def describe_guarantee(
    variant: str, dp: DPConfig, *, preprocessing: tuple[str, ...] = ()
) -> GuaranteeStatement | None:
    """What ``dp``'s epsilon covers for algorithm ``variant`` (``None`` without DP).

    Parameters
    ----------
    variant
        The algorithm (``algorithm.variant``: ``vflgan``, ``vflgan_base``, ``wgan_gp``,
        ``vtgan``, ``ctgan``, ``vflgan_ts``).
    dp
        The run's DP settings.
    preprocessing
        What the run's data preparation read from the private rows beyond what the
        variant's statement already lists (:data:`SERIES_SCALING` for scaled series).

    Raises
    ------
    ValueError
        For a variant and mechanism this project does not run together.
    """
    if not dp.enabled:
        return None
    statement = _statement(variant, dp.mechanism)
    extra = (*preprocessing, *((_SELECTION,) if dp.select_by_fd else ()))
    if extra:
        statement = GuaranteeStatement(
            statement.guarantee, statement.covers, (*statement.not_covered, *extra)
        )
    return statement


_FIRST_LAYER = (
    "paper 000's first-layer argument: each discriminator's first layer is clipped and "
    "noised, and the paper holds the generators to be its post-processing"
)
_RNG = "the noise comes from PyTorch's generator, not a cryptographically secure source"
_PER_ROW = "per-row clipped, Gaussian noise"
_POST = "the generators and the published table are their post-processing"

_INSIDERS = (
    "the other parties, who know which rows form each batch: the epsilon's amplification "
    "by sampling holds against the server and outsiders only; each party reports its "
    "epsilon against them, which dp.masked_batch_size (batch masking) lowers"
)
_FEDERATED = ("vflgan", "vflgan_base")
_STATEMENTS: dict[tuple[Mechanism, str], GuaranteeStatement] = {
    **{
        (Mechanism.VFLGAN_GAUSSIAN, v): GuaranteeStatement(
            Guarantee.FIRST_LAYER,
            _FIRST_LAYER,
            (
                "the shared discriminator D_s and the later layers of each local "
                "discriminator (trained un-noised on real rows)",
                _ENCODERS,
                _INSIDERS,
            ),
        )
        for v in _FEDERATED
    },
    (Mechanism.VFLGAN_GAUSSIAN, "vertigan"): GuaranteeStatement(
        Guarantee.FIRST_LAYER,
        _FIRST_LAYER,
        (
            "the later layers of each party's discriminator (trained un-noised on real rows)",
            _ENCODERS,
        ),
    ),
    (Mechanism.DPSGD, "vertigan"): GuaranteeStatement(
        Guarantee.CRITIC_UPDATES,
        "every update of every party's discriminator, the only models that read real rows "
        f"({_PER_ROW}, the M parties' releases of a step in one joint account); the "
        "backbone gradients the server adds, the generators and the published table are "
        "their post-processing",
        (_ENCODERS,),
    ),
    (Mechanism.PATE, "vdgan"): GuaranteeStatement(
        Guarantee.NOISY_VOTES,
        "every release that depends on real rows: each client's noisy, thresholded votes "
        "of its teachers' gradient signs (Gaussian noise, the N clients' votes in one "
        "joint account, no amplification by sampling); the teachers stay at their client, "
        "and the server's generator and the published table are post-processing",
        (
            _ENCODERS,
            "the teachers themselves (trained un-noised on their shards: they must never "
            "leave the client)",
            _RNG,
        ),
    ),
    (Mechanism.GS_WGAN, "gs_wgan"): GuaranteeStatement(
        Guarantee.SANITIZED_GRADIENTS,
        "every release that reaches the generator: the gradient each synthetic sample "
        "receives from the generator step's discriminator, clipped to C and noised "
        "(GS-WGAN's sanitization; the batch's gradients in one joint account, the "
        "discriminator one of K on disjoint shards drawn uniformly); the generator and the "
        "published table are their post-processing",
        (
            _ENCODERS,
            "the K discriminators themselves (trained un-noised on their shards: they must "
            "never be released)",
            _RNG,
        ),
    ),
    (Mechanism.DPSGD, "vdgan"): GuaranteeStatement(
        Guarantee.CRITIC_UPDATES,
        "every update of every client's critic, the only models that read real rows "
        f"({_PER_ROW}, the N clients' releases of a step in one joint account); the "
        "gradients the clients return, the server's generator and the published table "
        "are their post-processing",
        (_ENCODERS,),
    ),
    (Mechanism.VFLGAN_GAUSSIAN, "vflgan_ts"): GuaranteeStatement(
        Guarantee.FIRST_LAYER,
        "paper 003's first-layer argument (Theorem 1): the first layer of each attribute "
        "discriminator and of each feature extractor is clipped and noised on its own "
        "(Gaussian noise of the gradient's shape), a party's releases of a step in one "
        "joint account, and the paper holds the generators to be their post-processing",
        (
            "the shared discriminator D_s and the later layers of each attribute "
            "discriminator and feature extractor (trained un-noised on real series)",
        ),
    ),
    (Mechanism.VFLGAN_GAUSSIAN, "wgan_gp"): GuaranteeStatement(
        Guarantee.FIRST_LAYER,
        _FIRST_LAYER,
        ("the critic's later layers (trained un-noised on real rows)", _ENCODERS),
    ),
    **{
        (Mechanism.DPSGD, v): GuaranteeStatement(
            Guarantee.LOCAL_DISCRIMINATORS,
            f"every update of each party's local discriminator ({_PER_ROW})",
            (
                "the server's shared discriminator D_s (trained un-noised on real-row "
                "features), and through it the generators and the published table",
                _ENCODERS,
                _INSIDERS,
            ),
        )
        for v in _FEDERATED
    },
    **{
        (Mechanism.DPSGD, v): GuaranteeStatement(
            Guarantee.CRITIC_UPDATES, f"every update of the critic ({_PER_ROW})", (_ENCODERS,)
        )
        for v in ("wgan_gp", "ctgan")
    },
    (Mechanism.DPSGD, "vtgan"): GuaranteeStatement(
        Guarantee.CRITIC_UPDATES,
        "every update of every critic part, server's and clients', and the noisy category "
        f"counts ({_PER_ROW}, one joint account)",
        (
            _ENCODERS,
            "what the server sees in training (the chosen client's conditions of the "
            "sampled real rows, sent in the clear)",
        ),
    ),
    **{
        (Mechanism.END_TO_END, v): GuaranteeStatement(
            Guarantee.END_TO_END,
            "every update that reads real rows: each party's whole local discriminator and "
            f"the server's shared discriminator D_s ({_PER_ROW}, the step's releases in one "
            f"joint account), with encoders from public metadata; {_POST}",
            (
                "what the parties and the server see while training (real-row features at "
                "the server, its feature gradients at the parties, which rows form a batch)",
                "that the server adds its noise (the parties cannot check it)",
                _RNG,
            ),
        )
        for v in _FEDERATED
    },
    (Mechanism.END_TO_END, "wgan_gp"): GuaranteeStatement(
        Guarantee.END_TO_END,
        f"every update of the critic ({_PER_ROW}), with encoders from public metadata; "
        "the generator and the published table are their post-processing",
        (_RNG,),
    ),
    **{
        (Mechanism.END_TO_END, v): GuaranteeStatement(
            Guarantee.END_TO_END,
            "every release that reads real rows: the noisy marginals (Gaussian) and the "
            "choices of which to measure (exponential mechanism), in one zCDP account over "
            "add/remove-one neighbours, with the codes from public metadata; the model and "
            "the published table are their post-processing",
            (
                "the number of rows (the published table has as many unless "
                "output.publish_rows says otherwise)",
                "the noise comes from numpy's generator, not a cryptographically secure source",
            ),
        )
        for v in ("aim", "mst")
    },
    (Mechanism.END_TO_END, "dplt"): GuaranteeStatement(
        Guarantee.END_TO_END,
        "every release that reads real rows: each party's choices of which bits to group "
        "(exponential mechanism) and its groups' histograms, the server's tables of every "
        "pair of latent attributes and of the tree's edges (Laplace), in one pure epsilon-DP "
        "account (sequential composition) over replace-one neighbours, with the codes from "
        "public metadata; the tree and the published table are their post-processing",
        (
            "the latent state of every row of every group, which each party sends the "
            "server un-noised as paper 004 describes (the guarantee holds for what the "
            "server publishes, not against the server)",
            "the number of rows (the published table has as many unless "
            "output.publish_rows says otherwise)",
            "the noise comes from numpy's generator, not a cryptographically secure source, "
            "seeded from the run seed (in config.json) unless a party sets its node's "
            "noise-seed",
        ),
    ),
}


def _statement(variant: str, mechanism: Mechanism) -> GuaranteeStatement:
    try:
        return _STATEMENTS[(mechanism, variant)]
    except KeyError:
        raise ValueError(f"algorithm {variant!r} does not run with dp={mechanism.value}") from None


def spent_description(holder: Mapping[str, Any]) -> str:
    """How one data holder's epsilon was spent, in words (the console and report.md):
    the discriminator steps and their noise, or AIM's and MST's zCDP releases."""
    if holder.get("accountant") == "pate-votes":
        return (
            f"{holder['steps']} iterations of noisy votes on {holder['batch_size']} rows, "
            f"{holder['teachers']} teachers, top-{holder['top_k']} signs, sigma "
            f"{holder['noise_multiplier']:.4g}, classic conversion"
        )
    if holder.get("mechanism") == "gs_wgan":
        return (
            f"{holder['steps']} generator steps, each reading one of {holder['dataset_size']} "
            f"shard discriminators through {holder['parts']} sanitized sample gradients, "
            f"sigma {holder['noise_multiplier']:.4f}, {holder['accountant']}, "
            f"{holder['conversion']} conversion"
        )
    if holder.get("mechanism") == "dplt":
        steps = holder["spent_by_step"]
        return (
            f"pure epsilon-DP: {holder['selections']} grouping choices (epsilon "
            f"{steps['grouping']:.4g}), {holder['pairs']} pair tables (Laplace scale "
            f"{holder['pair_scale']:.4g}, epsilon {steps['mutual_information']:.4g}), "
            f"{2 * holder['steps']} parameter tables (scale {holder['parameter_scale']:.4g}, "
            f"epsilon {steps['parameters']:.4g}), {holder['neighbours']} neighbours"
        )
    if holder.get("accountant") == "zcdp":
        return (
            f"rho {holder['rho_spent']:.4f}-zCDP: {holder['steps']} noisy marginals and "
            f"{holder['selections']} selections, {holder['neighbours']} neighbours, "
            "Canonne-Kamath-Steinke conversion"
        )
    return (
        f"{holder['steps']} discriminator steps, sigma {holder['noise_multiplier']:.4f}, "
        f"{holder['accountant']}, {holder['conversion']} conversion"
    )


def against_parties_description(holder: Mapping[str, Any]) -> str | None:
    """One party's guarantee against the other parties, in words (``None`` when the
    holder has none): see :mod:`flwr_vflgan.privacy.masking`."""
    insiders = holder.get("against_parties")
    if not insiders:
        return None
    steps = holder.get("steps")
    held = (
        f"the most-used row was in {insiders['appearances']} of the "
        f"{'' if steps is None else f'{steps} '}discriminator batches, which every party knows"
    )
    if insiders["masked"]:
        how = (
            f"batch masking: each step kept {insiders['batch_size']} of "
            f"{insiders['drawn_rows']} drawn rows, unknown to the others"
        )
    else:
        how = "no batch masking (dp.masked_batch_size lowers it)"
    return (
        f"epsilon {insiders['epsilon']:.4f} at delta {insiders['delta']:g} against the other "
        f"parties; {how}; {held}"
    )
