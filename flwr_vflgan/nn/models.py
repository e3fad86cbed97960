"""Networks of the VFLGAN family (paper 000, Section 3.2 and Appendix A.4).

* :class:`PartyGenerator` maps the shared noise ``z`` to one party's encoded columns;
  its last activation is chosen per output span: identity for standardised numbers,
  tanh for [-1, 1]-scaled pixels, Gumbel-softmax for one-hot categories.
* :class:`LocalDiscriminator` is ``D_i``: a first part ``D_i^1`` whose output is the
  intermediate feature ``f_i`` sent to the server, and (VFLGAN, not VFLGAN-base) a
  local second part ``D_i^2`` that scores ``f_i`` (one linear layer, as the reference
  code's, or an MLP with ``head_hidden``).
* :class:`SharedDiscriminator` is ``D_s`` on the server, over the concatenated features.
* :class:`ParameterAverage` keeps an exponential moving average of a generator.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import nn


class SpanLike(Protocol):
    """What an output head needs to know about one encoded column."""

    @property
    def start(self) -> int: ...

    @property
    def width(self) -> int: ...

    @property
    def activation(self) -> str: ...


def gumbel_softmax(
    logits: torch.Tensor, tau: float, hard: bool, generator: torch.Generator | None
) -> torch.Tensor:
    """Gumbel-softmax (Jang et al., 2016) drawing its noise from ``generator``.

    ``torch.nn.functional.gumbel_softmax`` reads the global generator; this one does not,
    so a party can recompute a step's output exactly.
    """
    uniform = torch.rand(logits.shape, generator=generator, dtype=logits.dtype)
    return _gumbel_from_uniform(logits, uniform, tau, hard)


def _gumbel_from_uniform(
    logits: torch.Tensor, uniform: torch.Tensor, tau: float, hard: bool
) -> torch.Tensor:
    """:func:`gumbel_softmax` with its uniform draws given (row by row the same)."""
    exponential = (-torch.log(uniform.clamp_min(1e-20))).clamp_min(1e-20)
    gumbels = -torch.log(exponential)
    soft = torch.softmax((logits + gumbels) / tau, dim=-1)
    if not hard:
        return soft
    index = soft.argmax(dim=-1, keepdim=True)
    hard_one_hot = torch.zeros_like(soft).scatter_(-1, index, 1.0)
    return hard_one_hot - soft.detach() + soft


_ACTIVATIONS = ("gumbel_softmax", "identity", "identity_missing", "tanh", "tanh_missing")


def _parts(span: SpanLike) -> list[tuple[int, int, str]]:
    """A span's activation as ``(offset, width, identity|tanh|gumbel_softmax)`` pieces:
    ``*_missing`` is a numeric value followed by a Gumbel-softmax ``[present, missing]``."""
    kind = span.activation
    if kind in ("identity", "tanh", "gumbel_softmax"):
        return [(0, span.width, kind)]
    if kind in ("identity_missing", "tanh_missing") and span.width >= 3:
        return [(0, 1, kind.removesuffix("_missing")), (1, span.width - 1, "gumbel_softmax")]
    raise ValueError(
        f"unknown activation {kind!r} for an output span of width {span.width}; valid: "
        f"{list(_ACTIVATIONS)} (the *_missing ones need width >= 3)"
    )


def apply_output_activations(
    raw: torch.Tensor,
    spans: Sequence[SpanLike],
    tau: float,
    hard: bool,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Apply each span's activation to the generator's last linear output."""
    pieces = []
    for span in spans:
        for offset, width, kind in _parts(span):
            block = raw[:, span.start + offset : span.start + offset + width]
            if kind == "identity":
                pieces.append(block)
            elif kind == "tanh":
                pieces.append(torch.tanh(block))
            else:
                pieces.append(gumbel_softmax(block, tau, hard, generator))
    return torch.cat(pieces, dim=1)


def _check_spans(spans: Sequence[SpanLike], out_dim: int) -> None:
    position = 0
    for span in spans:
        if span.start != position or span.width <= 0:
            raise ValueError(
                f"output spans must tile [0, {out_dim}) in order; a span starts at "
                f"{span.start} (expected {position}) with width {span.width}"
            )
        position += span.width
    if position != out_dim:
        raise ValueError(f"output spans cover {position} columns, the generator has {out_dim}")


