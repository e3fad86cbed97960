"""A Flower ``Grid`` that calls a ``ClientApp`` directly, in this process.

It uses real Flower Messages, Contexts and records (so the ClientApp, its state
(de)serialisation and every message are exactly what runs in a deployment) but no
engine, no polling and no transport: one exchange costs a few milliseconds. Tests use
it, and ``runtime=inprocess`` runs whole trainings with it. An optional ``observer``
sees every instruction and reply (the protocol audit uses it).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from uuid import uuid4

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

log = logging.getLogger(__name__)

SUPERLINK_NODE_ID = 1
_FIRST_NODE_ID = 1001
ERROR_UNAVAILABLE = 3
ERROR_CLIENT_EXCEPTION = 4
ERROR_NODE_UNAVAILABLE = 5
"""Flower's ``ErrorCode.NODE_UNAVAILABLE``: what a SuperLink answers for a node whose
heartbeat stopped."""


class InProcessGrid(Grid):
    """Grid over ``len(node_configs)`` in-process nodes running ``client_app``.

    Parameters
    ----------
    client_app
        The ClientApp every node runs.
    node_configs
        One ``node_config`` per node (``partition-id``, ``data-path``, ``shared-seed``...).
    run_config
        The run config every node's Context carries.
    run_id
        Run id stamped on messages and Contexts.
    observer
        Called with every instruction before delivery and every reply after it.
    """

    def __init__(
        self,
        client_app: ClientApp,
        node_configs: Sequence[Mapping[str, bool | float | int | str]],
        run_config: Mapping[str, bool | float | int | str] | None = None,
        run_id: int = 1,
        observer: Callable[[Message], None] | None = None,
    ) -> None:
        if not node_configs:
            raise ValueError("an InProcessGrid needs at least one node")
        self._app = client_app
        self._run = Run.create_empty(run_id)
        self._observer = observer
        self._contexts: dict[int, Context] = {}
        for index, node_config in enumerate(node_configs):
            node_id = _FIRST_NODE_ID + index
            self._contexts[node_id] = Context(
                run_id=run_id,
                node_id=node_id,
                node_config=dict(node_config),
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
        self._replies: dict[str, Message] = {}
        self._failed: set[int] = set()
        self._next_node_id = _FIRST_NODE_ID + len(node_configs)
        # Flower stamps instructions with the identity of the running ServerApp task.
        TaskIdentity.run_id = run_id
        TaskIdentity.node_id = SUPERLINK_NODE_ID
        TaskIdentity.task_id = 1

    def set_run(self, run: Run) -> None:
        """Replace the run description."""
        self._run = run

    @property
    def run(self) -> Run:
        """The run description."""
        return self._run

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        """Build an instruction (prefer the ``Message`` constructor, as Flower does)."""
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """Ids of the in-process nodes."""
        return list(self._contexts)

    def context(self, node_id: int) -> Context:
        """A node's Context (its ``state`` persists between messages, as on a SuperNode)."""
        return self._contexts[node_id]

    def fail_node(self, node_id: int, restart: bool = True) -> int | None:
        """A node's process dies: its state is lost and every message for it is answered
        as a SuperLink answers for a node without heartbeat. With ``restart``, a fresh
        process with the same ``node_config`` connects under a new node id (returned), as
        a restarted SuperNode does. An observer may call it for the message it sees."""
        context = self._contexts.pop(node_id)
        self._failed.add(node_id)
        if not restart:
            return None
        new_id = self._next_node_id
        self._next_node_id += 1
        self._contexts[new_id] = Context(
            run_id=context.run_id,
            node_id=new_id,
            node_config=dict(context.node_config),
            state=RecordDict(),
            run_config=dict(context.run_config),
        )
        return new_id

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Deliver each message to its node now; replies wait for :meth:`pull_messages`."""
        ids = []
        for message in messages:
            node_id = message.metadata.dst_node_id
            if node_id not in self._contexts and node_id not in self._failed:
                raise ValueError(f"no node {node_id}; nodes: {sorted(self._contexts)}")
            message_id = str(uuid4())
            message.metadata.__dict__["_message_id"] = message_id
            if self._observer is not None:
                self._observer(message)
            if node_id in self._failed:
                reply = Message(
                    Error(code=ERROR_NODE_UNAVAILABLE, reason=f"node {node_id} is gone"),
                    reply_to=message,
                )
            else:
                reply = self._deliver(message, self._contexts[node_id])
            reply.metadata.__dict__["_message_id"] = str(uuid4())
            if self._observer is not None:
                self._observer(reply)
            self._replies[message_id] = reply
            ids.append(message_id)
        return ids

    def _deliver(self, message: Message, context: Context) -> Message:
        try:
            return self._app(message, context)
        except Exception as exc:
            log.error("ClientApp raised:\n%s", traceback.format_exc())
            return Message(
                Error(code=ERROR_CLIENT_EXCEPTION, reason=f"{type(exc).__name__}: {exc}"),
                reply_to=message,
            )

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Replies for the given ids; each reply is returned once."""
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Push and return every reply (delivery is synchronous here)."""
        return self.pull_messages(list(self.push_messages(messages)))
