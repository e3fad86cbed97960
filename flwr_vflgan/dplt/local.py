"""A DPLT party's model and the whole sequence without Flower.

:class:`PartyLatentModel` is what one party does (code its columns from the public
domain, cut its bits into groups, fit each group's latent attribute, decode sampled
latent states into its columns); :func:`synthesize_locally` runs every party and the
server's tree with the seeds named here, so a federated run publishes the table it
makes (before the server's row shuffle); the tests compare the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.schema import Schema
from flwr_vflgan.marginals.discretize import Discretizer
from flwr_vflgan.runtime.rng import Stream, numpy_generator

from .config import DPLTSettings
from .model import BudgetPlan, LatentGroup, LatentTree, bits_of, code_bits, codes_of, group_bits

__all__ = ["PartyLatentModel", "party_bit_count", "synthesize_locally"]


def party_noise(
    run_seed: int, partition_id: int, noise_seed: int | None = None
) -> np.random.Generator:
    """The generator of party ``partition_id``'s grouping choices and histogram noise:
    from the party's own ``noise_seed`` (its node config's ``noise-seed``, which nobody
    else knows) when it has one, else from the run seed (reproducible simulated runs)."""
    if noise_seed is not None:
        return numpy_generator(noise_seed, Stream.DP_NOISE)
    return numpy_generator(run_seed, Stream.DP_NOISE, 0, partition_id + 1)


def party_sampling(run_seed: int, partition_id: int) -> np.random.Generator:
    """The generator of the bits party ``partition_id`` draws for the published rows."""
    return numpy_generator(run_seed, Stream.EVAL_NOISE, 0, partition_id + 1)


def server_noise(run_seed: int) -> np.random.Generator:
    """The generator of the server's table noise."""
    return numpy_generator(run_seed, Stream.DP_NOISE)


def server_sampling(run_seed: int) -> np.random.Generator:
    """The generator of the published rows' latent states."""
    return numpy_generator(run_seed, Stream.EVAL_NOISE)


def party_bit_count(domain: PublicDomain, schema: Schema, settings: DPLTSettings) -> int:
    """Bits of a party's columns: public (from the domain and ``dplt.bins`` alone)."""
    discretizer = Discretizer.from_domain(domain, schema, settings.bins)
    return sum(code_bits(c.size) for c in discretizer.columns)


@dataclass
class PartyLatentModel:
    """One party's coding, groups and latent attributes."""

    discretizer: Discretizer
    groups: list[LatentGroup]
    latents: np.ndarray
    """The latent states of the party's rows, ``(rows, groups)``: what it sends."""

    @classmethod
    def fit(
        cls,
        frame: pd.DataFrame,
        schema: Schema,
        domain: PublicDomain,
        settings: DPLTSettings,
        plan: BudgetPlan,
        rng: np.random.Generator,
    ) -> PartyLatentModel:
        """Steps 1 and 4 at the party: group its bits (``plan.selection_epsilon`` a
        choice), then each group's noisy histogram (``plan.parameter_scale``) and latent
        attribute."""
        discretizer = Discretizer.from_domain(domain, schema, settings.bins)
        codes = discretizer.encode(frame.reset_index(drop=True))
        bits = bits_of([codes[n] for n in discretizer.names], list(discretizer.sizes.values()))
        members = group_bits(bits, settings.group_size, plan.selection_epsilon, rng)
        groups = [LatentGroup.fit(bits, m, settings, plan.parameter_scale, rng) for m in members]
        latents = np.stack([g.latents(bits) for g in groups], axis=1)
        return cls(discretizer, groups, latents)

    @property
    def n_bits(self) -> int:
        """The party's bits."""
        return sum(len(g.members) for g in self.groups)

    @property
    def states(self) -> list[int]:
        """States of each of the party's latent attributes."""
        return [g.states for g in self.groups]

    def decode(
        self,
        states: np.ndarray,
        rng: np.random.Generator,
        dtypes: Mapping[str, Any] | None = None,
    ) -> pd.DataFrame:
        """The party's columns for rows of the given latent states ``(rows, groups)``."""
        bits = np.zeros((states.shape[0], self.n_bits), dtype=np.uint8)
        for j, group in enumerate(self.groups):
            bits[:, group.members] = group.sample(states[:, j], rng)
        sizes = list(self.discretizer.sizes.values())
        codes = dict(zip(self.discretizer.names, codes_of(bits, sizes), strict=True))
        return self.discretizer.decode(codes, rng, dtypes=dtypes)


def synthesize_locally(
    parties: Sequence[Any],
    domain: PublicDomain,
    settings: DPLTSettings,
    epsilon: float,
    run_seed: int,
    rows: int,
) -> tuple[pd.DataFrame, BudgetPlan, LatentTree]:
    """The table a federated run with server seed ``run_seed`` publishes (before its
    row shuffle), its budget plan and the server's tree; ``parties`` have ``frame`` and
    ``schema``."""
    plan = BudgetPlan.of(
        epsilon, [party_bit_count(domain, p.schema, settings) for p in parties], settings
    )
    models = [
        PartyLatentModel.fit(p.frame, p.schema, domain, settings, plan, party_noise(run_seed, i))
        for i, p in enumerate(parties)
    ]
    joined = np.concatenate([m.latents for m in models], axis=1)
    states = [s for m in models for s in m.states]
    tree = LatentTree.fit(joined, states, plan, server_noise(run_seed))
    sampled = tree.sample(rows, server_sampling(run_seed))
    bounds = np.cumsum([len(m.groups) for m in models])[:-1]
    frames = [
        m.decode(np.ascontiguousarray(block), party_sampling(run_seed, i), p.frame.dtypes.to_dict())
        for i, (m, p, block) in enumerate(
            zip(models, parties, np.split(sampled, bounds, axis=1), strict=True)
        )
    ]
    return pd.concat(frames, axis=1), plan, tree
