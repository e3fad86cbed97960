"""Output heads, networks and the context managers of :mod:`flwr_vflgan.nn.models`."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from flwr_vflgan.data import Span
from flwr_vflgan.nn import models
from flwr_vflgan.nn.models import (
    LocalDiscriminator,
    PartyGenerator,
    SharedDiscriminator,
    apply_output_activations,
    eval_mode,
    frozen_batchnorm_stats,
    gumbel_softmax,
    seeded_init,
)


@dataclass(frozen=True)
class _RawSpan:
    """A span without Span's own validation, to reach the model's checks."""

    start: int
    width: int
    activation: str


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _assert_exact_one_hot(rows: torch.Tensor) -> None:
    assert set(rows.detach().unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(rows.detach().sum(dim=-1), torch.ones(rows.shape[:-1]))


# -- gumbel_softmax --------------------------------------------------------------------
def test_gumbel_hard_rows_are_exactly_one_hot():
    logits = torch.randn(200, 5, generator=_gen(0))
    _assert_exact_one_hot(gumbel_softmax(logits, tau=1.0, hard=True, generator=_gen(1)))


def test_gumbel_soft_rows_are_distributions():
    logits = torch.randn(200, 5, generator=_gen(0))
    soft = gumbel_softmax(logits, tau=0.7, hard=False, generator=_gen(1))
    assert torch.all(soft >= 0)
    torch.testing.assert_close(soft.sum(dim=1), torch.ones(200))
    assert soft.max() < 1  # not hard


def test_gumbel_hard_argmax_is_the_soft_argmax():
    logits = torch.randn(100, 4, generator=_gen(0))
    soft = gumbel_softmax(logits, 1.0, hard=False, generator=_gen(3))
    hard = gumbel_softmax(logits, 1.0, hard=True, generator=_gen(3))
    assert torch.equal(hard.argmax(dim=1), soft.argmax(dim=1))


def test_gumbel_straight_through_gradient_is_the_soft_gradient():
    weights = torch.randn(16, 4, generator=_gen(5))
    grads = []
    for hard in (True, False):
        logits = torch.randn(16, 4, generator=_gen(0)).requires_grad_(True)
        (gumbel_softmax(logits, 0.5, hard, _gen(9)) * weights).sum().backward()
        grads.append(logits.grad)
    assert grads[0] is not None and grads[1] is not None
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0], grads[1])


def test_gumbel_same_generator_seed_same_output():
    logits = torch.randn(30, 6, generator=_gen(0))
    a = gumbel_softmax(logits, 1.0, False, _gen(4))
    assert torch.equal(a, gumbel_softmax(logits, 1.0, False, _gen(4)))
    assert not torch.equal(a, gumbel_softmax(logits, 1.0, False, _gen(5)))


def test_gumbel_follows_the_logits():
    # Logit gap 20 >> Gumbel noise spread: the one-hot picks the largest logit.
    logits = torch.tensor([[0.0, 20.0, 0.0]]).repeat(50, 1)
    hard = gumbel_softmax(logits, 1.0, True, _gen(0))
    assert torch.equal(hard, torch.tensor([[0.0, 1.0, 0.0]]).repeat(50, 1))


@pytest.mark.parametrize("hard", [True, False])
@pytest.mark.parametrize("tau", [1.0, 0.1])
def test_gumbel_extreme_logits_stay_finite(hard, tau):
    logits = torch.tensor(
        [[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [1e4, 1e4, -1e4], [-1e4, 0.0, 1e4]],
        requires_grad=True,
    )
    out = gumbel_softmax(logits, tau, hard, _gen(0))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.detach().sum(dim=1), torch.ones(4))
    if hard:
        _assert_exact_one_hot(out)
        assert out[0].tolist() == [1.0, 0.0, 0.0]
    (out * torch.arange(3.0)).sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("draw", [0.0, 1.0 - 2.0**-24], ids=["zero", "largest_below_one"])
@pytest.mark.parametrize("hard", [True, False])
def test_gumbel_extreme_uniform_draws_stay_finite(monkeypatch, draw, hard):
    real_rand = torch.rand

    def fake_rand(*args, **kwargs):
        values = real_rand(*args, **kwargs)
        values[:, ::2] = draw  # every other column hits the extreme draw
        return values

    monkeypatch.setattr(models.torch, "rand", fake_rand)
    logits = torch.randn(8, 5, generator=_gen(0)).requires_grad_(True)
    out = gumbel_softmax(logits, 1.0, hard, _gen(1))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.detach().sum(dim=1), torch.ones(8))
    out.sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_gumbel_all_zero_uniform_draws_stay_finite(monkeypatch):
    monkeypatch.setattr(models.torch, "rand", lambda *a, **k: torch.zeros(a[0], dtype=k["dtype"]))
    out = gumbel_softmax(torch.tensor([[1e4, -1e4, 0.0]]), 1.0, True, None)
    assert out.tolist() == [[1.0, 0.0, 0.0]]


# -- output activations ----------------------------------------------------------------
SPANS = [
    Span("num", 0, 2, "identity"),
    Span("cat", 2, 3, "gumbel_softmax"),
    Span("pix", 5, 1, "tanh"),
]


def test_output_activations_per_span():
    raw = torch.randn(64, 6, generator=_gen(0))
    out = apply_output_activations(raw, SPANS, tau=1.0, hard=True, generator=_gen(1))
    assert out.shape == (64, 6)
    assert torch.equal(out[:, 0:2], raw[:, 0:2])  # identity passes through
    _assert_exact_one_hot(out[:, 2:5])
    assert torch.equal(out[:, 5:6], torch.tanh(raw[:, 5:6]))
    assert torch.all(out[:, 5].abs() < 1)


def test_output_activations_keep_the_span_order():
    raw = torch.randn(4, 3, generator=_gen(0))
    spans = [_RawSpan(0, 1, "identity"), _RawSpan(1, 2, "tanh")]
    out = apply_output_activations(raw, spans, 1.0, True, None)
    assert torch.equal(out, torch.cat([raw[:, :1], torch.tanh(raw[:, 1:])], dim=1))


def test_unknown_activation_raises():
    with pytest.raises(
        ValueError, match=r"unknown activation 'relu' for an output span of width 1"
    ):
        apply_output_activations(torch.zeros(2, 1), [_RawSpan(0, 1, "relu")], 1.0, True, None)
    with pytest.raises(ValueError, match=r"the \*_missing ones need width >= 3"):
        apply_output_activations(
            torch.zeros(2, 2), [_RawSpan(0, 2, "identity_missing")], 1.0, True, None
        )


@pytest.mark.parametrize("numeric", ["identity", "tanh"])
def test_a_numeric_span_with_missing_values_is_a_value_and_a_gumbel_indicator(numeric: str):
    raw = torch.randn(50, 4, generator=_gen(0))
    spans = [_RawSpan(0, 3, f"{numeric}_missing"), _RawSpan(3, 1, "identity")]
    out = apply_output_activations(raw, spans, 1.0, True, _gen(5))
    value = raw[:, :1] if numeric == "identity" else torch.tanh(raw[:, :1])
    assert torch.equal(out[:, :1], value) and torch.equal(out[:, 3:], raw[:, 3:])
    _assert_exact_one_hot(out[:, 1:3])
    # The indicator's noise is the one a two-category span would draw at that place.
    torch.testing.assert_close(out[:, 1:3], gumbel_softmax(raw[:, 1:3], 1.0, True, _gen(5)))
    generator = PartyGenerator(4, [8], [_RawSpan(0, 3, f"{numeric}_missing")])
    z = torch.randn(300, 4, generator=_gen(2))
    with eval_mode(generator):
        whole = generator(z, _gen(9))
        assert torch.equal(generator.sample(z, _gen(9), chunk_rows=64), whole)


# -- networks ------------------------------------------------------------------------
def test_party_generator_architecture_and_output():
    with seeded_init(0):
        g = PartyGenerator(4, [8, 16, 12], SPANS, batchnorm_eps=0.8, leaky_slope=0.3)
    kinds = [type(m).__name__ for m in g.body]
    assert kinds == [
        "Linear", "LeakyReLU",
        "Linear", "BatchNorm1d", "LeakyReLU",
        "Linear", "BatchNorm1d", "LeakyReLU",
        "Linear",
    ]  # fmt: skip
    linear = [(m.in_features, m.out_features) for m in g.body if isinstance(m, nn.Linear)]
    assert linear == [(4, 8), (8, 16), (16, 12), (12, 6)]
    assert all(m.eps == 0.8 for m in g.body if isinstance(m, nn.BatchNorm1d))
    assert all(m.negative_slope == 0.3 for m in g.body if isinstance(m, nn.LeakyReLU))
    out = g(torch.randn(10, 4, generator=_gen(1)), _gen(2))
    assert out.shape == (10, 6)
    _assert_exact_one_hot(out[:, 2:5])


@pytest.mark.parametrize(
    ("spans", "message"),
    [
        (
            [_RawSpan(0, 2, "identity"), _RawSpan(3, 1, "identity")],
            r"a span starts at 3 \(expected 2\)",
        ),
        ([_RawSpan(1, 2, "identity")], r"a span starts at 1 \(expected 0\)"),
        (
            [_RawSpan(0, 2, "identity"), _RawSpan(1, 2, "tanh")],
            r"a span starts at 1 \(expected 2\)",
        ),
        ([_RawSpan(0, 0, "identity")], r"a span starts at 0 \(expected 0\) with width 0"),
    ],
    ids=["gap", "offset", "overlap", "empty"],
)
def test_party_generator_rejects_spans_that_do_not_tile(spans, message):
    with pytest.raises(ValueError, match=r"output spans must tile \[0, \d+\) in order; " + message):
        PartyGenerator(4, [8], spans)


def test_local_discriminator_parts():
    with_head = LocalDiscriminator(6, [8, 5], feature_dim=3, local_head=True)
    widths = [(m.in_features, m.out_features) for m in with_head.first if isinstance(m, nn.Linear)]
    assert widths == [(6, 8), (8, 5), (5, 3)]
    x = torch.randn(7, 6, generator=_gen(0))
    features = with_head.features(x)
    assert features.shape == (7, 3)
    assert with_head.second is not None
    assert torch.equal(with_head(x), with_head.second(features))

    base = LocalDiscriminator(6, [], feature_dim=3, local_head=False)
    assert base.second is None
    assert base.features(x).shape == (7, 3)
    with pytest.raises(RuntimeError, match=r"VFLGAN-base local discriminators have no second part"):
        base(x)


def test_local_discriminator_head_hidden_is_an_mlp_after_the_feature():
    paper = LocalDiscriminator(6, [8], feature_dim=3, local_head=True)
    assert isinstance(paper.second, nn.Linear)  # the reference code's D_p, state keys unchanged
    assert sorted(paper.state_dict()) == [
        "first.0.bias",
        "first.0.weight",
        "first.2.bias",
        "first.2.weight",
        "second.bias",
        "second.weight",
    ]
    deep = LocalDiscriminator(6, [8], feature_dim=3, local_head=True, head_hidden=(5, 4))
    assert isinstance(deep.second, nn.Sequential)
    layers = [type(m).__name__ for m in deep.second]
    assert layers == ["Linear", "LeakyReLU", "Linear", "LeakyReLU", "Linear"]
    widths = [(m.in_features, m.out_features) for m in deep.second if isinstance(m, nn.Linear)]
    assert widths == [(3, 5), (5, 4), (4, 1)]
    x = torch.randn(7, 6, generator=_gen(0))
    f = deep.features(x)
    w1, w2, w3 = (m for m in deep.second if isinstance(m, nn.Linear))
    by_hand = F.leaky_relu(
        F.leaky_relu(f @ w1.weight.T + w1.bias, 0.2) @ w2.weight.T + w2.bias, 0.2
    )
    torch.testing.assert_close(deep(x), by_hand @ w3.weight.T + w3.bias)
    # VFLGAN-base has no second part whatever the head widths say
    assert LocalDiscriminator(6, [8], 3, local_head=False, head_hidden=(5,)).second is None


def test_shared_discriminator_scores_rows():
    d = SharedDiscriminator(12, [8, 4])
    widths = [(m.in_features, m.out_features) for m in d.net if isinstance(m, nn.Linear)]
    assert widths == [(12, 8), (8, 4), (4, 1)]
    assert d(torch.randn(5, 12, generator=_gen(0))).shape == (5, 1)
    assert [type(m).__name__ for m in SharedDiscriminator(12, []).net] == ["Linear"]


# -- context managers ----------------------------------------------------------------
def _bn_net(momentum: float | None) -> tuple[nn.Sequential, nn.BatchNorm1d]:
    with seeded_init(0):
        norm = nn.BatchNorm1d(5, momentum=momentum)
        net = nn.Sequential(nn.Linear(3, 5), norm, nn.Linear(5, 2))
    net.train()
    net(torch.randn(16, 3, generator=_gen(1)))  # statistics off their defaults
    return net, norm


def _stats(norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Copies of running mean, running variance and batch counter."""
    assert isinstance(norm, nn.BatchNorm1d)
    mean, var, count = norm.running_mean, norm.running_var, norm.num_batches_tracked
    assert mean is not None and var is not None and count is not None
    return mean.clone(), var.clone(), count.clone()


