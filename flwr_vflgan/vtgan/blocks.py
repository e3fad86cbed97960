"""VT-GAN's ``K`` steps per exchange, as pure functions over the server and the clients.

The Flower strategy and client and the single-process :func:`~flwr_vflgan.vtgan.local.
train_local` run this same code; only the transport between them differs.

A *block* is what one exchange carries forward (``train.steps_per_exchange = K``):

* up to ``K`` consecutive critic steps, never across a generator step, an epoch's end
  or the end of training; or
* one generator step, alone: its update needs a second exchange, since the clients'
  chunk gradients must reach ``G^t`` before it moves on (as with ``K = 1``).

For a critic block the server draws every step's noise and chunks of ``G^t`` at once
(``G^t`` and every ``G^b_i`` stay fixed during critic steps, so the chunks are exact);
each client computes the fake features of every step, and the real features, with the
parameters it holds when it sends them; the server performs its updates in order and
returns the gradients; each client applies them in order, recomputing each forward with
its current parameters (the stale upstream gradients of FedBCD and CELU-VFL, as for
VFLGAN, :mod:`flwr_vflgan.gan.exchanges`).

**Every-row features once per block.** A client that is not the chosen one in a critic
step sends the features of *all* its rows (paper 001: so that it does not learn which
rows were selected). In a block it sends them once, computed with the dropout draw of
its first such step, and the server reads each step's selected rows from that one
tensor. The gradient a non-chosen client gets back is zero outside the selected rows;
the server sends only those rows, with their positions (the same information: the
client reads them from the gradient's sparsity when it is dense).

With ``K = 1`` this is the exchange sequence of Algorithm 1 exactly, and the same table
bit for bit. Differential privacy is unchanged in count: every critic step is applied,
clipped and noised once by every part, whatever ``K``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flwr_vflgan.gan.schedule import Schedule, StepKind

from .party import VTGANParty
from .server import VTGANServer


def block_end(schedule: Schedule, start: int, steps_per_exchange: int) -> int:
    """One past the last step of the VT-GAN block that begins at step ``start``."""
    total = schedule.total_steps
    if not 0 <= start < total:
        raise ValueError(f"start must be in [0, {total}), got {start}")
    if steps_per_exchange < 1:
        raise ValueError(f"steps_per_exchange must be >= 1, got {steps_per_exchange}")
    if schedule.kind(start) is StepKind.GENERATOR:
        return start + 1
    epoch_end = (start // schedule.steps_per_epoch + 1) * schedule.steps_per_epoch
    limit = min(start + steps_per_exchange, epoch_end, total)
    end = start + 1
    while end < limit and schedule.kind(end) is StepKind.DISCRIMINATOR:
        end += 1
    return end


def check_block(schedule: Schedule, start: int, count: int, steps_per_exchange: int) -> None:
    """Raise ``ValueError`` unless steps ``start .. start + count - 1`` are a block of
    this schedule at ``K = steps_per_exchange`` (what a client checks on arrival)."""
    if count < 1 or not 0 <= start < schedule.total_steps:
        raise ValueError(
            f"a block must hold steps of the schedule (0 .. {schedule.total_steps - 1}), "
            f"got start {start}, count {count}"
        )
    end = block_end(schedule, start, steps_per_exchange)
    if start + count != end:
        raise ValueError(
            f"steps {start}-{start + count - 1} are not a block at steps_per_exchange="
            f"{steps_per_exchange}: the block that starts at {start} ends before {end}"
        )


def blocks(schedule: Schedule, steps_per_exchange: int) -> list[range]:
    """Every block of the schedule, in order."""
    out, start = [], 0
    while start < schedule.total_steps:
        end = block_end(schedule, start, steps_per_exchange)
        out.append(range(start, end))
        start = end
    return out


def every_row_step(steps: Sequence[int], chosen: Sequence[bool], private: bool) -> int | None:
    """The step whose dropout draw computes a client's every-row features in a critic
    block: its first step as a non-chosen client (``None``: it sends none, being chosen
    in every step, or under DP where every client sends the batch rows only)."""
    if private:
        return None
    return next((step for step, mine in zip(steps, chosen, strict=True) if not mine), None)


@dataclass(frozen=True)
class BlockForward:
    """What a client sends for the forward pass of a block."""

    fake: list[torch.Tensor]
    """``(B, f)`` fake features of every step."""
    real: list[torch.Tensor | None]
    """Per critic step, ``(B, f)`` real features where the client is chosen (or under
    DP, the uniform batch); ``None`` otherwise and for a generator step."""
    rows: list[np.ndarray | None]
    """Per step, the chosen client's row indices (current order); ``None`` otherwise."""
    every_row: torch.Tensor | None
    """``(N, f)`` features of every row in the current order, once per block, where the
    client is not chosen in some critic step (never under DP)."""


