"""VertiGAN (paper 000, Section 2.3): a backbone shared by summed gradients (eq. 5), a
private head and a private WGAN-GP discriminator per party (eq. 4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.exchanges import (
    LocalVFLGAN,
    fixed_rows,
    party_trainer,
    step_server,
    wire_width,
)
from flwr_vflgan.gan.losses import critic_loss, generator_loss
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.gan.vertigan import VertiGANParty, VertiGANServer, backbone_size
from flwr_vflgan.nn.models import frozen_batchnorm_stats
from flwr_vflgan.privacy.guarantee import Guarantee, describe_guarantee
from flwr_vflgan.runtime.rng import Stream, uniform_alpha

N_ROWS = 40


def _local(config, spans, tables, k: int = 1, steps: int = 12, seed: int = 1) -> LocalVFLGAN:
    parties = [
        party_trainer(config, s, t, seed, i)
        for i, (s, t) in enumerate(zip(spans, tables, strict=True))
    ]
    schedule = Schedule(N_ROWS, 8, 2, epochs=3, max_steps=steps)
    return LocalVFLGAN(parties, step_server(config, len(parties), 2), schedule, k)


def _flat(params) -> np.ndarray:
    return np.concatenate([p.detach().numpy().ravel() for p in params])


def test_the_backbone_size_counts_the_hidden_layers(make_config, party_spans, party_tables):
    config = make_config("vertigan")
    party = party_trainer(config, party_spans[0], party_tables(1, N_ROWS)[0], 1, 0)
    assert isinstance(party, VertiGANParty)
    # latent 4 -> 8 (Linear), 8 -> 8 (Linear + BatchNorm): 40 + 72 + 16.
    assert backbone_size(config.model) == sum(p.numel() for p in party.backbone) == 128
    assert wire_width(config) == 1
    assert fixed_rows(config, StepKind.GENERATOR) == 128
    assert fixed_rows(config, StepKind.DISCRIMINATOR) == 0
    vflgan = make_config("vflgan")
    assert wire_width(vflgan) == vflgan.model.feature_dim
    assert fixed_rows(vflgan, StepKind.GENERATOR) == vflgan.train.batch_size


@pytest.mark.parametrize("k", [1, 4])
def test_backbones_start_equal_and_stay_equal_while_heads_differ(
    make_config, party_spans, party_tables, k
):
    config = make_config("vertigan")
    local = _local(config, party_spans, party_tables(3, N_ROWS), k=k)
    start = [_flat(p.backbone) for p in local.parties]
    for block in local.blocks():
        local.run_block(block)
    end = [_flat(p.backbone) for p in local.parties]
    for backbone in start[1:]:
        np.testing.assert_array_equal(backbone, start[0])
    for backbone in end[1:]:
        np.testing.assert_array_equal(backbone, end[0])
    assert not np.array_equal(end[0], start[0])  # and it trained
    # The running statistics of the backbone's BatchNorm move alike too.
    norms = [p.generator.body[3] for p in local.parties]
    for norm in norms[1:]:
        torch.testing.assert_close(norm.running_mean, norms[0].running_mean, rtol=0, atol=0)


def test_another_shared_seed_gives_another_backbone(make_config, party_spans, party_tables):
    config = make_config("vertigan")
    table = party_tables(1, N_ROWS)[0]
    first = party_trainer(config, party_spans[0], table, 1, 0)
    other = party_trainer(config, party_spans[0], table, 2, 0)
    assert not np.array_equal(_flat(first.backbone), _flat(other.backbone))


def test_the_server_adds_the_backbone_gradients_it_does_not_average():
    server = VertiGANServer(3)
    grads = [torch.full((5, 1), float(i + 1)) for i in range(3)]
    back, norm = server.generator_step(grads)
    assert len(back) == 3
    for tensor in back:
        torch.testing.assert_close(tensor, torch.full((5, 1), 6.0))
    assert norm == pytest.approx(6.0 * 5**0.5)
    real, fake, loss = server.discriminator_step(0, [], [])
    assert [t.shape for t in real + fake] == [(0, 1)] * 6 and np.isnan(loss)
    assert server.state.size == 0  # it holds no model
    with pytest.raises(ValueError, match="expected 3 backbone gradients, got 2"):
        server.generator_step(grads[:2])


def test_a_generator_step_applies_the_sum_to_the_backbone_and_its_own_gradient_to_the_head(
    make_config, party_spans, party_tables
):
    """Eq. (5): every party's backbone takes G_b^1 + G_b^2; each head takes its own
    gradient of -E[D_i(G_hi(G_b(z)))], as WGAN-GP's generator (eq. 4)."""
    config = make_config("vertigan")
    local = _local(config, party_spans[:2], party_tables(2, N_ROWS))
    step = next(s for s in range(12) if local.schedule.kind(s) is StepKind.GENERATOR)
    for block in local.blocks()[:step]:
        local.run_block(block)
    parties = local.parties
    sent = [p.forward(step, StepKind.GENERATOR).fake for p in parties]
    total, _ = local.server.generator_step(sent)
    for party, summed in zip(parties, total, strict=True):
        head = list(party.generator.body)[-1]
        with frozen_batchnorm_stats(party.generator):
            loss = generator_loss(party.discriminator(party._fake(step)))
        own = torch.autograd.grad(loss, [head.weight, head.bias])
        party.apply(step, StepKind.GENERATOR, None, summed)
        got = torch.cat([p.grad.reshape(-1) for p in party.backbone])
        torch.testing.assert_close(got, summed[:, 0], rtol=0, atol=0)
        torch.testing.assert_close(head.weight.grad, own[0], rtol=0, atol=0)
        torch.testing.assert_close(head.bias.grad, own[1], rtol=0, atol=0)
    # The sum is what a single backbone feeding both heads would get from both losses.
    torch.testing.assert_close(total[0][:, 0], sent[0][:, 0] + sent[1][:, 0])
    assert not torch.equal(sent[0], sent[1])


