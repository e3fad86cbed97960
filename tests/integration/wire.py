"""The message audits' shared check: every record and field of a message is listed."""

from __future__ import annotations

from collections.abc import Mapping

from flwr.app import Message

SETUP_FIELDS = frozenset(
    {
        "algorithm",
        "checkpoint_root",
        "data_spec",
        "n_parties",
        "protocol_version",
        "resume_step",
        "run_seed",
    }
)
"""The setup instruction's fields (VFLGAN's and VT-GAN's: the same message at each
family's protocol version). Never a shared seed."""

Allowed = Mapping[tuple[str, str], Mapping[str, set[str]]]


def check_listed_fields(message: Message, direction: str, allowed: Allowed) -> None:
    """The message's records and fields are among those ``allowed`` lists for its kind
    and ``direction``: a field added on either side fails until it is listed."""
    kind = message.metadata.message_type
    listed = allowed[(direction, kind)]
    assert set(message.content) <= set(listed), (direction, kind, set(message.content))
    for name, record in message.content.items():
        extra = set(record) - listed[name]
        assert not extra, f"{direction} {kind}: unlisted {name} {extra}"
