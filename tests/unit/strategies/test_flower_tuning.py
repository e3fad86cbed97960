"""The ServerApp's tuning of Flower's object pulls: applied inside, restored after."""

from __future__ import annotations

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
