"""One exchange: push a message to every involved node, then poll for every reply.

``Grid.send_and_receive`` sleeps 3 s between polls in a deployment; this loop polls
with a short interval instead, drops answered message ids (pulling one again returns an
error reply), stops at the first error reply with the party's reason, and gives up
after ``timeout`` seconds naming the nodes that did not answer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from flwr.app import ConfigRecord, Message
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid

from flwr_vflgan.data.alignment import check_aligned
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError, get_config
from flwr_vflgan.runtime.messages import SetupReply

DEFAULT_POLL_INTERVAL = 0.05
"""Longest wait between two pulls of one exchange, in seconds. Pulls start 1 ms after the
push and back off by half each time up to this: a quick reply is seen within
milliseconds, and a waiting run costs a shared SuperLink at most about 20 pulls a second
(the 1 ms of earlier releases cost it about 1000)."""

_FIRST_POLL = 0.001
_BACKOFF = 1.5


class RunStopped(RuntimeError):
    """The run cannot continue; the message says why (and which party, if one failed)."""


class PartyLost(RunStopped):
    """Nodes stopped answering: the SuperLink reports them unavailable (their process
    died; no heartbeat) or they stayed silent past the exchange's timeout. Unlike a
    party's error reply, this may pass: a restarted party can rejoin the run
    (:meth:`~flwr_vflgan.strategies.base.VerticalStrategy.start`).

    ``nodes`` are the lost nodes' ids.
    """

    def __init__(self, message: str, nodes: Sequence[int]) -> None:
        super().__init__(message)
        self.nodes = tuple(nodes)


def exchange(
    grid: Grid,
    messages: Sequence[Message],
    *,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    timeout: float = 600.0,
    describe: str = "exchange",
    names: Mapping[int, str] | None = None,
) -> dict[int, Message]:
    """Push ``messages`` (at most one per node) and return the replies keyed by node id.

    Replies are pulled 1 ms after the push, then at intervals growing by half up to
    ``poll_interval`` seconds. ``names`` says how errors name a node (its party).

    Raises
    ------
    PartyLost
        The grid reports a node unavailable, or not all nodes answered within ``timeout``.
    RunStopped
        A node answered with an error of its own.
    """
    destinations = [m.metadata.dst_node_id for m in messages]
    if len(set(destinations)) != len(destinations):
        raise ValueError(
            f"{describe}: more than one message for a node in one exchange: {destinations}"
        )
    ids = [str(i) for i in grid.push_messages(messages)]
    if len(ids) != len(messages) or any(not i for i in ids):
        raise RunStopped(f"{describe}: the grid accepted {len(ids)} of {len(messages)} messages")
    node_of = dict(zip(ids, destinations, strict=True))
    pending = set(ids)
    replies: dict[int, Message] = {}
    deadline = time.monotonic() + timeout
    delay = min(_FIRST_POLL, poll_interval)
    while pending:
        for reply in grid.pull_messages(list(pending)):
            message_id = reply.metadata.reply_to_message_id
            if message_id not in pending:
                continue
            pending.discard(message_id)
            node = node_of[message_id]
            if reply.has_error():
                who = (names or {}).get(node, f"node {node}")
                if reply.error.code == ErrorCode.NODE_UNAVAILABLE:
                    raise PartyLost(
                        f"{describe}: {who} is unavailable: {reply.error.reason}", [node]
                    )
                raise RunStopped(f"{describe}: {who} replied with an error: {reply.error.reason}")
            replies[node] = reply
        if pending:
            if time.monotonic() > deadline:
                missing = sorted(node_of[i] for i in pending)
                who = ", ".join((names or {}).get(n, f"node {n}") for n in missing)
                raise PartyLost(f"{describe}: no reply from {who} within {timeout:.0f} s", missing)
            time.sleep(delay)
            delay = min(delay * _BACKOFF, poll_interval)
    return replies


def wait_for_nodes(grid: Grid, n_nodes: int, timeout: float) -> list[int]:
    """The sorted ids of exactly ``n_nodes`` connected nodes, waiting up to ``timeout`` s.

    Too many nodes are waited on as well: a node restarted shortly before the run is
    listed beside its dead predecessor until the SuperLink drops that one (after two
    missed heartbeats, about a minute).

    Raises
    ------
    RunStopped
        Too few, or too many, nodes connected when the timeout passes.
    """
    deadline = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) == n_nodes:
            return nodes
        if time.monotonic() > deadline:
            if len(nodes) > n_nodes:
                raise RunStopped(
                    f"{len(nodes)} nodes were still connected after {timeout:.0f} s but the "
                    f"run has {n_nodes} parties: stop the extra nodes (a node restarted "
                    "shortly before is listed beside its dead predecessor for about a minute)"
                )
            raise RunStopped(
                f"only {len(nodes)} of {n_nodes} nodes connected within {timeout:.0f} s"
            )
        time.sleep(0.2)


def check_strategy_args(
    n_parties: int,
    data_parties: int | None,
    publish_rows: int | None,
    poll_interval: float,
    timeout: float,
    node_wait_timeout: float,
    seed: int,
    min_parties: int,
) -> None:
    """The argument checks every strategy constructor shares.

    Raises
    ------
    ValueError
        Naming the argument, the rule and the value.
    """
    if not isinstance(n_parties, int) or n_parties < min_parties:
        raise ValueError(f"n_parties must be an integer >= {min_parties}, got {n_parties!r}")
    if data_parties is not None and data_parties != n_parties:
        raise ValueError(f"data_spec splits {data_parties} parties, n_parties={n_parties}")
    if publish_rows is not None and publish_rows < 1:
        raise ValueError(f"publish_rows must be >= 1, got {publish_rows}")
    if poll_interval <= 0 or timeout <= 0 or node_wait_timeout <= 0:
        raise ValueError("poll_interval, timeout and node_wait_timeout must be > 0")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def setup_replies(
    replies: Mapping[int, Message],
    n_parties: int,
    parties: str = "parties",
    reference: tuple[str, int] | None = None,
    shared_seed: bool = False,
) -> tuple[list[int], int, list[ConfigRecord]]:
    """Check the setup replies every strategy gets and order them by partition id.

    Every reply's config record names its ``partition_id``, ``n_rows``, ``id_digest`` and
    ``columns``; no column may be held by two parties (a party given another's file).
    ``reference`` is one more (digest, row count) the parties must match: the label
    party's IDs in split classification. With ``shared_seed`` every reply also carries a
    ``seed_commitment``, and all must be equal: parties started with different shared
    seeds would train to the end and publish rows that do not line up.

    Returns
    -------
    tuple
        The node ids by partition id, the common row count, and each reply's config
        record by partition id (for the strategy's own fields).

    Raises
    ------
    RunStopped
        A reply is malformed, partition ids are not ``0..n_parties-1`` exactly once, or
        the rows do not line up (the message names ``parties`` and the mismatch).
    """
    by_partition: dict[int, int] = {}
    configs: dict[int, ConfigRecord] = {}
    rows: dict[int, int] = {}
    digests: dict[int, str] = {}
    for node, reply in replies.items():
        try:
            cfg = get_config(reply.content, P.CONFIG)
            pid, rows_of_party, digest = SetupReply.common(cfg)
            rows[pid], digests[pid] = rows_of_party, digest
        except ProtocolError as exc:
            raise RunStopped(f"node {node} sent a malformed setup reply: {exc}") from exc
        if pid in by_partition:
            raise RunStopped(f"nodes {by_partition[pid]} and {node} both claim partition-id {pid}")
        by_partition[pid] = node
        configs[pid] = cfg
    expected = set(range(n_parties))
    if set(by_partition) != expected:
        raise RunStopped(
            f"partition ids must be {sorted(expected)}, the nodes reported {sorted(by_partition)}"
        )
    if reference is not None:
        # Checked like one more party's IDs (index -1 sorts first).
        digests, rows = {-1: reference[0], **digests}, {-1: reference[1], **rows}
    try:
        check_aligned(digests, rows)
    except ValueError as exc:
        what = " with the labels" if reference is not None else ""
        raise RunStopped(f"the {parties}' rows do not line up{what}: {exc}") from exc
    check_disjoint_columns(configs, parties)
    if shared_seed:
        check_shared_seed(configs, parties)
    order = sorted(by_partition)
    return [by_partition[p] for p in order], rows[order[0]], [configs[p] for p in order]


def check_shared_seed(configs: Mapping[int, ConfigRecord], parties: str = "parties") -> None:
    """Stop unless every setup reply commits to the same shared seed.

    Raises
    ------
    RunStopped
        A reply lacks its commitment, or the parties hold different shared seeds; the
        message groups the partition ids by seed.
    """
    groups: dict[str, list[int]] = {}
    for pid in sorted(configs):
        try:
            commitment = SetupReply.commitment_of(configs[pid])
        except ProtocolError as exc:
            raise RunStopped(f"partition {pid} sent a malformed setup reply: {exc}") from exc
        groups.setdefault(commitment, []).append(pid)
    if len(groups) > 1:
        split = " / ".join(str(pids) for pids in groups.values())
        raise RunStopped(
            f"the {parties} hold different shared seeds (partitions {split} agree among "
            "themselves): give every party the same node_config 'shared-seed' (python -m "
            "simulations.export_parties prints one), then start the run again"
        )


def check_disjoint_columns(configs: Mapping[int, ConfigRecord], parties: str = "parties") -> None:
    """Stop unless the parties' columns are disjoint (a vertical split).

    Raises
    ------
    RunStopped
        A reply lacks its column list, or two parties hold a column; the message names
        both partitions and the shared columns (the first five).
    """
    holders: dict[str, int] = {}
    shared: dict[tuple[int, int], list[str]] = {}
    for pid in sorted(configs):
        try:
            columns = SetupReply.columns_of(configs[pid])
        except ProtocolError as exc:
            raise RunStopped(f"partition {pid} sent a malformed setup reply: {exc}") from exc
        for name in columns:
            if name in holders:
                shared.setdefault((holders[name], pid), []).append(name)
            else:
                holders[name] = pid
    if shared:
        (first, second), names = next(iter(shared.items()))
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        raise RunStopped(
            f"partitions {first} and {second} both hold columns {names[:5]}{more}: each of the "
            f"{parties} must load its own block of columns (is one started with another's "
            "node_config 'data-path'?)"
        )
