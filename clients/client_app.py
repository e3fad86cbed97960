"""The project's ``ClientApp`` (``[tool.flwr.app.components] clientapp``): VFLGAN's,
VT-GAN's and GAFM's message types routed to their party clients."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from flwr_vflgan.runtime import protocol as P

from .vtgan import VTGANClient

if TYPE_CHECKING:
    from .gafm import GAFMClient

Handler = Callable[[Message, Context], Message]


class PartyClients:
    """The party clients behind one ClientApp's handlers, and their caches.

    Flower's simulation engine pickles the ClientApp, handlers and everything they hold,
    into its Ray worker with every message. Pickled by value these clients would arrive
    with empty caches each time, and every message would reload the party's table and
    rebuild its models (measured: most of the 148 ms of an exchange at K = 4, Adult).
    A ``PartyClients`` pickles as its token instead: the first message in a worker builds
    that worker's instance for the token, and later messages find it. In the process
    that made it, it is simply itself (in-process grid, party node, stock ClientApp
    process). Caches never decide a result: every message restores the party's state
    from ``context.state``.

    GAFM's client is built on its first message: its label party's metrics and the
    Marvell defence import scikit-learn and scipy, which a GAN party never needs.
    """

    def __init__(self, token: str | None = None) -> None:
        self.token = token or uuid.uuid4().hex
        self.gan = VTGANClient()
        self._gafm: GAFMClient | None = None

    @property
    def gafm(self) -> GAFMClient:
        if self._gafm is None:
            from .gafm import GAFMClient

            self._gafm = GAFMClient()
        return self._gafm

    def __reduce__(self) -> tuple[Callable[[str], PartyClients], tuple[str]]:
        return (_received_clients, (self.token,))


_RECEIVED: dict[str, PartyClients] = {}
"""Clients of ClientApps that arrived pickled in this process (a simulation worker), by
token; one entry per ClientApp sent here, kept for the worker's life (its run)."""


def _received_clients(token: str) -> PartyClients:
    if token not in _RECEIVED:
        _RECEIVED[token] = PartyClients(token)
    return _RECEIVED[token]


def _handlers(clients: PartyClients) -> dict[str, Handler]:
    """Message type -> handler (looked up on ``clients`` at call time)."""
    return {
        P.SETUP: lambda m, c: clients.gan.setup(m, c),
        P.STEP: lambda m, c: clients.gan.step(m, c),
        P.GENERATE: lambda m, c: clients.gan.generate(m, c),
        P.VT_SETUP: lambda m, c: clients.gan.vt_setup(m, c),
        P.VT_BUILD: lambda m, c: clients.gan.vt_build(m, c),
        P.VT_STEP: lambda m, c: clients.gan.vt_step(m, c),
        P.VT_GENERATE: lambda m, c: clients.gan.vt_generate(m, c),
        P.GF_SETUP: lambda m, c: clients.gafm.setup(m, c),
        P.GF_STEP: lambda m, c: clients.gafm.step(m, c),
        P.GF_PREDICT: lambda m, c: clients.gafm.predict(m, c),
    }


def make_client_app() -> ClientApp:
    """A ClientApp with its own :class:`PartyClients`, serving every message type of the
    project (``query``, ``train`` or ``evaluate`` ``.<action>``, as in ``protocol``)."""
    app = ClientApp()
    register = {"query": app.query, "train": app.train, "evaluate": app.evaluate}
    for message_type, handler in _handlers(PartyClients()).items():
        category, action = message_type.split(".")
        register[category](action)(handler)
    return app


app = make_client_app()
