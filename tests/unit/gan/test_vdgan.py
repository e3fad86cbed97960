"""VDGAN's core (paper 004, Algorithm 3) against the same objective in one graph."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from flwr_vflgan.gan.losses import critic_loss, generator_loss
from flwr_vflgan.gan.vdgan import LocalVDGAN, VDGANClient, VDGANServer
from flwr_vflgan.nn.models import frozen_batchnorm_stats, joint_spans
from flwr_vflgan.runtime.rng import Stream, discriminator_batch, uniform_alpha

N_ROWS = 40


def _run(make_config, party_spans, party_tables, n: int = 3):
    config = make_config("vflgan", n_critic=2)
    tables = party_tables(n, N_ROWS)
    server = VDGANServer(config, party_spans[:n], seed=7)
    clients = [
        VDGANClient(config, s, t, 11, k)
        for k, (s, t) in enumerate(zip(party_spans[:n], tables, strict=True))
    ]
    return config, tables, server, clients


def test_the_joint_spans_lie_end_to_end(party_spans):
    spans = joint_spans(party_spans)
    assert [(s.start, s.width) for s in spans] == [(0, 1), (1, 3), (4, 2), (6, 1), (7, 2)]
    assert [s.activation for s in spans][:2] == ["identity", "gumbel_softmax"]


def test_the_server_sends_each_client_its_columns_only(make_config, party_spans, party_tables):
    _, _, server, _ = _run(make_config, party_spans, party_tables)
    fakes = server.synthesize(0)
    assert [tuple(f.shape) for f in fakes] == [(8, 4), (8, 2), (8, 3)]
    # A one-hot span of client 0 comes out one-hot (hard Gumbel-softmax).
    assert torch.equal(fakes[0][:, 1:4].sum(dim=1), torch.ones(8))


def test_an_iteration_is_algorithm_3_in_one_graph(make_config, party_spans, party_tables):
    """n_critic WGAN-GP updates per critic on the same synthetic batch, then G steps on
    sum_k J_k^T g_k (eq. 4.2): the gradient of sum_k -mean D_k(G(z)_k) in one graph."""
    config, tables, server, clients = _run(make_config, party_spans, party_tables)
    reference_g = copy.deepcopy(server.generator)
    reference_d = [copy.deepcopy(c.critic) for c in clients]
    LocalVDGAN(server, clients).iteration(0)

    # The same iteration written out in one process, one graph.
    g_opt = torch.optim.Adam(reference_g.parameters(), lr=config.train.lr, betas=config.train.betas)
    fake_all = _joint(server, reference_g, 0)
    with torch.no_grad():
        fakes = torch.split(fake_all.detach(), server.widths, dim=1)
    for k, (critic, table, fake) in enumerate(zip(reference_d, tables, fakes, strict=True)):
        opt = torch.optim.Adam(critic.parameters(), lr=config.train.lr, betas=config.train.betas)
        for inner in range(config.train.n_critic):
            rows = discriminator_batch(11, inner, N_ROWS, 8)
            alpha = uniform_alpha(11, Stream.LOCAL_ALPHA, inner, 8)
            loss, _ = critic_loss(critic, table[rows], fake, alpha, config.train.gp_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
        for a, b in zip(critic.parameters(), clients[k].critic.parameters(), strict=True):
            torch.testing.assert_close(a, b)
    with frozen_batchnorm_stats(reference_g):
        joint = _joint(server, reference_g, 0)
    parts = torch.split(joint, server.widths, dim=1)
    total = sum(generator_loss(d(p)) for d, p in zip(reference_d, parts, strict=True))
    g_opt.zero_grad()
    total.backward()
    g_opt.step()
    for a, b in zip(reference_g.parameters(), server.generator.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_the_objective_cannot_see_how_the_clients_columns_are_paired(
    make_config, party_spans, party_tables
):
    """Algorithm 3 is blind to the joint across clients: each ``D_k`` scores a row of
    client ``k``'s columns alone, so pairing client 1's synthetic rows with the others'
    at random leaves ``sum_k -mean D_k(G(z)_k)`` unchanged and only permutes client 1's
    returned gradient. Any coupling of the right per-client marginals is an optimum of
    the generator's loss (docs/vertigan.md, "What Algorithm 3 cannot learn")."""
    _, _, server, clients = _run(make_config, party_spans, party_tables)
    local = LocalVDGAN(server, clients)
    for t in range(2):
        local.iteration(t)
    fakes = server.synthesize(2)
    perm = torch.randperm(fakes[1].shape[0], generator=torch.Generator().manual_seed(3))
    assert not torch.equal(perm, torch.arange(len(perm)))

    def objective(blocks: list[torch.Tensor]) -> tuple[float, list[torch.Tensor]]:
        total, grads = 0.0, []
        for client, block in zip(clients, blocks, strict=True):
            leaf = block.detach().clone().requires_grad_(True)
            loss = generator_loss(client.critic(leaf))
            grads.append(torch.autograd.grad(loss, leaf)[0])
            total += float(loss)
        return total, grads

    total, grads = objective(fakes)
    repaired_total, repaired = objective([fakes[0], fakes[1][perm], fakes[2]])
    assert repaired_total == pytest.approx(total, rel=1e-6)
    torch.testing.assert_close(repaired[1], grads[1][perm])
    torch.testing.assert_close(repaired[0], grads[0])
    torch.testing.assert_close(repaired[2], grads[2])


def _joint(server: VDGANServer, generator, iteration: int) -> torch.Tensor:
    from flwr_vflgan.runtime.rng import latent_noise, torch_generator

    z = latent_noise(
        server.seed, iteration, server.config.train.batch_size, server.config.model.latent_dim
    )
    return generator(z, torch_generator(server.seed, Stream.GUMBEL, iteration))


