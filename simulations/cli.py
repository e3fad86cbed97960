"""A user's mistake at the command line: one line naming it, exit status 2.

Every Hydra entry point runs through :func:`run_hydra_main`. A bad override, a value that
breaks its rule, a missing file or a run that stopped with a reason prints

    simulations.run: error: <what is wrong and what to do>

on stderr and exits with status 2. The traceback is shown, as Hydra shows it, only with
``HYDRA_FULL_ERROR=1``. Anything else (a bug) keeps its traceback and exit status 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from flwr_vflgan.privacy import BudgetExceededError
from flwr_vflgan.runtime.errors import ProtocolError
from flwr_vflgan.strategies import RunStopped

from .outputs import RunDirectoryBusy

USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
    HydraException,
    OmegaConfBaseException,
    RunStopped,
    ProtocolError,
    BudgetExceededError,
    RunDirectoryBusy,
)
"""What a user's input, or a run that stopped for a stated reason, raises."""

_FULL_ERROR = "HYDRA_FULL_ERROR"
_HYDRA_JOB_ERROR = "Error executing job with overrides:"


class _WithoutHydraJobError:
    """``sys.stderr`` without the line Hydra writes before it re-raises a job's exception
    (the one line of :func:`run_hydra_main` reports the error; a multirun has already
    printed which job is running)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith(_HYDRA_JOB_ERROR):
            return len(text)
        return int(self._stream.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: its message's lines joined, Hydra's and OmegaConf's causes and
    the configuration key they name included."""
    parts = [_text(exc)]
    cause = exc.__cause__
    if isinstance(exc, HydraException) and cause is not None and _text(cause) not in parts[0]:
        parts.append(_text(cause))
    return ": ".join(part for part in parts if part) or type(exc).__name__


def _text(exc: BaseException) -> str:
    if isinstance(exc, OmegaConfBaseException):
        # OmegaConf appends "full_key: ...", "object_type=..." lines; keep the message and
        # put the key first.
        message = str(exc).splitlines()[0].strip() if str(exc) else type(exc).__name__
        key = getattr(exc, "full_key", None)
        return f"{key}: {message}" if key and str(key) not in message else message
    text = str(exc).split("Config search path:")[0]  # Hydra's list of config sources
    lines = [
        line.strip().rstrip(".")
        for line in text.splitlines()
        # Hydra's hint for an unknown key; an added key is refused as unknown all the same.
        if line.strip() and not line.strip().startswith("To append to your config use")
    ]
    return "; ".join(lines).replace(":; ", ": ")


def run_hydra_main(prog: str, hydra_main: Callable[[], Any]) -> int:
    """Call a ``@hydra.main`` function; returns the exit status (0, or 2 on a user error).

    Hydra prints a shortened traceback for any exception unless ``HYDRA_FULL_ERROR`` is
    set; it is set here for the call so that the exception reaches this function, which
    prints one line, or re-raises it when the user set ``HYDRA_FULL_ERROR=1`` themselves.
    """
    wanted_traceback = os.environ.get(_FULL_ERROR, "") not in ("", "0")
    saved, stderr = os.environ.get(_FULL_ERROR), sys.stderr
    os.environ[_FULL_ERROR] = "1"
    if not wanted_traceback:
        sys.stderr = _WithoutHydraJobError(stderr)
    try:
        hydra_main()
    except USER_ERRORS as exc:
        if wanted_traceback:
            raise
        print(
            f"{prog}: error: {one_line(exc)} (HYDRA_FULL_ERROR=1 shows the traceback)",
            file=sys.stderr,
            flush=True,
        )
        return 2
    finally:
        sys.stderr = stderr
        if saved is None:
            os.environ.pop(_FULL_ERROR, None)
        else:
            os.environ[_FULL_ERROR] = saved
    return 0
