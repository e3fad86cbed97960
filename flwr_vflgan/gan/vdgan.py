"""VDGAN's computations (paper 004, Algorithm 3): a global generator on the server and one
WGAN-GP critic per client, without Flower.

One iteration:

1. the server draws ``m`` noise rows, generates the joint synthetic batch
   ``X~ = G(z)`` and splits it by client: client ``k`` receives ``X~_k``, its columns
   (:meth:`VDGANServer.synthesize`);
2. client ``k`` updates its critic ``D_k`` ``s`` times (``train.n_critic``) by WGAN-GP
   on its own real rows against ``X~_k`` (the same synthetic batch each time, a fresh
   real batch each time), then
3. returns ``g_k``, the gradient of its share of the generator loss,
   ``-mean D_k(X~_k)``, with respect to ``X~_k`` (:meth:`VDGANClient.step`);
4. the server updates ``G`` with ``sum_k J_k^T g_k`` (eq. 4.2), the chain rule through
   its own Jacobian (:meth:`VDGANServer.update`).

Only synthetic columns go down and only their gradients come up: no client sends a
model, a feature of a real row or a row index. The server knows ``z`` (it is its own
draw, as in the thesis).

Decisions (docs/vertigan.md, "VDGAN"): losses are batch means (the thesis writes sums;
with Adam the scale is immaterial); ``G`` has the centralized WGAN-GP's capacity
(``model.generator_hidden`` times the number of clients) and ``D_k`` is the VFLGAN family's
local discriminator with its second part on the client's columns; the client's real
batches come from the seed the clients share, so every client's ``j``-th critic step
reads the same rows (what the joint DP account below needs, and what keeps a client's
steps reproducible across runtimes).

The Flower strategy and client are ``strategies/vdgan.py`` and ``clients/vdgan.py``.
VDGAN-DPSGD trains each critic by per-row clipped, noised DP-SGD (``privacy``); the
gradients sent to the server and the generator are its post-processing. Not here yet
(issue 19): the warm-up and VDGAN-PATE (the voting mechanism and its account are
:mod:`flwr_vflgan.privacy.pate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flwr_vflgan.gan.losses import critic_loss, generator_loss
from flwr_vflgan.gan.vflgan import adam, make_generator, make_local_discriminator
from flwr_vflgan.nn.models import (
    SpanLike,
    eval_mode,
    frozen_batchnorm_stats,
    joint_spans,
    load_module_snapshot,
    module_snapshot,
    seeded_init,
)
from flwr_vflgan.privacy.config import PrivacyPlan
from flwr_vflgan.privacy.mechanisms import wgan_gp_row_loss
from flwr_vflgan.privacy.pate import compress, vote
from flwr_vflgan.privacy.updates import discriminator_update
from flwr_vflgan.runtime.flat import FlatState
from flwr_vflgan.runtime.rng import (
    Stream,
    derive_seed,
    discriminator_batch,
    latent_noise,
    numpy_generator,
    torch_generator,
    uniform_alpha,
)

from .config import GANSettings, TrainConfig
from .schedule import Schedule, StepKind, epochs_for


@dataclass(frozen=True)
class VDSchedule:
    """Iterations of a VDGAN run: an epoch is as many iterations as VFLGAN's epoch has
    generator steps (``(n // batch) // n_critic``), each reading ``n_critic`` real
    batches; ``train.max_steps`` caps the iterations, and an automatic length
    (``train.epochs=null``) counts ``train.min_steps`` in iterations."""

    per_epoch: int
    total: int

    @classmethod
    def of(cls, n_rows: int, train: TrainConfig) -> VDSchedule:
        """The schedule of ``n_rows`` training rows under ``train``.

        Raises
        ------
        ValueError
            An epoch would have no iteration.
        """
        per_epoch = (n_rows // train.batch_size) // train.n_critic
        if per_epoch < 1:
            raise ValueError(
                f"an epoch of {n_rows} rows has no VDGAN iteration (batch_size "
                f"{train.batch_size} x n_critic {train.n_critic} rows each): lower "
                "train.batch_size or train.n_critic"
            )
        total = per_epoch * epochs_for(train, per_epoch)
        if train.max_steps is not None:
            total = min(total, train.max_steps)
        return cls(per_epoch, total)

    def ends_epoch(self, iteration: int) -> bool:
        """Whether ``iteration`` is its epoch's last (or the run's)."""
        return (iteration + 1) % self.per_epoch == 0 or iteration + 1 == self.total

    def epoch_of(self, iteration: int) -> int:
        """The 1-based epoch of ``iteration``."""
        return iteration // self.per_epoch + 1

    def evaluation_due(self, iteration: int, eval_every: int) -> bool:
        """Whether the generator is evaluated after ``iteration``: at the end of every
        ``eval_every``-th epoch and after the last iteration (never when it is 0), as the
        VFLGAN family's schedule has it."""
        if eval_every <= 0:
            return False
        if iteration + 1 == self.total:
            return True
        return self.ends_epoch(iteration) and self.epoch_of(iteration) % eval_every == 0


class VDGANServer:
    """The global generator ``G`` and its optimizer (Algorithm 3, steps 1 and 4).

    Parameters
    ----------
    config
        Model and training settings.
    party_spans
        Each client's output spans (the attributes' encoding is public in the thesis).
    seed
        The server's seed: its noise ``z`` and Gumbel draws.
    """

    def __init__(
        self, config: GANSettings, party_spans: Sequence[Sequence[SpanLike]], seed: int
    ) -> None:
        if len(party_spans) < 1:
            raise ValueError("VDGAN needs at least one client")
        model, train = config.model, config.train
        self.config = config
        self.seed = seed
        self.widths = [sum(span.width for span in spans) for spans in party_spans]
        with seeded_init(derive_seed(seed, Stream.INIT)):
            self.generator = make_generator(model, joint_spans(party_spans), len(party_spans))
        self.opt = adam(self.generator, train, generator=True)
        self.state = FlatState([self.generator], [self.opt])

    def _joint(self, iteration: int) -> torch.Tensor:
        z = latent_noise(
            self.seed, iteration, self.config.train.batch_size, self.config.model.latent_dim
        )
        return self.generator(z, torch_generator(self.seed, Stream.GUMBEL, iteration))

    def synthesize(self, iteration: int) -> list[torch.Tensor]:
        """Step 1: iteration ``iteration``'s synthetic batch, split by client (moves the
        generator's BatchNorm statistics once)."""
        with torch.no_grad():
            joint = self._joint(iteration)
        return list(torch.split(joint, self.widths, dim=1))

    def generate(self, n_rows: int, draw: int) -> list[torch.Tensor]:
        """``n_rows`` encoded synthetic rows of evaluation draw ``draw``, split by client."""
        z = latent_noise(self.seed, draw, n_rows, self.config.model.latent_dim, Stream.EVAL_NOISE)
        with eval_mode(self.generator):
            joint = self.generator.sample(z, torch_generator(self.seed, Stream.EVAL_NOISE, draw))
        return list(torch.split(joint, self.widths, dim=1))

    def snapshot(self) -> np.ndarray:
        """The generator's parameters and buffers (for keeping the best epoch's)."""
        return module_snapshot(self.generator)

    def load_snapshot(self, values: np.ndarray) -> None:
        """Inverse of :meth:`snapshot`."""
        load_module_snapshot(self.generator, values)

    def update(self, iteration: int, grads: Sequence[torch.Tensor]) -> None:
        """Step 4: ``G`` takes ``sum_k J_k^T g_k`` (eq. 4.2), on the batch of
        :meth:`synthesize` recomputed with the same draws."""
        if len(grads) != len(self.widths):
            raise ValueError(f"expected {len(self.widths)} clients' gradients, got {len(grads)}")
        for k, (grad, width) in enumerate(zip(grads, self.widths, strict=True)):
            want = (self.config.train.batch_size, width)
            if tuple(grad.shape) != want or not torch.isfinite(grad).all():
                raise ValueError(
                    f"client {k}'s gradient must be finite {want}, got {tuple(grad.shape)}"
                )
        with frozen_batchnorm_stats(self.generator):
            joint = self._joint(iteration)
        surrogate = (joint * torch.cat(list(grads), dim=1)).sum()
        self.opt.zero_grad(set_to_none=True)
        surrogate.backward()
        self.opt.step()


class VDGANClient:
    """Client ``k``'s critic ``D_k`` and its optimizer (Algorithm 3, steps 2 and 3).

    Parameters
    ----------
    config
        Model and training settings.
    spans
        The client's output spans.
    data
        The client's encoded rows, ``float32 (n, width)``.
    shared_seed
        The clients' common seed (their real batches and penalty weights); the server
        does not know it.
    party
        The client's index (its critic's initialisation).
    privacy
        VDGAN-DPSGD: every critic update is a per-row clipped, noised DP-SGD update
        (``None``: plain updates).
    noise_seed
        Seed of the DP noise, the client's alone (by default derived from its seeds).
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
        width = sum(span.width for span in spans)
        if data.ndim != 2 or data.shape[1] != width or data.dtype != torch.float32:
            raise ValueError(f"client data must be float32 (n, {width}), got {tuple(data.shape)}")
        model, train = config.model, config.train
        self.config = config
        self.data = data
        self.shared_seed = shared_seed
        self.spans, self.party = tuple(spans), party
        with seeded_init(derive_seed(shared_seed, Stream.INIT, 0, party + 1)):
            self.critic = make_local_discriminator(model, width, local_head=True)
        self.opt = adam(self.critic, train, generator=False)
        self.state = FlatState([self.critic], [self.opt])
        self.privacy = privacy
        if noise_seed is None:
            noise_seed = derive_seed(shared_seed, Stream.DP_NOISE, 0, party + 1)
        self.update = discriminator_update(privacy, noise_seed)
        self._row_loss = wgan_gp_row_loss(train.gp_weight)

    def step(self, iteration: int, fake: torch.Tensor) -> torch.Tensor:
        """Steps 2 and 3: ``n_critic`` WGAN-GP updates of ``D_k`` against ``fake`` (each
        through the client's privacy mechanism), then the gradient of ``-mean D_k(fake)``
        with respect to ``fake``."""
        train = self.config.train
        if tuple(fake.shape) != (train.batch_size, self.data.shape[1]):
            raise ValueError(
                f"synthetic batch must be {(train.batch_size, self.data.shape[1])}, "
                f"got {tuple(fake.shape)}"
            )
        fake = fake.detach()
        for inner in range(train.n_critic):
            step = iteration * train.n_critic + inner
            rows = discriminator_batch(self.shared_seed, step, self.data.shape[0], train.batch_size)
            real = self.data[rows]
            alpha = uniform_alpha(self.shared_seed, Stream.LOCAL_ALPHA, step, train.batch_size)

            def batch_loss(real: torch.Tensor = real, alpha: torch.Tensor = alpha) -> torch.Tensor:
                return critic_loss(self.critic, real, fake, alpha, train.gp_weight)[0]

            self.update(
                self.critic, self.opt, batch_loss, self._row_loss, (real, fake, alpha), step
            )
        leaf = fake.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(generator_loss(self.critic(leaf)), leaf)
        self.critic.zero_grad(set_to_none=True)
        return grad

    def warm_up(self) -> int:
        """The optional warm-up (paper 004, Section 4.3.2, Figure 4.3), before the
        co-training: ``D_k`` trains for ``train.warmup_epochs`` epochs by WGAN-GP
        (Algorithm 2) against a local generator of the client's own columns, on the
        client's rows; the generator is then dropped, ``D_k`` and its Adam go on. Nothing
        crosses the wire. Its draws come from the clients' shared seed's warm-up stream
        and the client's index. Returns the critic steps it took (0 without warm-up)."""
        model, train = self.config.model, self.config.train
        if not train.warmup_epochs:
            return 0
        seed = derive_seed(self.shared_seed, Stream.WARMUP, 0, self.party + 1)
        with seeded_init(seed):
            generator = make_generator(model, self.spans)
        g_opt = adam(generator, train, generator=True)
        n, batch = self.data.shape[0], train.batch_size
        schedule = Schedule(n, batch, train.n_critic, train.warmup_epochs)
        for step in range(schedule.total_steps):
            z = latent_noise(seed, step, batch, model.latent_dim)
            fake = generator(z, torch_generator(seed, Stream.GUMBEL, step))
            if schedule.kind(step) is StepKind.GENERATOR:
                g_opt.zero_grad(set_to_none=True)
                generator_loss(self.critic(fake)).backward()
                g_opt.step()
                continue
            real = self.data[discriminator_batch(seed, step, n, batch)]
            alpha = uniform_alpha(seed, Stream.LOCAL_ALPHA, step, batch)
            loss = critic_loss(self.critic, real, fake.detach(), alpha, train.gp_weight)[0]
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
        self.critic.zero_grad(set_to_none=True)
        return schedule.d_steps_before(schedule.total_steps)


class PateClient:
    """VDGAN-PATE's client (paper 004, Algorithm 4): ``E`` teacher critics, each trained by
    WGAN-GP on its own disjoint shard of the client's rows, and their noisy vote.

    The shards come from a permutation of the rows drawn from the clients' shared seed, so
    shard ``j`` holds the same people at every client (what the joint account assumes).
    Per iteration every teacher takes ``n_critic`` updates on batches of its shard against
    the received synthetic batch; then each teacher's gradient of ``-D_j`` at every
    synthetic row is compressed to ``K`` signs and the signs are voted
    (:mod:`flwr_vflgan.privacy.pate`). The reply is the voted signs divided by the batch
    size (the scale of a batch-mean loss's gradient); nothing else leaves the client.

    Parameters
    ----------
    config, spans, data, shared_seed, party
        As :class:`VDGANClient`.
    sigma
        The votes' noise standard deviation.
    noise_seed
        Seed of the client's signs and vote noise, its own (by default derived).
    """

    def __init__(
        self,
        config: GANSettings,
        spans: Sequence[SpanLike],
        data: torch.Tensor,
        shared_seed: int,
        party: int,
        sigma: float,
        noise_seed: int | None = None,
    ) -> None:
        dp, train = config.dp, config.train
        shard_rows = data.shape[0] // dp.pate_teachers
        if shard_rows < train.batch_size:
            raise ValueError(
                f"{dp.pate_teachers} teachers leave {shard_rows} rows each, fewer than "
                f"train.batch_size {train.batch_size}: lower dp.pate_teachers or the batch"
            )
        self.config = config
        self.sigma = sigma
        self.shared_seed = shared_seed
        order = numpy_generator(shared_seed, Stream.SHUFFLE, 0, 1).permutation(data.shape[0])
        self.shards = [
            data[torch.from_numpy(order[j :: dp.pate_teachers][:shard_rows])]
            for j in range(dp.pate_teachers)
        ]
        # Teacher j draws its batches and initialisation from its own stream of the
        # shared seed (the same at every client: shard j's people, batch for batch).
        self.teachers = [
            VDGANClient(
                config, spans, shard, derive_seed(shared_seed, Stream.BATCH, 0, j + 1), party
            )
            for j, shard in enumerate(self.shards)
        ]
        self.state = FlatState([t.critic for t in self.teachers], [t.opt for t in self.teachers])
        self.noise_seed = (
            noise_seed
            if noise_seed is not None
            else derive_seed(shared_seed, Stream.DP_NOISE, 0, party + 1)
        )

    def step(self, iteration: int, fake: torch.Tensor) -> torch.Tensor:
        """Every teacher's critic updates, then the voted signs (over the batch size)."""
        dp = self.config.dp
        grads = []
        for teacher in self.teachers:
            # The gradient of the batch mean, times the batch: each row's own -grad D_j.
            grads.append(teacher.step(iteration, fake) * fake.shape[0])
        generator = torch_generator(self.noise_seed, Stream.DP_NOISE, iteration)
        signs = compress(torch.stack(grads), dp.pate_top_k, dp.pate_clip, generator)
        voted = vote(signs, self.sigma, dp.pate_threshold, generator)
        return voted / fake.shape[0]


class LocalVDGAN:
    """The server and the clients of a VDGAN run in one process, in the protocol's order."""

    def __init__(self, server: VDGANServer, clients: Sequence[VDGANClient | PateClient]) -> None:
        if len(clients) != len(server.widths):
            raise ValueError(f"the server expects {len(server.widths)} clients, got {len(clients)}")
        self.server = server
        self.clients = list(clients)
        for client in self.clients:
            if isinstance(client, VDGANClient):
                client.warm_up()  # before the co-training (nothing with train.warmup_epochs=0)

    def iteration(self, iteration: int) -> None:
        """Algorithm 3 once: synthesize, every client's critic steps and gradient, update."""
        fakes = self.server.synthesize(iteration)
        grads = [c.step(iteration, f) for c, f in zip(self.clients, fakes, strict=True)]
        self.server.update(iteration, grads)
