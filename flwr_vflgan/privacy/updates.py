"""How a discriminator turns one batch into a parameter update: plainly, or privately.

A trainer hands its discriminator step to a :class:`DiscriminatorUpdate` instead of
calling ``backward()`` and ``optimizer.step()`` itself, so the GAN code has no DP
branches. Each update receives the batch loss (for the plain and first-layer paths)
and the loss of one row (for per-sample DP-SGD); both describe the same objective: the
batch loss is the mean of the row losses.

Noise is drawn from a generator seeded by ``(noise_seed, step)``: a holder's private seed
in the federated protocol, so the server cannot remove the noise, and the same run
gives the same noise (a recomputed or resumed step is identical).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from flwr_vflgan.privacy.config import Mechanism, PrivacyPlan
from flwr_vflgan.privacy.mechanisms import (
    FirstLayerGaussian,
    RowLoss,
    make_dp_optimizer,
    per_sample_grads,
    privatize_first_layers,
    set_grad_samples,
)
from flwr_vflgan.privacy.tape import tapeable, taped_per_sample_grads
from flwr_vflgan.runtime.rng import Stream, torch_generator

if TYPE_CHECKING:
    from opacus.optimizers import DPOptimizer


class DiscriminatorUpdate(Protocol):
    """One discriminator update from one batch."""

    def __call__(
        self,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        batch_loss: Callable[[], torch.Tensor],
        row_loss: RowLoss,
        rows: Sequence[torch.Tensor],
        step: int,
    ) -> float:
        """Update ``module``'s parameters with ``optimizer``; return the batch loss."""
        ...


class PlainUpdate:
    """``batch_loss().backward()`` and ``optimizer.step()``; subclasses privatize in between."""

    def __call__(
        self,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        batch_loss: Callable[[], torch.Tensor],
        row_loss: RowLoss,
        rows: Sequence[torch.Tensor],
        step: int,
    ) -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = batch_loss()
        loss.backward()
        self.privatize(module, step)
        optimizer.step()
        return float(loss.detach())

    def privatize(self, module: nn.Module, step: int) -> None:
        """Change the gradients before the optimizer step; the plain update leaves them."""


class FirstLayerUpdate(PlainUpdate):
    """DP-VFLGAN: the first linear layer's batch gradient is clipped and noised (eqs. 20-21).

    Parameters
    ----------
    mechanism
        Clip bound and noise multiplier.
    noise_seed
        The holder's private seed; step ``t`` draws from ``(noise_seed, DP_NOISE, t)``.

    Notes
    -----
    Sampling, neighbouring relation, sensitivity and theorem: see
    :class:`~flwr_vflgan.privacy.mechanisms.FirstLayerGaussian`.
    """

    def __init__(self, mechanism: FirstLayerGaussian, noise_seed: int) -> None:
        self.mechanism = mechanism
        self.noise_seed = noise_seed

    def privatize(self, module: nn.Module, step: int) -> None:
        privatize_first_layers(
            [module], self.mechanism, torch_generator(self.noise_seed, Stream.DP_NOISE, step)
        )


