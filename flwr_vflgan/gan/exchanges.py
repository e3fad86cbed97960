"""``K`` training steps per exchange, as pure functions over the party and server trainers.

The federated strategy and client and the single-process :class:`LocalVFLGAN` run this
same code; only the transport between them differs.

One exchange of a block ``t .. t+K-1`` (``train.steps_per_exchange = K``):

1. every party computes the features of all ``K`` steps with the parameters it holds at
   the block's start (:func:`party_forward_block`; BatchNorm statistics move once per
   step, as with ``K = 1``);
2. the server performs its ``K`` updates in order on those features and returns the
   ``K`` feature gradients (:func:`server_block`);
3. every party applies them in order (:func:`party_apply_block`), recomputing each
   step's forward with its current parameters. Step ``t``'s gradient is exact; step
   ``t+j``'s was computed on features ``j`` local updates old: the stale upstream
   gradients of FedBCD (Liu et al. 2022) and CELU-VFL (Fu et al. 2022).

With ``K = 1`` this is Algorithm 1 of paper 000 exactly (and bit for bit the same as
:class:`~flwr_vflgan.gan.plain.PlainVFLGAN`). Differential privacy is unchanged in count:
each discriminator step is applied, clipped and noised once, whatever ``K``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.gan.vertigan import WIRE_WIDTH, VertiGANParty, VertiGANServer, wire_rows
from flwr_vflgan.gan.vflgan import PartyTrainer, ServerTrainer
from flwr_vflgan.nn.models import SpanLike
from flwr_vflgan.privacy.config import PrivacyPlan
from flwr_vflgan.runtime.blocks import StepBlock, StepTensors
from flwr_vflgan.runtime.flat import FlatState

from .config import GANSettings


class StepParty(Protocol):
    """A party's half of a step: VFLGAN's :class:`~flwr_vflgan.gan.vflgan.PartyTrainer`
    (VertiGAN's subclass) or VFLGAN-TS's :class:`~flwr_vflgan.series.training.SeriesParty`."""

    def forward(self, step: int, kind: StepKind) -> StepTensors:
        """The features of step ``step`` (no autograd)."""
        ...

    def apply(
        self, step: int, kind: StepKind, grad_real: torch.Tensor | None, grad_fake: torch.Tensor
    ) -> float:
        """Update from the server's feature gradients of step ``step``."""
        ...


class StepServer(Protocol):
    """The server's half of a step: VFLGAN's shared discriminator
    (:class:`~flwr_vflgan.gan.vflgan.ServerTrainer`) or VertiGAN's gradient sum
    (:class:`~flwr_vflgan.gan.vertigan.VertiGANServer`)."""

    @property
    def state(self) -> FlatState:
        """The server's checkpointed models and optimizers."""
        ...

    def discriminator_step(
        self, step: int, real: Sequence[torch.Tensor], fake: Sequence[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]: ...

    def generator_step(
        self, fake: Sequence[torch.Tensor], step: int = 0
    ) -> tuple[list[torch.Tensor], float]:
        """Gradients of the generators' shared loss for each party's fake features
        (``step``: the step number, for a server that draws per-step randomness)."""
        ...


def party_trainer(
    config: GANSettings,
    spans: Sequence[SpanLike],
    data: torch.Tensor,
    shared_seed: int,
    party: int,
    privacy: PrivacyPlan | None = None,
    noise_seed: int | None = None,
) -> PartyTrainer:
    """The party's trainer for ``config``'s algorithm (arguments as :class:`PartyTrainer`)."""
    kind = VertiGANParty if config.shares_backbone else PartyTrainer
    return kind(config, spans, data, shared_seed, party, privacy, noise_seed)


def step_server(
    config: GANSettings, n_parties: int, seed: int, privacy: PrivacyPlan | None = None
) -> StepServer:
    """The server's half of ``config``'s algorithm (arguments as :class:`ServerTrainer`)."""
    if config.shares_backbone:
        return VertiGANServer(n_parties)
    return ServerTrainer(config, n_parties, seed, privacy)


def wire_width(config: GANSettings) -> int:
    """Columns of a step's tensors on the wire: the feature width, or VertiGAN's one."""
    return WIRE_WIDTH if config.shares_backbone else config.model.feature_dim


def fixed_rows(config: GANSettings, kind: StepKind) -> int | None:
    """Rows every party's tensors of a ``kind`` step have on the wire: the batch (``None``
    for a Poisson-sampled discriminator batch, whose size the party draws; ``B_hat`` for a
    masked one), or VertiGAN's
    (:func:`~flwr_vflgan.gan.vertigan.wire_rows`)."""
    if config.shares_backbone:
        return wire_rows(config.model, kind)
    if kind is StepKind.DISCRIMINATOR and config.dp.poisson:
        return None
    if kind is StepKind.DISCRIMINATOR:
        return config.dp.drawn_rows(config.train.batch_size)  # B_hat under batch masking
    return config.train.batch_size


def party_forward_block(
    party: StepParty, schedule: Schedule, block: StepBlock
) -> list[StepTensors]:
    """The party's features of every step of ``block``, all with its current parameters."""
    return [party.forward(step, schedule.kind(step)) for step in block.steps]


def party_apply_block(
    party: StepParty,
    schedule: Schedule,
    block: StepBlock,
    grads: Sequence[StepTensors],
    before_discriminator_step: Callable[[int], None] | None = None,
) -> None:
    """Apply the server's gradients of every step of ``block`` in order.

    ``before_discriminator_step`` is called with the step number before each
    discriminator step is applied (a DP party counts it against its budget there, and
    may refuse it by raising).
    """
    if len(grads) != block.count:
        raise ValueError(f"{block.describe()} needs {block.count} gradients, got {len(grads)}")
    for step, grad in zip(block.steps, grads, strict=True):
        kind = schedule.kind(step)
        if kind is StepKind.DISCRIMINATOR and before_discriminator_step is not None:
            before_discriminator_step(step)
        party.apply(step, kind, grad.real, grad.fake)


def server_block(
    server: StepServer,
    schedule: Schedule,
    block: StepBlock,
    features: Sequence[Sequence[StepTensors]],
) -> list[list[StepTensors]]:
    """The server's updates for every step of ``block``, in order.

    ``features[i][j]`` is party ``i``'s features of the block's ``j``-th step. Returns
    ``grads[i][j]``, the gradient of the server's loss with respect to them.
    """
    grads: list[list[StepTensors]] = [[] for _ in features]
    for j, step in enumerate(block.steps):
        fake = [party[j].fake for party in features]
        if schedule.kind(step) is StepKind.DISCRIMINATOR:
            real = [party[j].real for party in features]
            if any(r is None for r in real):
                raise ValueError(f"step {step} is a discriminator step but lacks real features")
            grads_real, grads_fake, _ = server.discriminator_step(step, real, fake)  # type: ignore[arg-type]
            for index, party_grads in enumerate(grads):
                party_grads.append(StepTensors(grads_real[index], grads_fake[index]))
        else:
            grads_fake, _ = server.generator_step(fake, step)
            for index, party_grads in enumerate(grads):
                party_grads.append(StepTensors(None, grads_fake[index]))
    return grads


class LocalVFLGAN:
    """The parties and the server of a VFLGAN run in one process, ``K`` steps per
    exchange, with no transport: the federated protocol's exact computation order.

    Parameters
    ----------
    parties
        Each party's trainer, in party order.
    server
        The shared discriminator's trainer.
    schedule
        The run's schedule (the same at every party and the server).
    steps_per_exchange
        ``K``.
    """

    def __init__(
        self,
        parties: Sequence[StepParty],
        server: StepServer,
        schedule: Schedule,
        steps_per_exchange: int,
    ) -> None:
        if steps_per_exchange < 1:
            raise ValueError(f"steps_per_exchange must be >= 1, got {steps_per_exchange}")
        self.parties = list(parties)
        self.server = server
        self.schedule = schedule
        self.steps_per_exchange = steps_per_exchange

    def blocks(self, start: int = 0) -> list[StepBlock]:
        """The exchanges' blocks from step ``start`` to the end of the schedule."""
        out, step = [], start
        while step < self.schedule.total_steps:
            stop = self.schedule.block_end(step, self.steps_per_exchange)
            out.append(StepBlock(step, stop - step))
            step = stop
        return out

    def run_block(self, block: StepBlock) -> None:
        """One exchange's worth of computation: forwards, the server's updates, applies."""
        features = [party_forward_block(p, self.schedule, block) for p in self.parties]
        grads = server_block(self.server, self.schedule, block, features)
        for party, party_grads in zip(self.parties, grads, strict=True):
            party_apply_block(party, self.schedule, block, party_grads)
