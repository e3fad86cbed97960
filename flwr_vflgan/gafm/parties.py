"""The two roles of split classification, as plain PyTorch objects.

:class:`LabelParty` (the server) holds the labels' side: ``F``, GAFM's generator and
discriminator or vanilla split learning's head, and the defenses. Given the parties'
cut values for a batch and the batch's labels it updates its own models and returns the
gradient each party receives. :class:`LocalParty` (a non-label party) holds ``f_p`` and
its Adam optimiser: it computes cut values for rows the label party names and applies
the gradient it gets back.

Update order (Section 3.2, Algorithm A.1): the discriminator, then the generator, then
the local models, whose gradients are computed with the updated generator and
discriminator. (The reference code takes them before the generator's update.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from flwr_vflgan.runtime.rng import Stream, derive_seed, torch_generator

from .config import GAFMSettings, Method
from .defenses import marvell, max_norm
from .losses import (
    ce_loss,
    clip_weights,
    critic_loss,
    cut_score,
    generator_loss,
    noisy_labels,
    normalized,
    randomized_response,
)
from .models import combine, discriminator, head, local_model, seeded

# The seed of party p's local model is derive_seed(seed, INIT, 0, p); the label party's
# models use extras from here on, so no two models share an initialisation.
_LABEL_PARTY_INIT = 1 << 20


def _adam(params: object, lr: float, settings: GAFMSettings) -> torch.optim.Adam:
    return torch.optim.Adam(params, lr=lr, betas=settings.betas)  # type: ignore[arg-type]


@dataclass
class StepResult:
    """What one label-party step produced."""

    grads: list[torch.Tensor]
    """The gradient each party receives, shape (batch, cut_dim), float32."""
    stats: dict[str, float] = field(default_factory=dict)
    trace: dict[str, np.ndarray] | None = None
    """With :attr:`LabelParty.tracing`: per row of the batch, its label, the prediction and
    party 0's gradient summed over the cut (for GAFM also its GAN and CE terms): paper
    002's Figure 2 (:func:`~flwr_vflgan.gafm.plots.plot_gradients`)."""


def _per_row(values: torch.Tensor) -> np.ndarray:
    """One number per row: the values summed over the cut dimensions."""
    return values.detach().reshape(values.shape[0], -1).sum(dim=1).numpy().astype(np.float64)


