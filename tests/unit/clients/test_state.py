"""A party kept in memory skips reloading the state it saved itself, and only then."""

from __future__ import annotations

import numpy as np
import torch
from flwr.app import ConfigRecord, Context, RecordDict

from flwr_vflgan.clients.state import load_flat, save_flat
from flwr_vflgan.runtime.flat import FlatState


def _state() -> tuple[torch.nn.Linear, torch.optim.Adam, FlatState]:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    return model, optimizer, FlatState([model], [optimizer])


def _context() -> Context:
    return Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})


def test_the_state_a_party_saved_is_not_copied_back_while_nothing_changed_it() -> None:
    *_, state = _state()
    context = _context()
    steps = save_flat(context, "flat", state)
    load_flat(context, "flat", state, steps, "party")
    assert state.loads == 0  # the very bytes it saved, nothing changed since


def test_any_change_since_the_save_or_other_bytes_make_the_party_load() -> None:
    model, optimizer, state = _state()
    context = _context()
    steps = save_flat(context, "flat", state)
    saved = state.to_numpy()
    # An optimizer step changes the parameters and Adam's moments in place.
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    assert not np.array_equal(state.to_numpy(), saved)
    load_flat(context, "flat", state, steps, "party")
    assert state.loads == 1 and np.array_equal(state.to_numpy(), saved)
    # The same values in another bytes object (a context copied, as Flower's simulation
    # engine and a new ClientApp process get it) are loaded.
    steps = save_flat(context, "flat", state)
    context.state["flat"] = ConfigRecord(
        {"float32": bytes(bytearray(context.state["flat"]["float32"]))}
    )
    load_flat(context, "flat", state, steps, "party")
    assert state.loads == 2
    # A write through a parameter, then the saved bytes again: loaded back.
    steps = save_flat(context, "flat", state)
    with torch.no_grad():
        model.weight.add_(1.0)
    load_flat(context, "flat", state, steps, "party")
    assert state.loads == 3 and np.array_equal(state.to_numpy(), saved)
    # Other optimizer step counters than the state's: loaded (and set).
    load_flat(context, "flat", state, [5], "party")
    assert state.loads == 4 and state.optimizer_steps() == [5]