def test_a_discriminator_step_is_wgan_gp_on_the_partys_columns_alone(
    make_config, party_spans, party_tables
):
    """No gradient arrives from a server: the party's critic loss is eq. (4) on its own
    real and fake rows, with the gradient penalty on its own interpolates."""
    config = make_config("vertigan")
    party = party_trainer(config, party_spans[0], party_tables(1, N_ROWS)[0], 1, 0)
    assert party.forward(0, StepKind.DISCRIMINATOR).fake.shape == (0, 1)
    real = party._batch(0)
    with torch.no_grad():
        fake = party._fake(0, real.shape[0])
    alpha = uniform_alpha(1, Stream.LOCAL_ALPHA, 0, real.shape[0])
    want, _ = critic_loss(party.discriminator, real, fake, alpha, config.train.gp_weight)
    got = party.apply(0, StepKind.DISCRIMINATOR, None, torch.zeros(0, 1))
    assert got == pytest.approx(float(want.detach()), rel=1e-5)


def test_a_malformed_backbone_gradient_is_refused(make_config, party_spans, party_tables):
    config = make_config("vertigan")
    party = party_trainer(config, party_spans[0], party_tables(1, N_ROWS)[0], 1, 0)
    with pytest.raises(ValueError, match=r"backbone gradient must be \(128, 1\), got \(64, 1\)"):
        party.apply(4, StepKind.GENERATOR, None, torch.zeros(64, 1))


def test_generator_loss_is_the_wgan_one(make_config, party_spans, party_tables):
    config = make_config("vertigan")
    party = party_trainer(config, party_spans[0], party_tables(1, N_ROWS)[0], 1, 0)
    with torch.no_grad():
        scores = party.discriminator(party._fake(3))
    assert float(generator_loss(scores)) == pytest.approx(-float(scores.mean()))


def test_vertigan_privacy_choices():
    with pytest.raises(ValueError, match="vertigan has none: use dp=dpsgd"):
        VFLGANConfig.from_dict(
            {"variant": "vertigan", "dp": {"mechanism": "end_to_end", "target_epsilon": 1.0}}
        )
    dpsgd = VFLGANConfig.from_dict(
        {"variant": "vertigan", "dp": {"mechanism": "dpsgd", "target_epsilon": 1.0}}
    )
    first = VFLGANConfig.from_dict(
        {"variant": "vertigan", "dp": {"mechanism": "vflgan_gaussian", "target_epsilon": 1.0}}
    )
    statement = describe_guarantee("vertigan", dpsgd.dp)
    assert statement is not None and statement.guarantee is Guarantee.CRITIC_UPDATES
    assert "one joint account" in statement.covers
    statement = describe_guarantee("vertigan", first.dp)
    assert statement is not None and statement.guarantee is Guarantee.FIRST_LAYER


def test_the_plain_vflgan_loop_refuses_vertigan(make_config, party_spans, party_tables):
    from flwr_vflgan.gan.plain import PlainVFLGAN

    with pytest.raises(ValueError, match="PlainVFLGAN is VFLGAN's one-graph loop"):
        PlainVFLGAN(make_config("vertigan"), party_spans[:2], party_tables(2, N_ROWS), 1, 2)
