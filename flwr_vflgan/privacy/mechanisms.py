"""Differential-privacy mechanisms for discriminators: what is clipped and what is noised.

Three mechanisms, none of which keeps any accounting state (``accounting.py`` does):

* :class:`FirstLayerGaussian` and :func:`privatize_first_layers`: DP-VFLGAN (paper 000,
  Section 3.4, eqs. 20-21). The batch gradient of the first linear layer of each local
  discriminator is clipped as a whole to L2 norm ``C`` and full-shape Gaussian noise of
  standard deviation ``2 C sigma`` is added. Costs one norm and one noise draw per step.
* :func:`per_sample_critic_grads`, :func:`set_grad_samples` and :func:`make_dp_optimizer`:
  per-sample DP-SGD (Abadi et al., 2016) on a whole WGAN-GP critic. Opacus's gradient
  samplers cannot differentiate the gradient penalty (a double backward), so the
  per-sample gradients come from ``torch.func`` and are handed to Opacus's
  ``DPOptimizer`` as ``p.grad_sample`` (Opacus's ``grad_sample_mode="no_op"`` route).
* :func:`sanitize_sample_gradients`: GS-WGAN's gradient sanitization (Chen et al. 2020).
  The gradient each synthetic sample receives from a discriminator is clipped to L2 norm
  ``C`` on its own and Gaussian noise is added to every entry, before it flows on into
  the generator; the discriminator's own updates are not noised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.func import functional_call, grad, grad_and_value, vmap

from flwr_vflgan.checked import is_finite_number

if TYPE_CHECKING:
    from opacus.optimizers import DPOptimizer


def _check_number(name: str, value: object, *, allow_zero: bool) -> None:
    rule = ">= 0" if allow_zero else "> 0"
    if not is_finite_number(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {rule}, got {value!r}")


def _check_generator(generator: object) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator (noise never comes from the global RNG), "
            f"got {type(generator).__name__}"
        )


@dataclass(frozen=True)
class FirstLayerGaussian:
    """DP-VFLGAN's Gaussian mechanism on a first-layer batch gradient (paper 000, eqs. 20-21).

    Parameters
    ----------
    clip : float
        ``C`` > 0, the L2 bound on the whole batch gradient of the first layer.
    noise_multiplier : float
        ``sigma`` >= 0; the noise standard deviation is ``2 C sigma``.

    Raises
    ------
    ValueError
        If ``clip`` is not a finite number > 0 or ``noise_multiplier`` not a finite
        number >= 0.

    Notes
    -----
    Sampling scheme: a fixed-size mini-batch of ``B`` of the ``n`` training rows, drawn
    without replacement (paper 000, Proposition 4; Wang, Balle and Kasiviswanathan,
    2019). Neighbouring relation: replace one record (the one the accountant for that
    sampling scheme uses). The mechanism releases ``clip(G, C) + N(0, (2 C sigma)^2 I)``
    where ``G`` is the gradient of the first layer's parameters computed on the batch.

    Sensitivity (Appendix A.2, eqs. 25-26): ``clip`` bounds ``||clip(G, C)||_2 <= C``
    for *every* batch, so by the triangle inequality any two batches give clipped
    gradients at most ``2 C`` apart. The bound uses nothing about adjacency: it holds for
    any neighbouring relation and does not shrink with ``B`` (one record moves a mean
    batch gradient by about ``1/B`` of it, but the clip is per batch, not per record, so
    only the worst case ``2 C`` can be claimed). It rests on the clip covering the whole
    gradient of the layer as one vector (weight and bias, see
    :func:`privatize_first_layers`). With noise ``2 C sigma`` the Gaussian mechanism
    (Proposition 1, Mironov 2017) gives ``(alpha, alpha / (2 sigma^2))``-RDP per step
    (Theorem 1), so the accountant's noise multiplier is ``sigma`` =
    ``noise_std / sensitivity``. The amplification by subsampling (Proposition 4) further
    assumes that a step reads the private data only through this release; the paper
    argues the rest (features, the generators' gradients) is post-processing of the noised
    first layer (eqs. 27-29), although the later layers of ``D_i`` and the shared
    discriminator are updated from un-noised gradients. That argument is the paper's and
    is not checked here; the paper also limits the guarantee to external adversaries,
    since the parties know which rows are in each batch (Section 3.5).

    The reference code's red-wine scripts draw one scalar (``torch.randn([1])``) and
    broadcast it over the gradient; that is one noise value for the whole layer, not the
    ``N(0, (2 C sigma)^2 I)`` of eq. 21 that Theorem 1 needs. This class draws one value
    per coordinate.
    """

    clip: float
    noise_multiplier: float

    def __post_init__(self) -> None:
        _check_number("clip", self.clip, allow_zero=False)
        _check_number("noise_multiplier", self.noise_multiplier, allow_zero=True)

    @property
    def sensitivity(self) -> float:
        """Replace-one L2 sensitivity of the clipped batch gradient: ``2 C``."""
        return 2.0 * self.clip

    @property
    def noise_std(self) -> float:
        """Standard deviation of each noise coordinate: ``2 C sigma``."""
        return self.sensitivity * self.noise_multiplier

    def clip_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        """``g * min(1, C / ||g||_2)`` (eq. 20), the norm taken in float64.

        Parameters
        ----------
        grad : torch.Tensor
            A floating-point gradient; its L2 norm is taken over all its entries.

        Returns
        -------
        torch.Tensor
            A new tensor of ``grad``'s shape and dtype.

        Raises
        ------
        TypeError
            If ``grad`` is not a floating-point tensor.
        ValueError
            If ``grad`` has a non-finite entry (the clip would be undefined).
        """
        if not isinstance(grad, torch.Tensor) or not grad.is_floating_point():
            raise TypeError(
                f"grad must be a floating-point torch.Tensor, got "
                f"{getattr(grad, 'dtype', type(grad).__name__)}"
            )
        wide = grad.detach().to(torch.float64)
        norm = torch.linalg.vector_norm(wide)
        if not torch.isfinite(norm):
            raise ValueError(f"grad has non-finite entries (norm {norm.item()}); cannot clip")
        scale = torch.clamp(self.clip / norm, max=1.0) if norm > 0 else torch.ones_like(norm)
        return (wide * scale).to(grad.dtype)

    def privatize(self, grad: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Clip ``grad`` to norm ``C`` and add ``N(0, (2 C sigma)^2)`` to every entry (eq. 21).

        Parameters
        ----------
        grad : torch.Tensor
            The batch gradient of a first layer (any shape; clipped as one vector).
        generator : torch.Generator
            Source of the noise, on ``grad``'s device. Nothing is drawn when
            ``noise_multiplier`` is 0.

        Returns
        -------
        torch.Tensor
            A new tensor of ``grad``'s shape and dtype; ``grad`` is not modified.

        Raises
        ------
        TypeError
            If ``grad`` is not a floating-point tensor or ``generator`` not a
            ``torch.Generator``.
        ValueError
            If ``grad`` has a non-finite entry.
        """
        _check_generator(generator)
        clipped = self.clip_gradient(grad)
        if self.noise_std == 0.0:
            return clipped
        noise = torch.randn(grad.shape, generator=generator, dtype=grad.dtype, device=grad.device)
        return clipped + self.noise_std * noise


def first_linear(module: nn.Module) -> nn.Linear:
    """The first ``nn.Linear`` of ``module`` in ``module.modules()`` order.

    ``modules()`` walks submodules depth first in registration order, which is the
    input layer for :class:`~flwr_vflgan.nn.models.LocalDiscriminator` and any
    ``nn.Sequential`` MLP; a module that registers its layers out of forward order
    would need its own lookup.

    Raises
    ------
    ValueError
        If ``module`` contains no ``nn.Linear``.
    """
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            return sub
    raise ValueError(f"module {type(module).__name__} has no nn.Linear layer to privatize")


def privatize_first_layers(
    modules: Sequence[nn.Module],
    mechanism: FirstLayerGaussian,
    generator: torch.Generator,
) -> None:
    """Replace the first-layer gradients of each module by ``mechanism.privatize`` of them.

    Call between ``backward()`` and ``optimizer.step()``. For each module, in order,
    each of its first layers (:func:`first_layers`: the first ``nn.Linear``, or the
    layers a VFLGAN-TS party names, each on its own) has its ``weight.grad`` and, if
    the layer has a trainable bias, its ``bias.grad`` overwritten in place; weight and bias
    are clipped *jointly* as one flattened vector and both receive noise, because the
    sensitivity bound of :class:`FirstLayerGaussian` holds only for the whole layer. (The
    reference code's first layers have no bias; this project's ``LocalDiscriminator``
    layers do.) Every other gradient is left untouched.

    Parameters
    ----------
    modules : Sequence[torch.nn.Module]
        The local discriminators ``D_i`` (one per party held here).
    mechanism : FirstLayerGaussian
        Clip bound and noise multiplier.
    generator : torch.Generator
        Source of the noise; modules draw from it in the order given.

    Raises
    ------
    ValueError
        If a module has no ``nn.Linear``, its first linear layer has no gradient, two
        modules share the same first layer, or a gradient is non-finite.
    TypeError
        If ``generator`` is not a ``torch.Generator``.

    Notes
    -----
    Sampling scheme, neighbouring relation, sensitivity and theorem: those of
    :class:`FirstLayerGaussian` (fixed-size batches without replacement, replace-one,
    ``2 C``, paper 000 Theorem 1; paper 003 Theorem 1 for each of a VFLGAN-TS party's
    layers, whose ``C_i + 1`` releases of a step the party accounts jointly).
    """
    _check_generator(generator)
    seen: set[int] = set()
    for index, module in enumerate(modules):
        for layer in first_layers(module):
            name = f"modules[{index}] ({type(module).__name__})"
            if id(layer) in seen:
                raise ValueError(f"{name} shares its first nn.Linear with an earlier module")
            seen.add(id(layer))
            _privatize_layer(layer, name, mechanism, generator)


def first_layers(module: nn.Module) -> list[nn.Linear]:
    """The layers of ``module`` that read the data: those its ``first_layers()`` method
    names (a VFLGAN-TS party's attribute discriminators and feature extractor, paper 003
    Theorem 1, each clipped and noised on its own), else :func:`first_linear`."""
    named = getattr(module, "first_layers", None)
    if callable(named):
        layers = list(named())
        if not layers or not all(isinstance(layer, nn.Linear) for layer in layers):
            raise ValueError(f"{type(module).__name__}.first_layers() must name nn.Linear layers")
        return layers
    return [first_linear(module)]


def _privatize_layer(
    layer: nn.Linear, name: str, mechanism: FirstLayerGaussian, generator: torch.Generator
) -> None:
    """Clip one layer's weight and bias gradients jointly and add full-shape noise."""
    params = [layer.weight]
    if layer.bias is not None and layer.bias.requires_grad:
        params.append(layer.bias)
    grads = []
    for param_name, param in zip(("weight", "bias"), params, strict=False):
        if param.grad is None:
            raise ValueError(
                f"{name}: the first nn.Linear's {param_name} has no gradient; run "
                "backward() before privatize_first_layers"
            )
        grads.append(param.grad)
    flat = torch.cat([g.reshape(-1) for g in grads])
    private = mechanism.privatize(flat, generator)
    for g, piece in zip(grads, private.split([g.numel() for g in grads]), strict=True):
        g.copy_(piece.view_as(g))


def _reject_batchnorm(critic: nn.Module) -> None:
    for name, sub in critic.named_modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            raise ValueError(
                f"critic contains BatchNorm ({name or 'the module itself'}: "
                f"{type(sub).__name__}); per-sample gradients need a row-wise critic"
            )


class _Methods(nn.Module):
    """Calls a named method of ``module``, so ``functional_call`` can reach more than ``forward``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, method: str, x: torch.Tensor) -> torch.Tensor:
        return getattr(self.module, method)(x)


RowLoss = Callable[..., torch.Tensor]
"""``row_loss(call, *rows) -> scalar``; ``call(method, x)`` runs ``module.<method>(x)``
with the parameters being differentiated, on a batch ``x`` of one row."""


def per_sample_grads(
    module: nn.Module, row_loss: RowLoss, rows: Sequence[torch.Tensor]
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Gradients of ``row_loss`` of every row with respect to ``module``'s trainable parameters.

    ``vmap`` over rows of ``grad`` of a ``functional_call`` of ``module`` (Opacus's
    ``grad_sample_mode="no_op"`` route): unlike Opacus's hooks this differentiates through
    inner ``torch.func.grad`` calls such as a gradient penalty.

    Parameters
    ----------
    module : torch.nn.Module
        Row-wise module (no BatchNorm, no randomness in the methods ``row_loss`` calls).
    row_loss : RowLoss
        Loss of one row; receives ``call`` and one slice of each tensor of ``rows``.
    rows : Sequence[torch.Tensor]
        Batched inputs sharing their first dimension ``B``; treated as constants.

    Returns
    -------
    tuple[dict[str, torch.Tensor], torch.Tensor]
        Parameter name (as in ``module.named_parameters()``) to a ``(B, *param.shape)``
        tensor, and the ``B`` row losses.

    Raises
    ------
    ValueError
        On BatchNorm in ``module``, no trainable parameter, or inputs that disagree on B.
    """
    _reject_batchnorm(module)
    if not rows or any(r.dim() < 1 for r in rows) or len({r.shape[0] for r in rows}) != 1:
        raise ValueError(
            f"rows must be batched tensors with one batch size, got shapes "
            f"{[tuple(r.shape) for r in rows]}"
        )
    if rows[0].shape[0] == 0:
        raise ValueError("rows must hold at least one row, got an empty batch")
    params = {f"module.{n}": p.detach() for n, p in module.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError(f"{type(module).__name__} has no trainable parameters")
    wrapper = _Methods(module)

    def loss(weights: dict[str, torch.Tensor], *row: torch.Tensor) -> torch.Tensor:
        def call(method: str, x: torch.Tensor) -> torch.Tensor:
            return functional_call(wrapper, weights, (method, x))

        return row_loss(call, *row)

    per_row = vmap(grad_and_value(loss), in_dims=(None, *([0] * len(rows))), randomness="error")
    grads, values = per_row(params, *(r.detach() for r in rows))
    return {name.removeprefix("module."): g for name, g in grads.items()}, values


def _score(call: Callable[[str, torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    out = call("forward", x.unsqueeze(0))
    if out.numel() != 1:
        raise ValueError(
            f"critic must return one score per row, got shape {tuple(out.shape)} for one row"
        )
    return out.reshape(())


def row_penalty(
    scalar: Callable[[torch.Tensor], torch.Tensor],
    real_row: torch.Tensor,
    fake_row: torch.Tensor,
    alpha_row: torch.Tensor,
) -> torch.Tensor:
    """``(||grad_x scalar(x^)||_2 - 1)^2`` at ``x^ = alpha real + (1 - alpha) fake`` for one row.

    The per-row term of :func:`flwr_vflgan.gan.losses.gradient_penalty`.
    """
    interpolate = alpha_row * real_row + (1.0 - alpha_row) * fake_row
    return (torch.linalg.vector_norm(grad(scalar)(interpolate)) - 1.0) ** 2


def wgan_gp_row_loss(gp_weight: float) -> RowLoss:
    """Row loss of a WGAN-GP critic: ``d(fake) - d(real) + gp_weight * row_penalty(d)``.

    Its mean over a batch is :func:`flwr_vflgan.gan.losses.critic_loss` with the same
    interpolation weights; the row's inputs are ``(real_row, fake_row, alpha_row)``.
    """

    def row_loss(
        call: Callable[[str, torch.Tensor], torch.Tensor],
        real_row: torch.Tensor,
        fake_row: torch.Tensor,
        alpha_row: torch.Tensor,
    ) -> torch.Tensor:
        penalty = row_penalty(lambda x: _score(call, x), real_row, fake_row, alpha_row)
        return _score(call, fake_row) - _score(call, real_row) + gp_weight * penalty

    return row_loss


def per_sample_critic_grads(
    critic: nn.Module,
    real: torch.Tensor,
    fake: torch.Tensor,
    alpha: torch.Tensor,
    gp_weight: float,
) -> dict[str, torch.Tensor]:
    """Per-row gradients of the WGAN-GP critic loss with respect to every trainable parameter.

    The loss of row ``i`` is ``d(fake_i) - d(real_i) + gp_weight * (||grad_x d(x^_i)||_2 - 1)^2``
    with ``x^_i = alpha_i real_i + (1 - alpha_i) fake_i``: the same interpolation and the
    same penalty (L2 norm over all input dimensions of a row) as
    :func:`flwr_vflgan.gan.losses.critic_loss`, whose batch loss is the mean of these.
    Computed with :func:`per_sample_grads`.

    Parameters
    ----------
    critic : torch.nn.Module
        Maps a batch ``(B, *row_shape)`` to one score per row; no BatchNorm and no
        randomness (dropout) in its forward.
    real, fake : torch.Tensor
        Batches of the same shape ``(B, *row_shape)``; treated as constants.
    alpha : torch.Tensor
        Interpolation weights of shape ``(B, 1)``, as in ``gradient_penalty``.
    gp_weight : float
        ``lambda`` >= 0.

    Returns
    -------
    dict[str, torch.Tensor]
        Parameter name (as in ``critic.named_parameters()``, trainable ones only) to a
        tensor of shape ``(B, *param.shape)``.

    Raises
    ------
    ValueError
        On BatchNorm in ``critic``, mismatched shapes, an empty batch, a critic that does
        not return one score per row, or an invalid ``gp_weight``.
    """
    _check_number("gp_weight", gp_weight, allow_zero=True)
    if real.shape != fake.shape:
        raise ValueError(
            f"real and fake batches differ in shape: {tuple(real.shape)} vs {tuple(fake.shape)}"
        )
    if real.dim() < 2 or real.shape[0] == 0:
        raise ValueError(f"real must be a non-empty batch (B, ...), got {tuple(real.shape)}")
    if alpha.shape != (real.shape[0], 1):
        raise ValueError(f"alpha must have shape ({real.shape[0]}, 1), got {tuple(alpha.shape)}")

    # alpha_row has shape (1,), which broadcasts against a row of any shape.
    grads, _ = per_sample_grads(critic, wgan_gp_row_loss(gp_weight), (real, fake, alpha))
    return grads


def set_grad_samples(critic: nn.Module, grads: dict[str, torch.Tensor]) -> None:
    """Assign ``p.grad_sample = grads[name]`` for every trainable parameter of ``critic``.

    Parameters
    ----------
    critic : torch.nn.Module
        The module whose parameters the ``DPOptimizer`` steps.
    grads : dict[str, torch.Tensor]
        Per-sample gradients from :func:`per_sample_critic_grads`: exactly the names of
        the trainable parameters, each of shape ``(B, *param.shape)`` with one ``B``.

    Raises
    ------
    ValueError
        If names are missing or unknown, a shape does not match its parameter, or the
        batch sizes differ.
    """
    params = {n: p for n, p in critic.named_parameters() if p.requires_grad}
    missing, unknown = sorted(set(params) - set(grads)), sorted(set(grads) - set(params))
    if missing or unknown:
        raise ValueError(
            f"grads must name every trainable parameter of the critic: missing {missing}, "
            f"unknown {unknown}"
        )
    batch_sizes = {n: g.shape[0] if g.dim() > 0 else None for n, g in grads.items()}
    for name, param in params.items():
        sample = grads[name]
        if sample.dim() == 0 or tuple(sample.shape[1:]) != tuple(param.shape):
            raise ValueError(
                f"grads[{name!r}] must have shape (B, {', '.join(map(str, param.shape))}), "
                f"got {tuple(sample.shape)}"
            )
    if len(set(batch_sizes.values())) != 1:
        raise ValueError(f"grads disagree on the batch size: {batch_sizes}")
    for name, param in params.items():
        param.grad_sample = grads[name].detach()  # type: ignore[attr-defined]


def make_dp_optimizer(
    critic: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    noise_multiplier: float,
    max_grad_norm: float,
    expected_batch_size: int,
    generator: torch.Generator | None = None,
) -> DPOptimizer:
    """Wrap ``optimizer`` in Opacus's ``DPOptimizer`` for per-sample DP-SGD on ``critic``.

    Each step (after :func:`set_grad_samples`): the per-sample gradients, taken over all
    the optimizer's parameters jointly, are scaled by ``min(1, max_grad_norm /
    (||g_i|| + 1e-6))`` (Opacus's stabiliser), summed, noised with
    ``N(0, (noise_multiplier * max_grad_norm)^2)`` per coordinate, divided by
    ``expected_batch_size`` (``loss_reduction="mean"``) and handed to ``optimizer``.
    Call ``zero_grad()`` between steps; Opacus refuses to reuse gradients.

    Parameters
    ----------
    critic : torch.nn.Module
        The critic; must contain every parameter the optimizer steps, and no BatchNorm.
    optimizer : torch.optim.Optimizer
        A plain optimizer over (some of) ``critic``'s parameters.
    noise_multiplier : float
        ``sigma`` >= 0.
    max_grad_norm : float
        Per-sample clip bound ``C`` > 0.
    expected_batch_size : int
        The divisor of the summed gradients (the batch size for fixed-size batches).
    generator : torch.Generator or None
        Source of the noise. Opacus draws one ``torch.normal`` tensor per parameter from
        it, in parameter order, so a seeded generator gives identical steps. ``None``
        creates a private generator seeded from OS entropy (``Generator.seed()``), never
        the global RNG. Opacus's ``secure_mode`` (noise hardened against floating-point
        attacks) is not used.

    Returns
    -------
    opacus.optimizers.DPOptimizer

    Raises
    ------
    ValueError
        On an invalid number, BatchNorm in ``critic``, or an optimizer parameter that is
        not a parameter of ``critic``.
    TypeError
        If ``optimizer`` is already a ``DPOptimizer`` or ``generator`` is not a generator.

    Notes
    -----
    Sampling scheme and neighbouring relation decide what to account, not this function.
    Under Poisson sampling with add/remove-one neighbours the sum of clipped per-sample
    gradients has sensitivity ``C`` and the accountant's multiplier is
    ``noise_multiplier`` (Abadi et al., 2016; Mironov, Talwar and Zhang, 2019). Under
    fixed-size batches sampled without replacement with replace-one neighbours (Wang,
    Balle and Kasiviswanathan, 2019, as for DP-VFLGAN) the sensitivity is ``2 C``, so the
    accountant's multiplier is ``noise_multiplier / 2``. Each row's loss depends on that
    row only (hence no BatchNorm), which is what makes the per-sample clip a bound on one
    record's influence.
    """
    from opacus.optimizers import DPOptimizer

    _check_number("noise_multiplier", noise_multiplier, allow_zero=True)
    _check_number("max_grad_norm", max_grad_norm, allow_zero=False)
    if (
        isinstance(expected_batch_size, bool)
        or not isinstance(expected_batch_size, int)
        or expected_batch_size < 1
    ):
        raise ValueError(
            f"expected_batch_size must be a positive integer, got {expected_batch_size!r}"
        )
    if isinstance(optimizer, DPOptimizer):
        raise TypeError("optimizer is already a DPOptimizer; pass the plain optimizer")
    _reject_batchnorm(critic)
    owned = {id(p) for p in critic.parameters()}
    for group_index, group in enumerate(optimizer.param_groups):
        for param in group["params"]:
            if id(param) not in owned:
                raise ValueError(
                    f"optimizer param_groups[{group_index}] holds a parameter of shape "
                    f"{tuple(param.shape)} that is not a parameter of the critic"
                )
    if generator is None:
        first = next(iter(critic.parameters()), None)
        generator = torch.Generator(device=first.device if first is not None else "cpu")
        generator.seed()
    _check_generator(generator)
    return DPOptimizer(
        optimizer,
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        expected_batch_size=expected_batch_size,
        loss_reduction="mean",
        generator=generator,
    )


def sanitize_sample_gradients(
    grads: torch.Tensor, clip: float, noise_std: float, generator: torch.Generator | None
) -> torch.Tensor:
    """GS-WGAN's sanitized gradients: each row clipped to ``clip``, plus Gaussian noise.

    Parameters
    ----------
    grads
        One row per synthetic sample: the gradient of that sample's own generator loss
        (``-D(x~_i)``, not divided by the batch size) with respect to the sample.
    clip
        ``C``: every row is scaled by ``min(1, C / ||row||_2)``.
    noise_std
        Standard deviation of the noise added to every entry (``2 C sigma`` in GS-WGAN,
        whose sensitivity is ``2 C`` when one row of a shard is replaced); 0 clips only.
    generator
        Source of the noise (required when ``noise_std > 0``).

    Returns
    -------
    torch.Tensor
        The sanitized gradients, shaped like ``grads``.

    Raises
    ------
    ValueError
        If ``grads`` has no sample dimension, ``clip`` is not > 0 or ``noise_std`` is
        negative.
    TypeError
        If noise is asked for without a ``torch.Generator``.
    """
    _check_number("clip", clip, allow_zero=False)
    _check_number("noise_std", noise_std, allow_zero=True)
    if grads.dim() < 1:
        raise ValueError("grads needs a first dimension of samples, got a scalar")
    flat = grads.detach().reshape(grads.shape[0], -1)
    norms = flat.norm(2, dim=1, keepdim=True)
    # A zero row stays zero: the factor's denominator never vanishes.
    sanitized = flat * torch.clamp(clip / norms.clamp_min(1e-12), max=1.0)
    if noise_std > 0:
        _check_generator(generator)
        noise = torch.randn(sanitized.shape, generator=generator, dtype=sanitized.dtype)
        sanitized = sanitized + noise_std * noise
    return sanitized.reshape(grads.shape)
