"""The party node process: its settings, its command line and the Flower internals it uses.

The internals are outside Flower's public API; this test is where an upgrade of flwr that
moves or changes them fails, naming what changed, before a user's deployment does.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import flwr
import pytest
from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from packaging.version import Version

from flwr_vflgan.clients.node import (
    ERROR_CLIENT_EXCEPTION,
    FLWR_INTERNALS,
    NodeSettings,
    PartyNode,
    main,
    parse_args,
)


def test_flwr_is_inside_the_range_this_node_was_checked_against():
    assert Version("1.41") <= Version(flwr.__version__) < Version("1.43"), (
        f"flwr {flwr.__version__}: check clients/node.py against its source, then widen the "
        "range here and in pyproject.toml"
    )


@pytest.mark.parametrize(("module", "names"), sorted(FLWR_INTERNALS.items()))
def test_every_flower_internal_the_node_uses_exists(module: str, names: tuple[str, ...]):
    loaded = importlib.import_module(module)
    missing = [name for name in names if not hasattr(loaded, name)]
    assert not missing, f"flwr {flwr.__version__} no longer has {module}.{missing}"


def test_the_fleet_connection_has_the_signature_the_node_calls():
    from flwr.supernode.fleet_http_connection import http_request_response

    parameters = list(inspect.signature(http_request_response).parameters)
    assert parameters == [
        "server_address",
        "insecure",
        "root_certificates",
        "authentication_keys",
        "max_retries",
        "max_wait_time",
    ]
    # It yields (node_id, receive, send, get_run, get_fab, pull_object, push_object,
    # confirm_message_received): eight entries, as unpacked in PartyNode.serve.
    returned = str(inspect.signature(http_request_response).return_annotation)
    assert returned.count("Callable") == 7 and "int," in returned.replace(" ", ""), returned


def test_pull_and_push_helpers_take_the_arguments_the_node_passes():
    from flwr.supercore.inflatable.inflatable_utils import (
        pull_and_inflate_object_from_tree,
        push_object_contents_from_iterable,
    )

    pull = inspect.signature(pull_and_inflate_object_from_tree).parameters
    assert list(pull)[:3] == ["object_tree", "pull_object_fn", "confirm_object_received_fn"]
    assert "return_type" in pull
    push = inspect.signature(push_object_contents_from_iterable).parameters
    assert list(push)[:2] == ["object_contents", "push_object_fn"]


def test_command_line_settings():
    settings = parse_args(
        ["--insecure", "--superlink", "127.0.0.1:9", "--node-config", 'partition-id=1 a="x y"']
    )
    assert settings.superlink == "127.0.0.1:9" and settings.insecure
    assert settings.node_config == {"partition-id": 1, "a": "x y"}
    assert (settings.poll_interval, settings.max_poll_interval) == (0.005, 0.1)
    assert settings.idle_poll_interval == 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give --root-certificates PATH"),
        (["--insecure", "--root-certificates", "ca.pem"], "--insecure cannot be combined"),
        (["--root-certificates", "/no/such/ca.pem"], "no such file: /no/such/ca.pem"),
        (["--insecure", "--poll-interval", "0"], "poll_interval must be > 0, got 0.0"),
        (
            ["--insecure", "--poll-interval", "0.5", "--max-poll-interval", "0.2"],
            r"poll_interval \(0.5\) <= max_poll_interval \(0.2\) <= idle_poll_interval",
        ),
        (["--insecure", "--auth-supernode-private-key", "k"], "give both"),
        (["--insecure", "--torch-threads", "0"], "torch_threads must be >= 1"),
    ],
)
def test_bad_settings_are_named(argv: list[str], message: str):
    with pytest.raises(ValueError, match=message):
        parse_args(argv)


def test_bad_settings_exit_with_status_2_and_one_line(capsys: pytest.CaptureFixture[str]):
    assert main(["--poll-interval", "-1", "--insecure"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["flwr-vflgan-node: error: poll_interval must be > 0, got -1.0"]


def test_a_client_app_that_raises_still_gets_an_error_reply(monkeypatch: pytest.MonkeyPatch):
    from flwr.supercore.task_identity import TaskIdentity

    # Flower stamps a new instruction with the identity of the running ServerApp task.
    for name, value in (("_run_id", 1), ("_node_id", 1), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, name, value)
    app = ClientApp()

    @app.train()
    def broken(msg: Message, context: Context) -> Message:
        raise RuntimeError("boom")

    node = PartyNode(app, NodeSettings(superlink="127.0.0.1:1", insecure=True))
    message = Message(RecordDict(), 7, "train")
    context = Context(run_id=1, node_id=7, node_config={}, state=RecordDict(), run_config={})
    reply = node._handle(message, context)
    assert reply.has_error() and reply.error.code == ERROR_CLIENT_EXCEPTION
    assert "boom" in reply.error.reason


def test_a_party_process_does_not_load_libraries_only_other_roles_use():
    # scikit-learn, scipy and dp_accounting cost a party node about 150 MiB; a VFLGAN
    # party without DP never calls them (they load when a VT-GAN client fits its modes,
    # a GAFM client builds its defence or metrics, or a run accounts for DP).
    probe = (
        "import sys\n"
        "import flwr_vflgan.clients.node, flwr_vflgan.clients.client_app\n"
        "from flwr_vflgan.runtime.party_data import party_block\n"
        "from flwr_vflgan.gan.exchanges import LocalVFLGAN\n"
        "print(' '.join(m for m in ('sklearn', 'scipy', 'dp_accounting', 'opacus') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "", f"a party process imports {out.stdout.strip()}"


@pytest.fixture
def _task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_run_id", 1), ("_node_id", 1), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, name, value)


class _ObjectStore:
    """A SuperLink's object store as the Fleet API shows it to a node: a push is stored only
    while the object is pending in the push session (Flower's ``store_object``), a pull
    answers found / available / content. ``lost_answers`` are objects whose first push is
    stored but whose answer never reaches the node, which then sends it again."""

    def __init__(self, pending: set[str], lost_answers: set[str] = frozenset()) -> None:
        self.pending, self.stored = set(pending), {}
        self.lost_answers, self.requests = set(lost_answers), 0

    def push(self, request):
        from flwr.proto.message_pb2 import PushObjectResponse

        self.requests += 1
        stored = request.object_id in self.pending
        if stored:
            self.pending.discard(request.object_id)
            self.stored[request.object_id] = request.object_content
        if request.object_id in self.lost_answers:
            self.lost_answers.discard(request.object_id)
            raise ConnectionError("the answer was lost")
        return PushObjectResponse(stored=stored)

    def pull(self, request):
        from flwr.proto.message_pb2 import PullObjectResponse

        if request.object_id in self.pending:
            return PullObjectResponse(object_found=True, object_available=False)
        if request.object_id not in self.stored:
            return PullObjectResponse(object_found=False, object_available=False)
        content = self.stored[request.object_id]
        return PullObjectResponse(object_found=True, object_available=True, object_content=content)


def _flower_calls(store: _ObjectStore):
    """The node's push and pull functions, built as Flower's fleet connection builds them,
    with one retry of a request that got no answer (Flower's connection retries)."""
    from flwr.proto.node_pb2 import Node
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_pull_object_fn_protobuf,
        make_push_object_fn_protobuf,
    )

    def retried(call):
        def invoke(request):
            try:
                return call(request)
            except ConnectionError:
                return call(request)

        return invoke

    def push_object(session: str, object_id: str, content: bytes) -> None:
        make_push_object_fn_protobuf(retried(store.push), Node(node_id=7), 1, session)(
            object_id, content
        )

    return push_object, make_pull_object_fn_protobuf(store.pull, Node(node_id=7), 1)


def _reply_and_objects() -> tuple[Message, dict[str, bytes]]:
    import numpy as np
    from flwr.app import ArrayRecord, ConfigRecord
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    content = RecordDict({"a": ArrayRecord([np.arange(6.0)]), "c": ConfigRecord({"x": 1})})
    instruction = Message(RecordDict(), dst_node_id=7, message_type="train")
    instruction.metadata.__dict__["_message_id"] = instruction.object_id
    reply = Message(content, reply_to=instruction)
    reply.metadata.__dict__["_message_id"] = reply.object_id
    objects = {oid: obj.deflate() for oid, obj in get_all_nested_objects(reply).items()}
    return reply, objects


@pytest.mark.usefixtures("_task_identity")
def test_a_push_retried_after_its_first_attempt_was_stored_completes_the_reply(
    caplog: pytest.LogCaptureFixture,
):
    """Flower's connection sends a request again when its answer is lost; the SuperLink
    then refuses the object it already stored (ObjectPushError, "the push session may have
    expired or been replaced"). The node asks for it back and goes on: the reply is whole,
    and the node logs no error. (A CI run of the TLS deployment test once failed with that
    error in a node's log while the run finished; its log does not say which cause it was.)"""
    from flwr_vflgan.clients.node import _checked_push, _push_reply

    reply, objects = _reply_and_objects()
    lost = sorted(objects)[0]
    store = _ObjectStore(set(objects), lost_answers={lost})
    push_object, pull_object = _flower_calls(store)

    def send(message, tree, app_seconds):
        return set(objects), "session-1"

    with caplog.at_level("INFO", logger="flwr_vflgan.clients.node"):
        _push_reply(reply, send, _checked_push(push_object, pull_object), 0.0)
    assert store.stored == objects and not store.pending
    assert store.requests == len(objects) + 1  # the lost answer's request was sent twice
    assert f"object {lost} of a reply was already stored" in caplog.text
    assert "ERROR" not in caplog.text


@pytest.mark.usefixtures("_task_identity")
def test_an_object_the_superlink_still_misses_fails_the_push():
    """A refusal the SuperLink does not explain by holding the object (an expired or
    replaced session) stays an error: the reply cannot be read."""
    from flwr.supercore.inflatable.inflatable_utils import ObjectPushError

    from flwr_vflgan.clients.node import _checked_push

    _, objects = _reply_and_objects()
    object_id = sorted(objects)[0]
    store = _ObjectStore(set(objects))
    store.pending.discard(object_id)
    push_object, pull_object = _flower_calls(store)
    store.stored[object_id] = b"other content"  # a different object under that id
    with pytest.raises(ObjectPushError):
        _checked_push(push_object, pull_object)("s", object_id, objects[object_id])

    class StillPending(_ObjectStore):
        def push(self, request):
            from flwr.proto.message_pb2 import PushObjectResponse

            return PushObjectResponse(stored=False)  # the session went; still pending

    store = StillPending(set(objects))
    push_object, pull_object = _flower_calls(store)
    with pytest.raises(ObjectPushError):
        _checked_push(push_object, pull_object)("s", object_id, objects[object_id])


@pytest.mark.usefixtures("_task_identity")
def test_an_object_already_read_and_released_is_logged_on_one_line(
    caplog: pytest.LogCaptureFixture,
):
    from flwr_vflgan.clients.node import _checked_push

    _, objects = _reply_and_objects()
    object_id = sorted(objects)[0]
    store = _ObjectStore(set())  # not pending, not held: the server read it and released it
    push_object, pull_object = _flower_calls(store)
    with caplog.at_level("INFO", logger="flwr_vflgan.clients.node"):
        _checked_push(push_object, pull_object)("s", object_id, objects[object_id])
    assert f"refused object {object_id} of a reply and no longer holds it" in caplog.text
    assert "Traceback" not in caplog.text
