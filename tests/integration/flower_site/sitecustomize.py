"""Loaded at start-up by every Python process of a deployment test (this folder leads
their PYTHONPATH): Flower's heartbeat interval from ``FLWR_VFLGAN_TEST_HEARTBEAT``
instead of its hard-coded 30 s.

A SuperNode reports the interval when it registers and sends heartbeats a little more
often than that; the SuperLink drops a node (and answers its pending messages with an
error) after ``HEARTBEAT_PATIENCE`` (2) missed intervals. At Flower's minimum, 10 s, a
killed node is noticed in about 20 s instead of 60 s: the fault tests run the same paths
with a shorter wait. Nothing outside the tests sets the variable; real deployments keep
Flower's default (and ``runtime.rejoin_grace`` is checked against it in the unit tests).
"""

import os

_interval = os.environ.get("FLWR_VFLGAN_TEST_HEARTBEAT")
if _interval:
    import flwr.common.constant as _constant

    # Set before any Flower module copies it with ``from ... import``.
    _constant.HEARTBEAT_DEFAULT_INTERVAL = int(_interval)
