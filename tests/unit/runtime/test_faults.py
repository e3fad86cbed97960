"""The fault tests' pause points: off by default, one pause per point and marker
directory, named errors for a bad setting."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from flwr.app import Message, RecordDict

from flwr_vflgan.runtime import faults
from flwr_vflgan.runtime import protocol as P


@pytest.fixture
def markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(faults.PAUSE_DIR, str(tmp_path))
    monkeypatch.setenv(faults.PAUSE_SECONDS, "0")
    return tmp_path


def test_no_point_pauses_unless_the_environment_names_it(
    markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(faults.PAUSE_AT, raising=False)
    assert not any(faults.pause_point(p) for p in faults.POINTS)
    monkeypatch.setenv(faults.PAUSE_AT, "server-publication")
    assert not faults.pause_point("server-setup")
    assert list(markers.iterdir()) == []


def test_a_point_pauses_once_and_leaves_the_pausing_pid(
    markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    monkeypatch.setenv(faults.PAUSE_AT, " server-setup , party-publication")
    assert faults.pause_point("server-setup")
    assert (markers / "server-setup").read_text() == f"{os.getpid()}\n"
    assert not faults.pause_point("server-setup")  # a resumed run goes straight on
    assert faults.pause_for_message(P.GENERATE)
    assert not faults.pause_for_message(P.VT_GENERATE)  # the same point, once
    assert not faults.pause_for_message(P.STEP)  # no point of its own


def test_two_processes_at_one_point_pause_one_of_them(
    markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(faults.PAUSE_AT, "party-setup")
    paused: list[bool] = []
    threads = [
        threading.Thread(target=lambda: paused.append(faults.pause_point("party-setup")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(paused) == [False] * 7 + [True]


def test_the_pause_lasts_its_seconds_and_then_the_process_goes_on(
    markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(faults.time, "sleep", slept.append)
    monkeypatch.setenv(faults.PAUSE_AT, "server-setup")
    monkeypatch.setenv(faults.PAUSE_SECONDS, "7.5")
    assert faults.pause_point("server-setup") and slept == [7.5]


@pytest.mark.parametrize(
    ("env", "point", "match"),
    [
        ({faults.PAUSE_AT: "server-setup"}, "nowhere", "unknown pause point 'nowhere'"),
        ({faults.PAUSE_AT: "server-stup"}, "server-setup", r"unknown points \['server-stup'\]"),
        ({faults.PAUSE_AT: "server-setup", faults.PAUSE_DIR: ""}, "server-setup", "PAUSE_DIR"),
    ],
)
def test_a_bad_setting_is_named(
    markers: Path, monkeypatch: pytest.MonkeyPatch, env: dict, point: str, match: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match=match):
        faults.pause_point(point)


def test_a_party_pauses_before_its_handler_runs(
    markers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the project's ClientApp: the setup message's pause comes first, then its
    handler (here refusing an empty setup)."""
    from flwr_vflgan.clients import make_client_app
    from flwr_vflgan.strategies import InProcessGrid, RunStopped
    from flwr_vflgan.strategies.exchange import exchange

    monkeypatch.setenv(faults.PAUSE_AT, "party-setup")
    paused: list[bool] = []
    monkeypatch.setattr(faults.time, "sleep", lambda s: paused.append(not list(markers.iterdir())))
    grid = InProcessGrid(make_client_app(), [{"partition-id": 0}])
    [node] = grid.get_node_ids()
    with pytest.raises(RunStopped, match="protocol error: message has no config record"):
        exchange(grid, [Message(RecordDict(), node, P.SETUP)])
    assert paused == [False]  # the marker was there when the pause began


def test_the_server_pauses_after_its_checkpoint_is_written(
    markers: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``server-checkpoint``: the pause comes once the file is in place (a holder killed
    then resumes from it), and only at the first checkpoint."""
    import numpy as np

    from flwr_vflgan.runtime.checkpoint import save_server_checkpoint

    directory = tmp_path / "checkpoints"
    seen: list[list[str]] = []
    monkeypatch.setattr(
        faults.time, "sleep", lambda _: seen.append(sorted(p.name for p in directory.iterdir()))
    )
    monkeypatch.setenv(faults.PAUSE_AT, "server-checkpoint")
    save_server_checkpoint(directory, 12, {"w": np.zeros(2)}, {})
    save_server_checkpoint(directory, 24, {"w": np.ones(2)}, {})
    assert seen == [["server-12.npz"]]
    assert (markers / "server-checkpoint").is_file()
