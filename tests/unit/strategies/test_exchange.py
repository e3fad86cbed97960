"""One exchange's failure modes: a silent node and an error reply stop the run naming
the party, in bounded time."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from flwr.common.constant import ErrorCode

from flwr_vflgan.strategies.exchange import PartyLost, RunStopped, exchange


def _messages(*nodes: int) -> list:
    """What ``exchange`` reads of a message: its destination."""
    return [SimpleNamespace(metadata=SimpleNamespace(dst_node_id=node)) for node in nodes]


class _Grid:
    """Accepts every message; node 2 never answers, node 3 answers with an error, node 4
    is unavailable (as a SuperLink answers for a node whose heartbeat stopped)."""

    def __init__(self) -> None:
        self.pushed: list = []

    def push_messages(self, messages):
        self.pushed = list(messages)
        return [f"m{i}" for i in range(len(messages))]

    def pull_messages(self, ids):
        replies = []
        for i, message in enumerate(self.pushed):
            node = message.metadata.dst_node_id
            if f"m{i}" not in ids or node == 2:
                continue
            error = {
                3: SimpleNamespace(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason="disk full"),
                4: SimpleNamespace(code=ErrorCode.NODE_UNAVAILABLE, reason="no heartbeat"),
            }.get(node)
            replies.append(
                SimpleNamespace(
                    metadata=SimpleNamespace(reply_to_message_id=f"m{i}"),
                    has_error=lambda error=error: error is not None,
                    error=error,
                )
            )
        return replies


def test_a_silent_node_stops_the_exchange_at_its_timeout_naming_the_party() -> None:
    started = time.monotonic()
    names = {2: "party 1 (node 2)"}
    with pytest.raises(
        PartyLost, match=r"setup: no reply from party 1 \(node 2\) within 0 s"
    ) as lost:
        exchange(
            _Grid(), _messages(1, 2), timeout=0.3, poll_interval=0.05, describe="setup", names=names
        )
    assert time.monotonic() - started < 2.0
    assert lost.value.nodes == (2,)


def test_an_error_reply_stops_the_exchange_with_its_reason() -> None:
    names = {3: "party 2 (node 3)"}
    with pytest.raises(
        RunStopped, match=r"step 4: party 2 \(node 3\) replied with an error"
    ) as stopped:
        exchange(_Grid(), _messages(1, 3), timeout=5, describe="step 4", names=names)
    # A party's own error is not a lost party: nothing to wait for.
    assert not isinstance(stopped.value, PartyLost)


def test_an_unavailable_node_is_a_lost_party() -> None:
    with pytest.raises(PartyLost, match=r"step 4: party 3 \(node 4\) is unavailable") as lost:
        exchange(
            _Grid(), _messages(1, 4), timeout=5, describe="step 4", names={4: "party 3 (node 4)"}
        )
    assert lost.value.nodes == (4,)


def test_two_messages_for_one_node_are_refused() -> None:
    with pytest.raises(ValueError, match="more than one message for a node in one exchange"):
        exchange(_Grid(), _messages(1, 1))


class _Nodes:
    """A grid whose connected nodes change over time, one list per call (the last repeats)."""

    def __init__(self, *lists: list[int]) -> None:
        self.lists = list(lists)

    def get_node_ids(self) -> list[int]:
        return self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]


def test_wait_for_nodes_waits_out_a_dead_node_the_superlink_still_lists() -> None:
    """A node restarted just before the run is listed beside its dead predecessor until
    the SuperLink drops it: the run waits for the count to be right."""
    from flwr_vflgan.strategies.exchange import wait_for_nodes

    grid = _Nodes([7], [7, 8, 9], [7, 8, 9], [9, 7])
    assert wait_for_nodes(grid, 2, timeout=5.0) == [7, 9]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([1, 2, 3], r"3 nodes were still connected after 0 s but the run has 2 parties: stop"),
        ([1], r"only 1 of 2 nodes connected within 0 s"),
    ],
)
def test_wait_for_nodes_stops_at_its_timeout_with_too_many_or_too_few(nodes, message) -> None:
    from flwr_vflgan.strategies.exchange import wait_for_nodes

    started = time.monotonic()
    with pytest.raises(RunStopped, match=message):
        wait_for_nodes(_Nodes(nodes), 2, timeout=0.3)  # type: ignore[arg-type]
    assert time.monotonic() - started < 2.0
