"""WGAN-GP losses against hand-computed values (paper 000, eq. 8 and 17)."""

from __future__ import annotations

import pytest
import torch

from flwr_vflgan.gan.losses import critic_loss, generator_loss, gradient_penalty

F64 = torch.float64


def _linear_critic(w: torch.Tensor):
    return lambda x: x @ w


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ((3.0, 4.0), (5.0 - 1.0) ** 2),  # ||w|| = 5
        ((1.0, 2.0, 2.0), (3.0 - 1.0) ** 2),  # ||w|| = 3
        ((0.6, 0.8), 0.0),  # ||w|| = 1: no penalty
    ],
)
def test_gradient_penalty_of_linear_critic_is_norm_minus_one_squared(weights, expected):
    w = torch.tensor(weights, dtype=F64)
    gen = torch.Generator().manual_seed(0)
    real = torch.randn(6, w.numel(), generator=gen, dtype=F64)
    fake = torch.randn(6, w.numel(), generator=gen, dtype=F64)
    alpha = torch.rand(6, 1, generator=gen, dtype=F64)
    penalty = gradient_penalty(_linear_critic(w), real, fake, alpha)
    assert penalty.item() == pytest.approx(expected, abs=1e-12)


def test_gradient_penalty_of_squared_norm_critic_by_hand():
    # D(x) = sum(x^2): grad = 2 x^, so each row contributes (2 ||x^|| - 1)^2.
    real = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=F64)
    fake = torch.tensor([[0.0, 0.0], [2.0, 2.0]], dtype=F64)
    alpha = torch.tensor([[0.5], [0.25]], dtype=F64)
    # x^_1 = (0.5, 0)   -> 2 x^ = (1, 0), norm 1 -> 0
    # x^_2 = (1.5, 2.0) -> 2 x^ = (3, 4), norm 5 -> 16
    penalty = gradient_penalty(lambda x: (x**2).sum(dim=1), real, fake, alpha)
    assert penalty.item() == pytest.approx((0.0 + 16.0) / 2)


def test_gradient_penalty_is_differentiable_in_the_inputs():
    # d GP / d x^_2 = (1/2) * 2 * (5 - 1) * 2 * x^_2 / ||x^_2|| = 8 * (0.6, 0.8).
    real = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=F64, requires_grad=True)
    fake = torch.tensor([[0.0, 0.0], [2.0, 2.0]], dtype=F64, requires_grad=True)
    alpha = torch.tensor([[0.5], [0.25]], dtype=F64)
    penalty = gradient_penalty(lambda x: (x**2).sum(dim=1), real, fake, alpha)
    penalty.backward()
    torch.testing.assert_close(real.grad, torch.tensor([[0.0, 0.0], [1.2, 1.6]], dtype=F64))
    torch.testing.assert_close(fake.grad, torch.tensor([[0.0, 0.0], [3.6, 4.8]], dtype=F64))


def test_gradient_penalty_is_differentiable_in_the_critic_parameters():
    # GP(w) = (||w|| - 1)^2 -> dGP/dw = 2 (||w|| - 1) w / ||w|| = 2 * 4 * (0.6, 0.8).
    w = torch.tensor([3.0, 4.0], dtype=F64, requires_grad=True)
    real = torch.ones(3, 2, dtype=F64)
    fake = torch.zeros(3, 2, dtype=F64)
    alpha = torch.full((3, 1), 0.3, dtype=F64)
    gradient_penalty(lambda x: x @ w, real, fake, alpha).backward()
    torch.testing.assert_close(w.grad, torch.tensor([4.8, 6.4], dtype=F64))


def test_critic_loss_by_hand():
    w = torch.tensor([3.0, 4.0], dtype=F64)
    real = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)  # D = 3, 4 -> mean 3.5
    fake = torch.tensor([[-1.0, 0.0], [0.0, -1.0]], dtype=F64)  # D = -3, -4 -> mean -3.5
    alpha = torch.tensor([[0.1], [0.9]], dtype=F64)
    loss, penalty = critic_loss(_linear_critic(w), real, fake, alpha, gp_weight=10.0)
    assert penalty.item() == pytest.approx(16.0)
    assert loss.item() == pytest.approx(-3.5 + (-3.5) + 10.0 * 16.0)


def test_generator_loss_is_minus_the_mean_score():
    assert generator_loss(torch.tensor([1.0, 2.0, 6.0])).item() == pytest.approx(-3.0)
    assert generator_loss(torch.tensor([[-2.0], [4.0]])).item() == pytest.approx(-1.0)


def test_gradient_penalty_rejects_shape_mismatch():
    critic = _linear_critic(torch.ones(2))
    with pytest.raises(
        ValueError, match=r"real and fake batches differ in shape: \(4, 2\) vs \(3, 2\)"
    ):
        gradient_penalty(critic, torch.zeros(4, 2), torch.zeros(3, 2), torch.zeros(4, 1))


@pytest.mark.parametrize("alpha_shape", [(4,), (4, 2), (3, 1), (1, 1)])
def test_gradient_penalty_rejects_bad_alpha(alpha_shape):
    critic = _linear_critic(torch.ones(2))
    with pytest.raises(ValueError, match=r"alpha must have shape \(4, 1\)"):
        gradient_penalty(critic, torch.zeros(4, 2), torch.zeros(4, 2), torch.zeros(alpha_shape))


def test_gradient_penalty_averages_per_row_penalties():
    # D(x)_i = c_i * x_i0: row gradients (2, 0, 0) and (0, 0, 0), norms 2 and 0,
    # penalties (2 - 1)^2 = 1 and (0 - 1)^2 = 1 -> mean 1.
    scale = torch.tensor([2.0, 0.0], dtype=F64)
    real = torch.zeros(2, 3, dtype=F64)
    penalty = gradient_penalty(
        lambda x: x[:, 0] * scale, real, real.clone(), torch.full((2, 1), 0.5, dtype=F64)
    )
    assert penalty.item() == pytest.approx(((2.0 - 1.0) ** 2 + (0.0 - 1.0) ** 2) / 2)