@dataclass(frozen=True)
class StepGrads:
    """The server's gradients for one client in one step of a block."""

    fake: torch.Tensor
    """``(B, f)`` with respect to the fake features."""
    real: torch.Tensor | None
    """Critic steps: ``(B, f)`` for the chosen client (or under DP); for every other
    client one row per entry of ``selected``."""
    selected: np.ndarray | None = None
    """A non-chosen client's rows (current order) that carry gradient, ascending."""


def sparse_rows(grad: torch.Tensor) -> tuple[np.ndarray, torch.Tensor]:
    """The rows of a dense every-row gradient that are not zero, and their values."""
    selected = torch.nonzero(grad.abs().sum(dim=1) > 0).flatten()
    return selected.numpy().astype(np.int64), grad[selected]


def party_forward_block(
    party: VTGANParty,
    steps: Sequence[int],
    chunks: Sequence[torch.Tensor],
    chosen: Sequence[bool],
    discriminator: bool,
) -> BlockForward:
    """A client's forward pass of a block (of critic steps, or one generator step), with
    the parameters it holds now."""
    fake: list[torch.Tensor] = []
    real: list[torch.Tensor | None] = []
    rows: list[np.ndarray | None] = []
    for step, chunk, mine in zip(steps, chunks, chosen, strict=True):
        fake.append(party.forward_fake(step, chunk))
        if discriminator and (mine or party.privacy is not None):
            forward = party.forward_real(step, mine)
            real.append(forward.features)
            rows.append(forward.rows)
        else:
            real.append(None)
            rows.append(None)
    every = None
    if discriminator:
        shared = every_row_step(steps, chosen, party.privacy is not None)
        if shared is not None:
            every = party.forward_real(shared, False).features
    return BlockForward(fake, real, rows, every)


def server_critic_block(
    server: VTGANServer,
    steps: Sequence[int],
    clients: Sequence[int],
    cond_real: Sequence[torch.Tensor],
    cond_fake: Sequence[torch.Tensor],
    forwards: Sequence[BlockForward],
) -> tuple[list[list[StepGrads]], list[float]]:
    """The server's critic updates of a block, in order.

    Returns ``grads[i][j]`` for client ``i`` in the block's ``j``-th step, and the
    critic loss of every step.
    """
    private = server.privacy is not None
    grads: list[list[StepGrads]] = [[] for _ in forwards]
    losses = []
    for j, (step, client) in enumerate(zip(steps, clients, strict=True)):
        real = []
        for i, forward in enumerate(forwards):
            features = forward.real[j] if i == client or private else forward.every_row
            if features is None:
                raise ValueError(f"client {i} sent no real features for step {step}")
            real.append(features)
        fake = [forward.fake[j] for forward in forwards]
        rows = forwards[client].rows[j]
        grads_real, grads_fake, loss = server.discriminator_step(
            step, client, real, rows, fake, cond_real[j], cond_fake[j]
        )
        losses.append(loss)
        for i, (g_real, g_fake) in enumerate(zip(grads_real, grads_fake, strict=True)):
            if i == client or private:
                grads[i].append(StepGrads(g_fake, g_real))
            else:
                selected, values = sparse_rows(g_real)
                grads[i].append(StepGrads(g_fake, values, selected))
    return grads, losses


def party_apply_critic_block(
    party: VTGANParty,
    steps: Sequence[int],
    chunks: Sequence[torch.Tensor],
    chosen: Sequence[bool],
    grads: Sequence[StepGrads],
    before_step: Callable[[int], None] | None = None,
) -> None:
    """Apply the server's gradients of every critic step of a block in order.

    ``before_step`` is called with the step number before each step is applied (a DP
    client counts it against its plan there, and may refuse it by raising).
    """
    if not len(steps) == len(chunks) == len(chosen) == len(grads):
        raise ValueError(
            f"a block of {len(steps)} steps needs as many chunks, choices and gradients, got "
            f"{len(chunks)}, {len(chosen)}, {len(grads)}"
        )
    shared = every_row_step(steps, chosen, party.privacy is not None)
    for step, chunk, mine, grad in zip(steps, chunks, chosen, grads, strict=True):
        if grad.real is None:
            raise ValueError(f"step {step} is a critic step but has no real-feature gradient")
        if before_step is not None:
            before_step(step)
        party.apply_discriminator(
            step, chunk, mine, grad.real, grad.fake, selected=grad.selected, real_step=shared
        )


# -- packing: one array per kind of tensor, whatever the block's length -------------------


def feature_sizes(
    discriminator: bool, chosen: Sequence[bool], private: bool, batch: int, n_rows: int
) -> list[int]:
    """Row groups of a client's packed features for a block: per step its real rows (a
    critic step where it is chosen, or under DP) then its fake rows; then the every-row
    features once, where it sends them."""
    sizes: list[int] = []
    for mine in chosen:
        if discriminator and (mine or private):
            sizes.append(batch)
        sizes.append(batch)
    if discriminator and not private and not all(chosen):
        sizes.append(n_rows)
    return sizes


