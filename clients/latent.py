"""The party side of the one-round latent diffusion family on Flower.

Setup loads the party's columns and reports the width of its latents. The encode
message trains the party's autoencoder on its own encoded columns (nothing leaves the
party while it trains) and answers with the latents of every row in the agreed order;
the autoencoder stays in ``context.state`` and, with a checkpoint directory, in a
checkpoint. The decode message decodes the party's slice of the sampled latents into its
columns. A party set up to resume a run whose server already holds the latents takes its
autoencoder from its checkpoint; one that has none cannot decode them and says so.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict

from flwr_vflgan.config import VFLGANConfig, settings_as_read_now
from flwr_vflgan.data.encoder import TabularEncoder
from flwr_vflgan.latent.autoencoder import (
    PartyAutoencoder,
    autoencoder_state,
    decode_latents,
    encode_rows,
    load_autoencoder,
    train_autoencoder,
)
from flwr_vflgan.latent.local import party_encoder, party_seed
from flwr_vflgan.latent.messages import DecodeRequest, EncodeRequest, LatentSetupReply, LatentsReply
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import load_party_checkpoint, save_party_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import GenerateReply, SetupInstruction
from flwr_vflgan.runtime.party_data import PartyData, party_block

from .common import CACHE_SIZE, PartyTables, entry_point, node_partition_id, party_checkpoint_dir
from .state import BlockState

log = logging.getLogger(__name__)

AUTOENCODER_PHASE = 1
"""The party checkpoint's step: written once its autoencoder is trained (the server's
phase 1 checkpoint holds the latents it made)."""


@dataclass
class LatentPartyMeta(BlockState):
    """A party's bookkeeping between messages (JSON in ``context.state``)."""

    config: str
    data_key: str
    partition_id: int
    seed: int
    """Seed of the party's autoencoder (initialisation and batch order)."""
    checkpoint_dir: str = ""
    trained: bool = False
    """Whether ``context.state`` holds the trained autoencoder."""

    @property
    def algorithm(self) -> VFLGANConfig:
        """The run's configuration."""
        return VFLGANConfig.from_dict(json.loads(self.config))


