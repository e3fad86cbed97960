"""FlatState: parameters, buffers and Adam moments as views into one float32 buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from flwr_vflgan.nn.models import seeded_init
from flwr_vflgan.runtime.flat import FlatState


def _model(seed: int) -> nn.Sequential:
    with seeded_init(seed):
        return nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.LeakyReLU(0.2), nn.Linear(5, 2))


def _optimizers(model: nn.Sequential) -> list[torch.optim.Adam]:
    # Two optimizers over disjoint parameter sets, as a party has for G and D.
    return [
        torch.optim.Adam(model[0].parameters(), lr=1e-2, betas=(0.5, 0.999)),
        torch.optim.Adam([*model[1].parameters(), *model[3].parameters()], lr=5e-3),
    ]


def _batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(step)
    return torch.randn(8, 3, generator=gen), torch.randn(8, 2, generator=gen)


def _train_step(model: nn.Module, optimizers: list[torch.optim.Adam], step: int) -> None:
    x, y = _batch(step)
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    ((model(x) - y) ** 2).mean().backward()
    # Alternate like the GAN does: not every optimizer steps every time.
    for index, opt in enumerate(optimizers):
        if index == 0 or step % 2 == 0:
            opt.step()


def _everything(model: nn.Module, optimizers: list[torch.optim.Adam]) -> list[torch.Tensor]:
    tensors = [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                state = opt.state[p]
                tensors += [state["exp_avg"], state["exp_avg_sq"], state["step"]]
    return [t.detach().clone() for t in tensors]


def _assert_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


def test_size_counts_params_float_buffers_and_two_moments():
    model = _model(0)
    n_params = sum(p.numel() for p in model.parameters())
    n_buffers = 5 + 5  # running mean and var; num_batches_tracked is an integer buffer
    state = FlatState([model], _optimizers(model))
    assert state.size == n_params + n_buffers + 2 * n_params
    assert state.to_numpy().dtype == np.float32
    assert state.optimizer_steps() == [0, 0]


def test_round_trip_restores_params_buffers_and_moments():
    model = _model(0)
    optimizers = _optimizers(model)
    state = FlatState([model], optimizers)
    for step in range(5):
        _train_step(model, optimizers, step)
    values, steps = state.to_numpy(), state.optimizer_steps()
    assert steps == [5, 3]

    fresh = _model(1)  # different initialisation, overwritten by the load
    fresh_optimizers = _optimizers(fresh)
    fresh_state = FlatState([fresh], fresh_optimizers)
    fresh_state.load(values, steps)

    _assert_equal(_everything(fresh, fresh_optimizers), _everything(model, optimizers))
    assert fresh_state.optimizer_steps() == [5, 3]
    np.testing.assert_array_equal(fresh_state.to_numpy(), values)


def test_to_numpy_is_a_copy():
    model = _model(0)
    state = FlatState([model], _optimizers(model))
    values = state.to_numpy()
    before = [p.detach().clone() for p in model.parameters()]
    values[:] = 123.0
    _assert_equal([p.detach() for p in model.parameters()], before)


def test_tensors_are_views_into_the_flat_buffer():
    model = _model(0)
    state = FlatState([model], _optimizers(model))
    state.flat.zero_()
    assert all(torch.count_nonzero(p) == 0 for p in model.parameters())


def test_eager_moments_match_adams_lazy_initialisation():
    flat_model, plain_model = _model(0), _model(0)
    flat_opts, plain_opts = _optimizers(flat_model), _optimizers(plain_model)
    FlatState([flat_model], flat_opts)
    for step in range(6):
        _train_step(flat_model, flat_opts, step)
        _train_step(plain_model, plain_opts, step)
    _assert_equal(_everything(flat_model, flat_opts), _everything(plain_model, plain_opts))


def test_load_into_a_fresh_model_between_every_step_trains_in_lockstep():
    """As in a deployment: each step runs in a new process from the saved flat state."""
    model = _model(0)
    optimizers = _optimizers(model)
    state = FlatState([model], optimizers)
    saved = (state.to_numpy(), state.optimizer_steps())
    for step in range(6):
        _train_step(model, optimizers, step)

        fresh = _model(100 + step)
        fresh_optimizers = _optimizers(fresh)
        fresh_state = FlatState([fresh], fresh_optimizers)
        fresh_state.load(*saved)
        _train_step(fresh, fresh_optimizers, step)
        saved = (fresh_state.to_numpy(), fresh_state.optimizer_steps())

        np.testing.assert_array_equal(saved[0], state.to_numpy())
        assert saved[1] == state.optimizer_steps()


@pytest.mark.parametrize(
    "values",
    [np.zeros(3, dtype=np.float32), np.zeros(0, dtype=np.float32)],
    ids=["short", "empty"],
)
def test_load_rejects_the_wrong_size(values):
    model = _model(0)
    state = FlatState([model], _optimizers(model))
    with pytest.raises(
        ValueError, match=rf"flat state must be float32 of shape \({state.size},\), got float32"
    ):
        state.load(values, [0, 0])
    longer = np.zeros(state.size + 1, dtype=np.float32)
    with pytest.raises(
        ValueError, match=r"the model configuration differs from the one that saved it"
    ):
        state.load(longer, [0, 0])


def test_load_rejects_the_wrong_dtype_and_step_count():
    model = _model(0)
    state = FlatState([model], _optimizers(model))
    with pytest.raises(ValueError, match=r"flat state must be float32 .* got float64"):
        state.load(state.to_numpy().astype(np.float64), [0, 0])
    with pytest.raises(ValueError, match=r"flat state must be float32"):
        state.load(state.to_numpy().reshape(1, -1), [0, 0])
    with pytest.raises(ValueError, match=r"expected 2 optimizer step counters, got 1"):
        state.load(state.to_numpy(), [0])
