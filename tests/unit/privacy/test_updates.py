"""Discriminator updates: the plain, first-layer and per-sample paths on the same objective."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.losses import critic_loss
from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.privacy.mechanisms import FirstLayerGaussian, per_sample_grads, wgan_gp_row_loss
from flwr_vflgan.privacy.updates import FirstLayerUpdate, PerSampleUpdate, PlainUpdate


def _critic(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))


def _batch(seed: int = 1, n: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(n, 5, generator=gen),
        torch.randn(n, 5, generator=gen),
        torch.rand(n, 1, generator=gen),
    )


def _step(update, critic: nn.Module, rows, step: int = 3) -> None:
    opt = torch.optim.SGD(critic.parameters(), lr=0.1)
    real, fake, alpha = rows
    update(
        critic,
        opt,
        lambda: critic_loss(critic, real, fake, alpha, 10.0)[0],
        wgan_gp_row_loss(10.0),
        rows,
        step,
    )


def test_noiseless_unclipped_dp_sgd_equals_the_plain_step() -> None:
    plain, private = _critic(), _critic()
    rows = _batch()
    _step(PlainUpdate(), plain, rows)
    _step(PerSampleUpdate(0.0, 1e9, 6, noise_seed=1), private, rows)
    for a, b in zip(plain.parameters(), private.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_dp_sgd_moves_by_at_most_lr_times_clip_without_noise() -> None:
    critic, before = _critic(), _critic()
    _step(PerSampleUpdate(0.0, 0.01, 6, noise_seed=1), critic, _batch())
    moved = torch.cat(
        [(a - b).reshape(-1) for a, b in zip(critic.parameters(), before.parameters(), strict=True)]
    )
    # The mean of per-row gradients each clipped to 0.01 has norm <= 0.01; SGD lr 0.1.
    assert 0 < torch.linalg.vector_norm(moved) <= 0.1 * 0.01 + 1e-9


def test_dp_sgd_noise_is_reproducible_per_step_and_seed() -> None:
    a, b, c, d = _critic(), _critic(), _critic(), _critic()
    rows = _batch()
    _step(PerSampleUpdate(1.0, 0.5, 6, noise_seed=7), a, rows, step=3)
    _step(PerSampleUpdate(1.0, 0.5, 6, noise_seed=7), b, rows, step=3)
    _step(PerSampleUpdate(1.0, 0.5, 6, noise_seed=7), c, rows, step=4)
    _step(PerSampleUpdate(1.0, 0.5, 6, noise_seed=8), d, rows, step=3)
    first = [p.detach().clone() for p in a.parameters()]
    assert all(torch.equal(x, y) for x, y in zip(first, b.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(first, c.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(first, d.parameters(), strict=True))


def test_first_layer_update_changes_only_the_first_layer() -> None:
    plain, private = _critic(), _critic()
    rows = _batch()
    _step(PlainUpdate(), plain, rows)
    _step(
        FirstLayerUpdate(FirstLayerGaussian(clip=0.05, noise_multiplier=1.0), noise_seed=3),
        private,
        rows,
    )
    assert not torch.allclose(plain[0].weight, private[0].weight)
    assert not torch.allclose(plain[0].bias, private[0].bias)
    torch.testing.assert_close(plain[2].weight, private[2].weight)
    torch.testing.assert_close(plain[2].bias, private[2].bias)


def test_per_sample_update_rejects_another_batch_size() -> None:
    with pytest.raises(ValueError, match="planned for batches of 8 rows, got 6"):
        _step(PerSampleUpdate(1.0, 1.0, 8, noise_seed=1), _critic(), _batch())


class _Spy:
    """Records the batch gradient and the mean of the per-sample gradients of one step."""

    def __call__(self, module, optimizer, batch_loss, row_loss, rows, step):  # type: ignore[no-untyped-def]
        optimizer.zero_grad(set_to_none=True)
        batch_loss().backward()
        self.batch = {n: p.grad.clone() for n, p in module.named_parameters()}
        grads, _ = per_sample_grads(module, row_loss, rows)
        self.mean = {n: g.mean(dim=0) for n, g in grads.items()}
        optimizer.zero_grad(set_to_none=True)
        return 0.0


@pytest.mark.parametrize(
    ("variant", "first_part_gp"),
    [("vflgan", False), ("vflgan", True), ("vflgan_base", False), ("vflgan_base", True)],
)
def test_party_row_losses_average_to_the_party_batch_gradient(
    variant: str, first_part_gp: bool
) -> None:
    """The party's per-row losses (local WGAN-GP, penalties, the server's feature gradients)
    are a decomposition of its batch loss: DP-SGD clips the right per-row quantities."""
    from flwr_vflgan.data import Span

    config = VFLGANConfig.from_dict(
        {
            "variant": variant,
            "model": {"disc_hidden": [16], "feature_dim": 4, "generator_hidden": [8, 8]},
            "train": {"batch_size": 8, "first_part_gp": first_part_gp},
        }
    )
    spans = [
        Span(column="a", start=0, width=1, activation="identity"),
        Span(column="b", start=1, width=3, activation="gumbel_softmax"),
    ]
    gen = torch.Generator().manual_seed(0)
    data = torch.cat(
        [
            torch.randn(40, 1, generator=gen),
            nn.functional.one_hot(torch.randint(0, 3, (40,), generator=gen), 3).float(),
        ],
        dim=1,
    )
    party = PartyTrainer(config, spans, data, shared_seed=11, party=0)
    spy = _Spy()
    party.d_update = spy
    party.forward(0, StepKind.DISCRIMINATOR)
    grad_real, grad_fake = (
        torch.randn(8, 4, generator=gen) / 8,
        torch.randn(8, 4, generator=gen) / 8,
    )
    party.apply(0, StepKind.DISCRIMINATOR, grad_real, grad_fake)
    assert spy.batch.keys() == spy.mean.keys()
    for name, batch in spy.batch.items():
        torch.testing.assert_close(spy.mean[name], batch, atol=1e-5, rtol=1e-4, msg=name)


def test_an_empty_poisson_batch_releases_only_noise() -> None:
    empty = tuple(t[:0] for t in _batch())
    still, noised, before = _critic(), _critic(), _critic()
    _step(PerSampleUpdate(0.0, 1.0, 6, noise_seed=1, variable_batches=True), still, empty)
    _step(PerSampleUpdate(1.0, 1.0, 6, noise_seed=1, variable_batches=True), noised, empty)
    for a, b, c in zip(still.parameters(), noised.parameters(), before.parameters(), strict=True):
        torch.testing.assert_close(a, c)  # no rows, no noise: nothing moves
        assert not torch.equal(b, c)  # no rows, noise: the noise is released


def test_variable_batches_accept_any_size() -> None:
    plain, private = _critic(), _critic()
    rows = _batch(n=9)
    _step(PlainUpdate(), plain, rows)
    # Opacus divides by the expected batch size: 9 rows against 6 expected scale the step.
    _step(PerSampleUpdate(0.0, 1e9, 9, noise_seed=1, variable_batches=True), private, rows)
    for a, b in zip(plain.parameters(), private.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def _end_to_end_server(sigma: float, clip: float, batch: int = 16):
    from flwr_vflgan.gan.vflgan import ServerTrainer
    from flwr_vflgan.privacy import plan_privacy

    config = VFLGANConfig.from_dict(
        {
            "model": {"feature_dim": 6, "shared_hidden": [32]},
            "train": {"batch_size": batch},
            "dp": {
                "mechanism": "end_to_end",
                "target_epsilon": 50.0,
                "noise_multiplier": sigma,
                "max_grad_norm": clip,
            },
        }
    )
    plan = plan_privacy(config.dp, dataset_size=1000, batch_size=batch, planned_steps=4, parts=3)
    return config, ServerTrainer(config, 2, seed=5, privacy=plan), ServerTrainer(config, 2, seed=5)


def _features(batch: int = 16) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(2)
    return (
        [torch.randn(batch, 6, generator=gen) for _ in range(2)],
        [torch.randn(batch, 6, generator=gen) for _ in range(2)],
    )


def test_end_to_end_server_sends_the_plain_feature_gradients() -> None:
    """D_s's DP changes how it learns, not what the parties receive for this step."""
    _, private, plain = _end_to_end_server(sigma=1.0, clip=0.5)
    real, fake = _features()
    g_private = private.discriminator_step(0, real, fake)
    g_plain = plain.discriminator_step(0, real, fake)
    for a, b in zip([*g_private[0], *g_private[1]], [*g_plain[0], *g_plain[1]], strict=True):
        torch.testing.assert_close(a, b)
    assert g_private[2] == pytest.approx(g_plain[2])


