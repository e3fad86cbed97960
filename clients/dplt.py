"""The party side of DPLT, the latent-tree baseline, on Flower.

Setup loads the party's columns and the public domain they are coded from (the run's
``dataset.domain`` in simulation, the ``<file>.domain.json`` sidecar beside a deployed
party's file) and reports how many bits they make. The latents message groups the bits,
fits each group's latent attribute to its noisy histogram and answers with the latent
state of every row; the decode message draws the party's columns for the sampled latent
states. The model is a deterministic function of the rows, the plan and the run seed, so
a process that lacks it (a new simulation worker, a deployed node's next message) fits it
again from ``context.state``'s plan instead of storing it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass

from flwr.app import Context, Message, RecordDict

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.files import domain_sidecar
from flwr_vflgan.dplt.local import PartyLatentModel, party_bit_count, party_noise, party_sampling
from flwr_vflgan.dplt.messages import DecodeRequest, DPLTSetupReply, LatentsReply, LatentsRequest
from flwr_vflgan.dplt.model import BudgetPlan, group_sizes
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import GenerateReply, SetupInstruction
from flwr_vflgan.runtime.party_data import DataSpec, PartyData, party_block

from .common import CACHE_SIZE, PartyTables, entry_point, node_integer, node_partition_id
from .state import BlockState


@dataclass
class DPLTPartyMeta(BlockState):
    """A party's bookkeeping between messages (JSON in ``context.state``)."""

    config: str
    data_key: str
    partition_id: int
    run_seed: int
    domain: str
    """The public domain of the party's columns (JSON)."""
    plan: list[float] | None = None
    """``[epsilon, selections, latents]`` of the plan its latents were made with."""
    noise_seed: int | None = None
    """The party's own noise seed (node config ``noise-seed``), if it set one."""
    bits: int = 0
    """The party's bit count, as its setup reply said."""

    @property
    def algorithm(self) -> VFLGANConfig:
        """The run's configuration."""
        return VFLGANConfig.from_dict(json.loads(self.config))

    @property
    def public_domain(self) -> PublicDomain:
        """The public domain."""
        return PublicDomain.from_mapping(json.loads(self.domain))


def party_domain(context: Context, data_spec: str) -> PublicDomain:
    """The public domain a party codes its columns from.

    Raises
    ------
    ValueError
        There is none: the message says where to put it.
    """
    path = context.node_config.get(P.NODE_DATA_PATH)
    if path:
        sidecar = domain_sidecar(str(path))
        if sidecar.is_file():
            return PublicDomain.load(sidecar)
        raise ValueError(
            f"dplt codes the party's columns from public metadata, but {sidecar} does not "
            "exist: put the domain of its columns there (simulations.export_parties with "
            "dataset.domain writes it)"
        )
    domain = DataSpec.from_json(data_spec).public_domain if data_spec else None
    if domain is None:
        raise ValueError("dplt needs dataset.domain (dp=end_to_end resolves a bundled one)")
    return domain


class DPLTClient:
    """Message handlers of a DPLT party (registered on the project's ClientApp)."""

    def __init__(self) -> None:
        self._tables = PartyTables(party_block)
        self._models: OrderedDict[str, PartyLatentModel] = OrderedDict()

    setup = entry_point("_setup", "Load the party's columns; report its rows and bits.")

    latents = entry_point("_latents", "Group the bits and send each row's latent states.")

    decode = entry_point("_decode", "Publication: the party's columns for the sampled states.")

    def _setup(self, msg: Message, context: Context) -> RecordDict:
        setup = SetupInstruction.from_content(msg.content)
        partition_id = node_partition_id(context)
        data_key, data = self._tables.for_setup(context, setup.data_spec, partition_id)
        domain = party_domain(context, setup.data_spec)
        meta = DPLTPartyMeta(
            setup.algorithm,
            data_key,
            partition_id,
            setup.run_seed,
            json.dumps(domain.to_mapping(), sort_keys=True),
            noise_seed=node_integer(context, P.NODE_NOISE_SEED),
        )
        meta.bits = party_bit_count(domain, data.schema, meta.algorithm.dplt)
        meta.store(context, P.DL_STATE_META)
        return DPLTSetupReply(
            partition_id=partition_id,
            n_rows=data.n_rows,
            id_digest=data.id_digest,
            columns=data.schema.names,
            bits=meta.bits,
        ).to_content()

    def _latents(self, msg: Message, context: Context) -> RecordDict:
        meta, data = self._meta(context)
        request = LatentsRequest.from_content(msg.content)
        budget = meta.algorithm.dp.target_epsilon
        if budget is None or abs(request.epsilon - budget) > 1e-12 * budget:
            raise ProtocolError(
                f"the server's plan spends epsilon {request.epsilon}, but this run's budget "
                f"is {budget}: refused"
            )
        own = group_sizes(meta.bits, meta.algorithm.dplt.group_size)
        if request.latents < len(own) or request.selections < sum(own) - len(own):
            raise ProtocolError(
                f"the server's plan counts {request.latents} latent attributes and "
                f"{request.selections} grouping choices in all, fewer than this party's own "
                f"{len(own)} and {sum(own) - len(own)}: refused (its noise would be too small)"
            )
        meta.plan = [request.epsilon, request.selections, request.latents]
        meta.store(context, P.DL_STATE_META)
        model = self._model(meta, data)
        return LatentsReply(model.states, model.latents).to_content()

    def _decode(self, msg: Message, context: Context) -> RecordDict:
        meta, data = self._meta(context)
        if meta.plan is None:
            raise ProtocolError("asked to decode before the latents were made")
        model = self._model(meta, data)
        request = DecodeRequest.from_content(msg.content, model.states)
        rng = party_sampling(meta.run_seed, meta.partition_id)
        frame = model.decode(request.states, rng, data.frame.dtypes.to_dict())
        spent = {
            "party": meta.partition_id,
            **_plan(meta).party_spent(model.n_bits, len(model.groups)),
        }
        return GenerateReply.of_frame(frame, json.dumps(spent)).to_content()

    def _meta(self, context: Context) -> tuple[DPLTPartyMeta, PartyData]:
        meta = DPLTPartyMeta.stored(context, P.DL_STATE_META)
        return meta, self._tables.load(meta.data_key)

    def _model(self, meta: DPLTPartyMeta, data: PartyData) -> PartyLatentModel:
        """The party's model for the plan in ``meta``: this process's, or fitted again
        (the same draws: its noise generator's seed is in ``meta``)."""
        key = meta.to_json()
        if key not in self._models:
            self._models[key] = PartyLatentModel.fit(
                data.frame,
                data.schema,
                meta.public_domain,
                meta.algorithm.dplt,
                _plan(meta),
                party_noise(meta.run_seed, meta.partition_id, meta.noise_seed),
            )
            while len(self._models) > CACHE_SIZE:
                self._models.popitem(last=False)
        self._models.move_to_end(key)
        return self._models[key]


def _plan(meta: DPLTPartyMeta) -> BudgetPlan:
    """The budget plan of the party's latents (``meta.plan`` with its budget split)."""
    assert meta.plan is not None
    epsilon, selections, latents = meta.plan
    split = meta.algorithm.dplt.budget_split
    return BudgetPlan(float(epsilon), int(selections), int(latents), split)
