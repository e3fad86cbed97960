"""One VT-GAN client: its bottom generator ``G^b_i``, bottom discriminator ``D^b_i``, its
conditional-vector sampler and its row order (paper 001, Algorithm 1, client side).

Every step is split in two halves that arrive in different messages (possibly in
different processes): a *forward* (fake features from the server's chunk of ``G^t``'s
output, and real features) and an *apply* (the server's gradients with respect to those
features). The apply recomputes the forward pass from the same random draws (Gumbel
noise, dropout masks, conditional vectors and row choices are pure functions of the
client's private seed and the step number) instead of keeping an autograd graph alive.

Rows live in a *current order* that changes after every round (training-with-shuffling,
Section 3.1.5): round ``r`` applies the permutation drawn from the clients' shared seed
and ``r``, so all clients stay aligned while the server's row indices refer to different
people in every round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flwr_vflgan.data.encoder import Span
from flwr_vflgan.gan.config import TrainConfig
from flwr_vflgan.nn.models import eval_mode, frozen_batchnorm_stats, seeded_init
from flwr_vflgan.privacy.updates import PerSampleUpdate
from flwr_vflgan.runtime.flat import FlatState
from flwr_vflgan.runtime.rng import (
    Stream,
    derive_seed,
    discriminator_batch,
    numpy_generator,
    torch_generator,
)

from .conditions import ConditionSampler, conditional_loss
from .config import VTGANSettings
from .models import ClientDiscriminator, ClientGenerator, adam
from .privacy import VTGANPrivacy, noisy_counts


@dataclass(frozen=True)
class PartyLayout:
    """The widths the server assigns a client (from the clients' column shares)."""

    chunk_width: int
    """Width of the client's chunk of ``G^t``'s output."""
    g_block_width: int
    """Width of each of the client's residual blocks."""
    d_block_width: int
    """Width of each of the client's FN blocks."""


@dataclass(frozen=True)
class Condition:
    """A client's conditional vectors for one step (paper 001, CVGeneration)."""

    cond: np.ndarray
    """``(B, cond_dim)`` one-hot conditions of the fake rows."""
    mask: np.ndarray
    """``(B, n_columns)`` the chosen column of each row (for the conditional loss)."""
    cond_real: np.ndarray
    """``(B, cond_dim)`` the same conditions permuted: what the real rows must match."""
    column_real: np.ndarray
    category_real: np.ndarray


@dataclass(frozen=True)
class RealForward:
    """Real features of a discriminator step."""

    features: torch.Tensor
    """``(B, f)`` for the chosen client, ``(N, f)`` (every row, current order) otherwise."""
    rows: np.ndarray | None
    """The chosen client's row indices (current order), sent to the server."""


def shuffle_permutation(shared_seed: int, round_index: int, n_rows: int) -> np.ndarray:
    """The permutation every client applies after round ``round_index``."""
    return numpy_generator(shared_seed, Stream.SHUFFLE, round_index).permutation(n_rows)


class VTGANParty:
    """A client's models, optimizers, sampler and row order.

    Parameters
    ----------
    settings, train
        VT-GAN settings and the shared schedule/optimiser settings.
    encoded
        The client's encoded rows in their original order, ``float32 (N, width)``.
    spans, discrete_spans
        Output spans of the encoding, and the one-hot spans of its categorical columns
        (the conditional-vector columns).
    layout
        Widths assigned by the server.
    shared_seed
        Seed all clients share and the server does not know (shuffling).
    party
        The client's index; its private seed (conditions, Gumbel noise, dropout,
        initialisation) is derived from the shared seed and this index.
    privacy, noise_seed
        DP-SGD plan (:mod:`flwr_vflgan.vtgan.privacy`) and the seed of this client's
        noise, known to it alone (default: derived from its private seed). Under DP the
        real rows are a uniform batch from the shared seed, the fake rows' conditions
        come from noisy category counts, and ``D^b_i`` takes per-row clipped, noised
        steps.
    """

    def __init__(
        self,
        settings: VTGANSettings,
        train: TrainConfig,
        encoded: np.ndarray,
        spans: Sequence[Span],
        discrete_spans: Sequence[Span],
        layout: PartyLayout,
        shared_seed: int,
        party: int,
        privacy: VTGANPrivacy | None = None,
        noise_seed: int | None = None,
    ) -> None:
        if encoded.ndim != 2 or encoded.dtype != np.float32:
            raise ValueError(
                f"encoded rows must be a 2-D float32 array, got {encoded.dtype} {encoded.shape}"
            )
        self.settings = settings
        self.train = train
        self.encoded = torch.from_numpy(encoded)
        self.n_rows = int(encoded.shape[0])
        self.spans = tuple(spans)
        self.discrete_spans = tuple(discrete_spans)
        self.layout = layout
        self.shared_seed = shared_seed
        self.party = party
        self.private_seed = derive_seed(shared_seed, Stream.CONDITION, 0, party + 1)
        self.sampler = ConditionSampler(encoded, self.discrete_spans, settings.log_frequency)
        self.order = np.arange(self.n_rows)
        self.round = 0
        self._build_models(int(encoded.shape[1]))
        self._set_up_privacy(encoded, privacy, noise_seed)

    def _build_models(self, width: int) -> None:
        """Seeded ``G^b_i`` and ``D^b_i`` (``D^b_i`` reads ``width`` columns), their Adams and state."""
        settings, train, layout = self.settings, self.train, self.layout
        with seeded_init(derive_seed(self.private_seed, Stream.INIT)):
            self.generator = ClientGenerator(
                layout.chunk_width,
                layout.g_block_width,
                settings.g_client_blocks,
                self.spans,
                settings.gumbel_tau,
            )
            self.discriminator = ClientDiscriminator(width, layout.d_block_width, settings)
        self.g_opt = adam(self.generator, train, settings)
        self.d_opt = adam(self.discriminator, train, settings)
        self.state = FlatState([self.generator, self.discriminator], [self.g_opt, self.d_opt])

    def _set_up_privacy(
        self, encoded: np.ndarray, privacy: VTGANPrivacy | None, noise_seed: int | None
    ) -> None:
        """DP state: the noised ``D^b_i`` update, the one noisy count release, the row codes."""
        self.privacy = privacy
        if noise_seed is None:
            noise_seed = derive_seed(self.private_seed, Stream.DP_NOISE)
        self.d_update: PerSampleUpdate | None = None
        self._counts: list[np.ndarray] | None = None
        if privacy is not None:
            self.d_update = PerSampleUpdate(
                privacy.noise_multiplier, privacy.clip, self.train.batch_size, noise_seed
            )
            # The client's one release of its category counts (accounted in the plan).
            self._counts = noisy_counts(
                self.sampler.all_counts(),
                privacy,
                numpy_generator(noise_seed, Stream.DP_NOISE, 0, 1),
            )
            self.sampler.set_frequencies(self._counts)
            spans = self.discrete_spans
            self._codes = (
                np.stack([encoded[:, sp.start : sp.stop].argmax(axis=1) for sp in spans], axis=1)
                if spans
                else np.zeros((self.n_rows, 0), dtype=np.int64)
            )

    @property
    def feature_dim(self) -> int:
        """Width of ``D^b_i``'s output."""
        return self.discriminator.out_dim

    # -- row order -------------------------------------------------------------------
    def set_order(self, order: np.ndarray, round_index: int) -> None:
        """Adopt a saved row order (a client restored in a new process).

        The sampler is rebuilt on the original rows and then permuted, which leaves it
        exactly as a client kept in memory has it after its shuffles: the same draws
        pick the same rows in every runtime.
        """
        if order.shape != (self.n_rows,):
            raise ValueError(f"row order must have {self.n_rows} entries, got {order.shape}")
        self.order = order.astype(np.int64)
        self.round = round_index
        self.sampler = ConditionSampler(
            self.encoded.numpy(), self.discrete_spans, self.settings.log_frequency
        )
        self.sampler.permute(self.order)
        if self._counts is not None:
            self.sampler.set_frequencies(self._counts)

    def shuffle(self) -> None:
        """End of a round: reorder the rows with the shared permutation of this round."""
        permutation = shuffle_permutation(self.shared_seed, self.round, self.n_rows)
        self.order = self.order[permutation]
        self.sampler.permute(permutation)
        self.round += 1

    def _rows(self, rows: np.ndarray) -> torch.Tensor:
        return self.encoded[torch.from_numpy(self.order[rows])]

    # -- conditional vectors ---------------------------------------------------------
    def dp_rows(self, step: int) -> np.ndarray:
        """Under DP: the uniform batch of step ``step`` (original row ids, shared seed)."""
        return discriminator_batch(
            self.shared_seed, step, self.n_rows, self.train.batch_size
        ).numpy()

    def condition(self, step: int, batch: int) -> Condition:
        """This client's conditional vectors for step ``step`` (it was chosen for it).

        Without DP the real rows' conditions are the fake rows' permuted (CTGAN); under
        DP they are the values of the uniform batch's rows in one of this client's
        categorical columns, chosen uniformly per row.
        """
        rng = numpy_generator(self.private_seed, Stream.CONDITION, step)
        drawn = self.sampler.sample_train(batch, rng)
        if self.privacy is not None and self.sampler.n_columns == 0:
            rows = self.dp_rows(step)
            none = np.full(len(rows), -1, dtype=np.int64)
            return Condition(
                drawn.cond, drawn.mask, np.zeros((len(rows), 0), np.float32), none, none
            )
        if self.privacy is not None:
            rows = self.dp_rows(step)
            column = rng.integers(0, self.sampler.n_columns, size=len(rows))
            category = self._codes[rows, column]
            offsets = np.asarray(self.sampler.cond_offsets)
            cond_real = np.zeros((len(rows), self.sampler.cond_dim), dtype=np.float32)
            cond_real[np.arange(len(rows)), offsets[column] + category] = 1.0
            return Condition(drawn.cond, drawn.mask, cond_real, column, category)
        permutation = rng.permutation(batch)
        return Condition(
            cond=drawn.cond,
            mask=drawn.mask,
            cond_real=drawn.cond[permutation],
            column_real=drawn.column[permutation],
            category_real=drawn.category[permutation],
        )

    def real_rows(self, step: int, batch: int) -> np.ndarray:
        """Rows (current order) whose values match the permuted conditions of ``step``."""
        drawn = self.condition(step, batch)
        rng = numpy_generator(self.private_seed, Stream.CONDITION, step, 1)
        return self.sampler.sample_rows(drawn.column_real, drawn.category_real, rng)

    # -- forward ------------------------------------------------------------------------
    def _fake(self, step: int, chunk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.generator.logits(chunk)
        fake = self.generator.activate(
            logits, torch_generator(self.private_seed, Stream.GUMBEL, step)
        )
        return logits, fake

    def _disc(self, x: torch.Tensor, step: int, which: int, **kwargs: object) -> torch.Tensor:
        gen = torch_generator(self.private_seed, Stream.DROPOUT, step, which)
        return self.discriminator(x, gen, **kwargs)

    def forward_fake(self, step: int, chunk: torch.Tensor) -> torch.Tensor:
        """``D^b_i(G^b_i(chunk))``; updates BatchNorm statistics once."""
        with torch.no_grad():
            return self._disc(self._fake(step, chunk)[1], step, 1)

    def forward_real(self, step: int, chosen: bool) -> RealForward:
        """Real features: the chosen client's matching rows, every row otherwise."""
        with torch.no_grad():
            if self.privacy is not None:
                batch = self.encoded[torch.from_numpy(self.dp_rows(step))]
                return RealForward(self._disc(batch, step, 0), None)
            if chosen:
                rows = self.real_rows(step, self.train.batch_size)
                return RealForward(self._disc(self._rows(rows), step, 0), rows)
            everything = self.encoded[torch.from_numpy(self.order)]
            return RealForward(self._disc(everything, step, 0), None)

    # -- apply ---------------------------------------------------------------------------
    def apply_discriminator(
        self,
        step: int,
        chunk: torch.Tensor,
        chosen: bool,
        grad_real: torch.Tensor,
        grad_fake: torch.Tensor,
        selected: np.ndarray | None = None,
        real_step: int | None = None,
    ) -> None:
        """Update ``D^b_i`` from the server's gradients of step ``step``.

        ``grad_real`` has one row per real feature of the batch for the chosen client
        (and under DP); for any other client one row per entry of ``selected``, the rows
        (current order) the server selected from its every-row features, which were
        computed with the dropout draw of step ``real_step`` (default ``step``).
        """
        with torch.no_grad(), frozen_batchnorm_stats(self.generator):
            fake = self._fake(step, chunk)[1]
        if self.privacy is not None:
            self._private_discriminator(step, fake, grad_real, grad_fake)
            return
        if chosen:
            real = self._rows(self.real_rows(step, self.train.batch_size))
            rows = None
        else:
            if selected is None or grad_real.shape[0] != len(selected):
                raise ValueError(
                    f"step {step}: a non-chosen client needs one gradient row per selected row, "
                    f"got {grad_real.shape[0]} rows for "
                    f"{'no selection' if selected is None else len(selected)}"
                )
            if len(selected) and (selected.min() < 0 or selected.max() >= self.n_rows):
                raise ValueError(f"step {step}: selected rows outside [0, {self.n_rows})")
            rows = torch.from_numpy(np.asarray(selected, dtype=np.int64))
            real = self.encoded[torch.from_numpy(self.order[rows.numpy()])]
        g_real = grad_real
        real_draw = step if real_step is None or chosen else real_step

        def batch_loss() -> torch.Tensor:
            kwargs = {} if rows is None else {"rows": rows, "n_total": self.n_rows}
            f_real = self._disc(real, real_draw, 0, **kwargs)
            f_fake = self._disc(fake, step, 1)
            return (f_real * g_real).sum() + (f_fake * grad_fake).sum()

        # Without DP (the DP path returned above) the update is the plain one.
        self.d_opt.zero_grad(set_to_none=True)
        batch_loss().backward()
        self.d_opt.step()

    def _private_discriminator(
        self, step: int, fake: torch.Tensor, grad_real: torch.Tensor, grad_fake: torch.Tensor
    ) -> None:
        """DP-SGD step of ``D^b_i``: row ``k`` is real row ``k`` of the uniform batch with
        fake row ``k``; its loss carries the server's per-row gradients."""
        assert self.d_update is not None  # built with the privacy plan
        real = self.encoded[torch.from_numpy(self.dp_rows(step))]
        disc = self.discriminator
        n = real.shape[0]

        def packed(x: torch.Tensor, which: int) -> torch.Tensor:
            gen = torch_generator(self.private_seed, Stream.DROPOUT, step, which)
            masks = disc.draw_masks(n, gen)
            return torch.cat([x, *masks], dim=1) if masks else x

        real_packed, fake_packed = packed(real, 0), packed(fake, 1)

        def batch_loss() -> torch.Tensor:
            f_real, f_fake = disc.packed(real_packed), disc.packed(fake_packed)
            return (f_real * grad_real).sum() + (f_fake * grad_fake).sum()

        self.d_update(
            disc,
            self.d_opt,
            batch_loss,
            dp_row_loss(n),
            (real_packed, fake_packed, grad_real, grad_fake),
            step,
        )

    def privacy_summary(self, d_steps: int) -> dict | None:
        """What this client spent after ``d_steps`` discriminator steps (``None`` without DP)."""
        if self.privacy is None:
            return None
        return self.privacy.summary(f"client {self.party}", d_steps, self.party)

    def apply_generator(
        self, step: int, chunk: torch.Tensor, chosen: bool, grad_fake: torch.Tensor
    ) -> tuple[torch.Tensor, float]:
        """Update ``G^b_i``; return the gradient for the server's chunk and the
        conditional loss (0 unless this client supplied the step's conditions).

        The chosen client adds CTGAN's conditional cross-entropy on its own one-hot
        outputs: only it knows which of its columns the condition names.
        """
        chunk = chunk.detach().requires_grad_(True)
        with frozen_batchnorm_stats(self.generator):
            logits, fake = self._fake(step, chunk)
        features = self._disc(fake, step, 1)
        loss = (features * grad_fake).sum()
        cond_loss = torch.zeros(())
        if chosen:
            drawn = self.condition(step, chunk.shape[0])
            cond_loss = conditional_loss(
                logits,
                self.discrete_spans,
                torch.from_numpy(drawn.cond),
                torch.from_numpy(drawn.mask),
            )
            loss = loss + cond_loss
        self.g_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.g_opt.step()
        self.discriminator.zero_grad(set_to_none=True)
        assert chunk.grad is not None  # set by backward above
        return chunk.grad, float(cond_loss.detach())

    # -- publication ----------------------------------------------------------------------
    def generation_conditions(self, n: int, draw: int) -> np.ndarray:
        """Conditions for ``n`` published rows, by the true category frequencies."""
        return self.sampler.sample_generation(
            n, numpy_generator(self.private_seed, Stream.EVAL_NOISE, draw)
        )

    def generate(self, chunk: torch.Tensor, draw: int) -> torch.Tensor:
        """Encoded synthetic rows from the server's chunk (eval mode, no autograd)."""
        with eval_mode(self.generator):
            return self.generator(
                chunk, torch_generator(self.private_seed, Stream.EVAL_NOISE, draw)
            )


def dp_row_loss(n: int) -> Callable[..., torch.Tensor]:
    """Row ``k``'s share of a client's discriminator surrogate loss, times ``n``: its
    packed real row and fake row (data and dropout multipliers) and the server's
    gradients for their features. The server's gradients carry ``1 / n``, so the mean
    over the batch is the batch surrogate ``sum_k <f(real_k), g_k> + <f(fake_k), g~_k>``.
    """

    def row_loss(
        call: Callable[[str, torch.Tensor], torch.Tensor],
        real_row: torch.Tensor,
        fake_row: torch.Tensor,
        g_real_row: torch.Tensor,
        g_fake_row: torch.Tensor,
    ) -> torch.Tensor:
        f_real = call("packed", real_row.unsqueeze(0)).squeeze(0)
        f_fake = call("packed", fake_row.unsqueeze(0)).squeeze(0)
        return n * ((f_real * g_real_row).sum() + (f_fake * g_fake_row).sum())

    return row_loss
