"""Batch masking (paper 000, Section 3.5, end): the kept positions, the party's update
reading only them, and the guarantee against the other parties."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from flwr_vflgan.config import ModelConfig, TrainConfig, VFLGANConfig
from flwr_vflgan.data import Span
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.privacy import DPConfig, Mechanism, plan_privacy
from flwr_vflgan.privacy.accounting import GaussianSteps, epsilon
from flwr_vflgan.privacy.guarantee import against_parties_description
from flwr_vflgan.privacy.masking import against_parties, mask_positions, max_appearances
from flwr_vflgan.runtime.rng import batch_indices

SPANS = [Span("a", 0, 1, "identity"), Span("b", 1, 3, "gumbel_softmax")]
MODEL = ModelConfig(
    latent_dim=4, generator_hidden=(8, 8), disc_hidden=(8,), feature_dim=4, shared_hidden=(8,)
)
N_ROWS, BATCH, DRAWN, SHARED_SEED = 200, 8, 32, 5


def _table(seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    numbers = torch.randn(N_ROWS, 1, generator=gen)
    index = torch.randint(3, (N_ROWS,), generator=gen)
    return torch.cat([numbers, torch.nn.functional.one_hot(index, 3).float()], dim=1)


def _config(
    variant: str = "vflgan", mechanism: str = "vflgan_gaussian", **dp: object
) -> VFLGANConfig:
    settings = {"mechanism": mechanism, "target_epsilon": 10.0, "delta": 1e-5}
    settings.update(dp)
    return VFLGANConfig(
        variant=variant,  # type: ignore[arg-type]
        model=MODEL,
        train=TrainConfig(batch_size=BATCH, n_critic=2, epochs=3),
        dp=DPConfig(**settings),  # type: ignore[arg-type]
    )


def _party(config: VFLGANConfig, data: torch.Tensor, noise_seed: int = 3) -> PartyTrainer:
    plan = plan_privacy(config.dp, dataset_size=N_ROWS, batch_size=BATCH, planned_steps=20)
    return PartyTrainer(config, SPANS, data, SHARED_SEED, 0, plan, noise_seed)


# -- the kept positions ---------------------------------------------------------------------


def test_kept_positions_are_distinct_sorted_reproducible_and_secret() -> None:
    first = mask_positions(7, 3, DRAWN, BATCH)
    assert first.tolist() == sorted(set(first.tolist()))
    assert len(first) == BATCH and int(first.min()) >= 0 and int(first.max()) < DRAWN
    assert torch.equal(first, mask_positions(7, 3, DRAWN, BATCH))
    assert not torch.equal(first, mask_positions(8, 3, DRAWN, BATCH))  # another party's secret
    assert not torch.equal(first, mask_positions(7, 4, DRAWN, BATCH))  # another step


def test_every_drawn_position_is_kept_with_probability_b_over_b_hat() -> None:
    steps = 4000
    counts = np.zeros(DRAWN)
    for step in range(steps):
        counts[mask_positions(1, step, DRAWN, BATCH).numpy()] += 1
    rate = counts / steps
    # Binomial(4000, 1/4): standard deviation 0.0068; 5 of them is 0.034.
    assert np.abs(rate - BATCH / DRAWN).max() < 0.034


def test_keeping_more_rows_than_drawn_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot keep 9 of 8 rows"):
        mask_positions(1, 0, 8, 9)


# -- the party's update ---------------------------------------------------------------------


def test_a_masked_party_draws_b_hat_rows_and_sends_their_features() -> None:
    party = _party(_config(masked_batch_size=DRAWN), _table())
    assert party.batch_rows(0, StepKind.DISCRIMINATOR) == DRAWN
    assert party.batch_rows(2, StepKind.GENERATOR) == BATCH
    out = party.forward(0, StepKind.DISCRIMINATOR)
    assert out.real.shape == (DRAWN, MODEL.feature_dim)
    assert out.fake.shape == (DRAWN, MODEL.feature_dim)
    assert party.forward(2, StepKind.GENERATOR).fake.shape == (BATCH, MODEL.feature_dim)


def _stepped(party: PartyTrainer, step: int, grad_real: torch.Tensor, grad_fake: torch.Tensor):
    """The discriminator's parameters after one D step, and the step's raw gradients
    (before the mechanism clips and noises them)."""
    raw: list[torch.Tensor] = []
    privatize = getattr(party.d_update, "privatize", None)  # DP-SGD has no batch gradient
    if privatize is not None:

        def spy(module, at_step):
            raw.extend(p.grad.detach().clone() for p in module.parameters())
            return privatize(module, at_step)

        party.d_update.privatize = spy  # type: ignore[attr-defined]
    party.forward(step, StepKind.DISCRIMINATOR)
    party.apply(step, StepKind.DISCRIMINATOR, grad_real, grad_fake)
    params = torch.cat([p.detach().flatten() for p in party.discriminator.parameters()])
    return params, raw


@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base"])
@pytest.mark.parametrize("mechanism", ["vflgan_gaussian", "dpsgd"])
def test_the_update_reads_only_the_kept_rows(variant: str, mechanism: str) -> None:
    """Rows the party masks change nothing: neither their data nor the server's
    gradients for them. A kept row's gradient does. (A mask ignored fails the first.)"""
    config = _config(variant, mechanism, masked_batch_size=DRAWN)
    step = 0
    probe = _party(config, _table())
    kept = probe.kept_positions(step)
    assert kept is not None and len(kept) == BATCH
    masked = torch.ones(DRAWN, dtype=torch.bool)
    masked[kept] = False
    gen = torch.Generator().manual_seed(0)
    grad_real = torch.randn(DRAWN, MODEL.feature_dim, generator=gen) / DRAWN
    grad_fake = torch.randn(DRAWN, MODEL.feature_dim, generator=gen) / DRAWN
    base, _ = _stepped(_party(config, _table()), step, grad_real, grad_fake)

    data = _table()
    rows = batch_indices(SHARED_SEED, step, N_ROWS, DRAWN)
    data[rows[masked]] += 5.0  # the masked rows' values
    noisy_real, noisy_fake = grad_real.clone(), grad_fake.clone()
    noisy_real[masked] = 100.0  # and the server's gradients for them
    noisy_fake[masked] = -100.0
    other, _ = _stepped(_party(config, data), step, noisy_real, noisy_fake)
    assert torch.equal(base, other)

    changed = grad_real.clone()
    changed[kept[0]] += 1.0
    moved, _ = _stepped(_party(config, _table()), step, changed, grad_fake)
    assert not torch.equal(base, moved)