def test_end_to_end_server_clips_every_row_and_adds_its_noise() -> None:
    """The update D_s's optimizer receives is (sum of per-row gradients clipped to C +
    N(0, (sigma C)^2)) / B. Switching the server's noise off, or its clipping (every row's
    norm is far above C here), moves the residual's scale far from sigma."""
    from flwr_vflgan.runtime.rng import Stream, uniform_alpha

    sigma, clip, batch = 3.0, 0.05, 16
    config, server, _ = _end_to_end_server(sigma=sigma, clip=clip, batch=batch)
    real, fake = _features(batch)
    f_real, f_fake = torch.cat(real, dim=1), torch.cat(fake, dim=1)
    alpha = uniform_alpha(server.seed, Stream.SERVER_ALPHA, 0, batch)
    weight = config.train.shared_d_weight
    row = wgan_gp_row_loss(config.train.gp_weight)
    grads, _ = per_sample_grads(
        server.discriminator, lambda call, *r: weight * row(call, *r), (f_real, f_fake, alpha)
    )
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()))
    assert (norms > clip).all()  # every row is clipped at this C
    scale = (clip / norms).clamp(max=1.0)
    expected = {
        n: (g * scale.view(-1, *[1] * (g.dim() - 1))).sum(0) / batch for n, g in grads.items()
    }
    received: dict[str, torch.Tensor] = {}
    names = {id(p): n for n, p in server.discriminator.named_parameters()}

    def capture(optimizer: torch.optim.Optimizer, *_: object) -> None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                received[names[id(p)]] = p.grad.detach().clone()

    server.opt.register_step_pre_hook(capture)
    server.discriminator_step(0, real, fake)
    residual = torch.cat([(received[n] - expected[n]).reshape(-1) for n in expected])
    # The noise on the mean has std sigma C / B; over ~420 parameters within 15%.
    assert residual.numel() > 400
    measured = float(residual.std()) * batch / clip
    assert 0.85 * sigma < measured < 1.15 * sigma
