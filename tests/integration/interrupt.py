"""Cutting a run short at an epoch, and losing a party mid-run, for the resume and
rejoin tests."""

from __future__ import annotations

from collections.abc import Callable

from flwr.app import Message

from flwr_vflgan.strategies import InProcessGrid


class Interrupt(Exception):
    """Raised by :func:`stop_in_epoch` to cut a run short."""


def stop_in_epoch(epoch: int) -> Callable[[dict[str, float]], None]:
    """A progress callback that interrupts a run at its evaluation of ``epoch``."""

    def progress(record: dict[str, float]) -> None:
        if not record.get("tick") and record["epoch"] == epoch:
            raise Interrupt

    return progress


class CrashAt:
    """An in-process grid's observer that kills partition ``partition``'s node, once, at
    the first message of type ``kind`` to it for which ``when(message)`` holds, and
    restarts it (a lost party, for the rejoin tests). Set :attr:`grid` before the run."""

    def __init__(
        self, kind: str, when: Callable[[Message], bool] = lambda m: True, partition: int = 1
    ) -> None:
        self.kind, self.when, self.partition = kind, when, partition
        self.grid: InProcessGrid | None = None
        self.crashes = 0

    def __call__(self, message: Message) -> None:
        meta = message.metadata
        if self.crashes or meta.reply_to_message_id or meta.message_type != self.kind:
            return
        assert self.grid is not None
        if self.grid.context(meta.dst_node_id).node_config["partition-id"] != self.partition:
            return
        if self.when(message):
            self.crashes += 1
            self.grid.fail_node(meta.dst_node_id, restart=True)
