"""Cutting a run short at an epoch, for the resume tests."""

from __future__ import annotations

from collections.abc import Callable


class Interrupt(Exception):
    """Raised by :func:`stop_in_epoch` to cut a run short."""


def stop_in_epoch(epoch: int) -> Callable[[dict[str, float]], None]:
    """A progress callback that interrupts a run at its evaluation of ``epoch``."""

    def progress(record: dict[str, float]) -> None:
        if not record.get("tick") and record["epoch"] == epoch:
            raise Interrupt

    return progress
