"""VertiGAN (Jiang et al., PETS 2023) as paper 000 describes it (Section 2.3, Figure 2).

Every party holds a copy of one generator *backbone* ``G_b``, its own generator *head*
``G_hi`` and its own WGAN-GP discriminator ``D_i`` on its columns. Party ``i`` trains
``D_i`` and ``G_hi`` alone, by WGAN-GP's objective on its columns (eq. 4); only the
backbone is federated: every party sends its backbone gradient to the server, the server
adds them (eq. 5: ``G_Gb = G_Gb^1 + ... + G_Gb^N``, a sum, not an average; see
``shared/notes/seed-errata.md``) and sends the sum back, and every party applies it. The
parties feed the same noise ``z`` (the shared seed's) through identical backbones, which
is what ties a synthetic row's columns together; there is no discriminator that sees
more than one party's columns, which is paper 000's critique.

How it is built here, and why (docs/algorithms.md, "VertiGAN"):

* ``G_b`` is the hidden layers of the party generator (:class:`PartyGenerator`'s body
  without its last linear layer), ``G_hi`` its last linear layer and output activations;
  ``D_i`` is VFLGAN's local discriminator with its second part (the same networks as
  VFLGAN, so the comparison isolates the protocol), trained by eq. (4) alone:
  ``train.first_part_gp``, the penalty on the features a VFLGAN party sends, does not
  apply. Every party initialises its backbone
  from the shared seed, so the copies start equal; they stay equal because every party
  applies the same summed gradient with the same Adam state.
* It runs on the VFLGAN family's step protocol (forward, server, apply;
  :mod:`flwr_vflgan.gan.exchanges`). A generator step's "features" are the party's
  backbone gradient, one column of ``P`` values (``P`` = :func:`backbone_size`), and
  the server's "gradient" back is the sum. A discriminator step sends nothing (zero rows)
  and is taken wholly at the party, through the same discriminator update (and privacy
  mechanism) as a VFLGAN party's, with no gradient from a server.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from flwr_vflgan.gan.losses import generator_loss
from flwr_vflgan.gan.schedule import StepKind
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.nn.models import PartyGenerator, SpanLike, frozen_batchnorm_stats, seeded_init
from flwr_vflgan.privacy.config import PrivacyPlan
from flwr_vflgan.runtime.blocks import StepTensors
from flwr_vflgan.runtime.flat import FlatState
from flwr_vflgan.runtime.rng import Stream, derive_seed

from .config import GANSettings, ModelConfig

WIRE_WIDTH = 1
"""A VertiGAN step's tensors travel as one column: ``(P, 1)`` for a backbone gradient."""

_BACKBONE_INIT = 1
"""Sub-stream of :data:`Stream.INIT` under the shared seed: the backbone's initialisation."""


def backbone_size(model: ModelConfig) -> int:
    """``P``, the number of parameters in the backbone ``G_b`` (the generator's hidden
    layers: each Linear's weights and bias, each BatchNorm's scale and shift)."""
    size, width_in = 0, model.latent_dim
    for index, width in enumerate(model.generator_hidden):
        size += width_in * width + width
        if index > 0:
            size += 2 * width
        width_in = width
    return size


def wire_rows(model: ModelConfig, kind: StepKind) -> int:
    """Rows of a VertiGAN step's tensors on the wire: ``P`` for a generator step, none
    for a discriminator step (it is taken at the party)."""
    return backbone_size(model) if kind is StepKind.GENERATOR else 0


def _empty() -> torch.Tensor:
    return torch.zeros(0, WIRE_WIDTH)


