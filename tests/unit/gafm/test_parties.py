"""The label party's update rule (the local party's apply step: test_models.py)."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch

from flwr_vflgan.config import Variant, VFLGANConfig
from flwr_vflgan.gafm.config import GAFMSettings, Method
from flwr_vflgan.gafm.losses import ce_loss, randomized_response
from flwr_vflgan.gafm.parties import LabelParty
from flwr_vflgan.runtime.rng import Stream, torch_generator

SETTINGS = GAFMSettings(gamma=2.0, delta=0.2, sigma=0.05, lr_generator=1e-2, lr_discriminator=1e-2)


def _batch(n: int = 16, parties: int = 1, seed: int = 0) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    labels = (torch.rand(n, generator=gen) > 0.5).float()
    labels[0], labels[1] = 0.0, 1.0
    parts = [0.2 + 0.6 * torch.rand(n, 1, generator=gen) for _ in range(parties)]
    return parts, labels


def _manual_gafm(
    party: LabelParty, parts: list[torch.Tensor], labels: torch.Tensor, step: int
) -> torch.Tensor:
    """Algorithm A.1 written out: D step and clipping, G step, then the normalised gradient."""
    s = party.settings
    assert party.disc is not None
    g_net, d_net = copy.deepcopy(party.head), copy.deepcopy(party.disc)
    opt_d = torch.optim.Adam(d_net.parameters(), lr=s.lr_discriminator, betas=s.betas)
    opt_g = torch.optim.Adam(g_net.parameters(), lr=s.lr_generator, betas=s.betas)
    gen = torch_generator(party.seed, Stream.LABEL_NOISE, step)
    real = (labels + s.sigma * torch.randn(labels.shape, generator=gen)).unsqueeze(1)
    target = randomized_response(labels, s.delta, gen)
    f = torch.stack(parts).mean(dim=0)
    loss_d = -(d_net(real).mean() - d_net(g_net(f).detach()).mean())
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    with torch.no_grad():
        for p in d_net.parameters():
            p.clamp_(-s.clip, s.clip)
    loss_g = -d_net(g_net(f)).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    cut = f.clone().requires_grad_(True)
    (g_gan,) = torch.autograd.grad(-d_net(g_net(cut)).mean(), cut)
    (g_ce,) = torch.autograd.grad(ce_loss(cut.mean(dim=1), target), cut)
    return s.gamma * g_gan / g_gan.norm() + g_ce / g_ce.norm()


def test_gafm_cut_gradient_follows_algorithm_a1() -> None:
    party = LabelParty(Method.GAFM, SETTINGS, 1, seed=3)
    parts, labels = _batch()
    expected = _manual_gafm(party, parts, labels, step=5)
    result = party.train_step(parts, labels, 5)
    assert torch.allclose(result.grads[0], expected, atol=1e-6)
    # Both normalised terms have unit norm, so the sum's norm is at most gamma + 1.
    assert float(result.grads[0].norm()) <= SETTINGS.gamma + 1 + 1e-5
    assert {"loss_d", "loss_g", "ce", "gan_grad_mean", "ce_grad_mean"} <= set(result.stats)
    # The discriminator was clipped after its step.
    assert party.disc is not None
    assert all(
        float(p.detach().abs().max()) <= SETTINGS.clip + 1e-7 for p in party.disc.parameters()
    )


def test_average_cut_splits_the_gradient_equally_and_concat_slices_it() -> None:
    parts, labels = _batch(parties=3)
    party = LabelParty(Method.GAFM, SETTINGS, 3, seed=4)
    expected = _manual_gafm(party, parts, labels, step=0)
    grads = party.train_step(parts, labels, 0).grads
    for g in grads:  # eq. C.1: f = (f1 + f2 + f3) / 3, so d f / d f_p = 1/3
        assert torch.allclose(g, expected / 3, atol=1e-6)
    concat = LabelParty(Method.SPLITNN, GAFMSettings(cut="concat"), 3, seed=4)
    out = concat.train_step(parts, labels, 0).grads
    assert [tuple(g.shape) for g in out] == [(16, 1)] * 3
    assert not torch.allclose(out[0], out[1])


def test_vanilla_gradient_is_the_cross_entropy_gradient_and_defenses_perturb_it() -> None:
    parts, labels = _batch(n=64)
    vanilla = LabelParty(Method.SPLITNN, SETTINGS, 1, seed=5)
    head = copy.deepcopy(vanilla.head)
    cut = parts[0].clone().requires_grad_(True)
    (expected,) = torch.autograd.grad(ce_loss(head(cut).squeeze(1), labels), cut)
    assert torch.allclose(vanilla.train_step(parts, labels, 0).grads[0], expected, atol=1e-7)
    for method in (Method.MAXNORM, Method.MARVELL):
        noisy = LabelParty(method, SETTINGS, 1, seed=5).train_step(parts, labels, 0).grads[0]
        assert noisy.shape == expected.shape and not torch.allclose(noisy, expected)
    # Same seed, same step: the perturbation is reproducible.
    a = LabelParty(Method.MAXNORM, SETTINGS, 1, seed=5).train_step(parts, labels, 0).grads[0]
    b = LabelParty(Method.MAXNORM, SETTINGS, 1, seed=5).train_step(parts, labels, 0).grads[0]
    assert torch.equal(a, b)


def test_gafm_with_marvell_perturbs_the_gafm_gradient() -> None:
    parts, labels = _batch(n=64)
    plain = LabelParty(Method.GAFM, SETTINGS, 1, seed=6).train_step(parts, labels, 0)
    gm_settings = GAFMSettings(**{**SETTINGS.to_dict(), "marvell": True})
    gm = LabelParty(Method.GAFM, gm_settings, 1, seed=6).train_step(parts, labels, 0)
    assert not torch.allclose(plain.grads[0], gm.grads[0])
    assert "marvell_sum_kl" in gm.stats


def test_label_party_rejects_bad_shapes() -> None:
    party = LabelParty(Method.GAFM, SETTINGS, 2, seed=0)
    parts, labels = _batch(parties=2)
    with pytest.raises(ValueError, match="expected cut values of 2 parties"):
        party.train_step(parts[:1], labels, 0)
    with pytest.raises(ValueError, match="party 1's cut values"):
        party.train_step([parts[0], parts[1][:3]], labels, 0)
    with pytest.raises(ValueError, match="labels must have shape"):
        party.train_step(parts, labels[:3], 0)


@pytest.mark.parametrize("ablation", ["gan_only", "ce_only"])
def test_an_ablation_sends_one_term_of_the_gafm_gradient(ablation: str) -> None:
    """Paper 002, Section 4.2.2: GAN-only and CE-only differ from GAFM only in the cut
    gradient; the discriminator and generator train as before."""
    full = LabelParty(Method.GAFM, SETTINGS, 1, seed=3)
    ablated = LabelParty(Method.GAFM, replace(SETTINGS, ablation=ablation), 1, seed=3)
    parts, labels = _batch()
    both = full.train_step(parts, labels, 5)
    one = ablated.train_step(parts, labels, 5)
    assert one.stats["loss_d"] == both.stats["loss_d"]
    term = one.grads[0]
    if ablation == "gan_only":
        assert float(term.norm()) == pytest.approx(SETTINGS.gamma, rel=1e-5)
    else:
        assert float(term.norm()) == pytest.approx(1.0, rel=1e-5)
    # The two ablations' terms add up to GAFM's gradient.
    other = LabelParty(
        Method.GAFM,
        replace(SETTINGS, ablation="ce_only" if ablation == "gan_only" else "gan_only"),
        1,
        seed=3,
    ).train_step(parts, labels, 5)
    assert torch.allclose(term + other.grads[0], both.grads[0], atol=1e-6)


def test_an_ablation_is_named_and_only_for_gafm() -> None:
    with pytest.raises(ValueError, match=r"gafm.ablation must be one of \['gan_only', 'ce_only'\]"):
        GAFMSettings(ablation="gan")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="algorithm=splitnn has none"):
        VFLGANConfig(variant=Variant.SPLITNN, gafm=GAFMSettings(ablation="ce_only"))


@pytest.mark.parametrize("parties", [1, 3])
def test_a_traced_step_reports_the_terms_of_the_gradient_and_changes_nothing(parties: int) -> None:
    """Paper 002's Figure 2: the GAN and CE terms party 0 receives add up to its gradient;
    tracing leaves the update and the gradients exactly as an untraced step makes them."""
    parts, labels = _batch(parties=parties)
    plain, traced = (LabelParty(Method.GAFM, SETTINGS, parties, seed=7) for _ in range(2))
    traced.tracing = True
    untraced_result = plain.train_step(parts, labels, 2)
    result = traced.train_step(parts, labels, 2)
    assert untraced_result.trace is None and result.trace is not None
    for a, b in zip(untraced_result.grads, result.grads, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(plain.head.parameters(), traced.head.parameters(), strict=True):
        assert torch.equal(a, b)
    trace = result.trace
    assert set(trace) == {"label", "prediction", "gradient", "gan", "ce"}
    np.testing.assert_array_equal(trace["label"], labels.numpy().astype(int))
    np.testing.assert_allclose(trace["gan"] + trace["ce"], trace["gradient"], atol=1e-6)
    np.testing.assert_allclose(trace["gradient"], result.grads[0].sum(dim=1).numpy(), atol=1e-7)
    # The prediction is G(f(X)) after the step, as the label party would predict.
    assert np.all((trace["prediction"] > 0) & (trace["prediction"] < 1))


def test_a_traced_splitnn_step_has_no_gan_or_ce_terms() -> None:
    party = LabelParty(Method.SPLITNN, SETTINGS, 1, seed=5)
    party.tracing = True
    parts, labels = _batch()
    trace = party.train_step(parts, labels, 0).trace
    assert trace is not None and set(trace) == {"label", "prediction", "gradient"}
