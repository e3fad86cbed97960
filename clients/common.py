"""What every family's party client shares: the error reply of a failed handler, where a
party's data comes from, its tables loaded in this process, and the node settings every
party reads (partition id, shared seed). Each client holds what it needs of these by
composition; no client subclasses another's."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import traceback
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flwr.app import Context, Error, Message, RecordDict

from flwr_vflgan.data import AlignmentError
from flwr_vflgan.privacy import BudgetExceededError
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.faults import pause_for_message
from flwr_vflgan.runtime.party_data import DataSpec, PartyData, party_file, series_party_file
from flwr_vflgan.runtime.rng import Stream, derive_seed

log = logging.getLogger(__name__)

ERROR_PROTOCOL = 1
ERROR_DATA = 2
ERROR_INTERNAL = 3
ERROR_BUDGET = 4
CACHE_SIZE = 8
"""Tables and models a client keeps per process (least recently used out)."""


def guarded(
    msg: Message, context: Context, handler: Callable[[Message, Context], RecordDict]
) -> Message:
    """Run a handler and turn its failure into a Flower error reply with a clear reason
    (the fault tests' pause points, :mod:`~flwr_vflgan.runtime.faults`, come first)."""
    try:
        pause_for_message(msg.metadata.message_type)
        return Message(handler(msg, context), reply_to=msg)
    except ProtocolError as exc:
        return Message(Error(code=ERROR_PROTOCOL, reason=f"protocol error: {exc}"), reply_to=msg)
    except BudgetExceededError as exc:
        return Message(
            Error(code=ERROR_BUDGET, reason=f"privacy budget: {exc}; the step was refused"),
            reply_to=msg,
        )
    except (AlignmentError, FileNotFoundError, ValueError, KeyError) as exc:
        return Message(Error(code=ERROR_DATA, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)
    except Exception as exc:
        log.error("party handler failed:\n%s", traceback.format_exc())
        return Message(
            Error(code=ERROR_INTERNAL, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg
        )


def entry_point(handler: str, doc: str) -> Callable[[Any, Message, Context], Message]:
    """A party client's Flower entry point: ``setup = entry_point("_setup", "Load ...")``
    answers a message with the client's method ``handler`` run under :func:`guarded`
    (its result as the reply, its failure as a Flower error reply). ``doc`` is the
    entry point's docstring."""

    def answer(self: Any, msg: Message, context: Context) -> Message:
        return guarded(msg, context, getattr(self, handler))

    answer.__doc__ = doc
    answer.__name__ = answer.__qualname__ = handler.lstrip("_")
    return answer


def data_key(context: Context, data_spec: str, partition_id: int, series: bool = False) -> str:
    """Where a party's data comes from: its own file (``node_config`` data-path, a
    deployment; a series file when the run trains on ``series``) or its block of the
    server's data spec (``data_spec``, JSON; simulation)."""
    path = context.node_config.get(P.NODE_DATA_PATH)
    if path:
        source: dict[str, object] = {"file": str(path)}
        if series:
            source["series"] = True
        scaling = json.loads(data_spec).get("numeric_scaling") if data_spec else None
        if scaling not in (None, "standard"):  # the run's encoding (dataset.numeric_scaling)
            source["numeric_scaling"] = scaling
        rows = aligned_rows(context)
        if rows is not None:  # the rows shared with the other parties (runtime.align_ids)
            source["rows"] = rows
        return json.dumps(source)
    if not data_spec:
        raise ValueError(
            f"party {partition_id} has no data: set node_config '{P.NODE_DATA_PATH}' "
            "to its party file"
        )
    return json.dumps({"spec": data_spec, "partition_id": partition_id})


def load_cached(
    cache: OrderedDict[str, PartyData],
    key: str,
    block: Callable[[DataSpec, int], PartyData],
    size: int = CACHE_SIZE,
) -> PartyData:
    """The party data of a :func:`data_key`, from ``cache`` (least recently used out):
    the party file, or ``block(spec, partition_id)`` of the spec."""
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    source = json.loads(key)
    if "file" in source and source.get("series"):
        data = series_party_file(source["file"], source.get("rows"))
    elif "file" in source:
        scaling = source.get("numeric_scaling", "standard")
        data = party_file(source["file"], scaling, source.get("rows"))
    else:
        data = block(DataSpec.from_json(source["spec"]), int(source["partition_id"]))
    cache[key] = data
    while len(cache) > size:
        cache.popitem(last=False)
    return data


def aligned_rows(context: Context) -> list[int] | None:
    """The rows this party shares with the others, in the common order, once the run
    aligned them by ID (:mod:`flwr_vflgan.runtime.psi`); ``None`` otherwise."""
    if P.STATE_PSI not in context.state:
        return None
    rows = json.loads(str(context.state[P.STATE_PSI]["json"])).get("rows")
    return None if rows is None else [int(r) for r in rows]


def node_integer(context: Context, key: str, value: object = None) -> int | None:
    """``node_config[key]`` (or ``value`` when given) as a non-negative integer; ``None``
    when unset or empty.

    Flower's ``--node-config`` parser gives ``1`` as an int, ``1.0`` as a float and a
    quoted ``"1"`` as text: each is read as 1. Anything else (``1.5``, ``inf``, ``nan``,
    ``true``, ``-1``, ``"12a"``) is refused, never rounded.

    Raises
    ------
    ValueError
        Naming the key and the value.
    """
    value = context.node_config.get(key) if value is None else value
    if value is None or value == "":
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif (isinstance(value, float) and math.isfinite(value) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*\+?\d+\s*", value)
    ):
        number = int(value)
    if number is None or number < 0:
        raise ValueError(f"node_config '{key}' must be a non-negative integer, got {value!r}")
    return number


def node_partition_id(context: Context) -> int:
    """This node's ``partition-id`` (:func:`node_integer`).

    Raises
    ------
    ValueError
        It is unset or not a non-negative integer.
    """
    value = node_integer(context, P.NODE_PARTITION_ID)
    if value is None:
        raise ValueError(
            f"node_config lacks '{P.NODE_PARTITION_ID}': start the SuperNode with "
            "--node-config 'partition-id=<i> ...'"
        )
    return value


def agreed_seed(context: Context) -> int | None:
    """The seed this party agreed on with the others in this run, if it did."""
    if P.STATE_KEYS not in context.state:
        return None
    seed = json.loads(str(context.state[P.STATE_KEYS]["json"])).get("seed")
    return None if seed is None else int(seed)


def node_shared_seed(context: Context, run_seed: int) -> int:
    """The seed all parties share and the server does not know.

    Order: the seed the parties agreed on in this run (``runtime.key_agreement``,
    ``clients/keys.py``), then ``node_config['shared-seed']``, then
    ``$FLWR_VFLGAN_SHARED_SEED``; only when none is set is it derived from the run seed,
    which the server also knows, and a warning says so.
    """
    agreed = agreed_seed(context)
    if agreed is not None:
        return agreed
    value = context.node_config.get(P.NODE_SHARED_SEED, os.environ.get(P.ENV_SHARED_SEED))
    seed = node_integer(context, P.NODE_SHARED_SEED, value)
    if seed is None:
        log.warning(
            "no shared seed in node_config '%s' or $%s: deriving it from the run seed, which the "
            "server knows. Set it on every party in a real deployment.",
            P.NODE_SHARED_SEED,
            P.ENV_SHARED_SEED,
        )
        return derive_seed(run_seed, Stream.NOISE, 0, 1)
    return seed


def party_checkpoint_dir(context: Context, root: str, partition_id: int) -> str | None:
    """Where this party writes its checkpoints: its node_config ``checkpoint-dir``, else
    ``<root>/party-<id>`` under the setup's checkpoint root (simulated parties); ``None``
    when it has neither (no checkpoints)."""
    own = context.node_config.get(P.NODE_CHECKPOINT_DIR)
    if own:
        return str(own)
    return str(Path(root) / f"party-{partition_id}") if root else None


class PartyTables:
    """A client's party tables loaded in this process, by :func:`data_key`.

    ``block(spec, partition_id)`` makes a simulated party's table from the server's data
    spec; a deployed party reads its own file.
    """

    def __init__(self, block: Callable[[DataSpec, int], PartyData], size: int = CACHE_SIZE) -> None:
        self._cache: OrderedDict[str, PartyData] = OrderedDict()
        self._block = block
        self._size = size

    def load(self, key: str) -> PartyData:
        """The table of ``key``."""
        return load_cached(self._cache, key, self._block, self._size)

    def for_setup(
        self, context: Context, data_spec: str, partition_id: int, series: bool = False
    ) -> tuple[str, PartyData]:
        """The key and table a party reads at setup (``data_spec``: the setup message's;
        ``series``: a deployed party reads its file as series)."""
        key = data_key(context, data_spec, partition_id, series)
        return key, self.load(key)
