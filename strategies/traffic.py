"""Bytes of array payload a split-learning run sends, per party, direction and step kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from flwr.app import ArrayRecord, Message, RecordDict

from flwr_vflgan.runtime import protocol as P


@dataclass
class Traffic:
    """Bytes of array payload (features, gradients, chunks, conditions, indices) sent
    during training, per client and direction, by the kind of step they belong to."""

    to_client: dict[str, list[int]] = field(default_factory=dict)
    from_client: dict[str, list[int]] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)

    def count(
        self,
        kinds: tuple[str, str],
        messages: Sequence[Message],
        replies: Mapping[int, Message],
        order: Sequence[int],
    ) -> None:
        """Add one exchange's payload, booked to the step each value belongs to.

        ``kinds`` is the kind (``d``/``g``) of the step being applied and of the step
        being run forward: gradients and chunk gradients belong to the first, features,
        chunks, row indices and conditions to the second.
        """
        applied, forward = kinds
        index = {node: i for i, node in enumerate(order)}
        for kind in kinds:
            self.to_client.setdefault(kind, [0] * len(order))
            self.from_client.setdefault(kind, [0] * len(order))
        for message in messages:
            i = index[message.metadata.dst_node_id]
            for name, size in payload_bytes(message.content).items():
                self.to_client[applied if name == P.GRADS else forward][i] += size
        for node, reply in replies.items():
            for name, size in payload_bytes(reply.content).items():
                self.from_client[applied if name == P.CHUNK else forward][index[node]] += size

    def per_step(self) -> dict[str, dict[str, list[float]]]:
        """Mean bytes per step of each kind: ``{kind: {to_client: [...], from_client: [...]}}``."""
        return {
            kind: {
                direction: [b / max(1, self.steps.get(kind, 0)) for b in totals[kind]]
                for direction, totals in (
                    ("to_client", self.to_client),
                    ("from_client", self.from_client),
                )
            }
            for kind in self.to_client
        }


def payload_bytes(content: RecordDict) -> dict[str, int]:
    """Bytes of array data per record name."""
    return {
        name: sum(len(array.data) for array in record.values())
        for name, record in content.items()
        if isinstance(record, ArrayRecord)
    }


def message_array_bytes(message: Message) -> int:
    """Bytes of array data a message carries (0 for an error reply)."""
    return sum(payload_bytes(message.content).values()) if message.has_content() else 0