class PartyGenerator(nn.Module):
    """``G_i``: Linear + LeakyReLU, then (Linear + BatchNorm + LeakyReLU) blocks, then Linear."""

    def __init__(
        self,
        latent_dim: int,
        hidden: Sequence[int],
        spans: Sequence[SpanLike],
        *,
        batchnorm_eps: float = 0.8,
        leaky_slope: float = 0.2,
        gumbel_tau: float = 1.0,
        gumbel_hard: bool = True,
    ) -> None:
        super().__init__()
        out_dim = sum(span.width for span in spans)
        _check_spans(spans, out_dim)
        layers: list[nn.Module] = []
        width_in = latent_dim
        for index, width in enumerate(hidden):
            layers.append(nn.Linear(width_in, width))
            if index > 0:
                layers.append(nn.BatchNorm1d(width, eps=batchnorm_eps))
            layers.append(nn.LeakyReLU(leaky_slope))
            width_in = width
        layers.append(nn.Linear(width_in, out_dim))
        self.body = nn.Sequential(*layers)
        self.spans = list(spans)
        self.out_dim = out_dim
        self.tau = gumbel_tau
        self.hard = gumbel_hard

    def forward(self, z: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Encoded synthetic rows for noise ``z``; Gumbel noise comes from ``generator``."""
        return apply_output_activations(self.body(z), self.spans, self.tau, self.hard, generator)

    def sample(
        self, z: torch.Tensor, generator: torch.Generator | None, chunk_rows: int = 4096
    ) -> torch.Tensor:
        """:meth:`forward` for a large ``z`` with the hidden layers run ``chunk_rows`` rows
        at a time; call it in eval mode without autograd (:func:`eval_mode`).

        In eval mode every layer treats rows independently, and the Gumbel noise is drawn
        for all rows at once as :meth:`forward` draws it, so the rows are those of
        :meth:`forward` (bit for bit on the CPU builds tested). A full table's hidden
        activations (48,842 x 128 float32 values per layer on Adult) never exist at once,
        and the output activations are applied in place, chunk by chunk, on the one
        output tensor (a wide categorical span's Gumbel-softmax temporaries are a chunk's).
        """
        if self.training or torch.is_grad_enabled():
            raise RuntimeError("sample() is for eval mode without autograd (eval_mode)")
        out = torch.empty(z.shape[0], self.out_dim)
        for start in range(0, z.shape[0], chunk_rows):
            out[start : start + chunk_rows] = self.body(z[start : start + chunk_rows])
        # Span by span, in order, each Gumbel-softmax span's noise is drawn for all rows
        # at once, as forward() draws it; its activations then overwrite its logits in
        # place, a chunk of rows at a time.
        for span in self.spans:
            for offset, width, kind in _parts(span):
                if kind != "identity":
                    columns = slice(span.start + offset, span.start + offset + width)
                    self._activate(out, columns, kind, generator, chunk_rows)
        return out

    def _activate(
        self,
        out: torch.Tensor,
        columns: slice,
        kind: str,
        generator: torch.Generator | None,
        chunk_rows: int,
    ) -> None:
        """``out[:, columns]`` activated in place, ``chunk_rows`` rows at a time."""
        rows_total = out.shape[0]
        uniform = (
            torch.rand(
                (rows_total, columns.stop - columns.start), generator=generator, dtype=out.dtype
            )
            if kind == "gumbel_softmax"
            else None
        )
        for start in range(0, rows_total, chunk_rows):
            rows = slice(start, start + chunk_rows)
            logits = out[rows, columns]
            if uniform is not None:
                logits.copy_(_gumbel_from_uniform(logits, uniform[rows], self.tau, self.hard))
            else:
                logits.copy_(torch.tanh(logits))


def _mlp(width_in: int, widths: Sequence[int], leaky_slope: float) -> tuple[nn.Sequential, int]:
    layers: list[nn.Module] = []
    for width in widths:
        layers += [nn.Linear(width_in, width), nn.LeakyReLU(leaky_slope)]
        width_in = width
    return nn.Sequential(*layers), width_in


def _scorer(width_in: int, hidden: Sequence[int], leaky_slope: float) -> nn.Sequential:
    """``hidden`` linear layers with LeakyReLUs, then a linear layer to one score."""
    body, width = _mlp(width_in, hidden, leaky_slope)
    return nn.Sequential(*body, nn.Linear(width, 1))


class LocalDiscriminator(nn.Module):
    """``D_i`` of one party: ``first`` produces the feature ``f_i``, ``second`` scores it.

    ``second`` is ``None`` for VFLGAN-base, one ``nn.Linear(feature_dim, 1)`` with no
    ``head_hidden`` (the reference code's ``D_p``), and otherwise an MLP with those hidden
    widths (each followed by a LeakyReLU) and a last linear layer to one score.
    """

    row_wise_mlp = True
    """Each row passes through linear layers and LeakyReLUs on its own
    (:func:`flwr_vflgan.privacy.tape.tapeable`)."""

    def __init__(
        self,
        in_dim: int,
        hidden: Sequence[int],
        feature_dim: int,
        *,
        local_head: bool,
        leaky_slope: float = 0.2,
        head_hidden: Sequence[int] = (),
    ) -> None:
        super().__init__()
        self.first, _ = _mlp(in_dim, [*hidden, feature_dim], leaky_slope)
        self.second: nn.Module | None = None
        if local_head:  # the reference's linear D_p keeps its state keys (second.weight)
            self.second = (
                _scorer(feature_dim, head_hidden, leaky_slope)
                if head_hidden
                else nn.Linear(feature_dim, 1)
            )

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The intermediate feature ``f_i = D_i^1(x_i)`` (eq. 11)."""
        return self.first(x)

    def score(self, features: torch.Tensor) -> torch.Tensor:
        """``D_i^2(f_i)``; only VFLGAN has it."""
        if self.second is None:
            raise RuntimeError("VFLGAN-base local discriminators have no second part")
        return self.second(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``D_i(x) = D_i^2(D_i^1(x))``."""
        return self.score(self.features(x))


class SharedDiscriminator(nn.Module):
    """``D_s`` on the server: MLP over the concatenated intermediate features."""

    row_wise_mlp = True
    """Each row passes through linear layers and LeakyReLUs on its own
    (:func:`flwr_vflgan.privacy.tape.tapeable`)."""

    def __init__(self, in_dim: int, hidden: Sequence[int], *, leaky_slope: float = 0.2) -> None:
        super().__init__()
        self.net = _scorer(in_dim, hidden, leaky_slope)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Critic score of each row of concatenated features."""
        return self.net(features)


class ParameterAverage:
    """An exponential moving average of a module's parameters (the averaged generator of
    Yazici et al., ICLR 2019): after each update of the source,
    ``average = decay * average + (1 - decay) * source``; buffers (BatchNorm's running
    statistics) are copied from the source. The average starts as a copy of the source.

    Parameters
    ----------
    source
        The module being trained.
    decay
        In ``(0, 1)``.
    """

    def __init__(self, source: nn.Module, decay: float) -> None:
        if not 0 < decay < 1:
            raise ValueError(f"decay must be in (0, 1), got {decay!r}")
        self.decay = float(decay)
        self.module = copy.deepcopy(source)
        self.module.requires_grad_(False)

    @staticmethod
    def decay_for(half_life: float, updates_per_half_life_unit: int) -> float:
        """The decay whose weights halve every ``half_life`` units of
        ``updates_per_half_life_unit`` updates each (at least one update)."""
        updates = max(half_life * updates_per_half_life_unit, 1.0)
        return float(0.5 ** (1.0 / updates))

    def update(self, source: nn.Module) -> None:
        """Move the average towards ``source`` (call after each optimizer step)."""
        with torch.no_grad():
            mine: list[torch.Tensor] = list(self.module.parameters())
            theirs: list[torch.Tensor] = list(source.parameters())
            torch._foreach_mul_(mine, self.decay)
            torch._foreach_add_(mine, theirs, alpha=1.0 - self.decay)
            for b_mine, b_theirs in zip(self.module.buffers(), source.buffers(), strict=True):
                b_mine.copy_(b_theirs)


@contextmanager
def frozen_batchnorm_stats(module: nn.Module) -> Iterator[None]:
    """Run training-mode forwards without touching BatchNorm running statistics.

    A recomputed forward pass (to backpropagate gradients that arrived in a later
    message) must not update the running statistics a second time. With momentum 0
    the running mean and variance are left as they were; the batch counter is restored.
    """
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [
        (m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone())
        for m in norms
    ]
    try:
        for m in norms:
            m.momentum = 0.0
        yield
    finally:
        for m, (momentum, tracked) in zip(norms, saved, strict=True):
            m.momentum = momentum
            if tracked is not None and m.num_batches_tracked is not None:
                m.num_batches_tracked.copy_(tracked)


@contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    """Initialise parameters from ``seed`` without leaving the global generator changed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    """Sampling mode: ``eval()`` and no autograd, restoring the previous mode."""
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        module.train(was_training)


@dataclass(frozen=True)
class ShiftedSpan:
    """An output span at its offset in a table of several parties' columns."""

    start: int
    width: int
    activation: str


def joint_spans(party_spans: Sequence[Sequence[SpanLike]]) -> list[ShiftedSpan]:
    """The parties' output spans laid end to end, in party order (a generator of the whole
    table: the centralized WGAN-GP's, VDGAN's)."""
    out, offset = [], 0
    for spans in party_spans:
        for span in spans:
            out.append(ShiftedSpan(offset + span.start, span.width, span.activation))
        offset += sum(span.width for span in spans)
    return out


def module_snapshot(module: nn.Module) -> np.ndarray:
    """``module``'s parameters and buffers as one float32 vector (best-epoch keeping)."""
    tensors = [*module.parameters(), *module.buffers()]
    return torch.cat([t.detach().reshape(-1).float() for t in tensors]).numpy().copy()


def load_module_snapshot(module: nn.Module, values: np.ndarray) -> None:
    """Inverse of :func:`module_snapshot`.

    Raises
    ------
    ValueError
        ``values`` is not as long as the module's parameters and buffers.
    """
    tensors = [*module.parameters(), *module.buffers()]
    expected = sum(t.numel() for t in tensors)
    if values.shape != (expected,):
        raise ValueError(f"generator snapshot must have {expected} values, got {values.shape}")
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(torch.from_numpy(values[offset : offset + n]).view_as(t).to(t.dtype))
            offset += n
