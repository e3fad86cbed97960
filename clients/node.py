"""A long-lived party node: the project's ClientApp served to an unmodified SuperLink.

    flwr-vflgan-node --insecure --superlink 127.0.0.1:9092 \\
        --node-config 'partition-id=0 data-path="parties/party-0.csv" shared-seed=123'

It registers with the SuperLink's Fleet API exactly as ``flower-supernode`` does (Flower's
own ``http_request_response`` connection: node registration, heartbeats, message pull,
object pull and push, node authentication and TLS), but it runs the ClientApp in its own
process and keeps it there for the whole run: the party's data, encoders and models stay
in memory, and ``context.state`` lives in this process. A stock SuperNode instead sleeps
3 s after every pull that finds no message and starts a new ``flwr-clientapp`` process
(importing torch and the project, 3-4 s) for every message; Flower 1.41-1.42 offer no
setting that changes either (see docs/deployment.md for the measured timeline).

What crosses the wire is unchanged: the same messages, through the same SuperLink, with
the same object store; the SuperLink cannot tell this node from a stock one. Only the
node's own loop differs: after each reply it pulls again within ``--poll-interval``
seconds (default 5 ms), waiting half as long again after each empty pull up to
``--max-poll-interval`` (default 0.1 s: at most about ten pulls a second against a shared
SuperLink while it waits), and every ``--idle-poll-interval`` seconds (default 1 s)
after 30 s without a message.

The Flower internals used here are listed in :data:`FLWR_INTERNALS`; a test imports
each of them and checks their signatures, so an upgrade of flwr that changes them fails
loudly instead of at a user's site.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key
from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.config import get_fused_config_from_fab, parse_config_args
from flwr.proto.message_pb2 import ObjectTree
from flwr.supercore.fab import Fab
from flwr.supercore.inflatable.inflatable_object import (
    get_all_nested_objects,
    get_object_tree,
    no_object_id_recompute,
)
from flwr.supercore.inflatable.inflatable_utils import (
    ObjectPullError,
    ObjectPushError,
    ObjectUnavailableError,
    pull_and_inflate_object_from_tree,
    push_object_contents_from_iterable,
)
from flwr.supercore.run import Run, RunNotRunningException
from flwr.supernode.fleet_http_connection import http_request_response

from flwr_vflgan.clients.party_process import prepare_party_process

log = logging.getLogger(__name__)

FLWR_INTERNALS = {
    "flwr.supernode.fleet_http_connection": ("http_request_response",),
    "flwr.supercore.inflatable.inflatable_utils": (
        "ObjectPullError",
        "ObjectPushError",
        "ObjectUnavailableError",
        "pull_and_inflate_object_from_tree",
        "push_object_contents_from_iterable",
    ),
    "flwr.supercore.inflatable.inflatable_object": (
        "get_all_nested_objects",
        "get_object_tree",
        "iterate_object_tree",
        "no_object_id_recompute",
    ),
    "flwr.common.config": ("get_fused_config_from_fab", "parse_config_args"),
    "flwr.supercore.run": ("Run", "RunNotRunningException"),
    "flwr.supercore.fab": ("Fab",),
    "flwr.proto.message_pb2": ("ObjectTree",),
}
"""Flower modules and names this node uses beyond the public API (pinned range: flwr
>=1.41,<1.43, checked by tests/unit/clients/test_node.py)."""

OBJECT_TRANSFERS = 8
"""Objects of one message pulled or pushed concurrently (Flower caps it at the cores)."""
OBJECT_RETRY_FIRST = 0.002
OBJECT_RETRY_CAP = 0.05
"""First and longest wait, in seconds, before pulling an object again that the sender has
not pushed yet (Flower's defaults: 1 s and 10 s)."""

ERROR_CLIENT_EXCEPTION = 4
"""Flower's error code of a ClientApp that raised (``flwr.common.constant.ErrorCode``)."""


@dataclass
class NodeSettings:
    """How a party node connects and polls.

    Parameters
    ----------
    superlink
        Fleet API address of the SuperLink, ``host:port``.
    node_config
        The node's own configuration (``partition-id``, ``data-path``, ``shared-seed``...).
    insecure
        Plain HTTP (loopback and tests only); otherwise TLS with ``root_certificates``.
    root_certificates
        Path to the CA certificate that signed the SuperLink's certificate.
    auth_keys
        Paths of this node's private and public key (SuperNode authentication).
    poll_interval
        Seconds before the first pull after a reply; each empty pull waits half as long
        again, up to ``max_poll_interval``.
    max_poll_interval
        Longest wait between pulls while a run is active.
    idle_poll_interval
        Seconds between pulls after ``idle_after`` seconds without a message.
    idle_after
        Seconds without a message after which the node polls at ``idle_poll_interval``.
    max_retries, max_wait_time
        Connection retries and their time budget (``None``: no limit), as for
        ``flower-supernode``.
    torch_threads
        PyTorch intra-op threads of this process (the models are small; more threads
        only contend when parties share cores).
    """

    superlink: str
    node_config: dict[str, bool | float | int | str] = field(default_factory=dict)
    insecure: bool = False
    root_certificates: str | None = None
    auth_keys: tuple[str, str] | None = None
    poll_interval: float = 0.005
    max_poll_interval: float = 0.1
    idle_poll_interval: float = 1.0
    idle_after: float = 30.0
    max_retries: int | None = None
    max_wait_time: float | None = None
    torch_threads: int = 1

    def __post_init__(self) -> None:
        if self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1, got {self.torch_threads}")
        for name in ("poll_interval", "max_poll_interval", "idle_poll_interval", "idle_after"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not self.poll_interval <= self.max_poll_interval <= self.idle_poll_interval:
            raise ValueError(
                "the poll intervals must grow: poll_interval "
                f"({self.poll_interval}) <= max_poll_interval ({self.max_poll_interval}) <= "
                f"idle_poll_interval ({self.idle_poll_interval})"
            )
        if self.insecure and (self.root_certificates or self.auth_keys):
            raise ValueError(
                "--insecure cannot be combined with --root-certificates or node authentication "
                "keys: authentication needs TLS"
            )
        if not self.insecure and not self.root_certificates:
            raise ValueError(
                "give --root-certificates PATH (the CA of the SuperLink's TLS certificate), "
                "or --insecure for a plain-HTTP SuperLink on a trusted network"
            )
        for path in (self.root_certificates, *(self.auth_keys or ())):
            if path is not None and not Path(path).is_file():
                raise ValueError(f"no such file: {path}")


@dataclass
class NodeStats:
    """What a node did (for logs, benchmarks and tests)."""

    messages: int = 0
    pulls: int = 0
    app_seconds: float = 0.0
    transfer_seconds: float = 0.0


class PartyNode:
    """Serves ``app`` to the SuperLink until ``stop`` is set (or ``max_messages`` are done).

    One message is handled at a time, in arrival order, which keeps the protocol's rule
    of one state-changing message in flight per node. Each run gets one ``Context``
    (its ``state`` persists between the run's messages, in memory), built like a stock
    SuperNode's: this node's id and ``node_config``, the run's config fused from its FAB.
    """

    def __init__(self, app: ClientApp, settings: NodeSettings) -> None:
        self.app = app
        self.settings = settings
        self.stats = NodeStats()
        self._contexts: dict[int, Context] = {}
        self.registration_lost = False
        """Set when the SuperLink answered 401 to a pull: :meth:`serve` returned, and
        serving again registers anew."""

    def serve(
        self,
        stop: threading.Event,
        max_messages: int | None = None,
        interrupted: threading.Event | None = None,
    ) -> None:
        """Connect, register and handle messages until ``stop`` is set, or until the
        SuperLink stops knowing this node (:attr:`registration_lost`).

        ``interrupted`` is set by SIGINT: an operator's Ctrl-C, or Flower's heartbeat,
        which sends its own process a SIGINT when the SuperLink answers it 401. The next
        pull tells them apart: a 401 means the registration is lost, anything else stops.
        """
        settings = self.settings
        with http_request_response(
            settings.superlink,
            settings.insecure,
            _read(settings.root_certificates) if settings.root_certificates else None,
            _load_keys(settings.auth_keys) if settings.auth_keys else None,
            settings.max_retries,
            settings.max_wait_time,
        ) as connection:
            node_id, receive = connection[0], connection[1]
            log.info("registered with the SuperLink at %s as node %s", settings.superlink, node_id)
            last_message = time.monotonic()
            delay = settings.poll_interval
            while not stop.is_set():
                if max_messages is not None and self.stats.messages >= max_messages:
                    return
                if interrupted is not None and interrupted.is_set():
                    interrupted.clear()
                    if not self._lost(receive):
                        stop.set()  # an operator's interrupt: stop as SIGTERM does
                    return
                self.stats.pulls += 1
                try:
                    received = receive()
                except RunNotRunningException:
                    received = None
                except httpx.HTTPStatusError as exc:
                    if not _unauthorized(exc):
                        raise
                    # The SuperLink no longer knows this node: it restarted (its
                    # registrations were in its memory) or dropped the node.
                    self.registration_lost = True
                    return
                if received is None:
                    idle = time.monotonic() - last_message > settings.idle_after
                    stop.wait(settings.idle_poll_interval if idle else delay)
                    delay = min(delay * 1.5, settings.max_poll_interval)
                    continue
                delay = settings.poll_interval
                if not self._answer(received, node_id, connection):
                    return
                last_message = time.monotonic()

    def _answer(self, received: tuple[Message, ObjectTree], node_id: int, connection: Any) -> bool:
        """Pull one message's objects, answer it and push the reply; ``False`` when the
        SuperLink turned out no longer to know this node (:attr:`registration_lost`)."""
        _, _, send, get_run, get_fab, pull_object, push_object, confirm = connection
        message, tree = received
        run_id = message.metadata.run_id
        started = time.monotonic()
        try:
            message = _pull_message(tree, partial(pull_object, run_id), partial(confirm, run_id))
            pulled = time.monotonic()
            context = self._context(node_id, run_id, get_run, get_fab)
            reply = self._handle(message, context)
            handled = time.monotonic()
            push = _checked_push(partial(push_object, run_id), partial(pull_object, run_id))
            _push_reply(reply, send, push, handled - pulled)
        except RunNotRunningException:
            log.info("run %s is no longer running; its message is dropped", run_id)
            self._contexts.pop(run_id, None)
            return True
        except Exception as exc:  # one bad transfer must not end a node serving many runs
            if _unauthorized(exc):  # the registration went while handling it
                self.registration_lost = True
                return False
            log.exception("could not handle a message of run %s", run_id)
            return True
        self.stats.messages += 1
        self.stats.app_seconds += handled - pulled
        self.stats.transfer_seconds += (pulled - started) + (time.monotonic() - handled)
        return True

    def _lost(self, receive: Callable[[], Any]) -> bool:
        """One pull after a SIGINT: whether the SuperLink answers 401 (and the
        registration is lost). A message it returns is dropped: the node is stopping."""
        try:
            receive()
        except Exception as exc:
            if _unauthorized(exc):
                self.registration_lost = True
                return True
        return False

    def _context(
        self,
        node_id: int,
        run_id: int,
        get_run: Callable[[int], Run],
        get_fab: Callable[[str, int], Fab],
    ) -> Context:
        if run_id not in self._contexts:
            run = get_run(run_id)
            fab = get_fab(run.fab_hash, run_id)
            self._contexts[run_id] = Context(
                run_id=run_id,
                node_id=node_id,
                node_config=dict(self.settings.node_config),
                state=RecordDict(),
                run_config=get_fused_config_from_fab(fab.content, run),
            )
        return self._contexts[run_id]

    def _handle(self, message: Message, context: Context) -> Message:
        try:
            return self.app(message, context)
        except Exception as exc:  # a ClientApp that raises still owes the server a reply
            log.exception("the ClientApp raised on a %s message", message.metadata.message_type)
            return Message(
                Error(code=ERROR_CLIENT_EXCEPTION, reason=f"{type(exc).__name__}: {exc}"),
                reply_to=message,
            )


def _unauthorized(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from, is an HTTP 401 answer."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.HTTPStatusError) and (
            seen.response.status_code == httpx.codes.UNAUTHORIZED
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _pull_message(
    tree: ObjectTree, pull_object: Callable[[str], bytes], confirm: Callable[[str], None]
) -> Message:
    """The whole message of ``tree`` (all its objects pulled concurrently), confirmed."""
    # A message becomes visible before its sender has pushed all of its objects; Flower's
    # default first retry after an unavailable object is 1 s, far more than the gap.
    message = pull_and_inflate_object_from_tree(
        tree,
        pull_object,
        confirm,
        return_type=Message,
        max_concurrent_pulls=OBJECT_TRANSFERS,
        initial_backoff=OBJECT_RETRY_FIRST,
        backoff_cap=OBJECT_RETRY_CAP,
    )
    # The deflated message does not carry its own id (its object id).
    message.metadata.__dict__["_message_id"] = tree.object_id
    return message


def _push_reply(
    reply: Message,
    send: Callable[[Message, ObjectTree, float], tuple[set[str], str]],
    push_object: Callable[[str, str, bytes], None],
    app_seconds: float,
) -> None:
    """Announce the reply with its object tree, then push the objects the SuperLink asks for."""
    reply.metadata.__dict__["_message_id"] = reply.object_id
    with no_object_id_recompute():
        tree = get_object_tree(reply)
        objects = get_all_nested_objects(reply)
        wanted, session = send(reply, tree, app_seconds)
        push_object_contents_from_iterable(
            ((oid, obj.deflate()) for oid, obj in objects.items() if oid in wanted),
            partial(push_object, session),
            max_concurrent_pushes=OBJECT_TRANSFERS,
        )


def _checked_push(
    push_object: Callable[[str, str, bytes], None], pull_object: Callable[[str], bytes]
) -> Callable[[str, str, bytes], None]:
    """``push_object`` that asks the SuperLink again when it refuses an object.

    The SuperLink refuses (``ObjectPushError``) an object it no longer waits for. Besides
    an expired push session, that is the answer to a request Flower's connection retried
    after the first attempt had stored the object (its answer was lost), or to an object
    of a reply the server has already read in full. Only an object the SuperLink still
    lists as missing makes the reply incomplete: that error is raised; the others are
    logged on one line.
    """

    def push(session: str, object_id: str, content: bytes) -> None:
        try:
            push_object(session, object_id, content)
            return
        except ObjectPushError as exc:
            refused = exc
        try:
            stored = pull_object(object_id)
        except ObjectUnavailableError:
            raise refused from None  # still missing: the reply cannot be read
        except ObjectPullError:
            log.warning(
                "the SuperLink refused object %s of a reply and no longer holds it: the server "
                "has read the reply, or the SuperLink dropped it with an expired push session "
                "(then the server never gets this reply)",
                object_id,
            )
            return
        if stored != content:
            raise refused
        log.info("object %s of a reply was already stored (a retried request)", object_id)

    return push


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def _load_keys(
    paths: tuple[str, str],
) -> tuple[ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey]:
    """The node's (private, public) key pair for SuperNode authentication."""
    private = load_ssh_private_key(_read(paths[0]), password=None)
    public = load_ssh_public_key(_read(paths[1]))
    if not isinstance(private, ec.EllipticCurvePrivateKey) or not isinstance(
        public, ec.EllipticCurvePublicKey
    ):
        raise ValueError(
            f"node authentication keys must be elliptic-curve SSH keys: {paths[0]}, {paths[1]}"
        )
    return private, public


# -- command line ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> NodeSettings:
    """The command line's settings (flags named like ``flower-supernode``'s).

    Raises
    ------
    ValueError
        A setting is invalid; the message names it.
    """
    parser = argparse.ArgumentParser(
        prog="flwr-vflgan-node",
        description="Serve a flwr-vflgan party to a SuperLink from one long-lived process.",
    )
    parser.add_argument("--superlink", default="127.0.0.1:9092", help="Fleet API address")
    parser.add_argument("--node-config", default="", help="'key=value ...', as flower-supernode")
    parser.add_argument("--insecure", action="store_true", help="plain HTTP (no TLS)")
    parser.add_argument("--root-certificates", default=None, help="CA certificate (PEM)")
    parser.add_argument("--auth-supernode-private-key", default=None)
    parser.add_argument("--auth-supernode-public-key", default=None)
    parser.add_argument("--poll-interval", type=float, default=NodeSettings.poll_interval)
    parser.add_argument("--max-poll-interval", type=float, default=NodeSettings.max_poll_interval)
    parser.add_argument("--idle-poll-interval", type=float, default=NodeSettings.idle_poll_interval)
    parser.add_argument("--max-retries", type=int, default=None)
    parser.add_argument("--max-wait-time", type=float, default=None)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args(list(argv))
    keys = (args.auth_supernode_private_key, args.auth_supernode_public_key)
    if (keys[0] is None) != (keys[1] is None):
        raise ValueError(
            "give both --auth-supernode-private-key and --auth-supernode-public-key, or neither"
        )
    try:
        node_config = parse_config_args([args.node_config]) if args.node_config else {}
    except Exception as exc:
        raise ValueError(f"--node-config {args.node_config!r} cannot be parsed: {exc}") from None
    return NodeSettings(
        superlink=args.superlink,
        node_config=dict(node_config),
        insecure=args.insecure,
        root_certificates=args.root_certificates,
        auth_keys=(keys[0], keys[1]) if keys[0] is not None and keys[1] is not None else None,
        poll_interval=args.poll_interval,
        max_poll_interval=args.max_poll_interval,
        idle_poll_interval=args.idle_poll_interval,
        max_retries=args.max_retries,
        max_wait_time=args.max_wait_time,
        torch_threads=args.torch_threads,
    )


RECONNECT_DELAY = 2.0
"""Seconds a party node waits before registering again after its connection ended."""


def main(argv: Sequence[str] | None = None) -> int:
    """``flwr-vflgan-node``: run until SIGINT/SIGTERM; exit status 2 on bad settings."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # One line per HTTP request (thousands per run) would drown the node's own lines.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        settings = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"flwr-vflgan-node: error: {exc}", file=sys.stderr, flush=True)
        return 2
    # Before the ClientApp loads: glibc returns freed tables, TorchDynamo stays unloaded.
    if not prepare_party_process().freed_memory_returned:
        log.info("not glibc: freed memory is returned to the system as the allocator decides")
    import torch

    from flwr_vflgan.clients.client_app import app

    torch.set_num_threads(settings.torch_threads)
    stop, interrupted = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    node = PartyNode(app, settings)
    node.serve(stop, interrupted=interrupted)
    while node.registration_lost and not stop.is_set():
        # The SuperLink restarted (or dropped this node): register again rather than
        # exit. A SuperLink that stays away ends the node through Flower's connection
        # retries (--max-retries, --max-wait-time).
        log.warning(
            "the SuperLink at %s no longer knows this node (it restarted?): registering "
            "again in %.0f s",
            settings.superlink,
            RECONNECT_DELAY,
        )
        stop.wait(RECONNECT_DELAY)
        # The SIGINT that Flower's heartbeat sent on the same 401 has been handled by now
        # (its thread ended with the connection): it must not stop the new one.
        interrupted.clear()
        node.registration_lost = False
        node.serve(stop, interrupted=interrupted)
    log.info(
        "stopped after %d messages (%.1f s in the ClientApp, %.1f s moving messages)",
        node.stats.messages,
        node.stats.app_seconds,
        node.stats.transfer_seconds,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