def test_training_moves_every_model_and_is_reproducible(make_config, party_spans, party_tables):
    states = []
    for _ in range(2):
        _, _, server, clients = _run(make_config, party_spans, party_tables)
        start = server.state.to_numpy()
        local = LocalVDGAN(server, clients)
        for t in range(4):
            local.iteration(t)
        assert not np.array_equal(server.state.to_numpy(), start)
        states.append([server.state.to_numpy(), *(c.state.to_numpy() for c in clients)])
    for a, b in zip(*states, strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_shapes_are_refused(make_config, party_spans, party_tables):
    _, _, server, clients = _run(make_config, party_spans, party_tables)
    with pytest.raises(ValueError, match=r"synthetic batch must be \(8, 4\), got \(8, 3\)"):
        clients[0].step(0, torch.zeros(8, 3))
    with pytest.raises(ValueError, match="expected 3 clients' gradients, got 2"):
        server.update(0, [torch.zeros(8, 4), torch.zeros(8, 2)])
    with pytest.raises(ValueError, match=r"client 1's gradient must be finite \(8, 2\)"):
        server.update(0, [torch.zeros(8, 4), torch.full((8, 2), float("nan")), torch.zeros(8, 3)])
    with pytest.raises(ValueError, match="the server expects 3 clients, got 2"):
        LocalVDGAN(server, clients[:2])


def test_the_schedule_counts_iterations_like_vflgans_generator_steps(make_config):
    from flwr_vflgan.gan.vdgan import VDSchedule

    train = make_config("vdgan", n_critic=2, epochs=3).train  # batch 8
    schedule = VDSchedule.of(40, train)  # 5 batches an epoch, 2 per iteration
    assert (schedule.per_epoch, schedule.total) == (2, 6)
    assert [schedule.ends_epoch(i) for i in range(6)] == [False, True] * 3
    assert [schedule.epoch_of(i) for i in range(6)] == [1, 1, 2, 2, 3, 3]
    assert [schedule.evaluation_due(i, 2) for i in range(6)] == [False] * 3 + [True, False, True]
    assert not any(schedule.evaluation_due(i, 0) for i in range(6))
    capped = VDSchedule.of(40, make_config("vdgan", n_critic=2, max_steps=3).train)
    assert capped.total == 3 and capped.ends_epoch(2)
    # An automatic length counts train.min_steps in iterations, in whole epochs: 7 -> 4
    # epochs of 2.
    auto = VDSchedule.of(40, make_config("vdgan", n_critic=2, epochs=None, min_steps=7).train)
    assert auto.total == 8
    with pytest.raises(ValueError, match="has no VDGAN iteration"):
        VDSchedule.of(10, train)


def test_the_messages_round_trip_and_refuse_what_is_malformed():
    from flwr.app import ConfigRecord

    from flwr_vflgan.gan.vd_messages import VDDecode, VDSetupReply, VDStep, VDStepReply
    from flwr_vflgan.runtime import protocol as P
    from flwr_vflgan.runtime.codec import ProtocolError

    reply = VDSetupReply(1, 40, "d", "c", ["a", "b"], [1, 3], ["identity", "gumbel_softmax"])
    cfg = reply.to_content()[P.CONFIG]
    assert isinstance(cfg, ConfigRecord)
    spans = VDSetupReply.spans_of(cfg)
    assert [(s.start, s.width, s.activation) for s in spans] == [
        (0, 1, "identity"),
        (1, 3, "gumbel_softmax"),
    ]
    for widths, activations, message in [
        ([1], ["identity", "tanh"], "of one length"),
        ([0], ["identity"], "positive integer"),
        ([2], ["softmax"], "unknown span activation"),
    ]:
        bad = ConfigRecord({"span_widths": widths, "span_activations": activations})
        with pytest.raises(ProtocolError, match=message):
            VDSetupReply.spans_of(bad)
    fake = np.arange(12, dtype=np.float32).reshape(3, 4)
    step = VDStep.from_content(VDStep(5, fake).to_content(), 3, 4)
    assert step.iteration == 5 and np.array_equal(step.fake, fake)
    with pytest.raises(ProtocolError, match="must have shape"):
        VDStep.from_content(VDStep(5, fake).to_content(), 3, 5)
    back = VDStepReply.from_content(VDStepReply(5, fake).to_content(), 5, 3, 4)
    assert np.array_equal(back.grad, fake)
    with pytest.raises(ProtocolError, match="reply is for iteration 5, expected 6"):
        VDStepReply.from_content(VDStepReply(5, fake).to_content(), 6, 3, 4)
    nan = fake.copy()
    nan[0, 0] = np.nan
    with pytest.raises(ProtocolError, match="non-finite"):
        VDStepReply.from_content(VDStepReply(5, nan).to_content(), 5, 3, 4)
    decoded = VDDecode.from_content(VDDecode(fake).to_content(), 4)
    assert np.array_equal(decoded.rows, fake) and decoded.purpose == "publication"


def test_generator_lr_reaches_the_server_generator_only(make_config, party_spans, party_tables):
    config = make_config("vdgan", lr=3e-4, generator_lr=1e-4)
    server = VDGANServer(config, party_spans[:2], seed=7)
    client = VDGANClient(config, party_spans[0], party_tables(1, N_ROWS)[0], 11, 0)
    rates = [[g["lr"] for g in opt.param_groups] for opt in (server.opt, client.opt)]
    assert rates == [[1e-4], [3e-4]]
