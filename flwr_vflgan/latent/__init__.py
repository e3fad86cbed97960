"""The SiloFuse-style one-round latent-diffusion family (Shankar et al., ICDE 2024).

Each party trains an autoencoder on its own encoded columns
(:mod:`~flwr_vflgan.latent.autoencoder`) and sends the latents of its rows once; the
server trains a Gaussian DDPM with an MLP denoiser on the concatenated latents and
samples new ones (:mod:`~flwr_vflgan.latent.diffusion`); each party decodes its slice.
:mod:`~flwr_vflgan.latent.config` holds the ``latent.*`` settings.
"""

from flwr_vflgan.latent.autoencoder import (
    PartyAutoencoder,
    autoencoder_state,
    decode_latents,
    decode_rows,
    encode_rows,
    load_autoencoder,
    reconstruction_loss,
    train_autoencoder,
)
from flwr_vflgan.latent.config import LatentSettings
from flwr_vflgan.latent.diffusion import Denoiser, LatentDiffusion, NoiseSchedule

__all__ = [
    "Denoiser",
    "LatentDiffusion",
    "LatentSettings",
    "NoiseSchedule",
    "PartyAutoencoder",
    "autoencoder_state",
    "decode_latents",
    "decode_rows",
    "encode_rows",
    "load_autoencoder",
    "reconstruction_loss",
    "train_autoencoder",
]