class LatentDiffusionClient:
    """Message handlers of a latent diffusion party (registered on the project's
    ClientApp)."""

    def __init__(self) -> None:
        self._tables = PartyTables(party_block)
        self._models: OrderedDict[tuple, PartyAutoencoder] = OrderedDict()
        self._encoders: OrderedDict[tuple, TabularEncoder] = OrderedDict()

    # -- Flower entry points -------------------------------------------------------------
    setup = entry_point("_setup", "Load the party's columns; report its rows and latent width.")

    encode = entry_point("_encode", "Train the autoencoder and send the latents of every row.")

    decode = entry_point(
        "_decode", "Publication: the party's slice of the synthetic latents, decoded."
    )

    # -- handlers ------------------------------------------------------------------------
    def _setup(self, msg: Message, context: Context) -> RecordDict:
        setup = SetupInstruction.from_content(msg.content)
        partition_id = node_partition_id(context)
        data_key, data = self._tables.for_setup(context, setup.data_spec, partition_id)
        seed = party_seed(setup.run_seed, partition_id)
        meta = LatentPartyMeta(setup.algorithm, data_key, partition_id, seed)
        meta.checkpoint_dir = (
            party_checkpoint_dir(context, setup.checkpoint_root, partition_id) or ""
        )
        settings = meta.algorithm.latent
        width = settings.latent_width(len(data.schema.names))
        context.state.pop(P.LD_STATE_MODEL, None)
        if setup.resume_step not in (P.NO_STEP, 0):
            self._resume(context, meta, data)
        meta.store(context, P.LD_STATE_META)
        return LatentSetupReply(
            partition_id=partition_id,
            n_rows=data.n_rows,
            id_digest=data.id_digest,
            columns=data.schema.names,
            latent_width=width,
        ).to_content()

    def _resume(self, context: Context, meta: LatentPartyMeta, data: PartyData) -> None:
        """Take the autoencoder of the party's checkpoint (the server holds latents it made).

        Raises
        ------
        ValueError
            The party has no checkpoint directory, or no checkpoint in it.
        """
        if not meta.checkpoint_dir:
            raise ValueError(
                f"party {meta.partition_id} cannot resume: the server holds latents of its "
                "autoencoder, which only its checkpoint keeps, and it has no checkpoint "
                f"directory (node_config '{P.NODE_CHECKPOINT_DIR}')"
            )
        arrays, _ = load_party_checkpoint(
            Path(meta.checkpoint_dir), AUTOENCODER_PHASE, meta.config, settings_as_read_now
        )
        arrays.pop("flat", None)
        model = self._load(meta, data, arrays)
        self._keep(context, meta, model)

    def _encode(self, msg: Message, context: Context) -> RecordDict:
        meta, data = self._meta(context)
        request = EncodeRequest.from_content(msg.content)
        settings = meta.algorithm.latent
        encoder = self._encoder(meta, data)
        # Encoded here only: decoding needs the fitted encoder, not the rows.
        encoded = torch.from_numpy(encoder.transform(data.frame))
        model, losses = train_autoencoder(
            encoded, encoder.spans, settings, meta.seed, _log_epoch(meta, data.n_rows)
        )
        log.info(
            "party %d: autoencoder trained on %d rows, final loss %.4f",
            meta.partition_id,
            data.n_rows,
            losses[-1] if losses else float("nan"),
        )
        self._keep(context, meta, model)
        if request.checkpoint and meta.checkpoint_dir:
            save_party_checkpoint(
                Path(meta.checkpoint_dir),
                AUTOENCODER_PHASE,
                np.zeros(0, dtype=np.float32),
                [],
                autoencoder_state(model),
                meta.config,
            )
        return LatentsReply(encode_rows(model, encoded)).to_content()

    def _decode(self, msg: Message, context: Context) -> RecordDict:
        meta, data = self._meta(context)
        if not meta.trained:
            raise ProtocolError("asked to decode before the autoencoder was trained")
        model = self._restored(context, meta, data)
        width = meta.algorithm.latent.latent_width(len(data.schema.names))
        request = DecodeRequest.from_content(msg.content, width)
        encoder = self._encoder(meta, data)
        frame = encoder.inverse_transform(decode_latents(model, request.latents, encoder.spans))
        return GenerateReply.of_frame(frame).to_content()

    # -- state ---------------------------------------------------------------------------
    def _meta(self, context: Context) -> tuple[LatentPartyMeta, PartyData]:
        meta = LatentPartyMeta.stored(context, P.LD_STATE_META)
        return meta, self._tables.load(meta.data_key)

    def _keep(self, context: Context, meta: LatentPartyMeta, model: PartyAutoencoder) -> None:
        """Store the trained autoencoder in ``context.state`` and this process's cache."""
        meta.trained = True
        state = autoencoder_state(model)
        context.state[P.LD_STATE_MODEL] = ArrayRecord({k: _array(v) for k, v in state.items()})
        meta.store(context, P.LD_STATE_META)
        self._cache(context, meta, model)

    def _cache(self, context: Context, meta: LatentPartyMeta, model: PartyAutoencoder) -> None:
        key = (context.run_id, context.node_id, meta.config, meta.data_key, meta.seed)
        self._models[key] = model
        self._models.move_to_end(key)
        while len(self._models) > CACHE_SIZE:
            self._models.popitem(last=False)

    def _restored(
        self, context: Context, meta: LatentPartyMeta, data: PartyData
    ) -> PartyAutoencoder:
        """The trained autoencoder: this process's, or rebuilt from ``context.state``."""
        key = (context.run_id, context.node_id, meta.config, meta.data_key, meta.seed)
        if key in self._models:
            return self._models[key]
        record = context.state.get(P.LD_STATE_MODEL, None)
        if not isinstance(record, ArrayRecord):
            raise ProtocolError("party state lacks its trained autoencoder")
        model = self._load(meta, data, {k: v.numpy() for k, v in record.items()})
        self._cache(context, meta, model)
        return model

    def _encoder(self, meta: LatentPartyMeta, data: PartyData) -> TabularEncoder:
        """The encoder of the party's columns (``latent.numeric_scaling``), fitted once per
        process and table."""
        settings = meta.algorithm.latent
        key = (meta.data_key, settings.numeric_scaling)
        if key not in self._encoders:
            self._encoders[key] = party_encoder(data.frame, data.schema, settings)
            while len(self._encoders) > CACHE_SIZE:
                self._encoders.popitem(last=False)
        self._encoders.move_to_end(key)
        return self._encoders[key]

    def _load(
        self, meta: LatentPartyMeta, data: PartyData, state: dict[str, np.ndarray]
    ) -> PartyAutoencoder:
        settings = meta.algorithm.latent
        width = settings.latent_width(len(data.schema.names))
        encoder = self._encoder(meta, data)
        return load_autoencoder(encoder.spans, width, settings.ae_hidden, state)


def _array(values: np.ndarray) -> Array:
    return Array(np.ascontiguousarray(values))


def _log_epoch(meta: LatentPartyMeta, n_rows: int) -> Callable[[int, float], None]:
    total = meta.algorithm.latent.ae_epochs_for(n_rows)

    def on_epoch(epoch: int, loss: float) -> None:
        log.debug(
            "party %d: autoencoder epoch %d/%d loss %.4f", meta.partition_id, epoch + 1, total, loss
        )

    return on_epoch