@pytest.mark.parametrize("momentum", [0.1, None], ids=["ema", "cumulative"])
def test_frozen_batchnorm_stats_leave_statistics_and_output_alone(momentum):
    net, norm = _bn_net(momentum)
    twin = copy.deepcopy(net)
    mean, var, count = _stats(norm)
    x = torch.randn(16, 3, generator=_gen(2))

    with frozen_batchnorm_stats(net):
        frozen_out = net(x)
    after_mean, after_var, after_count = _stats(norm)
    assert torch.equal(after_mean, mean)
    assert torch.equal(after_var, var)
    assert torch.equal(after_count, count)
    assert norm.momentum == momentum

    normal_out = twin(x)  # an ordinary train-mode forward
    assert torch.equal(frozen_out, normal_out)
    twin_mean, _, twin_count = _stats(twin[1])  # ... which does update the statistics
    assert not torch.equal(twin_mean, mean)
    assert int(twin_count) == int(count) + 1


def test_frozen_batchnorm_stats_restore_on_error():
    net, norm = _bn_net(0.1)
    count = _stats(norm)[2]
    with pytest.raises(KeyError), frozen_batchnorm_stats(net):
        net(torch.randn(4, 3))
        raise KeyError("boom")
    assert norm.momentum == 0.1
    assert torch.equal(_stats(norm)[2], count)


