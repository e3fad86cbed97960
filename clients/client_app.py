"""The project's ``ClientApp`` (``[tool.flwr.app.components] clientapp``): every family's
message types routed to that family's party client (:data:`CLIENT_FAMILIES`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from flwr_vflgan.plugin import load_attribute
from flwr_vflgan.runtime import protocol as P

Handler = Callable[[Message, Context], Message]


@dataclass(frozen=True)
class ClientFamily:
    """One algorithm family's party client on the ClientApp.

    ``client`` names its class (``"package.module:Class"``, built with no arguments on the
    family's first message in a process); ``handlers`` maps each message type the family
    sends to the method of that class that answers it.
    """

    client: str
    handlers: Mapping[str, str]


CLIENT_FAMILIES: dict[str, ClientFamily] = {
    "vflgan": ClientFamily(
        "flwr_vflgan.clients.vflgan:VFLGANClient",
        {P.SETUP: "setup", P.STEP: "step", P.GENERATE: "generate"},
    ),
    "vtgan": ClientFamily(
        "flwr_vflgan.clients.vtgan:VTGANClient",
        {P.VT_SETUP: "setup", P.VT_BUILD: "build", P.VT_STEP: "step", P.VT_GENERATE: "generate"},
    ),
    "vdgan": ClientFamily(
        "flwr_vflgan.clients.vdgan:VDGANPartyClient",
        {P.VD_SETUP: "setup", P.VD_STEP: "step", P.VD_DECODE: "decode"},
    ),
    "latent": ClientFamily(
        "flwr_vflgan.clients.latent:LatentDiffusionClient",
        {P.LD_SETUP: "setup", P.LD_ENCODE: "encode", P.LD_DECODE: "decode"},
    ),
    "dplt": ClientFamily(
        "flwr_vflgan.clients.dplt:DPLTClient",
        {P.DL_SETUP: "setup", P.DL_LATENTS: "latents", P.DL_DECODE: "decode"},
    ),
    "keys": ClientFamily(
        "flwr_vflgan.clients.keys:KeyAgreementClient",
        {P.KEY_OFFER: "offer", P.KEY_SEAL: "seal", P.KEY_OPEN: "open"},
    ),
    "psi": ClientFamily(
        "flwr_vflgan.clients.psi:PsiClient",
        {P.PSI_BLIND: "blind", P.PSI_CROSS: "cross", P.PSI_MATCH: "match", P.PSI_APPLY: "apply"},
    ),
    "gafm": ClientFamily(
        "flwr_vflgan.clients.gafm:GAFMClient",
        {P.GF_SETUP: "setup", P.GF_STEP: "step", P.GF_PREDICT: "predict"},
    ),
}
"""Every family's party side, the parties' shared-seed agreement (``keys``) and their row
alignment by ID (``psi``): adding a family adds its line here (docs/architecture.md)."""


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

    Each family's client is built on its first message: GAFM's label metrics and the
    Marvell defence import scikit-learn and SciPy, which a GAN party never needs.
    """

    def __init__(self, token: str | None = None) -> None:
        self.token = token or uuid.uuid4().hex
        self._clients: dict[str, Any] = {}

    def client(self, family: str) -> Any:
        """The client of ``family`` (:data:`CLIENT_FAMILIES`), built on first use."""
        if family not in self._clients:
            self._clients[family] = load_attribute(CLIENT_FAMILIES[family].client)()
        return self._clients[family]

    def __reduce__(self) -> tuple[Callable[[str], PartyClients], tuple[str]]:
        return (_received_clients, (self.token,))


_RECEIVED: dict[str, PartyClients] = {}
"""Clients of ClientApps that arrived pickled in this process (a simulation worker), by
token; one entry per ClientApp sent here, kept for the worker's life (its run)."""


def _received_clients(token: str) -> PartyClients:
    if token not in _RECEIVED:
        _RECEIVED[token] = PartyClients(token)
    return _RECEIVED[token]


def _handler(clients: PartyClients, family: str, method: str) -> Handler:
    def handle(message: Message, context: Context) -> Message:
        reply: Message = getattr(clients.client(family), method)(message, context)
        return reply

    return handle


def _handlers(clients: PartyClients) -> dict[str, Handler]:
    """Message type -> handler (the family's client is looked up at call time)."""
    return {
        message_type: _handler(clients, family, method)
        for family, entry in CLIENT_FAMILIES.items()
        for message_type, method in entry.handlers.items()
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
