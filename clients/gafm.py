"""A non-label party of GAFM and its baselines on Flower (paper 002).

The party holds feature columns and its local model ``f_p``; it never sees a label. Three
message types:

* ``gafm_setup``: load the party's columns, build fresh models seeded by the
  repetition's seed, report row count, ID digest and encoded width;
* ``gafm_step``: apply the gradient of the last batch's cut values (recomputing that
  forward pass with the same parameters and dropout masks), then compute the cut values
  of the requested rows;
* ``gafm_predict``: cut values of the requested rows in evaluation mode.

The model, Adam's moments and the rows of the last forward pass live in
``context.state`` between messages (a deployment runs every message in a new process).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch
from flwr.app import ConfigRecord, Context, Message, RecordDict

from flwr_vflgan.gafm.config import GAFMSettings
from flwr_vflgan.gafm.data import block_fields, party_features
from flwr_vflgan.gafm.messages import CutValues, GAFMSetup, GAFMSetupReply, GAFMStep, PredictRows
from flwr_vflgan.gafm.parties import LocalParty
from flwr_vflgan.gafm.training import apply_block
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import (
    ProtocolError,
)
from flwr_vflgan.runtime.flat import FlatState

from .common import PartyTables, data_key, entry_point, node_partition_id
from .state import BlockState

_CACHE_SIZE = 4


@dataclass
class GAFMPartyMeta(BlockState):
    """A non-label party's bookkeeping, kept in ``context.state`` between messages (JSON)."""

    settings: str
    """The run's :class:`~flwr_vflgan.gafm.config.GAFMSettings` (JSON), as setup carried it."""
    data_key: str
    seed: int
    partition_id: int
    last_step: int = P.NO_STEP
    """The first step of the block whose cut values await their gradients (none: NO_STEP)."""
    last_sizes: list[int] = field(default_factory=list)
    """The batch sizes of that block's steps."""
    opt_steps: list[int] = field(default_factory=list)


class GAFMClient:
    """Message handlers of a non-label party (register them on a ``ClientApp``)."""

    def __init__(self) -> None:
        self._tables = PartyTables(party_features, _CACHE_SIZE)
        self._parties: OrderedDict[tuple, tuple[LocalParty, FlatState]] = OrderedDict()

    setup = entry_point(
        "_setup", "Load the party's columns and build fresh models for a repetition."
    )

    step = entry_point(
        "_step", "Apply the last batch's gradient, then return the cut values of the next batch."
    )

    predict = entry_point("_predict", "Cut values of the requested rows (evaluation mode).")

    # -- handlers --------------------------------------------------------------------------
    def _setup(self, msg: Message, context: Context) -> RecordDict:
        setup = GAFMSetup.from_content(msg.content)
        if setup.protocol_version != P.GF_PROTOCOL_VERSION:
            raise ProtocolError(
                f"server speaks GAFM protocol {setup.protocol_version}, this party "
                f"{P.GF_PROTOCOL_VERSION}"
            )
        GAFMSettings.from_dict(json.loads(setup.settings))  # validate before storing
        partition_id = node_partition_id(context)
        source = data_key(context, setup.data_spec, partition_id)
        data = self._tables.load(source)
        if setup.label in data.schema.names:
            raise ValueError(
                f"party {partition_id}'s table contains the label column {setup.label!r}: a "
                "non-label party must not hold labels; remove the column from its file"
            )
        meta = GAFMPartyMeta(setup.settings, source, setup.seed, partition_id)
        key = self._key(context, meta)
        self._parties.pop(key, None)
        party, state = self._party(context, meta)
        _save(context, state, meta, np.zeros(0, dtype=np.int64))
        return GAFMSetupReply(
            partition_id,
            data.n_rows,
            data.id_digest,
            int(party.features.shape[1]),
            data.schema.names,
        ).to_content()

    def _step(self, msg: Message, context: Context) -> RecordDict:
        party, state, meta, last_rows = self._restore(context)
        message = GAFMStep.from_content(
            msg.content,
            pending_rows=len(last_rows) if meta.last_step != P.NO_STEP else 0,
            cut_dim=party.settings.cut_dim,
            n_rows=party.n_rows,
            limit=party.settings.steps_per_exchange,
        )
        if message.grads is not None:
            sizes = meta.last_sizes
            first = meta.last_step
            batches = list(np.split(last_rows, np.cumsum(sizes)[:-1]))
            grads = list(torch.split(torch.from_numpy(message.grads), sizes))
            apply_block(party, range(first, first + len(sizes)), batches, grads)
            meta.last_step, meta.last_sizes = P.NO_STEP, []
            last_rows = np.zeros(0, dtype=np.int64)
        content = RecordDict()
        if message.rows is not None:
            cuts = [
                party.forward(batch, message.step + j) for j, batch in enumerate(message.batches())
            ]
            content = CutValues(torch.cat(cuts)).to_content()
            meta.last_step, meta.last_sizes = message.step, list(message.batch_rows)
            last_rows = message.rows
        _save(context, state, meta, last_rows)
        return content

    def _predict(self, msg: Message, context: Context) -> RecordDict:
        party, _, _, _ = self._restore(context)
        rows = PredictRows.from_content(msg.content, party.n_rows).rows
        return CutValues(party.predict(rows)).to_content()

    # -- state -------------------------------------------------------------------------------
    @staticmethod
    def _key(context: Context, meta: GAFMPartyMeta) -> tuple:
        return (context.run_id, context.node_id, meta.settings, meta.data_key, meta.seed)

    def _party(self, context: Context, meta: GAFMPartyMeta) -> tuple[LocalParty, FlatState]:
        key = self._key(context, meta)
        if key in self._parties:
            self._parties.move_to_end(key)
            return self._parties[key]
        settings = GAFMSettings.from_dict(json.loads(meta.settings))
        data = self._tables.load(meta.data_key)
        party = LocalParty(data.encoded, settings, meta.partition_id, meta.seed, block_fields(data))
        state = FlatState([party.model], [party.optimizer])
        self._parties[key] = (party, state)
        while len(self._parties) > _CACHE_SIZE:
            self._parties.popitem(last=False)
        return party, state

    def _restore(self, context: Context) -> tuple[LocalParty, FlatState, GAFMPartyMeta, np.ndarray]:
        if P.GF_STATE_META not in context.state:
            raise ProtocolError("this party has not been set up for GAFM (no gafm_setup yet)")
        record = context.state[P.GF_STATE_META]
        assert isinstance(record, ConfigRecord)
        meta = GAFMPartyMeta.from_json(str(record["json"]))
        party, state = self._party(context, meta)
        flat = context.state[P.GF_STATE_FLAT]
        assert isinstance(flat, ConfigRecord)
        values = np.frombuffer(flat["float32"], dtype=np.float32)  # type: ignore[arg-type]
        state.load(values.copy(), meta.opt_steps)
        rows_record = context.state[P.GF_STATE_ROWS]
        assert isinstance(rows_record, ConfigRecord)
        rows = np.frombuffer(rows_record["int64"], dtype=np.int64).copy()  # type: ignore[arg-type]
        return party, state, meta, rows


def _save(context: Context, state: FlatState, meta: GAFMPartyMeta, rows: np.ndarray) -> None:
    meta.opt_steps = state.optimizer_steps()
    context.state[P.GF_STATE_META] = ConfigRecord({"json": meta.to_json()})
    context.state[P.GF_STATE_FLAT] = ConfigRecord({"float32": state.flat.numpy().tobytes()})
    context.state[P.GF_STATE_ROWS] = ConfigRecord({"int64": rows.astype(np.int64).tobytes()})
