"""Counter-based random streams.

Every random draw of a run is a pure function of ``(seed, purpose, step)``: a party can
recompute the exact forward pass of an earlier step (it must, because in a Flower
deployment every message runs in a fresh process), an interrupted run resumes
bit-for-bit, and no code touches PyTorch's or NumPy's global generators.
"""

from __future__ import annotations

import hashlib
from enum import IntEnum

import numpy as np
import torch


class Stream(IntEnum):
    """Named purposes; the value is mixed into the seed so streams never collide."""

    BATCH = 1
    """Row indices of a discriminator batch (shared by all parties)."""
    NOISE = 2
    """Latent noise ``z`` (shared by all parties)."""
    LOCAL_ALPHA = 3
    """Interpolation weights of the local gradient penalties (shared by all parties)."""
    GUMBEL = 4
    """Gumbel noise of a party's one-hot outputs (private to the party)."""
    SERVER_ALPHA = 5
    """Interpolation weights of the shared discriminator's gradient penalty (server)."""
    INIT = 6
    """Parameter initialisation."""
    PUBLISH = 7
    """Row shuffle before publication (server)."""
    EVAL_NOISE = 8
    """Latent noise of evaluation and final generation (shared by all parties)."""
    DP_NOISE = 9
    """Gaussian noise of a differentially private discriminator update (private to its holder)."""
    SHUFFLE = 10
    """VT-GAN's per-round row permutation (shared by all clients, unknown to the server)."""
    CONDITION = 11
    """VT-GAN conditional vectors and matching real rows (private to the chosen client)."""
    DROPOUT = 12
    """Dropout masks of VT-GAN's discriminator blocks (private to their holder)."""
    CHOICE = 13
    """VT-GAN's choice of the client that supplies a step's conditional vector (server)."""
    SPLIT = 14
    """GAFM's train/test split of the rows (label party)."""
    EPOCH_ORDER = 15
    """GAFM's order of the training rows in an epoch (label party)."""
    LABEL_NOISE = 16
    """GAFM's label noise ``epsilon`` and randomized-response ``u`` (label party)."""
    GRADIENT_NOISE = 17
    """Max Norm's and Marvell's perturbation of the cut gradients (label party)."""
    ATTACK = 18
    """Choices of the simulated label-stealing attacker (cosine hints)."""
    WARMUP = 19
    """VDGAN's client warm-up: its local generator, batches and penalty weights."""
    BATCH_MASK = 20
    """Which rows of a masked discriminator batch a party's update keeps (private to it)."""
    SHARD = 21
    """GS-WGAN: the rows of each discriminator's shard and the discriminator each generator
    step reads."""


_MASK64 = (1 << 64) - 1