class PerSampleUpdate:
    """DP-SGD: per-row gradients, clipped and noised by Opacus's ``DPOptimizer``.

    The per-row gradients of a row-wise MLP critic (:func:`~flwr_vflgan.privacy.tape.
    tapeable`: VFLGAN's ``D_i`` and ``D_s``, the centralized and VDGAN critics) come from
    one backward pass of the batch loss (:func:`~flwr_vflgan.privacy.tape.
    taped_per_sample_grads`); any other module's from ``vmap`` over the row losses
    (:func:`~flwr_vflgan.privacy.mechanisms.per_sample_grads`). Both give the same
    gradients up to rounding, which is why the batch loss must be the mean of the row
    losses.

    Parameters
    ----------
    noise_multiplier
        ``sigma``: the noise on the sum of clipped gradients has std ``sigma * max_grad_norm``.
    max_grad_norm
        Per-row clip bound ``C`` over all of the module's parameters jointly.
    batch_size
        Rows per batch (the divisor of the noised sum); the expected size under Poisson
        sampling.
    noise_seed
        The holder's private seed; step ``t`` draws from ``(noise_seed, DP_NOISE, t)``.

    variable_batches
        Poisson sampling: batches of any size (even empty) are expected.

    Notes
    -----
    With fixed-size batches drawn without replacement, replacing one row changes the sum
    of clipped gradients by at most ``2 C``, so the accountant's multiplier is
    ``sigma / 2``; with Poisson sampling and add/remove-one neighbours the sensitivity is
    ``C`` and the multiplier ``sigma`` (:func:`~flwr_vflgan.privacy.config.plan_privacy`). Each row's loss
    must depend on that row only, which is why the row losses of the WGAN-GP objective
    take their own interpolate and the server's per-row feature gradients.
    """

    def __init__(
        self,
        noise_multiplier: float,
        max_grad_norm: float,
        batch_size: int,
        noise_seed: int,
        variable_batches: bool = False,
    ) -> None:
        self.variable_batches = variable_batches
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.batch_size = batch_size
        self.noise_seed = noise_seed
        self._wrapped: DPOptimizer | None = None

    def _dp_optimizer(self, module: nn.Module, optimizer: torch.optim.Optimizer) -> DPOptimizer:
        """Opacus's wrapper of ``optimizer``, built once (a trainer keeps its optimizer)."""
        if self._wrapped is None or self._wrapped.original_optimizer is not optimizer:
            self._wrapped = make_dp_optimizer(
                module,
                optimizer,
                noise_multiplier=self.noise_multiplier,
                max_grad_norm=self.max_grad_norm,
                expected_batch_size=self.batch_size,
                generator=torch.Generator(),
            )
        return self._wrapped

    def __call__(
        self,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        batch_loss: Callable[[], torch.Tensor],
        row_loss: RowLoss,
        rows: Sequence[torch.Tensor],
        step: int,
    ) -> float:
        if not self.variable_batches and rows[0].shape[0] != self.batch_size:
            raise ValueError(
                f"DP-SGD was planned for batches of {self.batch_size} rows, got {rows[0].shape[0]}"
            )
        dp_optimizer = self._dp_optimizer(module, optimizer)
        dp_optimizer.zero_grad(set_to_none=True)
        if rows[0].shape[0] == 0:
            # An empty Poisson batch still releases the noise: one all-zero row stands in
            # for it (it adds nothing to the clipped sum, and the divisor is the expected
            # batch size either way).
            params = {n: p for n, p in module.named_parameters() if p.requires_grad}
            grads = {n: torch.zeros((1, *p.shape), dtype=p.dtype) for n, p in params.items()}
            losses = torch.full((1,), float("nan"))
        elif tapeable(module):
            grads, losses = taped_per_sample_grads(module, batch_loss, rows[0].shape[0])
        else:
            grads, losses = per_sample_grads(module, row_loss, rows)
        set_grad_samples(module, grads)
        dp_optimizer.generator = torch_generator(self.noise_seed, Stream.DP_NOISE, step)
        dp_optimizer.step()
        dp_optimizer.zero_grad(set_to_none=True)
        return float(losses.mean())


def discriminator_update(plan: PrivacyPlan | None, noise_seed: int) -> DiscriminatorUpdate:
    """The update a plan asks for: :class:`PlainUpdate` when ``plan`` is ``None``."""
    if plan is None:
        return PlainUpdate()
    if plan.config.mechanism is Mechanism.VFLGAN_GAUSSIAN:
        return FirstLayerUpdate(FirstLayerGaussian(plan.clip, plan.noise_multiplier), noise_seed)
    if plan.config.mechanism.per_sample:
        return PerSampleUpdate(
            plan.noise_multiplier,
            plan.clip,
            plan.batch_size,
            noise_seed,
            variable_batches=plan.config.poisson,
        )
    raise ValueError(f"no discriminator update for dp.mechanism={plan.config.mechanism.value}")
