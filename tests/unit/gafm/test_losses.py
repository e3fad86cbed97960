"""GAFM's losses and cut gradient against hand-computed values (paper 002, eqs. 3-6, A.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from flwr_vflgan.gafm.config import GAFMSettings
from flwr_vflgan.gafm.losses import (
    ce_loss,
    clip_weights,
    critic_loss,
    cut_score,
    generator_loss,
    noisy_labels,
    normalized,
    randomized_response,
)


class _Affine(nn.Module):
    """D(x) = a x + b, so the expectations of eq. 3 are computable by hand."""

    def __init__(self, a: float, b: float) -> None:
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a * x + self.b


def test_wasserstein_losses_match_eq_3_by_hand() -> None:
    disc = _Affine(2.0, 0.5)
    real = torch.tensor([[1.0], [0.0], [1.0]])
    fake = torch.tensor([[0.8], [0.1], [0.6]])
    # L_GAN = E D(real) - E D(fake) = (2*2/3 + .5) - (2*0.5 + .5) = 1.8333 - 1.5
    l_gan = (2 * 2 / 3 + 0.5) - (2 * 0.5 + 0.5)
    assert float(critic_loss(disc, real, fake)) == pytest.approx(-l_gan)
    assert float(generator_loss(disc, fake)) == pytest.approx(-(2 * 0.5 + 0.5))


def test_ce_loss_matches_eq_5_by_hand() -> None:
    score = torch.tensor([0.9, 0.2])
    target = torch.tensor([0.55, 0.47])
    expected = (
        -(0.55 * math.log(0.9) + 0.45 * math.log(0.1) + 0.47 * math.log(0.2) + 0.53 * math.log(0.8))
        / 2
    )
    assert float(ce_loss(score, target)) == pytest.approx(expected, rel=1e-6)


def test_cut_score_sigmoid_outputs_average_and_linear_outputs_sum_then_sigmoid() -> None:
    cut = torch.tensor([[0.2, 0.6], [0.9, 0.1]])
    assert torch.allclose(cut_score(cut, sigmoid_output=True), torch.tensor([0.4, 0.5]))
    assert torch.allclose(
        cut_score(cut, sigmoid_output=False), torch.sigmoid(torch.tensor([0.8, 1.0]))
    )


def test_randomized_response_statistics() -> None:
    gen = torch.Generator().manual_seed(0)
    labels = torch.tensor([1.0, 0.0] * 50_000)
    delta = 0.2
    y = randomized_response(labels, delta, gen)
    pos, neg = y[labels == 1], y[labels == 0]
    # 0.5 + U(0, delta) and 0.5 - U(0, delta): support, mean and variance of a uniform.
    assert float(pos.min()) >= 0.5 and float(pos.max()) <= 0.5 + delta
    assert float(neg.min()) >= 0.5 - delta and float(neg.max()) <= 0.5
    assert float(pos.mean()) == pytest.approx(0.5 + delta / 2, abs=2e-3)
    assert float(neg.mean()) == pytest.approx(0.5 - delta / 2, abs=2e-3)
    assert float(pos.var()) == pytest.approx(delta**2 / 12, rel=0.03)
    # Fresh draws per example: the u of positives and negatives are independent.
    u_pos = (pos - 0.5).numpy()
    u_neg = (0.5 - neg).numpy()
    assert abs(np.corrcoef(u_pos, u_neg)[0, 1]) < 0.02
    # Delta = 0 removes all label information (Section 3.2).
    assert torch.equal(randomized_response(labels, 0.0, gen), torch.full_like(labels, 0.5))


def test_noisy_labels_have_the_configured_spread() -> None:
    gen = torch.Generator().manual_seed(1)
    labels = torch.ones(100_000)
    y = noisy_labels(labels, 0.01, gen)
    assert float(y.mean()) == pytest.approx(1.0, abs=2e-4)
    assert float(y.std()) == pytest.approx(0.01, rel=0.02)


def test_normalized_has_unit_batch_norm_and_keeps_zero() -> None:
    g = torch.tensor([[3.0], [4.0]])
    assert torch.allclose(normalized(g), torch.tensor([[0.6], [0.8]]))
    assert float(normalized(g).norm()) == pytest.approx(1.0)
    zero = torch.zeros(3, 2)
    assert torch.equal(normalized(zero), zero)


def test_clip_weights_bounds_every_parameter() -> None:
    net = nn.Linear(4, 3)
    with torch.no_grad():
        net.weight.mul_(100)
    clip_weights(net, 0.1)
    assert all(float(p.detach().abs().max()) <= 0.1 + 1e-7 for p in net.parameters())


def test_settings_validate_and_round_trip() -> None:
    s = GAFMSettings(delta=0.1, local_hidden=[8, 4])  # type: ignore[arg-type]
    assert GAFMSettings.from_dict(s.to_dict()) == s
    assert s.combine(1) == "identity" and s.combine(3) == "average"
    assert GAFMSettings(cut="concat").head_input(3) == 3
    with pytest.raises(ValueError, match=r"gafm\.delta"):
        GAFMSettings(delta=0.7)
    with pytest.raises(ValueError, match="identity needs exactly one"):
        GAFMSettings(cut="identity").combine(2)
    with pytest.raises(ValueError, match="unknown gafm config keys"):
        GAFMSettings.from_dict({"gama": 1})


def test_binary_labels_find_the_positive_class() -> None:
    from flwr_vflgan.gafm.training import binary_labels

    y, pos = binary_labels(np.array([0.0, 1.0, 1.0]))
    assert pos == "1.0" and y.tolist() == [0, 1, 1]
    y, pos = binary_labels(np.array([">50K", "<=50K", "<=50K"]))
    assert pos == ">50K" and y.tolist() == [1, 0, 0]  # the rarer value
    y, pos = binary_labels(np.array(["a", "b"]), positive="a")
    assert y.tolist() == [1, 0]
    with pytest.raises(ValueError, match="exactly two label values"):
        binary_labels(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="positive label 'c'"):
        binary_labels(np.array(["a", "b"]), positive="c")