class VertiGANParty(PartyTrainer):
    """One VertiGAN party: the backbone copy, its head and its discriminator ``D_i``.

    The parameters are :class:`~flwr_vflgan.gan.vflgan.PartyTrainer`'s; ``D_i`` keeps its
    second part (``has_local_head``), its loss being the whole of the party's objective.
    """

    def __init__(
        self,
        config: GANSettings,
        spans: Sequence[SpanLike],
        data: torch.Tensor,
        shared_seed: int,
        party: int,
        privacy: PrivacyPlan | None = None,
        noise_seed: int | None = None,
    ) -> None:
        if not config.has_local_head:
            raise ValueError("a VertiGAN party's discriminator needs its second part and loss")
        super().__init__(config, spans, data, shared_seed, party, privacy, noise_seed)
        # D_i is WGAN-GP's critic (eq. 4): its penalty is on its score; VFLGAN's extra
        # penalty on the features it sends to a server has nothing to stand for here.
        self.first_part_gp = False
        model = config.model
        with seeded_init(derive_seed(shared_seed, Stream.INIT, 0, _BACKBONE_INIT)):
            common = PartyGenerator(model.latent_dim, model.generator_hidden, spans)
        targets = [self.generator] + ([self.average.module] if self.average else [])
        with torch.no_grad():
            for target in targets:
                for mine, shared in zip(_backbone(target), _backbone(common), strict=True):
                    mine.copy_(shared)

    @property
    def backbone(self) -> list[torch.nn.Parameter]:
        """The trained generator's backbone parameters, in a fixed order."""
        return _backbone(self.generator)

    def batch_rows(self, step: int, kind: StepKind) -> int:
        """Rows of step ``step``'s tensors on the wire (:func:`wire_rows`)."""
        return wire_rows(self.config.model, kind)

    def forward(self, step: int, kind: StepKind) -> StepTensors:
        """The party's backbone gradient of a generator step, as a ``(P, 1)`` column;
        nothing for a discriminator step. Either updates the generator's BatchNorm
        statistics once, as a VFLGAN party's forward does."""
        if kind is StepKind.DISCRIMINATOR:
            with torch.no_grad():
                self._fake(step, self._batch(step).shape[0])
            return StepTensors(real=_empty(), fake=_empty())
        loss = generator_loss(self.discriminator(self._fake(step)))
        grads = torch.autograd.grad(loss, self.backbone)
        self.discriminator.zero_grad(set_to_none=True)
        return StepTensors(real=None, fake=_flatten(grads).unsqueeze(1))

    def apply(
        self,
        step: int,
        kind: StepKind,
        grad_real: torch.Tensor | None,
        grad_fake: torch.Tensor,
    ) -> float:
        """A discriminator step: WGAN-GP on ``D_i`` alone (eq. 4, through the party's
        privacy mechanism). A generator step: the head from the party's own gradient, the
        backbone from ``grad_fake``, the server's sum of every party's backbone gradient
        (eq. 5). Returns the party's loss."""
        if kind is StepKind.DISCRIMINATOR:
            rows = self._batch(step).shape[0]
            zeros = torch.zeros(rows, self.config.model.feature_dim)
            return self._apply_discriminator(step, zeros, zeros)
        if grad_fake.shape != (backbone_size(self.config.model), WIRE_WIDTH):
            raise ValueError(
                f"a backbone gradient must be ({backbone_size(self.config.model)}, 1), "
                f"got {tuple(grad_fake.shape)}"
            )
        with frozen_batchnorm_stats(self.generator):
            fake = self._fake(step)
        loss = generator_loss(self.discriminator(fake))
        self.g_opt.zero_grad(set_to_none=True)
        loss.backward()
        offset = 0
        for param in self.backbone:
            n = param.numel()
            param.grad = grad_fake[offset : offset + n, 0].reshape(param.shape).clone()
            offset += n
        self.g_opt.step()
        self.generator_updated()
        self.discriminator.zero_grad(set_to_none=True)
        return float(loss.detach())


class VertiGANServer:
    """The server of VertiGAN: it adds the parties' backbone gradients (eq. 5) and holds
    no model (its checkpointed state is empty)."""

    def __init__(self, n_parties: int) -> None:
        if n_parties < 1:
            raise ValueError(f"n_parties must be >= 1, got {n_parties}")
        self.n_parties = n_parties
        self.state = FlatState([], [])

    def discriminator_step(
        self, step: int, real: Sequence[torch.Tensor], fake: Sequence[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """Nothing: each party trains its own discriminator."""
        empty = [_empty() for _ in range(self.n_parties)]
        return empty, [_empty() for _ in range(self.n_parties)], float("nan")

    def generator_step(
        self, fake: Sequence[torch.Tensor], step: int = 0
    ) -> tuple[list[torch.Tensor], float]:
        """The sum of the parties' backbone gradients, once per party, and its norm."""
        if len(fake) != self.n_parties:
            raise ValueError(f"expected {self.n_parties} backbone gradients, got {len(fake)}")
        total = torch.stack(list(fake)).sum(dim=0)
        return [total.clone() for _ in fake], float(total.norm())


def _backbone(generator: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters of ``generator``'s hidden layers (all but its last Linear)."""
    assert isinstance(generator, PartyGenerator)
    return [p for layer in list(generator.body)[:-1] for p in layer.parameters()]


def _flatten(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])
