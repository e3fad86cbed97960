"""Per-row gradients of a row-wise MLP critic from one batched backward pass.

DP-SGD needs the gradient of every row's loss on its own. :func:`~flwr_vflgan.privacy.
mechanisms.per_sample_grads` gets them by ``vmap`` over rows of ``grad``, which works for
any row-wise module but runs the gradient penalty's nested backward row by row; on
VFLGAN's discriminators it was 80 % of a ``dp=end_to_end`` step (docs/privacy.md,
"Performance"). This module gets the same gradients from the ordinary batched loss.

For a critic built of ``nn.Linear`` layers and elementwise activations, the gradient of
a loss with respect to a layer's weight ``W`` is a sum over the layer's *uses*: each
forward use ``y = x W^T + b`` contributes ``g x^T`` (``g`` the loss's gradient at ``y``)
and each transposed use ``v = u W``, the one a gradient penalty's input gradient makes,
contributes ``u g^T`` (``g`` the loss's gradient at ``v``). When the batch loss is a sum
of row terms and every row flows through the critic on its own, row ``i`` of each
``g`` is row ``i``'s own term's gradient, so row ``i``'s gradient is the sum of the outer
products of row ``i`` of every use. :func:`taped_per_sample_grads` records the uses while
the batch loss is formed (its gradient penalties by ``torch.autograd.grad`` with
``create_graph=True``, as without DP), then one backward pass collects each use's ``g``.

Autograd does the rest: a penalty's input gradient reaches the parameters through the
transposed uses and, for a smooth activation such as tanh, through its derivative's
dependence on the pre-activation, which flows back into the forward uses (LeakyReLU's
derivative is piecewise constant and passes zeros). The result equals ``per_sample_grads``
up to floating-point rounding (tested on every critic and loss the project tapes, and
on tanh and sigmoid critics).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function
from torch.overrides import TorchFunctionMode

ELEMENTWISE = (nn.LeakyReLU, nn.ReLU, nn.Tanh, nn.Sigmoid, nn.Identity)
"""Parameter-free modules that act on each value on its own."""


def tapeable(module: nn.Module) -> bool:
    """Whether :func:`taped_per_sample_grads` can differentiate ``module`` row by row.

    Every submodule must be an ``nn.Linear``, an elementwise activation, an
    ``nn.Sequential`` or a class that declares ``row_wise_mlp = True`` (its forward only
    chains its children on each row), and every trainable parameter must be a linear
    layer's.
    """
    for sub in module.modules():
        if isinstance(sub, (nn.Linear, nn.Sequential, *ELEMENTWISE)):
            continue
        if not getattr(type(sub), "row_wise_mlp", False):
            return False
    linear = {
        id(p) for sub in module.modules() if isinstance(sub, nn.Linear) for p in sub.parameters()
    }
    return all(id(p) in linear for p in module.parameters() if p.requires_grad)


class _Layer:
    """The uses of one ``nn.Linear`` recorded during a batch: ``(u, c, forward)`` with
    ``u`` the output-side vector (``(B, out)``) and ``c`` the input-side one (``(B, in)``)."""

    def __init__(self, layer: nn.Linear, tape: _Tape) -> None:
        self.layer = layer
        self.tape = tape
        self.uses: list[tuple[torch.Tensor, torch.Tensor, bool]] = []

    def add(self, u: torch.Tensor, c: torch.Tensor, forward: bool) -> None:
        if self.tape.collecting:
            if u.dim() != 2 or u.shape[0] != self.tape.rows:
                raise ValueError(
                    f"a taped nn.Linear saw a batch of shape {tuple(u.shape)}; the tape "
                    f"needs (rows={self.tape.rows}, width)"
                )
            self.uses.append((u.detach(), c.detach(), forward))


class _ForwardUse(Function):
    """``y = x W^T + b``; its backward records ``(g, x)`` and continues through
    :class:`_TransposedUse`, so a penalty's input gradient is taped as well."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: Any, layer: _Layer) -> Any:
        ctx.save_for_backward(x, weight)
        ctx.layer = layer
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        x, weight = ctx.saved_tensors
        ctx.layer.add(g, x, forward=True)
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        return _TransposedUse.apply(g, weight, ctx.layer), None, None, None


class _TransposedUse(Function):
    """``v = u W``; its backward records ``(u, g)``."""

    @staticmethod
    def forward(ctx: Any, u: torch.Tensor, weight: torch.Tensor, layer: _Layer) -> Any:
        ctx.save_for_backward(u, weight)
        ctx.layer = layer
        return u @ weight

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        u, weight = ctx.saved_tensors
        ctx.layer.add(u, g, forward=False)
        if not ctx.needs_input_grad[0]:
            return None, None, None
        return g @ weight.T, None, None


class _Tape(TorchFunctionMode):
    """Routes every ``F.linear`` of the taped layers through :class:`_ForwardUse`."""

    def __init__(self, module: nn.Module, rows: int) -> None:
        super().__init__()
        self.rows = rows
        self.collecting = False
        self.layers = [_Layer(m, self) for m in module.modules() if isinstance(m, nn.Linear)]
        self._by_weight = {id(layer.layer.weight): layer for layer in self.layers}

    def __torch_function__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            layer = self._by_weight.get(id(weight))
            if layer is not None:
                return _ForwardUse.apply(x, weight, bias, layer)
        return func(*args, **kwargs)


def taped_per_sample_grads(
    module: nn.Module, batch_loss: Callable[[], torch.Tensor], rows: int
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Per-row gradients of ``rows * batch_loss()`` with respect to ``module``'s parameters.

    Parameters
    ----------
    module : torch.nn.Module
        A critic for which :func:`tapeable` holds.
    batch_loss : Callable[[], torch.Tensor]
        Forms the batch loss, the mean over the ``rows`` rows of per-row losses, each a
        function of its own row only (no BatchNorm, no randomness, no mixing of rows).
        Its gradient penalties take their input gradients with ``create_graph=True``.
    rows : int
        The batch size ``B`` (> 0).

    Returns
    -------
    tuple[dict[str, torch.Tensor], torch.Tensor]
        Parameter name (as in ``module.named_parameters()``) to a ``(B, *param.shape)``
        tensor of the row losses' gradients, and the batch loss (detached).

    Raises
    ------
    ValueError
        If ``module`` is not tapeable, ``rows`` < 1, or a taped layer sees a batch whose
        first dimension is not ``rows``.
    """
    if not tapeable(module):
        raise ValueError(f"{type(module).__name__} is not a row-wise MLP of nn.Linear layers")
    if rows < 1:
        raise ValueError(f"rows must be at least 1, got {rows}")
    tape = _Tape(module, rows)
    with tape:
        loss = batch_loss()
    tape.collecting = True
    try:
        torch.autograd.backward(loss)
    finally:
        tape.collecting = False
    grads: dict[int, torch.Tensor] = {}
    for layer in tape.layers:
        weight, bias = layer.layer.weight, layer.layer.bias
        if layer.uses:
            u = torch.stack([use[0] for use in layer.uses], dim=1)  # (B, U, out)
            c = torch.stack([use[1] for use in layer.uses], dim=1)  # (B, U, in)
            grads[id(weight)] = torch.bmm(u.transpose(1, 2), c).mul_(rows)
            if bias is not None:
                forward = [use[0] for use in layer.uses if use[2]]
                grads[id(bias)] = torch.stack(forward).sum(0).mul_(rows)
    out = {}
    for name, param in module.named_parameters():
        if param.requires_grad:
            found = grads.get(id(param))
            out[name] = found if found is not None else torch.zeros((rows, *param.shape))
    return out, loss.detach()
