"""What every strategy of the project shares: its nodes, its seed, its data, how it
exchanges messages with the nodes, and the shape of a run.

A family's strategy subclasses :class:`VerticalStrategy`, stores its own validated
settings, and fills in the steps of :meth:`~VerticalStrategy.start`, the template every
family follows (as Flower's own ``Strategy.start``): ``prepare`` (the setup handshake
and what training needs), ``train`` (the loop of exchanges with its evaluations,
best-model rule and checkpoints) and ``conclude`` (publication and the result). It calls
:meth:`~VerticalStrategy.exchange` for every push-and-poll round: the poll interval, the
timeout, the node wait and the party names in errors are written here once.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

import numpy as np
from flwr.app import Message, RecordDict
from flwr.serverapp import Grid

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.faults import pause_point
from flwr_vflgan.runtime.messages import KeyOffer, KeyOpen, KeySeal
from flwr_vflgan.runtime.party_data import DataSpec

from .alignment import lead_alignment, relay_alignment
from .exchange import (
    DEFAULT_POLL_INTERVAL,
    PartyLost,
    RunStopped,
    check_strategy_args,
    exchange,
    wait_for_nodes,
)

if TYPE_CHECKING:
    from typing import NotRequired

    from typing_extensions import Unpack

    __all__ = ["Unpack"]

log = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]
RunT = TypeVar("RunT")
"""A family's state of one run, from ``prepare`` to ``conclude``."""
ResultT = TypeVar("ResultT")


TICK_SECONDS = 5.0
"""Least time between two ticks of a long epoch's progress (:meth:`VerticalStrategy.tick`)."""

MAX_REJOINS = 3
"""Losses of a party one run survives: a party that dies at the same place again and
again (out of memory, say) stops the run instead of looping."""

PROGRESS_RECORD = {"progress": True}
"""``extra`` of a log record that repeats what the ``progress`` callback reports (an
epoch's line): a command line that prints the callback's lines filters these from its
console and keeps them in its log file."""


class StrategyArgs(TypedDict):
    """The keyword arguments every family's strategy takes and hands to
    :class:`VerticalStrategy` (documented there); a family's ``__init__`` takes them as
    ``**common: Unpack[StrategyArgs]``."""

    n_parties: int
    seed: NotRequired[int]
    data_spec: NotRequired[DataSpec | None]
    publish_rows: NotRequired[int | None]
    poll_interval: NotRequired[float]
    timeout: NotRequired[float]
    node_wait_timeout: NotRequired[float]
    progress: NotRequired[Progress | None]
    key_agreement: NotRequired[bool]
    rejoin_grace: NotRequired[float]
    align_ids: NotRequired[bool]


