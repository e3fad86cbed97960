"""WGAN-GP losses (Gulrajani et al., 2017) as used by every discriminator of paper 000.

``L(D, x~, x) = -E[D(x)] + E[D(x~)] + lambda * E[(||grad D(x^)||_2 - 1)^2]``, with
``x^ = alpha x + (1 - alpha) x~`` and ``alpha ~ U[0, 1]`` per row (paper 000, eq. 8 and
Algorithm 1). The generators minimise ``-E[D(x~)]`` (eq. 17).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def gradient_penalty(
    critic: Callable[[torch.Tensor], torch.Tensor],
    real: torch.Tensor,
    fake: torch.Tensor,
    alpha: torch.Tensor,
) -> torch.Tensor:
    """``E[(||grad_x^ critic(x^)||_2 - 1)^2]`` on the interpolates of ``real`` and ``fake``.

    The graph is kept (``create_graph=True``) so the penalty can be differentiated with
    respect to the critic's parameters and, through ``real``/``fake``, to whatever
    produced them (the shared discriminator's penalty reaches the parties' features).
    """
    if real.shape != fake.shape:
        raise ValueError(
            f"real and fake batches differ in shape: {tuple(real.shape)} vs {tuple(fake.shape)}"
        )
    if alpha.shape != (real.shape[0], 1):
        raise ValueError(f"alpha must have shape ({real.shape[0]}, 1), got {tuple(alpha.shape)}")
    interpolates = alpha * real + (1.0 - alpha) * fake
    if not interpolates.requires_grad:
        interpolates = interpolates.detach().requires_grad_(True)
    scores = critic(interpolates)
    (grads,) = torch.autograd.grad(scores.sum(), interpolates, create_graph=True)
    return ((grads.flatten(1).norm(2, dim=1) - 1.0) ** 2).mean()


def critic_loss(
    critic: Callable[[torch.Tensor], torch.Tensor],
    real: torch.Tensor,
    fake: torch.Tensor,
    alpha: torch.Tensor,
    gp_weight: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """WGAN-GP critic loss and its gradient-penalty term (for logging)."""
    penalty = gradient_penalty(critic, real, fake, alpha)
    loss = -critic(real).mean() + critic(fake).mean() + gp_weight * penalty
    return loss, penalty


def generator_loss(scores: torch.Tensor) -> torch.Tensor:
    """``-E[D(x~)]``: the generator maximises the critic's score of its samples."""
    return -scores.mean()
