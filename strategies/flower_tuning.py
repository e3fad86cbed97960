"""Settings of Flower's own transfer code that cost seconds per exchange, tuned for the
ServerApp of a deployment.

A reply becomes visible at the SuperLink as soon as its node announces it, before the
node has pushed the reply's objects. Flower's ``pull_objects`` then waits 1 s (doubling
up to 10 s) before it asks again for an object that is not there yet: with an exchange
that otherwise costs tens of milliseconds, one such race costs more than the exchange.
Flower offers no setting for it (flwr 1.41-1.42), so :func:`prompt_object_pulls` lowers
the keyword defaults of ``flwr.supercore.inflatable.inflatable_utils.pull_objects`` for
the duration of a run, in the ServerApp's own process, and restores them after.
``tests/unit/strategies/test_flower_tuning.py`` fails if an upgrade of flwr removes them.
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
