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