def _splitmix64(value: int) -> int:
    """One round of SplitMix64 (Steele et al., 2014): a fast, well-mixed 64-bit bijection."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def derive_seed(seed: int, stream: Stream, step: int = 0, extra: int = 0) -> int:
    """Mix ``(seed, stream, step, extra)`` into a 63-bit seed (SplitMix64 chaining).

    Seeds wider than 64 bits are folded in 64-bit words, so every bit counts.
    """
    if seed < 0 or step < 0 or extra < 0:
        raise ValueError(f"seed, step and extra must be >= 0, got {seed}, {step}, {extra}")
    mixed = _splitmix64(seed & _MASK64)
    seed >>= 64
    while seed:
        mixed = _splitmix64(mixed ^ (seed & _MASK64))
        seed >>= 64
    for word in (int(stream), step, extra):
        mixed = _splitmix64(mixed ^ (word & _MASK64))
    return mixed >> 1


def torch_generator(seed: int, stream: Stream, step: int = 0, extra: int = 0) -> torch.Generator:
    """A fresh CPU ``torch.Generator`` for one ``(seed, stream, step)``."""
    gen = torch.Generator()
    gen.manual_seed(derive_seed(seed, stream, step, extra))
    return gen


def numpy_generator(
    seed: int, stream: Stream, step: int = 0, extra: int = 0
) -> np.random.Generator:
    """A fresh NumPy ``Generator`` for one ``(seed, stream, step)``."""
    return np.random.default_rng(derive_seed(seed, stream, step, extra))


def batch_indices(shared_seed: int, step: int, n_rows: int, batch_size: int) -> torch.Tensor:
    """Fixed-size batch drawn uniformly without replacement (the DP accounting's scheme).

    Every party calls this with the same shared seed and gets the same rows.
    """
    if batch_size > n_rows:
        raise ValueError(f"batch_size={batch_size} exceeds the {n_rows} training rows")
    # NumPy samples k of n without replacement in O(k) (Floyd's algorithm for k << n),
    # where a full torch.randperm of n rows would cost O(n) at every step.
    rows = numpy_generator(shared_seed, Stream.BATCH, step).choice(
        n_rows, size=batch_size, replace=False
    )
    return torch.from_numpy(rows)


def poisson_batch_indices(shared_seed: int, step: int, n_rows: int, rate: float) -> torch.Tensor:
    """Poisson-sampled batch: every row joins independently with probability ``rate``.

    Drawn as a Binomial(``n_rows``, ``rate``) size and then that many distinct rows
    uniformly, which is the same distribution as ``n_rows`` independent coin flips in
    O(batch) instead of O(n). The batch may be empty. Every party calls this with the
    same shared seed and gets the same rows.
    """
    if not 0 < rate <= 1:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    gen = numpy_generator(shared_seed, Stream.BATCH, step)
    size = int(gen.binomial(n_rows, rate))
    return torch.from_numpy(np.sort(gen.choice(n_rows, size=size, replace=False)))


def discriminator_batch(
    shared_seed: int, step: int, n_rows: int, batch_size: int, poisson: bool = False
) -> torch.Tensor:
    """Row indices of a discriminator step: fixed-size without replacement, or Poisson
    with rate ``batch_size / n_rows`` (DP-SGD's ``dp.sampling=poisson``)."""
    if poisson:
        return poisson_batch_indices(shared_seed, step, n_rows, batch_size / n_rows)
    return batch_indices(shared_seed, step, n_rows, batch_size)


def latent_noise(
    shared_seed: int, step: int, n: int, latent_dim: int, stream: Stream = Stream.NOISE
) -> torch.Tensor:
    """The shared noise ``z`` of one step: identical at every party."""
    gen = torch_generator(shared_seed, stream, step)
    return torch.randn(n, latent_dim, generator=gen)


def uniform_alpha(seed: int, stream: Stream, step: int, n: int) -> torch.Tensor:
    """Per-row interpolation weights in [0, 1) for a gradient penalty, shape ``(n, 1)``."""
    gen = torch_generator(seed, stream, step)
    return torch.rand(n, 1, generator=gen)


def seed_commitment(shared_seed: int, run_seed: int) -> str:
    """A commitment to the parties' shared seed that the server may see and compare.

    SHA-256 of a domain tag, the run's seed and the shared seed (both as 8 bytes): the
    same for every party that holds the same shared seed in this run, different in
    another run, and with the 62-bit random seed that ``export_parties`` hands out it
    reveals nothing usable about the seed (finding it means searching 2^62 values). A
    seed a person picked from a small range can be guessed from this, as from anything
    that depends on it only.
    """
    if not 0 <= shared_seed < 2**64 or not 0 <= run_seed < 2**64:
        raise ValueError(
            f"seeds must be integers in [0, 2^64), got shared {shared_seed}, run {run_seed}"
        )
    payload = (
        b"flwr-vflgan shared-seed commitment v1\0"
        + run_seed.to_bytes(8, "big")
        + shared_seed.to_bytes(8, "big")
    )
    return hashlib.sha256(payload).hexdigest()
