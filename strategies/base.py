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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

from flwr.app import Message
from flwr.serverapp import Grid

from flwr_vflgan.runtime.party_data import DataSpec

from .exchange import DEFAULT_POLL_INTERVAL, check_strategy_args, exchange, wait_for_nodes

if TYPE_CHECKING:
    from typing import NotRequired

    from typing_extensions import Unpack

    __all__ = ["Unpack"]

log = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]
RunT = TypeVar("RunT")
"""A family's state of one run, from ``prepare`` to ``conclude``."""
ResultT = TypeVar("ResultT")


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


class VerticalStrategy(Generic[RunT, ResultT]):
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
        self.party_names: dict[int, str] = {}

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
        result's ``train_seconds``) and ``conclude`` (publication).

        Raises
        ------
        RunStopped
            A party failed or misbehaved, or nodes did not answer in time; the message
            says which and why.
        """
        started = time.monotonic()
        log.info("%s", self.summary())
        nodes = self.wait_for_nodes(grid)
        run = self.prepare(grid, nodes, started)
        loop_started = time.monotonic()
        self.train(run)
        return self.conclude(run, time.monotonic() - loop_started)

    def summary(self) -> str:
        """One line describing the configured run (logged as it starts)."""
        return f"{type(self).__name__}({self.n_parties} parties, seed {self.seed})"

    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> RunT:
        """The setup handshake with ``nodes`` and whatever training needs; returns the
        run's state. ``started`` is the run's start (``time.monotonic()``)."""
        raise NotImplementedError

    def train(self, run: RunT) -> None:
        """The training loop's exchanges."""
        raise NotImplementedError

    def conclude(self, run: RunT, train_seconds: float) -> ResultT:
        """Publication and the run's result."""
        raise NotImplementedError
