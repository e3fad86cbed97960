"""Settings of Flower's own transfer code that cost more per exchange than the exchange,
tuned for this project's runs.

A reply becomes visible at the SuperLink as soon as its node announces it, before the
node has pushed the reply's objects. Flower's ``pull_objects`` then waits 1 s (doubling
up to 10 s) before it asks again for an object that is not there yet: with an exchange
that otherwise costs tens of milliseconds, one such race costs more than the exchange.
Flower offers no setting for it (flwr 1.41-1.42), so :func:`prompt_object_pulls` lowers
the keyword defaults of ``flwr.supercore.inflatable.inflatable_utils.pull_objects`` for
the duration of a run, in the ServerApp's own process, and restores them after.

Flower's simulation engine moves pushed messages from its link state to the ClientApp
workers in a thread that looks every 0.1 s (``vce_api.add_messages_to_queue``): an
exchange waits 50 ms on average, up to 100 ms, before any node sees it.
:func:`prompt_simulation_delivery` runs the same loop every 5 ms while
``simulations.run runtime=simulation`` drives the engine in its own process (``flwr run
. local`` starts the engine in Flower's process, where it does not apply).

``tests/unit/strategies/test_flower_tuning.py`` fails if an upgrade of flwr changes what
these rely on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

FIRST_RETRY = 0.002
RETRY_CAP = 0.05


@contextmanager
def prompt_object_pulls(first: float = FIRST_RETRY, cap: float = RETRY_CAP) -> Iterator[None]:
    """Within the block, retry an object that is not yet available after ``first``
    seconds, doubling up to ``cap``; Flower's own defaults are restored on exit."""
    from flwr.supercore.inflatable import inflatable_utils

    defaults = inflatable_utils.pull_objects.__kwdefaults__
    if defaults is None or not {"initial_backoff", "backoff_cap"} <= set(defaults):
        raise RuntimeError(
            "flwr's pull_objects no longer takes initial_backoff/backoff_cap keywords: "
            "check strategies/flower_tuning.py against this flwr version"
        )
    saved = dict(defaults)
    defaults.update(initial_backoff=first, backoff_cap=cap)
    try:
        yield
    finally:
        defaults.clear()
        defaults.update(saved)


SIMULATION_DELIVERY = 0.005
"""Seconds between two looks for pushed messages in the simulation engine (Flower: 0.1)."""


@contextmanager
def prompt_simulation_delivery(interval: float = SIMULATION_DELIVERY) -> Iterator[None]:
    """Within the block, Flower's simulation engine started in this process hands pushed
    messages to its workers every ``interval`` seconds; Flower's loop is restored on exit."""
    import threading
    from queue import Queue

    from flwr.server.superlink.fleet.vce import vce_api

    original = vce_api.add_messages_to_queue

    def add_messages_to_queue(
        state: object, queue: Queue, nodes_mapping: dict, f_stop: threading.Event
    ) -> None:
        # Flower's loop (flwr 1.41-1.42), with its 0.1 s wait replaced.
        while not f_stop.is_set():
            for node_id in nodes_mapping:
                for msg in state.get_message_ins(node_id=node_id, limit=1):  # type: ignore[attr-defined]
                    queue.put(msg)
            f_stop.wait(interval)

    vce_api.add_messages_to_queue = add_messages_to_queue
    try:
        yield
    finally:
        vce_api.add_messages_to_queue = original