class VerticalStrategy(ABC, Generic[RunT, ResultT]):
    """The node count, seed, data spec and exchange settings of a vertical run, and the
    template of its ``start``.

    Parameters
    ----------
    n_parties
        Number of parties (nodes); the run waits for that many.
    seed
        The server's own seed.
    data_spec
        Table and column split for simulated parties; ``None`` in a deployment, where
        each party reads its own file.
    publish_rows
        Rows of a published synthetic table (``None``: as many as the training table).
    poll_interval
        Longest wait between two reply pulls, in seconds (pulls back off from 1 ms).
    timeout
        Seconds one exchange may take before the run stops, naming the silent nodes.
    node_wait_timeout
        Seconds to wait for ``n_parties`` nodes to connect.
    progress
        Called with a record after every evaluation (family-specific fields).
    key_agreement
        Before setup, let the parties agree on their shared seed among themselves
        (X25519, the server relays public keys and sealed seeds:
        :mod:`flwr_vflgan.runtime.keys`) instead of each reading one from its settings.
    rejoin_grace
        Seconds a run waits for a lost party (its node unavailable or silent past
        ``timeout``) to come back, restarted, before it stops; the run then resumes
        every party from the last checkpoint (families with checkpoints only). 0: stop
        at once.
    align_ids
        Before setup, align the parties' rows by ID through a private set intersection
        (:mod:`flwr_vflgan.runtime.psi`): parties holding different people train on the
        people they share, in one order, and learn nothing else of each other's IDs.
    min_parties
        The fewest parties the family trains with.

    Raises
    ------
    ValueError
        An argument breaks its rule; the message names it.
    """

    def __init__(
        self,
        *,
        n_parties: int,
        seed: int = 0,
        data_spec: DataSpec | None = None,
        publish_rows: int | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float = 600.0,
        node_wait_timeout: float = 120.0,
        progress: Progress | None = None,
        key_agreement: bool = False,
        rejoin_grace: float = 180.0,
        align_ids: bool = False,
        min_parties: int = 1,
    ) -> None:
        check_strategy_args(
            n_parties,
            data_spec.n_parties if data_spec is not None else None,
            publish_rows,
            poll_interval,
            timeout,
            node_wait_timeout,
            seed,
            min_parties=min_parties,
        )
        self.n_parties = n_parties
        self.seed = seed
        self.data_spec = data_spec
        self.publish_rows = publish_rows
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.node_wait_timeout = node_wait_timeout
        self.progress = progress
        if not rejoin_grace >= 0:
            raise ValueError(f"rejoin_grace must be >= 0 seconds, got {rejoin_grace!r}")
        self.key_agreement = key_agreement
        self.rejoin_grace = rejoin_grace
        self.align_ids = align_ids
        self.party_names: dict[int, str] = {}
        self.tick_seconds = TICK_SECONDS
        self._last_tick = 0.0

    def name_parties(self, order: Sequence[int], word: str = "party") -> None:
        """Name each node of ``order`` (node ids by partition id) in every later error:
        ``party 1 (node 8123...)``, where Flower's node id alone tells an operator little."""
        self.party_names = {node: f"{word} {i} (node {node})" for i, node in enumerate(order)}

    def party(self, node: int) -> str:
        """How errors name ``node``: its party once setup has named it."""
        return self.party_names.get(node, f"node {node}")

    def wait_for_nodes(self, grid: Grid) -> list[int]:
        """The ids of exactly ``n_parties`` connected nodes (waits up to the timeout)."""
        return wait_for_nodes(grid, self.n_parties, self.node_wait_timeout)

    def exchange(
        self, grid: Grid, messages: Sequence[Message], describe: str
    ) -> dict[int, Message]:
        """Push ``messages`` (one per node) and return every reply, keyed by node id."""
        return exchange(
            grid,
            messages,
            poll_interval=self.poll_interval,
            timeout=self.timeout,
            describe=describe,
            names=self.party_names,
        )

    # -- the template ---------------------------------------------------------------------
    def start(self, grid: Grid) -> ResultT:
        """Run the family's protocol over ``grid`` and return its result.

        Waits for the nodes, then ``prepare`` (setup), ``train`` (timed alone: the
        result's ``train_seconds``, with any wait for a lost party) and ``conclude``
        (publication). A party lost in any of them
        (:class:`~flwr_vflgan.strategies.exchange.PartyLost`) may rejoin: :meth:`rejoin`.

        Raises
        ------
        RunStopped
            A party failed or misbehaved, or nodes did not answer in time; the message
            says which and why.
        """
        started = time.monotonic()
        log.info("%s", self.summary())
        nodes = self.wait_for_nodes(grid)
        losses = 0
        pause_point("server-setup")
        try:
            run = self.prepare(grid, nodes, started)
        except PartyLost as lost:
            run = self.rejoin(grid, lost, losses, started)
            losses += 1
        loop_started = time.monotonic()
        while True:
            try:
                self.train(run)
                pause_point("server-publication")
                return self.conclude(run, time.monotonic() - loop_started)
            except PartyLost as lost:
                run = self.rejoin(grid, lost, losses, started)
                losses += 1

    def cannot_resume(self) -> str | None:
        """Why ``prepare`` could not resume this run from the last checkpoint of every
        holder, so that a lost party cannot rejoin; ``None`` when it can. Families
        without checkpoints say so."""
        return f"{type(self).__name__} keeps no checkpoints"

    def rejoin(self, grid: Grid, lost: PartyLost, losses: int, started: float) -> RunT:
        """After ``lost`` (at setup, in training or at publication; ``losses`` before it),
        wait up to :attr:`rejoin_grace` seconds for all parties to be connected again
        (the lost one restarted, under any node id) and set them up anew from the last
        checkpoint: every party and the server roll back to it, and the steps since are
        done again, exactly (their random draws are the steps' own).

        Raises
        ------
        RunStopped
            The family cannot resume within a run, the grace is 0 or has passed, or
            parties were lost :data:`MAX_REJOINS` times; the message says how to resume.
        """
        again = (
            "run the same command again in the same run directory to resume from the last "
            "checkpoint"
        )
        refusal = self.cannot_resume()
        if refusal is not None:
            raise RunStopped(f"{lost}; the run cannot take the party back: {refusal}")
        if losses >= MAX_REJOINS:
            raise RunStopped(f"{lost}; parties were lost {losses + 1} times: stopping ({again})")
        if self.rejoin_grace == 0:
            raise RunStopped(f"{lost}; runtime.rejoin_grace is 0: {again}")
        log.warning("%s; waiting up to %.0f s for it to rejoin", lost, self.rejoin_grace)
        deadline = time.monotonic() + self.rejoin_grace
        timeout = self.timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RunStopped(
                    f"{lost}; the parties were not all back within runtime.rejoin_grace = "
                    f"{self.rejoin_grace:.0f} s: {again}"
                )
            nodes = sorted(grid.get_node_ids())
            if len(nodes) != self.n_parties:
                time.sleep(min(0.2, remaining))
                continue
            # A node the grid still lists may be the lost one before its heartbeat
            # expires: its setup then fails the same way, and the loop waits on.
            self.timeout = min(timeout, max(remaining, 1.0))
            try:
                resumed = self.prepare(grid, nodes, started)
            except PartyLost as again_lost:
                log.warning("%s; still waiting", again_lost)
                time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
                continue
            finally:
                self.timeout = timeout
            log.info("all %d parties are back: resumed from the last checkpoint", self.n_parties)
            return resumed

    def summary(self) -> str:
        """One line describing the configured run (logged as it starts)."""
        return f"{type(self).__name__}({self.n_parties} parties, seed {self.seed})"

    @abstractmethod
    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> RunT:
        """The setup handshake with ``nodes`` and whatever training needs; returns the
        run's state. ``started`` is the run's start (``time.monotonic()``)."""

    @abstractmethod
    def train(self, run: RunT) -> None:
        """The training loop's exchanges."""

    @abstractmethod
    def conclude(self, run: RunT, train_seconds: float) -> ResultT:
        """Publication and the run's result."""

    def tick(self, step: int, total_steps: int, started: float) -> None:
        """Within a long epoch, tell ``progress`` how far training is: a record with
        ``tick`` set, the steps done and the total, at most every :attr:`tick_seconds`
        and not before the run is that old (the command line draws it as a progress
        bar). A ``progress`` callback that reads evaluation fields skips these."""
        now = time.monotonic()
        if self.progress is None or now - max(self._last_tick, started) < self.tick_seconds:
            return
        self._last_tick = now
        self.progress(
            {"tick": True, "step": step, "total_steps": total_steps, "elapsed": now - started}
        )

    def before_setup(self, grid: Grid, nodes: Sequence[int]) -> int:
        """The exchanges a family's ``prepare`` runs before its setup: the parties agree
        on their shared seed (``key_agreement``), then align their rows by ID
        (``align_ids``). Returns the exchanges they took."""
        taken = self.agree_shared_seed(grid, nodes) if self.key_agreement else 0
        if self.align_ids:
            taken += self.align_rows(grid, nodes)
        return taken

    # -- row alignment by ID ----------------------------------------------------------------
    def align_rows(self, grid: Grid, nodes: Sequence[int]) -> int:
        """Relay the parties' private set intersection of their IDs, party 0 leading
        (:func:`~.alignment.relay_alignment`); returns the exchanges it took (4).

        Raises
        ------
        RunStopped
            A party refused or sent a malformed answer, or no ID is common to all.
        """
        return relay_alignment(self, grid, nodes, series=self.aligns_series)

    @property
    def aligns_series(self) -> bool:
        """Whether the parties' files hold series (VFLGAN-TS), whose IDs are their
        ``series`` column."""
        return False

    def align_to_ids(
        self, grid: Grid, nodes: Sequence[int], ids: Sequence[object]
    ) -> tuple[int, np.ndarray]:
        """The private set intersection with the parties, led by the server, which holds
        ``ids`` (:func:`~.alignment.lead_alignment`): the exchanges it took (3) and the
        server's rows of the common IDs in its own order.

        Raises
        ------
        RunStopped
            A party refused or sent a malformed answer, or no ID is common to all.
        """
        return lead_alignment(self, grid, nodes, ids)

    # -- the parties' shared seed -----------------------------------------------------------
    def agree_shared_seed(self, grid: Grid, nodes: Sequence[int]) -> int:
        """Relay the parties' shared-seed agreement (:mod:`flwr_vflgan.runtime.keys`):
        their public keys to all, the leader's sealed seeds to the others. The server
        sees public keys and ciphertexts only; setup then checks that every party holds
        the same seed. Returns the exchanges it took (3, or 2 with one party).

        Raises
        ------
        RunStopped
            A party refused (a pinned key differs, a seal does not open) or sent a
            malformed answer; the message names it.
        """
        offers = self.exchange(
            grid, [Message(RecordDict(), n, P.KEY_OFFER) for n in nodes], "key offers"
        )
        by_partition: dict[int, tuple[int, bytes]] = {}
        for node, reply in offers.items():
            try:
                offer = KeyOffer.from_content(reply.content)
            except ProtocolError as exc:
                raise RunStopped(f"node {node} sent a malformed key offer: {exc}") from exc
            by_partition[offer.partition_id] = (node, offer.public_key)
        if sorted(by_partition) != list(range(len(nodes))):
            raise RunStopped(
                f"key offers came from partitions {sorted(by_partition)}, expected "
                f"0..{len(nodes) - 1} once each"
            )
        order = [by_partition[p][0] for p in range(len(nodes))]
        relay = KeySeal([by_partition[p][1] for p in range(len(nodes))], self.seed).to_content()
        replies = self.exchange(grid, [Message(relay, n, P.KEY_SEAL) for n in order], "key relay")
        try:
            sealed = KeySeal.read_reply(replies[order[0]].content, len(nodes))
        except ProtocolError as exc:
            raise RunStopped(
                f"party 0 (node {order[0]}) sent malformed sealed seeds: {exc}"
            ) from exc
        if len(nodes) == 1:
            return 2
        opens = [
            Message(KeyOpen(sealed[p]).to_content(), n, P.KEY_OPEN)
            for p, n in enumerate(order)
            if p
        ]
        self.exchange(grid, opens, "sealed seeds")
        return 3