class LabelParty:
    """The label party's models and update rule for one method.

    Parameters
    ----------
    method
        ``gafm``, ``splitnn``, ``maxnorm`` or ``marvell``.
    settings
        Architecture and hyperparameters.
    n_parties
        Number of non-label parties ``P``.
    seed
        Seeds the initialisation, the label noise and the gradient perturbations.
    """

    def __init__(self, method: Method, settings: GAFMSettings, n_parties: int, seed: int) -> None:
        if n_parties < 1:
            raise ValueError(f"split learning needs at least one non-label party, got {n_parties}")
        self.method = Method(method)
        self.settings = settings
        self.n_parties = n_parties
        self.seed = seed
        self.how = settings.combine(n_parties)
        width = settings.head_input(n_parties)
        init = derive_seed(seed, Stream.INIT, 0, _LABEL_PARTY_INIT)
        self.head = seeded(head, init, width, settings)
        self.optimizers: dict[str, torch.optim.Adam] = {
            "head": _adam(self.head.parameters(), settings.lr_generator, settings)
        }
        self.disc: nn.Module | None = None
        if self.method is Method.GAFM:
            self.disc = seeded(
                discriminator, derive_seed(seed, Stream.INIT, 0, _LABEL_PARTY_INIT + 1), settings
            )
            clip_weights(self.disc, settings.clip)
            self.optimizers["disc"] = _adam(
                self.disc.parameters(), settings.lr_discriminator, settings
            )
        self.tracing = False
        """Whether :meth:`train_step` returns a :attr:`StepResult.trace`."""

    # -- training ------------------------------------------------------------------------
    def train_step(
        self, parts: Sequence[torch.Tensor], labels: torch.Tensor, step: int
    ) -> StepResult:
        """Update the label party's models on one batch and return each party's gradient.

        ``parts`` are the parties' cut values (each (batch, cut_dim)), ``labels`` the
        batch's 0/1 labels as floats of shape (batch,).
        """
        self._check(parts, labels)
        leaves = [p.detach().float().requires_grad_(True) for p in parts]
        trace: dict[str, np.ndarray] | None = {} if self.tracing else None
        if self.method is Method.GAFM:
            grads, stats = self._gafm(leaves, labels, step, trace)
            perturb = self.settings.marvell
        else:
            grads, stats = self._vanilla(leaves, labels, trace)
            perturb = self.method is not Method.SPLITNN
        if perturb:
            grads = self._defend(grads, labels, step, stats)
        if trace is not None:
            trace["label"] = labels.numpy().astype(np.int64)
            trace["gradient"] = _per_row(grads[0])
        return StepResult([g.detach().float().contiguous() for g in grads], stats, trace)

    def _gafm(
        self,
        leaves: list[torch.Tensor],
        labels: torch.Tensor,
        step: int,
        trace: dict[str, np.ndarray] | None = None,
    ) -> tuple[list[torch.Tensor], dict[str, float]]:
        s = self.settings
        assert self.disc is not None
        gen = torch_generator(self.seed, Stream.LABEL_NOISE, step)
        real = noisy_labels(labels, s.sigma, gen).unsqueeze(1)
        target = randomized_response(labels, s.delta, gen)
        cut = combine([x.detach() for x in leaves], self.how)
        # Step 1: the discriminator maximises L_GAN, then its weights are clipped.
        fake = self.head(cut).detach()
        loss_d = critic_loss(self.disc, real, fake)
        self.optimizers["disc"].zero_grad(set_to_none=True)
        loss_d.backward()
        self.optimizers["disc"].step()
        clip_weights(self.disc, s.clip)
        # Step 2: the generator minimises L_GAN.
        loss_g = generator_loss(self.disc, self.head(cut))
        self.optimizers["head"].zero_grad(set_to_none=True)
        loss_g.backward()
        self.optimizers["head"].step()
        # Step 3: the normalised GAN and CE gradients with respect to f(X).
        cut = combine(leaves, self.how)
        gan = generator_loss(self.disc, self.head(cut))
        (g_gan,) = torch.autograd.grad(gan, cut, retain_graph=False)
        ce = ce_loss(cut_score(cut, s.local_output == "sigmoid"), target)
        (g_ce,) = torch.autograd.grad(ce, cut, retain_graph=True)
        n_gan, n_ce = normalized(g_gan), normalized(g_ce)
        # Algorithm A.1, step 3 (without normalisation, or with one term, only for ablations).
        gan_term, ce_term = (s.gamma * n_gan, n_ce) if s.normalize else (s.gamma * g_gan, g_ce)
        if s.ablation == "gan_only":
            g_cut = gan_term
        elif s.ablation == "ce_only":
            g_cut = ce_term
        else:
            g_cut = gan_term + ce_term
        if trace is not None:
            trace["prediction"] = _per_row(self.head(cut))
            for name, term in (("gan", gan_term), ("ce", ce_term)):
                (part,) = torch.autograd.grad(cut, leaves[0], grad_outputs=term, retain_graph=True)
                trace[name] = _per_row(part)
        grads = torch.autograd.grad(cut, leaves, grad_outputs=g_cut)
        n = float(labels.shape[0])
        stats = {
            "loss_d": float(loss_d.detach()),
            "loss_g": float(loss_g.detach()),
            "wasserstein": float(-loss_d.detach()),
            "ce": float(ce.detach()),
            # Table D.3's balance check: the batch means of the two normalised terms that
            # gamma weighs, and of the raw per-example gradients (sum reduction).
            "gan_grad_mean": float(n_gan.sum(dim=1).mean()),
            "ce_grad_mean": float(n_ce.sum(dim=1).mean()),
            "gan_grad_mean_raw": float((g_gan * n).sum(dim=1).mean()),
            "ce_grad_mean_raw": float((g_ce * n).sum(dim=1).mean()),
        }
        return list(grads), stats

    def _vanilla(
        self,
        leaves: list[torch.Tensor],
        labels: torch.Tensor,
        trace: dict[str, np.ndarray] | None = None,
    ) -> tuple[list[torch.Tensor], dict[str, float]]:
        out = self.head(combine(leaves, self.how)).squeeze(1)
        if trace is not None:
            trace["prediction"] = out.detach().numpy().astype(np.float64)
        loss = ce_loss(out, labels)
        params = list(self.head.parameters())
        self.optimizers["head"].zero_grad(set_to_none=True)
        found = torch.autograd.grad(loss, [*leaves, *params])
        for param, grad in zip(params, found[len(leaves) :], strict=True):
            param.grad = grad
        self.optimizers["head"].step()
        return list(found[: len(leaves)]), {"ce": float(loss.detach())}

    def _defend(
        self, grads: list[torch.Tensor], labels: torch.Tensor, step: int, stats: dict[str, float]
    ) -> list[torch.Tensor]:
        s = self.settings
        out = []
        for p, g in enumerate(grads):
            gen = torch_generator(self.seed, Stream.GRADIENT_NOISE, step, p)
            if self.method is Method.MAXNORM:
                out.append(max_norm(g, gen))
                continue
            noisy, solution = marvell(
                g,
                labels.long(),
                gen,
                scale=s.marvell_scale,
                uv_choice=s.marvell_uv,
                sum_kl_threshold=s.marvell_sumkl_threshold,
            )
            if solution is not None and p == 0:
                stats["marvell_sum_kl"] = float(solution.sum_kl)
                stats["marvell_sum_kl_before"] = float(solution.sum_kl_before)
            out.append(noisy)
        return out

    # -- prediction ----------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, parts: Sequence[torch.Tensor]) -> np.ndarray:
        """Scores in (0, 1): ``G(f(X))`` for GAFM (Section 3.2), ``h(f(X))`` otherwise."""
        self._check(parts, None)
        return self.head(combine([p.float() for p in parts], self.how)).squeeze(1).numpy()

    def _check(self, parts: Sequence[torch.Tensor], labels: torch.Tensor | None) -> None:
        if len(parts) != self.n_parties:
            raise ValueError(f"expected cut values of {self.n_parties} parties, got {len(parts)}")
        n = parts[0].shape[0]
        for p, x in enumerate(parts):
            if x.ndim != 2 or x.shape != (n, self.settings.cut_dim):
                raise ValueError(
                    f"party {p}'s cut values must have shape ({n}, {self.settings.cut_dim}), "
                    f"got {tuple(x.shape)}"
                )
        if labels is not None and labels.shape != (n,):
            raise ValueError(f"labels must have shape ({n},), got {tuple(labels.shape)}")


