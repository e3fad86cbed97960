"""The one-round sequence without Flower: every party's autoencoder, the joined latents,
the server's diffusion model, the sampled latents decoded by each party.

The strategy and the party client do exactly this over messages, with the seeds named
here, so a federated run publishes the table :func:`synthesize_locally` makes (before the
server's row shuffle); the tests compare the two. With one party holding every column it
is the family run centralized, the upper reference of the vertical run's quality.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd
import torch

from flwr_vflgan.data.encoder import TabularEncoder
from flwr_vflgan.data.schema import Schema
from flwr_vflgan.runtime.rng import Stream, derive_seed

from .autoencoder import decode_latents, encode_rows, train_autoencoder
from .config import LatentSettings
from .diffusion import LatentDiffusion


def party_seed(run_seed: int, partition_id: int) -> int:
    """Seed of party ``partition_id``'s autoencoder (initialisation and batch order)."""
    return derive_seed(run_seed, Stream.INIT, extra=partition_id + 1) % (2**63)


def diffusion_seed(server_seed: int) -> int:
    """Seed of the server's diffusion model (initialisation, batches, training noise)."""
    return derive_seed(server_seed, Stream.INIT) % (2**63)


def sampling_seed(server_seed: int) -> int:
    """Seed of the published table's synthetic latents."""
    return derive_seed(server_seed, Stream.EVAL_NOISE) % (2**63)


class PartyRows(Protocol):
    """A party's columns and their schema (a simulated party's ``PartyData``)."""

    @property
    def frame(self) -> pd.DataFrame: ...

    @property
    def schema(self) -> Schema: ...


def party_encoder(frame: pd.DataFrame, schema: Schema, settings: LatentSettings) -> TabularEncoder:
    """The encoder a party's autoencoder reads its columns through
    (``latent.numeric_scaling``, fitted on the party's rows)."""
    return TabularEncoder(numeric_scaling=settings.numeric_scaling).fit(frame, schema)  # type: ignore[arg-type]


def party_encoding(
    frame: pd.DataFrame, schema: Schema, settings: LatentSettings
) -> tuple[TabularEncoder, torch.Tensor]:
    """:func:`party_encoder` and the party's rows encoded through it."""
    encoder = party_encoder(frame, schema, settings)
    return encoder, torch.from_numpy(encoder.transform(frame))


def synthesize_locally(
    parties: Sequence[PartyRows],
    settings: LatentSettings,
    run_seed: int,
    rows: int,
) -> pd.DataFrame:
    """The table a federated run with server seed ``run_seed`` publishes, before its row
    shuffle: the parties' decoded columns side by side, in party order."""
    models, latents, encoders = [], [], []
    for i, party in enumerate(parties):
        encoder, encoded = party_encoding(party.frame, party.schema, settings)
        model, _ = train_autoencoder(encoded, encoder.spans, settings, party_seed(run_seed, i))
        models.append(model)
        encoders.append(encoder)
        latents.append(encode_rows(model, encoded))
    joined = np.concatenate(latents, axis=1)
    diffusion = LatentDiffusion(joined.shape[1], settings, diffusion_seed(run_seed))
    diffusion.fit(joined)
    sampled = diffusion.sample(rows, sampling_seed(run_seed))
    widths = [block.shape[1] for block in latents]
    slices = np.split(sampled, np.cumsum(widths)[:-1], axis=1)
    frames = [
        encoder.inverse_transform(decode_latents(model, np.ascontiguousarray(z), encoder.spans))
        for encoder, model, z in zip(encoders, models, slices, strict=True)
    ]
    return pd.concat(frames, axis=1)
