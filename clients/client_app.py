"""The VFLGAN ``ClientApp`` (``[tool.flwr.app.components] clientapp``)."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from flwr_vflgan.runtime import protocol as P

from .gafm import GAFMClient
from .vtgan import VTGANClient


def make_client_app() -> ClientApp:
    """A ClientApp whose handlers route VFLGAN's, VT-GAN's and GAFM's message types to
    fresh clients."""
    app = ClientApp()
    client = VTGANClient()
    gafm = GAFMClient()

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
        return gafm.setup(msg, context)

    @app.train(P.GF_STEP.split(".")[1])
    def gafm_step(msg: Message, context: Context) -> Message:
        return gafm.step(msg, context)

    @app.evaluate(P.GF_PREDICT.split(".")[1])
    def gafm_predict(msg: Message, context: Context) -> Message:
        return gafm.predict(msg, context)

    return app


app = make_client_app()
