"""VT-GAN's DP-SGD: calibration to the joint target, the count release, and row losses
that average exactly to the batch objective (so per-row clipping clips the right thing)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from flwr_vflgan.config import TrainConfig
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.schema import infer_schema
from flwr_vflgan.privacy.accounting import GaussianSteps, Sampling, epsilon
from flwr_vflgan.privacy.config import DPConfig
from flwr_vflgan.privacy.mechanisms import per_sample_grads
from flwr_vflgan.runtime.rng import Stream, torch_generator, uniform_alpha
from flwr_vflgan.vtgan.config import VTGANSettings
from flwr_vflgan.vtgan.party import VTGANParty, dp_row_loss
from flwr_vflgan.vtgan.privacy import VTGANPrivacy, noisy_counts, plan_vtgan_privacy
from flwr_vflgan.vtgan.server import ClientShape, VTGANServer

DP = DPConfig(mechanism="dpsgd", target_epsilon=5.0, delta=1e-5)  # type: ignore[arg-type]


def test_calibration_meets_the_joint_target_computed_independently() -> None:
    n, batch, steps = 10_000, 200, 150
    plan = plan_vtgan_privacy(
        DP, count_noise=5.0, count_columns=(3, 0, 2), dataset_size=n, batch_size=batch,
        planned_steps=steps,
    )  # fmt: skip
    sigma = plan.noise_multiplier
    # Two clients release counts (the third has no categorical column); four parts
    # (three clients and the server) clip to C with noise sigma C each: one Gaussian
    # of multiplier sigma / sqrt(4), halved for replace-one sensitivity 2C.
    events = [GaussianSteps(n, n, 5.0, 1)] * 2 + [GaussianSteps(n, batch, sigma / 2 / 2, steps)]
    joint = epsilon(events, 1e-5)
    assert joint == pytest.approx(plan.joint_epsilon(steps))
    assert 0.99 * 5.0 <= joint <= 5.0
    # The server's own release alone: its DP-SGD steps at sigma / 2.
    alone = epsilon([GaussianSteps(n, batch, sigma / 2, steps)], 1e-5)
    assert plan.part_epsilon(steps, counts_released=False) == pytest.approx(alone)
    assert alone < joint


def test_a_given_noise_is_checked_not_calibrated() -> None:
    fixed = DPConfig(mechanism="dpsgd", target_epsilon=5.0, delta=1e-5, noise_multiplier=8.0)  # type: ignore[arg-type]
    plan = plan_vtgan_privacy(
        fixed, count_noise=5.0, count_columns=(2, 2), dataset_size=10_000, batch_size=200,
        planned_steps=100,
    )  # fmt: skip
    assert plan.noise_multiplier == 8.0
    assert plan.joint_epsilon(100) < 5.0
    small = DPConfig(mechanism="dpsgd", target_epsilon=5.0, delta=1e-5, noise_multiplier=0.3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"dp.noise_multiplier=0.3 spends epsilon .* above"):
        plan_vtgan_privacy(
            small, count_noise=5.0, count_columns=(2, 2), dataset_size=10_000,
            batch_size=200, planned_steps=100,
        )  # fmt: skip


BASE = {
    "count_noise": 5.0,
    "count_columns": (2, 2),
    "dataset_size": 10_000,
    "batch_size": 100,
    "planned_steps": 10,
}


@pytest.mark.parametrize(
    ("config", "changes", "match"),
    [
        (
            DPConfig(mechanism="vflgan_gaussian", target_epsilon=5.0),  # type: ignore[arg-type]
            {},
            "VT-GAN trains its discriminators with dp=dpsgd",
        ),
        (
            DPConfig(mechanism="dpsgd", target_epsilon=5.0, sampling="poisson"),  # type: ignore[arg-type]
            {},
            "dp.sampling=poisson is not supported for algorithm=vtgan",
        ),
        (DP, {"count_noise": 0.05}, "category-count release alone spends epsilon"),
        (DP, {"dataset_size": 100_000}, r"dp.delta=1e-05 must be below 1/n"),
        (DP, {"planned_steps": 0}, "plans 0 discriminator steps"),
        (DP, {"count_noise": 0.0}, "vtgan.dp_count_noise must be > 0"),
    ],
)
def test_planning_errors(config: DPConfig, changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plan_vtgan_privacy(config, **{**BASE, **changes})


def test_noisy_counts_have_the_histogram_noise() -> None:
    plan = VTGANPrivacy(DP, 1, 1000, 10, 10, 1.0, 3.0, (2,))
    counts = [np.full(4, 1000.0), np.full(3, 1000.0)]
    draws = np.array(
        [
            np.concatenate(noisy_counts(counts, plan, np.random.default_rng(seed)))
            for seed in range(400)
        ]
    )
    # k = 2 columns, replace-one: sensitivity sqrt(2k) = 2, std 3 * 2 = 6.
    assert draws.std(axis=0).mean() == pytest.approx(6.0, rel=0.1)
    clipped = noisy_counts([np.zeros(3)], plan, np.random.default_rng(0))
    assert (clipped[0] >= 0).all() and clipped[0].sum() > 0


def _party_and_server() -> tuple[VTGANServer, VTGANParty, int]:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.choice(["x", "y", "z"], 60), "u": rng.normal(size=60)})
    encoder = ModeSpecificEncoder(max_modes=3, seed=0).fit(frame, infer_schema(frame))
    encoded = encoder.transform(frame, np.random.default_rng(1))
    settings = VTGANSettings(
        latent_dim=8, generator_width=12, discriminator_width=10, d_client_blocks=1
    )
    train = TrainConfig(batch_size=8, n_critic=1)
    plan = VTGANPrivacy(DP, 1, 60, 8, 50, 1.0, 5.0, (1,))
    shape = ClientShape(2, encoded.shape[1], 3)
    server = VTGANServer(settings, train, [shape], 3, plan)
    party = VTGANParty(
        settings,
        train,
        encoded,
        encoder.spans,
        encoder.discrete_spans,
        server.layouts[0],
        9,
        0,
        plan,
    )
    return server, party, 8


def _mean_rows(module: torch.nn.Module, row_loss, rows) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
    grads, _ = per_sample_grads(module, row_loss, rows)
    return [grads[name].mean(dim=0) for name, _ in module.named_parameters()]


def test_server_row_losses_average_to_the_batch_loss() -> None:
    server, _party, n = _party_and_server()
    disc = server.discriminator
    gen = torch.Generator().manual_seed(0)
    real = torch.randn(n, server.feature_dims[0], generator=gen)
    fake = torch.randn(n, server.feature_dims[0], generator=gen)
    cond_real = torch.eye(3)[torch.randint(0, 3, (n,), generator=gen)]
    cond_fake = torch.eye(3)[torch.randint(0, 3, (n,), generator=gen)]
    masks = [
        torch.cat(disc.body.draw_masks(n, torch_generator(1, Stream.DROPOUT, 0, w)), dim=1)
        for w in range(3)
    ]
    alpha = uniform_alpha(1, Stream.SERVER_ALPHA, 0, n)
    disc.zero_grad()
    server._masked_loss(
        disc.inputs(real, cond_real), disc.inputs(fake, cond_fake), masks, alpha
    ).backward()
    batch = [p.grad.clone() for p in disc.parameters()]
    rows = _mean_rows(disc, server.dp_row_loss(), (real, cond_real, fake, cond_fake, alpha, *masks))
    for a, b in zip(rows, batch, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_client_row_losses_average_to_the_batch_surrogate() -> None:
    _, party, n = _party_and_server()
    disc = party.discriminator
    gen = torch.Generator().manual_seed(1)
    width = disc.in_dim
    real = torch.randn(n, width, generator=gen)
    fake = torch.randn(n, width, generator=gen)
    g_real = torch.randn(n, disc.out_dim, generator=gen) / n
    g_fake = torch.randn(n, disc.out_dim, generator=gen) / n
    m_real = torch.cat(disc.draw_masks(n, torch_generator(2, Stream.DROPOUT, 0, 0)), dim=1)
    m_fake = torch.cat(disc.draw_masks(n, torch_generator(2, Stream.DROPOUT, 0, 1)), dim=1)
    real_p, fake_p = torch.cat([real, m_real], dim=1), torch.cat([fake, m_fake], dim=1)
    disc.zero_grad()
    ((disc.packed(real_p) * g_real).sum() + (disc.packed(fake_p) * g_fake).sum()).backward()
    batch = [p.grad.clone() for p in disc.parameters()]
    rows = _mean_rows(disc, dp_row_loss(n), (real_p, fake_p, g_real, g_fake))
    for a, b in zip(rows, batch, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert math.isfinite(float(sum(g.abs().sum() for g in batch)))


def test_dp_batches_are_uniform_and_shared_by_the_clients() -> None:
    _server, party, n = _party_and_server()
    rows = party.dp_rows(5)
    assert len(rows) == n == len(set(rows.tolist()))
    condition = party.condition(5, n)
    # Every real condition names the row's own category in the chosen column.
    codes = party._codes[rows, 0]
    assert (condition.cond_real.argmax(axis=1) == codes).all()
    assert party.forward_real(5, chosen=False).rows is None
    assert party.privacy is not None and party.privacy.sampling is Sampling.WITHOUT_REPLACEMENT
