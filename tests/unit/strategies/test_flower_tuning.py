"""The ServerApp's tuning of Flower's object pulls: applied inside, restored after."""

from __future__ import annotations

import inspect

import pytest
from flwr.supercore.inflatable import inflatable_utils

from flwr_vflgan.strategies.flower_tuning import prompt_object_pulls


def test_object_pull_retries_are_prompt_inside_and_flowers_outside():
    defaults = inflatable_utils.pull_objects.__kwdefaults__
    assert defaults is not None
    before = dict(defaults)
    # Flower's own first retry is 1 s: the reason for the tuning.
    assert before["initial_backoff"] >= 1
    with prompt_object_pulls():
        assert defaults["initial_backoff"] == 0.002 and defaults["backoff_cap"] == 0.05
    assert inflatable_utils.pull_objects.__kwdefaults__ == before


def test_defaults_are_restored_when_the_run_fails():
    before = dict(inflatable_utils.pull_objects.__kwdefaults__ or {})
    with pytest.raises(RuntimeError, match="boom"), prompt_object_pulls():
        raise RuntimeError("boom")
    assert inflatable_utils.pull_objects.__kwdefaults__ == before


def test_the_grid_calls_the_tuned_function_object():
    """The deployment grid imports pull_objects by name: the same function object."""
    from flwr.superlink.grid import http_grid

    assert http_grid.pull_objects is inflatable_utils.pull_objects


def test_simulation_delivery_loop_is_replaced_inside_and_restored_after():
    import inspect

    from flwr.server.superlink.fleet.vce import vce_api

    from flwr_vflgan.strategies.flower_tuning import prompt_simulation_delivery

    original = vce_api.add_messages_to_queue
    # The loop this replaces: if Flower changes it, check flower_tuning.py against it.
    assert list(inspect.signature(original).parameters) == [
        "state",
        "queue",
        "nodes_mapping",
        "f_stop",
    ]
    source = inspect.getsource(original)
    assert "get_message_ins(node_id=node_id, limit=1)" in source and "f_stop.wait(0.1)" in source
    with prompt_simulation_delivery():
        assert vce_api.add_messages_to_queue is not original
    assert vce_api.add_messages_to_queue is original


def test_the_replacement_delivers_every_pushed_message_and_waits_the_interval():
    from queue import Queue

    from flwr.server.superlink.fleet.vce import vce_api

    from flwr_vflgan.strategies.flower_tuning import prompt_simulation_delivery

    class State:
        def __init__(self) -> None:
            self.pending = {1: ["a", "b"], 2: ["c"]}

        def get_message_ins(self, node_id: int, limit: int) -> list[str]:
            taken = self.pending[node_id][:limit]
            self.pending[node_id] = self.pending[node_id][limit:]
            return taken

    class Stop:
        """Stops the loop after its third wait; records how long each wait was."""

        def __init__(self) -> None:
            self.waits: list[float] = []

        def is_set(self) -> bool:
            return len(self.waits) >= 3

        def wait(self, seconds: float) -> bool:
            self.waits.append(seconds)
            return self.is_set()

    queue: Queue = Queue()
    stop = Stop()
    with prompt_simulation_delivery(interval=0.004):
        vce_api.add_messages_to_queue(State(), queue, {1: 0, 2: 1}, stop)
    assert [queue.get_nowait() for _ in range(3)] == ["a", "c", "b"]  # one per node a look
    assert stop.waits == [0.004] * 3


def test_the_rejoin_grace_outlasts_flowers_dead_node_window():
    """A lost party is seen only after the SuperLink drops it (HEARTBEAT_PATIENCE missed
    intervals); until then a restarted node is listed beside its dead predecessor. The
    default grace must outlast that window with Flower's own interval (the deployment
    tests shorten it to 10 s: tests/integration/flower_site)."""
    from flwr.common import constant

    from flwr_vflgan.simulations.config import RuntimeConfig
    from flwr_vflgan.strategies.base import VerticalStrategy

    window = constant.HEARTBEAT_PATIENCE * constant.HEARTBEAT_DEFAULT_INTERVAL
    assert constant.HEARTBEAT_DEFAULT_INTERVAL == 30  # Flower's, unpatched in this process
    grace = inspect.signature(VerticalStrategy.__init__).parameters["rejoin_grace"].default
    assert grace == RuntimeConfig().rejoin_grace
    assert grace >= 2 * window, (grace, window)
