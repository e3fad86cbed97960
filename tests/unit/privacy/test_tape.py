"""Per-row gradients from one backward pass (flwr_vflgan/privacy/tape.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import flwr_vflgan.privacy.updates as updates
from flwr_vflgan.gan.losses import critic_loss
from flwr_vflgan.nn.models import LocalDiscriminator, SharedDiscriminator
from flwr_vflgan.privacy.mechanisms import per_sample_grads, wgan_gp_row_loss
from flwr_vflgan.privacy.tape import tapeable, taped_per_sample_grads
from flwr_vflgan.privacy.updates import PerSampleUpdate


class _Marked(nn.Module):
    row_wise_mlp = True

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__()
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _Unmarked(_Marked):
    row_wise_mlp = False


def _rows(batch: int = 12, width: int = 5, seed: int = 0) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, width, generator=gen),
        torch.randn(batch, width, generator=gen),
        torch.rand(batch, 1, generator=gen),
    )


def test_tapeable_means_linear_layers_and_elementwise_activations_only() -> None:
    assert tapeable(LocalDiscriminator(5, [8], 4, local_head=True))
    assert tapeable(LocalDiscriminator(5, [8], 4, local_head=True, head_hidden=(6,)))
    assert tapeable(SharedDiscriminator(8, [8]))
    assert tapeable(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)))
    assert not tapeable(nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.3), nn.Linear(8, 1)))
    assert not tapeable(nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.Linear(8, 1)))
    assert not tapeable(_Unmarked(nn.Linear(5, 1)))  # its forward could mix rows
    odd = _Marked(nn.Linear(5, 1))
    odd.scale = nn.Parameter(torch.ones(1))  # a parameter outside any linear layer
    assert not tapeable(odd)


@pytest.mark.parametrize(
    "critic",
    [
        nn.Sequential(
            nn.Linear(5, 16),
            nn.LeakyReLU(0.2),
            nn.Linear(16, 8),
            nn.LeakyReLU(0.2),
            nn.Linear(8, 1),
        ),
        # A smooth activation: the penalty's input gradient then depends on the
        # parameters through tanh' too, which autograd carries to the forward uses.
        nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1)),
        nn.Sequential(nn.Linear(5, 16, bias=False), nn.Sigmoid(), nn.Linear(16, 1)),
        # VFLGAN's command-line D_i: a hidden layer in the local head too
        LocalDiscriminator(5, [16], 8, local_head=True, head_hidden=(6,)),
    ],
)
def test_wgan_gp_row_gradients_match_vmap(critic: nn.Module) -> None:
    torch.manual_seed(0)
    real, fake, alpha = _rows()
    taped, loss = taped_per_sample_grads(
        critic, lambda: critic_loss(critic, real, fake, alpha, 10.0)[0], real.shape[0]
    )
    mapped, losses = per_sample_grads(critic, wgan_gp_row_loss(10.0), (real, fake, alpha))
    assert taped.keys() == mapped.keys()
    for name, grad in mapped.items():
        torch.testing.assert_close(taped[name], grad, atol=1e-5, rtol=1e-4, msg=name)
    torch.testing.assert_close(loss, losses.mean())
    # Rows differ, so a "gradient" repeated for every row would not pass.
    first = next(iter(taped.values()))
    assert not torch.allclose(first[0], first[1])


def test_a_layer_that_sees_other_rows_is_refused() -> None:
    """Rows packed two by two (as PacGAN does) break the row-to-gradient map."""
    critic = _Marked(nn.Linear(10, 1))
    real = torch.randn(12, 5)
    with pytest.raises(ValueError, match=r"saw a batch of shape \(6, 1\).*rows=12"):
        taped_per_sample_grads(critic, lambda: critic(real.reshape(6, 10)).mean(), 12)
    with pytest.raises(ValueError, match="not a row-wise MLP"):
        taped_per_sample_grads(_Unmarked(nn.Linear(5, 1)), lambda: torch.zeros(()), 12)


def _update(critic: nn.Module, rows: tuple[torch.Tensor, ...]) -> None:
    real, fake, alpha = rows
    optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)
    PerSampleUpdate(1.0, 1.0, real.shape[0], noise_seed=1)(
        critic,
        optimizer,
        lambda: critic_loss(critic, real, fake, alpha, 10.0)[0],
        wgan_gp_row_loss(10.0),
        rows,
        step=0,
    )


def test_dp_sgd_tapes_a_row_wise_mlp_and_maps_anything_else(monkeypatch) -> None:
    taped: list[str] = []
    original = updates.taped_per_sample_grads

    def spy(module, batch_loss, rows):
        taped.append(type(module).__name__)
        return original(module, batch_loss, rows)

    monkeypatch.setattr(updates, "taped_per_sample_grads", spy)
    rows = _rows()
    _update(LocalDiscriminator(5, [8], 4, local_head=True), rows)
    _update(_Unmarked(nn.Linear(5, 1)), rows)
    assert taped == ["LocalDiscriminator"]


def test_the_taped_and_mapped_dp_sgd_steps_agree(monkeypatch) -> None:
    """Same noise seed, same clip: the two routes move the critic to the same place."""
    torch.manual_seed(1)
    first = nn.Sequential(nn.Linear(5, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    second = nn.Sequential(nn.Linear(5, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    second.load_state_dict(first.state_dict())
    rows = _rows()
    _update(first, rows)
    monkeypatch.setattr(updates, "tapeable", lambda module: False)
    _update(second, rows)
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
