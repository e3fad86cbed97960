"""GAFM's losses and the cut-layer gradient (paper 002, eqs. 3-6 and Algorithm A.1).

* eq. 3: ``L_GAN = E[D(Y + eps)] - E[D(Y_hat)]`` with ``eps ~ N(0, sigma^2)`` and
  ``Y_hat = G(f(X))``. The discriminator maximises it (minimises
  :func:`critic_loss`); the generator and the local models minimise it, and only
  ``-E[D(Y_hat)]`` (:func:`generator_loss`) depends on them.
* eq. 4: the randomized response ``Y~ = 0.5 + u`` (``Y = 1``) or ``0.5 - u`` (``Y = 0``),
  ``u ~ Uniform(0, Delta)``, drawn afresh for every example at every step.
* eq. 5: ``L_CE = -E[Y~ log S + (1 - Y~) log(1 - S)]`` with ``S = sigma(f(X))``.
* Algorithm A.1, step 3: the gradient sent back is
  ``gamma * g_GAN / ||g_GAN||_2 + g_CE / ||g_CE||_2`` with both gradients taken with
  respect to ``f(X)`` and normalised by their L2 norm over the whole batch.
"""

from __future__ import annotations

import torch
from torch import nn

_EPS = 1e-7


def randomized_response(labels: torch.Tensor, delta: float, gen: torch.Generator) -> torch.Tensor:
    """Eq. 4: ``0.5 + u`` for positives and ``0.5 - u`` for negatives, ``u ~ U(0, delta)``."""
    u = delta * torch.rand(labels.shape, generator=gen)
    return torch.where(labels > 0.5, 0.5 + u, 0.5 - u)


def noisy_labels(labels: torch.Tensor, sigma: float, gen: torch.Generator) -> torch.Tensor:
    """``Y + eps`` with ``eps ~ N(0, sigma^2)`` (eq. 3): the discriminator's real samples."""
    return labels + sigma * torch.randn(labels.shape, generator=gen)


def critic_loss(disc: nn.Module, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    """``-L_GAN``: what the discriminator minimises (``real``, ``fake`` of shape (n, 1))."""
    return -(disc(real).mean() - disc(fake).mean())


def generator_loss(disc: nn.Module, fake: torch.Tensor) -> torch.Tensor:
    """``-E[D(Y_hat)]``: the part of ``L_GAN`` that depends on the generator and ``f``."""
    return -disc(fake).mean()


def clip_weights(module: nn.Module, clip: float) -> None:
    """Clip every parameter to ``[-clip, clip]`` (the WGAN Lipschitz constraint)."""
    with torch.no_grad():
        for param in module.parameters():
            param.clamp_(-clip, clip)


def cut_score(cut: torch.Tensor, sigmoid_output: bool) -> torch.Tensor:
    """``S`` of eq. 5, shape (n,).

    With linear local outputs, ``f(X)`` is summed over its ``d`` columns (Section 3.2)
    and passed through the sigmoid. With sigmoid local outputs (Appendix E.2) the cut
    value already is the score, as in the reference code, and its ``d`` columns are
    averaged so that ``S`` stays in (0, 1).
    """
    if sigmoid_output:
        return cut.mean(dim=1)
    return torch.sigmoid(cut.sum(dim=1))


def ce_loss(score: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Eq. 5: binary cross-entropy of the score against the randomized response (mean)."""
    s = score.clamp(_EPS, 1.0 - _EPS)
    return -(target * torch.log(s) + (1.0 - target) * torch.log(1.0 - s)).mean()


def normalized(grad: torch.Tensor) -> torch.Tensor:
    """``grad / ||grad||_2`` over the whole batch (a zero gradient stays zero)."""
    norm = grad.norm()
    return grad / norm if norm > 0 else grad
