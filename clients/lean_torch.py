"""Keep PyTorch's compiler stack out of a party node until something needs it.

Every ``torch.optim`` step runs through ``_use_grad_for_differentiable``, which imports
``torch._dynamo`` to call ``graph_break()``, and ``Optimizer.state_dict`` /
``load_state_dict`` / ``zero_grad`` are wrapped by ``torch._disable_dynamo``, which
imports it to call ``disable(fn, recursive, wrapping=False)``. Both are no-ops in eager
mode, but the import loads TorchDynamo with sympy and the inductor's configuration:
about 60-70 MiB of a party node's resident memory (measured on Adult: a one-party probe's
peak fell from 551 to 488 MiB), for models that are never compiled.

:func:`defer_torch_dynamo` puts a stand-in module under ``torch._dynamo`` that answers
exactly those two calls as eager PyTorch does (``graph_break`` does nothing, ``disable``
returns the function unchanged) and imports the real ``torch._dynamo`` the moment
anything asks it for another name, so code that compiles still gets the compiler.
Only party processes install it, before they import the ClientApp (``flwr-vflgan-node``
and a stock SuperNode's ``flwr-clientapp``, through
:mod:`flwr_vflgan.clients.party_process`); tests pin the
two calls, and a torch release that uses another name of ``torch._dynamo`` on the
optimizer's path brings the real module back (the memory test then fails, the
training does not change).
"""

from __future__ import annotations

import importlib
import logging
import sys
import types
from collections.abc import Callable
from typing import Any

MODULE = "torch._dynamo"
log = logging.getLogger(__name__)


class DeferredDynamo(types.ModuleType):
    """``torch._dynamo`` as eager PyTorch's optimizers use it; anything else loads it."""

    def __init__(self) -> None:
        super().__init__(MODULE, "Stand-in for torch._dynamo (flwr_vflgan.clients.lean_torch)")

    @staticmethod
    def graph_break() -> None:
        """Eager mode: nothing to break."""

    @staticmethod
    def disable(
        fn: Callable[..., Any] | None = None, recursive: bool = True, **_: Any
    ) -> Callable[..., Any]:
        """Eager mode: the function itself (as a decorator factory without ``fn``)."""
        if fn is None:
            return lambda inner: inner
        return fn

    def __getattr__(self, name: str) -> Any:
        # Module introspection (inspect, pickling, import machinery) asks modules for
        # dunder names such as ``__file__`` while other imports are half done: answer
        # those as a module without them would, rather than load the compiler midway.
        # ``__path__`` means a submodule of torch._dynamo is being imported: real use.
        if name.startswith("__") and name.endswith("__") and name != "__path__":
            raise AttributeError(name)
        log.info("torch._dynamo.%s requested: loading the real torch._dynamo", name)
        return getattr(load_real_dynamo(), name)


def defer_torch_dynamo() -> bool:
    """Install the stand-in unless ``torch._dynamo`` is already loaded; returns whether
    it is in place."""
    if MODULE in sys.modules:
        return isinstance(sys.modules[MODULE], DeferredDynamo)
    stand_in = DeferredDynamo()
    sys.modules[MODULE] = stand_in
    torch = sys.modules.get("torch")
    if torch is not None:
        torch._dynamo = stand_in  # type: ignore[attr-defined]
    return True


def load_real_dynamo() -> types.ModuleType:
    """Replace the stand-in with the real ``torch._dynamo`` and return it."""
    current = sys.modules.get(MODULE)
    if isinstance(current, DeferredDynamo):
        del sys.modules[MODULE]
    real = importlib.import_module(MODULE)
    sys.modules["torch"]._dynamo = real  # type: ignore[attr-defined]
    return real
