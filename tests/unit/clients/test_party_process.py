"""A party's memory set-up applies where a party runs alone in a process (a stock
SuperNode's ``flwr-clientapp``, ``flwr-vflgan-node``) and nowhere else."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from importlib.metadata import distribution

import pytest

from flwr_vflgan.clients import party_process
from flwr_vflgan.clients.party_process import (
    FLOWER_CLIENTAPP_COMMAND,
    is_flower_clientapp_process,
    return_freed_memory,
)

# Loads the ClientApp as Flower's flwr-clientapp does (by its module path), under the
# command name given as argv[1], and reports what the set-up did.
_LOAD = """
import json, sys
sys.argv[0] = sys.argv[1]
from flwr.clientapp import ClientApp
from flwr_vflgan.clients.client_app import app
from flwr_vflgan.clients import party_process
assert isinstance(app, ClientApp)
applied = party_process.APPLIED
print(json.dumps({
    "applied": None if applied is None else [applied.freed_memory_returned,
                                             applied.dynamo_deferred],
    "dynamo": type(sys.modules.get("torch._dynamo")).__name__,
}))
"""


def _load_client_app(command: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _LOAD, command],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_a_stock_supernodes_clientapp_process_gets_the_set_up_before_torch_trains():
    loaded = _load_client_app(f"/opt/venv/bin/{FLOWER_CLIENTAPP_COMMAND}")
    assert loaded["applied"] == [_glibc(), True]
    assert loaded["dynamo"] == "DeferredDynamo"


def test_any_other_process_that_loads_the_client_app_is_left_as_it_was():
    """The in-process runtime, Ray's actors and users' scripts hold more than a party."""
    loaded = _load_client_app("/opt/venv/bin/python")
    assert loaded["applied"] is None
    assert loaded["dynamo"] != "DeferredDynamo"


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        ("/usr/local/bin/flwr-clientapp", True),
        ("flwr-clientapp", True),
        ("C:/venv/Scripts/flwr-clientapp.exe", True),
        ("/usr/local/bin/flwr-serverapp", False),
        ("/usr/local/bin/flower-supernode", False),
        ("-c", False),
        ("/home/me/flwr-clientapp-notes/run.py", False),
    ],
)
def test_the_clientapp_process_is_recognised_by_its_command_name(argv0, expected):
    assert is_flower_clientapp_process(argv0) is expected


def test_flower_installs_the_command_its_supernode_runs_for_each_message():
    """SuperExec starts ``flwr-clientapp`` by this name: if Flower renames it, the set-up
    would silently stop applying on stock SuperNodes, so this fails instead."""
    scripts = {ep.name for ep in distribution("flwr").entry_points if ep.group == "console_scripts"}
    assert FLOWER_CLIENTAPP_COMMAND in scripts


def test_the_set_up_is_applied_once_and_remembered(monkeypatch):
    calls = []
    monkeypatch.setattr(party_process, "APPLIED", None)
    monkeypatch.setattr(party_process, "return_freed_memory", lambda: calls.append(1) or True)
    import flwr_vflgan.clients.lean_torch as lean_torch

    monkeypatch.setattr(lean_torch, "defer_torch_dynamo", lambda: False)
    first = party_process.prepare_party_process()
    assert party_process.prepare_party_process() is first
    assert calls == [1]
    assert (first.freed_memory_returned, first.dynamo_deferred) == (True, False)


def test_freed_memory_goes_back_to_the_system_on_glibc():
    if not _glibc():
        pytest.skip("mallopt is glibc's")
    assert return_freed_memory() is True
