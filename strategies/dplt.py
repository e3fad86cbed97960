"""The server side of DPLT, the latent-tree baseline, as a Flower strategy.

DPLT (Tang et al., IEEE TDSC 2019; paper 004 Section 3.3): each party codes its columns
into bits from the public domain, groups them (exponential mechanism), summarises each
group by a latent attribute fitted to its noisy histogram and sends the latent state of
every row once; the server releases a noisy joint table for every pair of latent
attributes, joins them by the maximum spanning tree of their mutual information,
releases noisy tables along the tree, samples it from the root and sends each party its
latent columns to decode. ``DPLTStrategy.start(grid)`` runs setup, the latents' exchange
and publication: three exchanges (plus the optional seed agreement and ID alignment).
The run takes seconds, so it keeps no checkpoints: a lost party stops it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Message
from flwr.serverapp import Grid

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.dplt.local import server_noise, server_sampling
from flwr_vflgan.dplt.messages import DecodeRequest, DPLTSetupReply, LatentsReply, LatentsRequest
from flwr_vflgan.dplt.model import BudgetPlan, LatentTree, group_sizes, state_count
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import SetupInstruction
from flwr_vflgan.runtime.rng import Stream, numpy_generator

from .base import StrategyArgs, VerticalStrategy
from .exchange import RunStopped, setup_replies
from .vflgan import VFLGANResult, collect_published

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)


@dataclass
class _Run:
    """One run's state from setup to publication."""

    grid: Grid
    order: list[int]
    n_rows: int
    plan: BudgetPlan
    bits: list[int]
    """Each party's bit count, in party order (its setup reply)."""
    started: float
    exchanges: int = 1
    counts: list[list[int]] = field(default_factory=list)
    """Each party's latent attributes' state counts, in party order (from its bits)."""
    tree: LatentTree | None = None
    phases: dict[str, float] = field(default_factory=dict)


