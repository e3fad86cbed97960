"""Pause points for the fault-matrix tests: a process stops for a while at a named point
of a run, so that a test can kill it exactly there (at setup, or at publication, which
last well under a second on their own).

Off unless the environment names points. ``FLWR_VFLGAN_PAUSE_AT`` lists them
(comma-separated), ``FLWR_VFLGAN_PAUSE_DIR`` is a directory both the process and the test
see, and ``FLWR_VFLGAN_PAUSE_SECONDS`` (default 120) how long a pause lasts. At its first
arrival at a listed point a process creates ``<dir>/<point>`` (exclusively: one process,
once per directory), logs it and sleeps; the test watches for the file and kills the
process meanwhile. Every later arrival, by this process or another (a restarted node, a
resumed run), goes straight on, and so does the process itself once the pause is over.

The points: ``server-setup`` (the ServerApp, its nodes connected, before the setup
exchange), ``server-checkpoint`` (the server, just after it wrote a checkpoint: every
holder then has one to resume from, and no exchange runs while it pauses),
``server-publication`` (after training, before publication), ``party-setup`` and
``party-publication`` (a party's handler of a setup or a publication message, before it
does anything).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from . import protocol as P

log = logging.getLogger(__name__)

PAUSE_AT = "FLWR_VFLGAN_PAUSE_AT"
PAUSE_DIR = "FLWR_VFLGAN_PAUSE_DIR"
PAUSE_SECONDS = "FLWR_VFLGAN_PAUSE_SECONDS"

POINTS = (
    "server-setup",
    "server-checkpoint",
    "server-publication",
    "party-setup",
    "party-publication",
)

_PARTY_POINTS = {
    P.SETUP: "party-setup",
    P.VT_SETUP: "party-setup",
    P.VD_SETUP: "party-setup",
    P.GF_SETUP: "party-setup",
    P.GENERATE: "party-publication",
    P.VT_GENERATE: "party-publication",
    P.VD_DECODE: "party-publication",
}
"""The message types at which a party pauses, by point (split classification publishes
no table)."""


def pause_point(point: str) -> bool:
    """Pause here if the environment names ``point`` and no process has paused at it
    yet; returns whether it paused.

    Raises
    ------
    ValueError
        ``point`` is not one of :data:`POINTS`, or the environment names a point without
        a directory, or an unknown point.
    """
    if point not in POINTS:
        raise ValueError(f"unknown pause point {point!r}; the points are {POINTS}")
    listed = os.environ.get(PAUSE_AT, "")
    if not listed:
        return False
    points = {p.strip() for p in listed.split(",") if p.strip()}
    unknown = points - set(POINTS)
    if unknown:
        raise ValueError(f"{PAUSE_AT} names unknown points {sorted(unknown)}; use {POINTS}")
    if point not in points:
        return False
    directory = os.environ.get(PAUSE_DIR, "")
    if not directory:
        raise ValueError(f"{PAUSE_AT} is set: set {PAUSE_DIR} to the directory of its markers")
    try:
        with open(Path(directory) / point, "x") as marker:
            marker.write(f"{os.getpid()}\n")
    except FileExistsError:
        return False
    seconds = float(os.environ.get(PAUSE_SECONDS, "120"))
    log.warning("pause point %s: process %d pauses %.0f s", point, os.getpid(), seconds)
    time.sleep(seconds)
    return True


def pause_for_message(message_type: str) -> bool:
    """A party's pause at the point of a message of ``message_type``, if it has one."""
    point = _PARTY_POINTS.get(message_type)
    return pause_point(point) if point is not None else False
