"""Every critic update that DP-SGD tapes gets the per-row gradients that ``vmap`` gets.

``PerSampleUpdate`` takes a row-wise MLP critic's per-row gradients from one backward pass
of the batch loss (flwr_vflgan/privacy/tape.py) instead of ``vmap`` over the row losses.
That is sound only where the site's batch loss is the mean of its row losses; these tests
run each site's real update with a spy that computes both.
"""

from __future__ import annotations

import pytest
import torch

from flwr_vflgan.gan.plain import CentralizedWGANGP
from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.gan.vdgan import VDGANClient
from flwr_vflgan.gan.vflgan import PartyTrainer, ServerTrainer
from flwr_vflgan.privacy.mechanisms import per_sample_grads
from flwr_vflgan.privacy.tape import tapeable, taped_per_sample_grads

from .test_plain import WHOLE_SPANS

N_ROWS = 40


class _Both:
    """A discriminator update that only computes the per-row gradients both ways."""

    calls = 0

    def __call__(self, module, optimizer, batch_loss, row_loss, rows, step):
        assert tapeable(module), type(module).__name__
        taped, loss = taped_per_sample_grads(module, batch_loss, rows[0].shape[0])
        mapped, losses = per_sample_grads(module, row_loss, rows)
        assert taped.keys() == mapped.keys()
        for name, grad in mapped.items():
            assert grad.abs().max() > 0 or name.endswith("bias"), name  # not a vacuous match
            torch.testing.assert_close(taped[name], grad, atol=1e-5, rtol=1e-4, msg=name)
        torch.testing.assert_close(loss, losses.mean(), atol=1e-5, rtol=1e-5)
        assert all(p.grad is None for p in module.parameters())  # the tape leaves .grad alone
        self.calls += 1
        return float(loss)


@pytest.mark.parametrize(
    ("variant", "first_part_gp"),
    [("vflgan", False), ("vflgan", True), ("vflgan_base", True)],
)
def test_a_party_discriminator_step(make_config, party_spans, party_tables, variant, first_part_gp):
    config = make_config(variant, first_part_gp=first_part_gp)
    party = PartyTrainer(
        config, party_spans[0], party_tables(1, N_ROWS)[0], shared_seed=11, party=0
    )
    party.d_update = both = _Both()
    party.forward(0, StepKind.DISCRIMINATOR)
    gen = torch.Generator().manual_seed(3)
    grads = [torch.randn(8, 4, generator=gen) / 8 for _ in range(2)]
    party.apply(0, StepKind.DISCRIMINATOR, *grads)
    assert both.calls == 1


def test_the_servers_end_to_end_step(make_config):
    config = make_config("vflgan")
    server = ServerTrainer(config, 2, seed=5)
    server.d_update = both = _Both()
    gen = torch.Generator().manual_seed(2)
    real = [torch.randn(8, 4, generator=gen) for _ in range(2)]
    fake = [torch.randn(8, 4, generator=gen) for _ in range(2)]
    f_real, f_fake = (torch.cat(f, 1).requires_grad_(True) for f in (real, fake))
    server._private_step(0, f_real, f_fake, torch.rand(8, 1, generator=gen))
    assert both.calls == 1


def test_the_centralized_critic_step(make_config, table):
    model = CentralizedWGANGP(
        make_config("wgan_gp"), WHOLE_SPANS, table(WHOLE_SPANS, N_ROWS, 1), 2, seed=5
    )
    model.d_update = both = _Both()
    model.step(0, StepKind.DISCRIMINATOR)
    assert both.calls == 1


def test_a_vdgan_critic_step(make_config, party_spans, party_tables):
    config = make_config("vdgan", n_critic=2)
    client = VDGANClient(config, party_spans[0], party_tables(1, N_ROWS)[0], 11, 0)
    client.update = both = _Both()
    gen = torch.Generator().manual_seed(4)
    fake = torch.cat([torch.randn(8, 1, generator=gen), torch.eye(3)[torch.randint(3, (8,))]], 1)
    client.step(0, fake)
    assert both.calls == 2