class DPLTStrategy(VerticalStrategy["_Run", VFLGANResult]):
    """Server of a DPLT run.

    Parameters
    ----------
    config
        Algorithm configuration (``variant`` ``dplt``, ``dp.target_epsilon`` the budget;
        sent to every party at setup, whose ``dplt`` settings code and group its bits).
    checkpoint_dir, party_checkpoint_root
        Accepted like every strategy's and unused: a DPLT run keeps no checkpoints.
    **common
        The settings every strategy takes (:class:`~.base.VerticalStrategy`).
    """

    def __init__(
        self,
        config: VFLGANConfig,
        *,
        checkpoint_dir: Any = None,
        party_checkpoint_root: Any = None,
        **common: Unpack[StrategyArgs],
    ) -> None:
        if not config.is_dplt:
            raise ValueError(f"DPLTStrategy runs dplt, got variant {config.variant.value!r}")
        if config.dp.target_epsilon is None:
            raise ValueError("dplt needs a budget: dp=end_to_end dp.target_epsilon=<epsilon>")
        super().__init__(**common, min_parties=1)
        self.config = config

    def summary(self) -> str:
        """One line describing the configured run."""
        s = self.config.dplt
        return (
            f"DPLTStrategy({self.n_parties} parties, epsilon {self.config.dp.target_epsilon:g}, "
            f"{s.bins} bins, groups of {s.group_size} bits, {s.latent_states} latent states)"
        )

    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> _Run:
        """Setup: the parties' order, rows and bit counts, and the budget plan."""
        agreed = self.before_setup(grid, nodes)
        content = SetupInstruction(
            algorithm=json.dumps(self.config.to_dict(), sort_keys=True),
            data_spec=self.data_spec.to_json() if self.data_spec else "",
            resume_step=P.NO_STEP,
            run_seed=self.seed,
            checkpoint_root="",
            n_parties=self.n_parties,
        ).to_content()
        replies = self.exchange(grid, [Message(content, n, P.DL_SETUP) for n in nodes], "setup")
        order, n_rows, configs = setup_replies(replies, self.n_parties)
        self.name_parties(order)
        bits = []
        for pid, cfg in enumerate(configs):
            try:
                bits.append(DPLTSetupReply.bits_of(cfg))
            except ProtocolError as exc:
                raise RunStopped(f"party {pid} sent a malformed setup reply: {exc}") from exc
        assert self.config.dp.target_epsilon is not None  # __init__
        plan = BudgetPlan.of(self.config.dp.target_epsilon, bits, self.config.dplt)
        log.info(
            "dplt: %d bits in %d latent attributes, %d grouping choices at epsilon %.4g each",
            sum(bits),
            plan.latents,
            plan.selections,
            plan.selection_epsilon,
        )
        settings = self.config.dplt
        counts = [
            [state_count(n, settings) for n in group_sizes(b, settings.group_size)] for b in bits
        ]
        return _Run(grid, order, n_rows, plan, bits, started, 1 + agreed, counts)

    def train(self, run: _Run) -> None:
        """The latents' exchange, then the tree (steps 2-4 on the server)."""
        begun = time.monotonic()
        plan = run.plan
        request = LatentsRequest(plan.epsilon, plan.selections, plan.latents).to_content()
        replies = self.exchange(
            run.grid, [Message(request, n, P.DL_LATENTS) for n in run.order], "latents"
        )
        run.exchanges += 1
        blocks = []
        for node, bits, expected in zip(run.order, run.bits, run.counts, strict=True):
            try:
                reply = LatentsReply.from_content(replies[node].content, run.n_rows)
            except ProtocolError as exc:
                raise RunStopped(f"{self.party(node)} sent malformed latents: {exc}") from exc
            # Its groups and their states follow from its bit count and the settings:
            # anything else (or a count that would make huge tables) stops the run.
            if list(reply.counts) != expected:
                raise RunStopped(
                    f"{self.party(node)} sent latent attributes of {list(reply.counts)} states; "
                    f"its {bits} bits make {expected} (dplt settings differ between the parties?)"
                )
            blocks.append(reply.states)
        latents = np.concatenate(blocks, axis=1)
        run.phases["latents"] = time.monotonic() - begun
        begun = time.monotonic()
        states = [c for counts in run.counts for c in counts]
        run.tree = LatentTree.fit(latents, states, plan, server_noise(self.seed))
        run.phases["tree"] = time.monotonic() - begun
        log.info("dplt: tree over %d latent attributes, edges %s", plan.latents, run.tree.edges)

    def conclude(self, run: _Run, train_seconds: float) -> VFLGANResult:
        """Sample the tree, send each party its latent columns, join the decoded columns
        and shuffle the rows."""
        assert run.tree is not None
        rows = self.publish_rows or run.n_rows
        begun = time.monotonic()
        sampled = run.tree.sample(rows, server_sampling(self.seed))
        bounds = np.cumsum([len(c) for c in run.counts])[:-1]
        messages = [
            Message(DecodeRequest(np.ascontiguousarray(s)).to_content(), node, P.DL_DECODE)
            for s, node in zip(np.split(sampled, bounds, axis=1), run.order, strict=True)
        ]
        replies = self.exchange(run.grid, messages, "publication")
        table, parties = collect_published(replies, run.order, rows, private=True)
        run.phases["publication"] = time.monotonic() - begun
        permutation = numpy_generator(self.seed, Stream.PUBLISH).permutation(rows)
        return VFLGANResult(
            synthetic=table.iloc[permutation].reset_index(drop=True),
            steps=run.plan.latents,
            exchanges=run.exchanges + 1,
            wall_seconds=time.monotonic() - run.started,
            n_rows=run.n_rows,
            train_seconds=train_seconds,
            privacy=[privacy_account(run.plan, self.config, parties)],
            phases=run.phases,
        )


def privacy_account(
    plan: BudgetPlan, config: VFLGANConfig, parties: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The run's one account: every party's releases as the party reports them and the
    server's, composed (they are about the same rows), each computed back from the noise
    scales used.

    Raises
    ------
    RunStopped
        The parties' and the server's spends do not add up to the plan's.
    """
    spent, server = plan.spent(), plan.server_spent()
    total = sum(float(p["epsilon"]) for p in parties) + server["epsilon"]
    if abs(total - spent["total"]) > 1e-9 * max(1.0, spent["total"]):
        raise RunStopped(
            f"the parties report epsilon {total - server['epsilon']:.6g} and the server spent "
            f"{server['epsilon']:.6g}, which is not the plan's {spent['total']:.6g}"
        )
    return {
        "party": "all parties and the server",
        "epsilon": total,
        "by_holder": [*parties, {"party": "server", **server}],
        "target_epsilon": plan.epsilon,
        "delta": 0.0,
        "accountant": "pure-composition",
        "conversion": "none (pure epsilon-DP)",
        "neighbours": "replace one row",
        "mechanism": "dplt",
        "steps": plan.latents,
        "selections": plan.selections,
        "selection_epsilon": plan.selection_epsilon,
        "pairs": plan.pairs,
        "pair_scale": plan.pair_scale,
        "parameter_scale": plan.parameter_scale,
        "spent_by_step": {k: v for k, v in spent.items() if k != "total"},
        "budget_split": list(config.dplt.budget_split),
    }