@pytest.mark.parametrize("was_training", [True, False])
def test_eval_mode_disables_grad_and_restores_the_mode(was_training):
    net, norm = _bn_net(0.1)
    net.train(was_training)
    mean = _stats(norm)[0]
    with eval_mode(net):
        assert not net.training and not norm.training
        assert not torch.is_grad_enabled()
        out = net(torch.randn(4, 3, generator=_gen(3)))
        assert not out.requires_grad
    assert torch.is_grad_enabled()
    assert net.training is was_training and norm.training is was_training
    assert torch.equal(_stats(norm)[0], mean)


def test_eval_mode_restores_on_error():
    net, _ = _bn_net(0.1)
    with pytest.raises(KeyError), eval_mode(net):
        raise KeyError("boom")
    assert net.training and torch.is_grad_enabled()


def test_seeded_init_is_deterministic_and_leaves_the_global_generator_alone():
    torch.manual_seed(99)
    state = torch.get_rng_state()
    with seeded_init(5):
        a = PartyGenerator(4, [8, 8], SPANS)
    with seeded_init(5):
        b = PartyGenerator(4, [8, 8], SPANS)
    with seeded_init(6):
        c = PartyGenerator(4, [8, 8], SPANS)
    assert torch.equal(torch.get_rng_state(), state)
    pa, pb, pc = (torch.cat([p.reshape(-1) for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb)
    assert not torch.equal(pa, pc)


@pytest.mark.parametrize("hard", [True, False])
@pytest.mark.parametrize("chunk_rows", [1024, 5000, 7000])
def test_sampling_in_chunks_gives_the_rows_of_one_forward_pass(hard: bool, chunk_rows: int) -> None:
    """sample() applies the output activations in place, chunk by chunk, span by span;
    the Gumbel noise must still be drawn as forward() draws it (whole spans, in order)."""
    torch.manual_seed(0)
    spans = [*SPANS, _RawSpan(SPANS[-1].start + SPANS[-1].width, 3, "tanh")]
    generator = PartyGenerator(4, [8, 16, 12], spans, gumbel_hard=hard)
    with torch.no_grad():  # move the BatchNorm statistics off their initial values
        generator(torch.randn(64, 4))
    z = torch.randn(5000, 4, generator=torch.Generator().manual_seed(1))
    with eval_mode(generator):
        whole = generator(z, torch.Generator().manual_seed(7))
        chunked = generator.sample(z, torch.Generator().manual_seed(7), chunk_rows=chunk_rows)
        other_noise = generator.sample(z, torch.Generator().manual_seed(8), chunk_rows=chunk_rows)
    assert torch.equal(whole, chunked)
    assert not torch.equal(whole, other_noise)
    with pytest.raises(RuntimeError, match="sample\\(\\) is for eval mode without autograd"):
        generator.sample(z, None)


def test_sampling_refuses_an_unknown_activation_as_forward_does() -> None:
    generator = PartyGenerator(4, [8], [_RawSpan(0, 2, "identity")])
    generator.spans = [_RawSpan(0, 2, "relu")]
    with eval_mode(generator), pytest.raises(ValueError, match="unknown activation 'relu'"):
        generator.sample(torch.zeros(3, 4), None)


def test_parameter_average_by_hand() -> None:
    """average <- d * average + (1 - d) * source after each update; buffers copied."""
    from flwr_vflgan.nn.models import ParameterAverage

    source = nn.Sequential(nn.Linear(2, 1), nn.BatchNorm1d(1))
    average = ParameterAverage(source, 0.75)
    start = [p.detach().clone() for p in source.parameters()]
    assert all(not p.requires_grad for p in average.module.parameters())
    with torch.no_grad():
        for p in source.parameters():
            p.add_(1.0)
        source[1].running_mean.fill_(3.0)
    average.update(source)
    for a, p0 in zip(average.module.parameters(), start, strict=True):
        torch.testing.assert_close(a, 0.75 * p0 + 0.25 * (p0 + 1.0))
    assert average.module[1].running_mean.item() == 3.0
    assert not torch.equal(average.module[0].weight, source[0].weight)  # a copy, not a view


def test_parameter_average_decay_halves_the_weight_every_half_life() -> None:
    from flwr_vflgan.nn.models import ParameterAverage

    decay = ParameterAverage.decay_for(2.0, 10)  # 20 updates
    assert decay**20 == pytest.approx(0.5)
    assert ParameterAverage.decay_for(0.01, 3) == 0.5  # at least one update
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError, match=r"decay must be in \(0, 1\)"):
            ParameterAverage(nn.Linear(1, 1), bad)