def test_the_kept_rows_gradient_is_their_mean_over_b() -> None:
    """The server's gradients carry 1 / B_hat; the party's update is the mean over its B
    kept rows: the surrogate of VFLGAN-base without penalties is
    ``(B_hat / B) sum_kept (f(x_r) . g_r + f(x~_r) . g~_r)``."""
    config = _config("vflgan_base", masked_batch_size=DRAWN)
    config = replace(config, train=replace(config.train, first_part_gp=False))
    step = 0
    party = _party(config, _table())
    kept = party.kept_positions(step)
    assert kept is not None
    real = party._batch(step)[kept]
    fake = party._fake(step, DRAWN).detach()[kept]
    gen = torch.Generator().manual_seed(1)
    grad_real = torch.randn(DRAWN, MODEL.feature_dim, generator=gen) / DRAWN
    grad_fake = torch.randn(DRAWN, MODEL.feature_dim, generator=gen) / DRAWN
    reference = _party(config, _table()).discriminator
    surrogate = (DRAWN / BATCH) * (
        (reference.features(real) * grad_real[kept]).sum()
        + (reference.features(fake) * grad_fake[kept]).sum()
    )
    expected = torch.autograd.grad(surrogate, list(reference.parameters()))
    _, raw = _stepped(party, step, grad_real, grad_fake)
    assert len(raw) == len(expected)
    for got, want in zip(raw, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_the_kept_rows_come_from_the_party_s_secret_not_the_shared_seed() -> None:
    """Two parties sharing the batch seed but not their noise seeds keep different rows."""
    config = _config(masked_batch_size=DRAWN)
    one, other = _party(config, _table(), noise_seed=3), _party(config, _table(), noise_seed=4)
    assert torch.equal(one._batch(0), other._batch(0))  # the drawn rows are common
    one_kept, other_kept = one.kept_positions(0), other.kept_positions(0)
    assert one_kept is not None and other_kept is not None
    assert not torch.equal(one_kept, other_kept)


def test_without_masking_every_drawn_row_is_used() -> None:
    party = _party(_config(), _table())
    assert party.kept_positions(0) is None
    assert party.batch_rows(0, StepKind.DISCRIMINATOR) == BATCH


def test_b_hat_above_the_rows_is_refused_by_the_party() -> None:
    config = _config(masked_batch_size=N_ROWS + 1)
    with pytest.raises(
        ValueError, match=rf"dp.masked_batch_size={N_ROWS + 1} exceeds the {N_ROWS} training rows"
    ):
        _party(config, _table())


# -- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: _config(masked_batch_size=BATCH), r"must exceed train.batch_size=8"),
        (lambda: _config("vertigan", masked_batch_size=DRAWN), r"algorithm=vertigan does not"),
        (lambda: _config("wgan_gp", masked_batch_size=DRAWN), r"algorithm=wgan_gp does not"),
        (lambda: _config(mechanism="end_to_end", masked_batch_size=DRAWN), r"dp=end_to_end does"),
        (
            lambda: _config(mechanism="dpsgd", sampling="poisson", masked_batch_size=DRAWN),
            "poisson",
        ),
        (lambda: DPConfig(masked_batch_size=DRAWN), r"dp.masked_batch_size=32 without a DP"),
        (lambda: _config(masked_batch_size=1), r"integer >= 2, got 1"),
        (lambda: _config(masked_batch_size=True), r"integer >= 2, got True"),
    ],
)
def test_settings_that_cannot_mask_are_refused(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_the_one_graph_loop_refuses_masking_instead_of_ignoring_it() -> None:
    from flwr_vflgan.gan.plain import PlainVFLGAN

    with pytest.raises(ValueError, match=r"train dp\.masked_batch_size through the protocol"):
        PlainVFLGAN(_config(masked_batch_size=DRAWN), [SPANS], [_table()], SHARED_SEED, 1)


def test_the_wire_carries_b_hat_rows_for_discriminator_steps_only() -> None:
    from flwr_vflgan.gan.exchanges import fixed_rows

    config = _config(masked_batch_size=DRAWN)
    assert fixed_rows(config, StepKind.DISCRIMINATOR) == DRAWN
    assert fixed_rows(config, StepKind.GENERATOR) == BATCH
    assert fixed_rows(_config(), StepKind.DISCRIMINATOR) == BATCH


# -- the guarantee against the parties ------------------------------------------------------


def test_max_appearances_counts_the_most_used_row() -> None:
    steps = [0, 3, 4, 9]
    counts = np.zeros(N_ROWS, dtype=int)
    for step in steps:
        counts[batch_indices(SHARED_SEED, step, N_ROWS, DRAWN).numpy()] += 1
    assert max_appearances(SHARED_SEED, steps, N_ROWS, DRAWN) == counts.max()
    assert max_appearances(SHARED_SEED, steps, N_ROWS, N_ROWS) == len(steps)
    assert max_appearances(SHARED_SEED, [], N_ROWS, DRAWN) == 0


def test_unmasked_guarantee_is_the_plain_gaussian_composed_per_appearance() -> None:
    plan = plan_privacy(_config().dp, dataset_size=N_ROWS, batch_size=BATCH, planned_steps=20)
    got = against_parties(plan, BATCH, 12)
    plain = epsilon([GaussianSteps(BATCH, BATCH, plan.accountant_multiplier, 12)], 1e-5)
    assert got["epsilon"] == pytest.approx(plain)
    assert got["masked"] is False and got["sampling_rate"] == 1.0
    assert against_parties(plan, BATCH, 0)["epsilon"] == 0.0
    # The run's own epsilon (against the server) is amplified by B / n; this is not.
    assert got["epsilon"] > plan.ledger("p", 12).spent()


def test_masked_guarantee_never_exceeds_the_plain_gaussian_at_the_same_appearances() -> None:
    """Wang, Balle and Kasiviswanathan's bound exceeds the un-subsampled Gaussian at
    B / B_hat = 1/2 for small noise; the account takes the smaller of the two."""
    dp = DPConfig(mechanism=Mechanism.VFLGAN_GAUSSIAN, target_epsilon=10.0, noise_multiplier=0.6)
    plan = plan_privacy(dp, dataset_size=32561, batch_size=64, planned_steps=1000)
    plain = against_parties(plan, 64, 200)["epsilon"]
    half = against_parties(plan, 128, 200)["epsilon"]
    subsampled_only = epsilon([GaussianSteps(128, 64, plan.accountant_multiplier, 200)], 1e-5)
    assert subsampled_only > plain  # the theorem alone would be worse than no masking
    assert half <= plain


def test_the_guarantee_against_the_parties_falls_as_b_hat_grows() -> None:
    """Issue 24's target, with the batches a run draws: a larger B_hat puts a row in more
    batches but keeps it in each with probability B / B_hat; from 8 B on, the epsilon
    against the parties falls, and at 64 B it is below the unmasked one."""
    n_rows, batch, steps = 4000, 16, 1500
    dp = DPConfig(mechanism=Mechanism.VFLGAN_GAUSSIAN, target_epsilon=10.0, delta=1e-5)
    plan = plan_privacy(dp, dataset_size=n_rows, batch_size=batch, planned_steps=steps)
    values = {}
    for drawn in (batch, 8 * batch, 16 * batch, 32 * batch, 64 * batch):
        k = max_appearances(SHARED_SEED, range(steps), n_rows, drawn)
        values[drawn] = against_parties(plan, drawn, k)["epsilon"]
    falling = [values[d] for d in (8 * batch, 16 * batch, 32 * batch, 64 * batch)]
    assert falling == sorted(falling, reverse=True) and len(set(falling)) == 4
    assert values[64 * batch] < values[batch] / 2


def test_a_party_accounts_the_discriminator_steps_it_took() -> None:
    config = _config(masked_batch_size=DRAWN)
    party = _party(config, _table())
    schedule = Schedule.of(N_ROWS, config.train)
    taken = list(schedule.discriminator_steps(5))
    assert len(taken) == 5 and all(schedule.kind(t) is StepKind.DISCRIMINATOR for t in taken)
    report = party.against_parties(schedule, 5)
    assert report is not None
    assert report["appearances"] == max_appearances(SHARED_SEED, taken, N_ROWS, DRAWN)
    assert report["masked"] is True and report["drawn_rows"] == DRAWN
    assert report["sampling_rate"] == BATCH / DRAWN
    text = against_parties_description({"against_parties": report})
    assert text is not None and f"kept {BATCH} of {DRAWN} drawn rows" in text


def test_no_guarantee_against_the_parties_is_reported_where_it_is_not_accounted() -> None:
    schedule = Schedule.of(N_ROWS, TrainConfig(batch_size=BATCH, n_critic=2, epochs=3))
    poisson = _party(_config(mechanism="dpsgd", sampling="poisson"), _table())
    assert poisson.against_parties(schedule, 3) is None
    assert against_parties_description({"party": "p"}) is None
