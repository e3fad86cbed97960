"""The VFLGAN ``ClientApp`` (``[tool.flwr.app.components] clientapp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from flwr_vflgan.runtime import protocol as P

from .vtgan import VTGANClient

if TYPE_CHECKING:
    from .gafm import GAFMClient


def make_client_app() -> ClientApp:
    """A ClientApp whose handlers route VFLGAN's, VT-GAN's and GAFM's message types to
    fresh clients.

    GAFM's client is built on its first message: its label party's metrics and the
    Marvell defence import scikit-learn and scipy, which a GAN party never needs (about
    90 MiB of a party node's memory).
    """
    app = ClientApp()
    client = VTGANClient()
    gafm_clients: list[GAFMClient] = []

    def gafm() -> GAFMClient:
        if not gafm_clients:
            from .gafm import GAFMClient

            gafm_clients.append(GAFMClient())
        return gafm_clients[0]

    @app.query(P.SETUP.split(".")[1])
    def setup(msg: Message, context: Context) -> Message:
        return client.setup(msg, context)

    @app.train(P.STEP.split(".")[1])
    def step(msg: Message, context: Context) -> Message:
        return client.step(msg, context)

    @app.evaluate(P.GENERATE.split(".")[1])
    def generate(msg: Message, context: Context) -> Message:
        return client.generate(msg, context)

    @app.query(P.VT_SETUP.split(".")[1])
    def vt_setup(msg: Message, context: Context) -> Message:
        return client.vt_setup(msg, context)

    @app.query(P.VT_BUILD.split(".")[1])
    def vt_build(msg: Message, context: Context) -> Message:
        return client.vt_build(msg, context)

    @app.train(P.VT_STEP.split(".")[1])
    def vt_step(msg: Message, context: Context) -> Message:
        return client.vt_step(msg, context)

    @app.evaluate(P.VT_GENERATE.split(".")[1])
    def vt_generate(msg: Message, context: Context) -> Message:
        return client.vt_generate(msg, context)

    @app.query(P.GF_SETUP.split(".")[1])
    def gafm_setup(msg: Message, context: Context) -> Message:
        return gafm().setup(msg, context)

    @app.train(P.GF_STEP.split(".")[1])
    def gafm_step(msg: Message, context: Context) -> Message:
        return gafm().step(msg, context)

    @app.evaluate(P.GF_PREDICT.split(".")[1])
    def gafm_predict(msg: Message, context: Context) -> Message:
        return gafm().predict(msg, context)

    return app


app = make_client_app()