class LocalParty:
    """A non-label party: ``f_p`` over its encoded columns and its Adam optimiser.

    ``fields`` are the widths of the party's column blocks (its encoder's spans), which
    ``gafm.local_model=wide_deep`` embeds field by field.

    The party remembers the rows of its last forward pass; :meth:`apply` recomputes that
    forward pass (same parameters, same dropout masks) and back-propagates the gradient
    the label party returned, so nothing but the parameters, Adam's moments and the row
    indices needs to survive between messages.
    """

    def __init__(
        self,
        features: torch.Tensor,
        settings: GAFMSettings,
        partition_id: int,
        seed: int,
        fields: Sequence[int] | None = None,
    ) -> None:
        if features.ndim != 2 or features.shape[0] < 1:
            raise ValueError(
                f"party features must be a non-empty 2-D table, got {tuple(features.shape)}"
            )
        self.features = features.float()
        self.settings = settings
        self.partition_id = partition_id
        self.seed = seed
        init = derive_seed(seed, Stream.INIT, 0, partition_id)
        self.model = seeded(local_model, init, features.shape[1], settings, fields)
        self.optimizer = _adam(self.model.parameters(), settings.lr_local, settings)

    @property
    def n_rows(self) -> int:
        """Rows of the party's table."""
        return int(self.features.shape[0])

    def _masks(self, step: int) -> torch.Generator | None:
        if self.settings.local_dropout <= 0:
            return None
        return torch_generator(self.seed, Stream.DROPOUT, step, self.partition_id)

    def forward(self, rows: np.ndarray, step: int) -> torch.Tensor:
        """Cut values of ``rows`` for training step ``step`` (detached, float32)."""
        with torch.no_grad():
            return self.model(self.features[torch.from_numpy(rows)], self._masks(step)).float()

    def apply(self, rows: np.ndarray, step: int, grad: torch.Tensor) -> None:
        """Back-propagate ``grad`` (the label party's gradient for ``rows`` at ``step``) and step Adam."""
        if grad.shape != (len(rows), self.settings.cut_dim):
            raise ValueError(
                f"gradient must have shape ({len(rows)}, {self.settings.cut_dim}) for the "
                f"{len(rows)} rows of step {step}, got {tuple(grad.shape)}"
            )
        out = self.model(self.features[torch.from_numpy(rows)], self._masks(step))
        self.optimizer.zero_grad(set_to_none=True)
        out.backward(grad)
        self.optimizer.step()

    def predict(self, rows: np.ndarray) -> torch.Tensor:
        """Cut values of ``rows`` without dropout (evaluation)."""
        with torch.no_grad():
            return self.model(self.features[torch.from_numpy(rows)], None).float()
