"""One exchange: push a message to every involved node, then poll for every reply.

``Grid.send_and_receive`` sleeps 3 s between polls in a deployment; this loop polls
with a short interval instead, drops answered message ids (pulling one again returns an
error reply), stops at the first error reply with the party's reason, and gives up
after ``timeout`` seconds naming the nodes that did not answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from flwr.app import Message
from flwr.serverapp import Grid


class RunStopped(RuntimeError):
    """The run cannot continue; the message says why (and which party, if one failed)."""


def exchange(
    grid: Grid,
    messages: Sequence[Message],
    *,
    poll_interval: float = 0.001,
    timeout: float = 600.0,
    describe: str = "exchange",
) -> dict[int, Message]:
    """Push ``messages`` (at most one per node) and return the replies keyed by node id.

    Raises
    ------
    RunStopped
        A node answered with an error, or not all nodes answered within ``timeout``.
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
    while pending:
        for reply in grid.pull_messages(list(pending)):
            message_id = reply.metadata.reply_to_message_id
            if message_id not in pending:
                continue
            pending.discard(message_id)
            node = node_of[message_id]
            if reply.has_error():
                raise RunStopped(
                    f"{describe}: node {node} replied with an error: {reply.error.reason}"
                )
            replies[node] = reply
        if pending:
            if time.monotonic() > deadline:
                missing = sorted(node_of[i] for i in pending)
                raise RunStopped(
                    f"{describe}: no reply from nodes {missing} within {timeout:.0f} s"
                )
            time.sleep(poll_interval)
    return replies


def wait_for_nodes(grid: Grid, n_nodes: int, timeout: float) -> list[int]:
    """The sorted ids of exactly ``n_nodes`` connected nodes, waiting up to ``timeout`` s.

    Raises
    ------
    RunStopped
        More nodes are connected than the run has parties, or too few within the timeout.
    """
    deadline = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= n_nodes:
            if len(nodes) > n_nodes:
                raise RunStopped(
                    f"{len(nodes)} nodes are connected but the run has {n_nodes} parties"
                )
            return nodes
        if time.monotonic() > deadline:
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
