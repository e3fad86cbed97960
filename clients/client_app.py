"""The VFLGAN ``ClientApp`` (``[tool.flwr.app.components] clientapp``)."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from flwr_vflgan.runtime import protocol as P

from .vflgan import VFLGANClient


def make_client_app() -> ClientApp:
    """A ClientApp whose handlers route VFLGAN's message types to a fresh client."""
    app = ClientApp()
    client = VFLGANClient()

    @app.query(P.SETUP.split(".")[1])
    def setup(msg: Message, context: Context) -> Message:
        return client.setup(msg, context)

    @app.train(P.STEP.split(".")[1])
    def step(msg: Message, context: Context) -> Message:
        return client.step(msg, context)

    @app.evaluate(P.GENERATE.split(".")[1])
    def generate(msg: Message, context: Context) -> Message:
        return client.generate(msg, context)

    return app


app = make_client_app()