def pack_forward(forward: BlockForward) -> tuple[np.ndarray, np.ndarray | None]:
    """A block's features as one float32 array, and the chosen steps' row indices as
    one int64 array (``None`` when there are none)."""
    parts: list[torch.Tensor] = []
    for real, fake in zip(forward.real, forward.fake, strict=True):
        if real is not None:
            parts.append(real)
        parts.append(fake)
    if forward.every_row is not None:
        parts.append(forward.every_row)
    rows = [r for r in forward.rows if r is not None]
    packed = torch.cat([p.detach() for p in parts], dim=0).numpy()
    return (
        np.ascontiguousarray(packed, dtype=np.float32),
        np.concatenate(rows).astype(np.int64) if rows else None,
    )


def unpack_forward(
    features: torch.Tensor,
    rows: np.ndarray | None,
    discriminator: bool,
    chosen: Sequence[bool],
    private: bool,
    batch: int,
    n_rows: int,
) -> BlockForward:
    """Inverse of :func:`pack_forward` for a block of known shape.

    Raises
    ------
    ValueError
        The arrays' row counts are not the block's.
    """
    sizes = feature_sizes(discriminator, chosen, private, batch, n_rows)
    if features.shape[0] != sum(sizes):
        raise ValueError(f"packed features have {features.shape[0]} rows, expected {sum(sizes)}")
    groups = iter(torch.split(features, sizes, dim=0))
    index_steps = sum(1 for mine in chosen if discriminator and mine and not private)
    wanted = index_steps * batch
    if (0 if rows is None else len(rows)) != wanted:
        raise ValueError(f"expected {wanted} row indices, got {0 if rows is None else len(rows)}")
    row_groups = iter(np.split(rows, index_steps) if rows is not None and index_steps else [])
    fake, real, step_rows = [], [], []
    for mine in chosen:
        has_real = discriminator and (mine or private)
        real.append(next(groups) if has_real else None)
        step_rows.append(next(row_groups) if discriminator and mine and not private else None)
        fake.append(next(groups))
    every = next(groups, None)
    return BlockForward(fake, real, step_rows, every)


def pack_grads(grads: Sequence[StepGrads]) -> tuple[np.ndarray, np.ndarray | None, list[int]]:
    """A client's gradients of a block as one float32 array (per step the real-feature
    gradient, then the fake-feature one), its selected rows as one int64 array, and how
    many of those belong to each step."""
    parts: list[torch.Tensor] = []
    selected: list[np.ndarray] = []
    counts: list[int] = []
    for grad in grads:
        if grad.real is not None:
            parts.append(grad.real)
        parts.append(grad.fake)
        counts.append(0 if grad.selected is None else len(grad.selected))
        if grad.selected is not None:
            selected.append(grad.selected)
    packed = torch.cat([p.detach() for p in parts], dim=0).numpy()
    return (
        np.ascontiguousarray(packed, dtype=np.float32),
        np.concatenate(selected).astype(np.int64) if sum(counts) else None,
        counts if sum(counts) else [],
    )


def unpack_grads(
    packed: torch.Tensor,
    selected: np.ndarray | None,
    counts: Sequence[int],
    discriminator: bool,
    chosen: Sequence[bool],
    private: bool,
    batch: int,
) -> list[StepGrads]:
    """Inverse of :func:`pack_grads` for the block a client ran forward.

    Raises
    ------
    ValueError
        The arrays do not fit the block (row counts, a selection where the client was
        chosen, or none where it was not).
    """
    counts = list(counts) or [0] * len(chosen)
    if len(counts) != len(chosen):
        raise ValueError(f"selected_counts has {len(counts)} entries for {len(chosen)} steps")
    sizes: list[int] = []
    for mine, count in zip(chosen, counts, strict=True):
        dense = discriminator and (mine or private)
        if count and (dense or not discriminator):
            raise ValueError("selected rows sent for a step whose gradient is not every-row")
        if discriminator:
            sizes.append(batch if dense else count)
        sizes.append(batch)
    if packed.shape[0] != sum(sizes):
        raise ValueError(f"packed gradients have {packed.shape[0]} rows, expected {sum(sizes)}")
    groups = iter(torch.split(packed, sizes, dim=0))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    out = []
    for j, mine in enumerate(chosen):
        real = next(groups) if discriminator else None
        rows = None
        if discriminator and not (mine or private):
            rows = (
                selected[offsets[j] : offsets[j + 1]]
                if selected is not None
                else np.zeros(0, np.int64)
            )
        out.append(StepGrads(next(groups), real, rows))
    return out
