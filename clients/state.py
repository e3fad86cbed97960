"""A party's bookkeeping between messages: a dataclass kept in ``context.state`` as JSON
with a schema version (a deployment runs every message in a new process)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any, ClassVar, TypeVar

from flwr_vflgan.runtime.blocks import StepBlock
from flwr_vflgan.runtime.codec import ProtocolError

Meta = TypeVar("Meta", bound="BlockState")


class BlockState:
    """Mixin for a party's state dataclass; its JSON carries ``schema_version``
    (:data:`SCHEMA_VERSION`), and a ``pending: StepBlock`` field, if it has one, travels
    as ``[start, count]``.

    ``WHO`` names the holder in errors (``party``, ``client``).
    """

    WHO: ClassVar[str] = "party"
    SCHEMA_VERSION: ClassVar[int] = 1

    def to_json(self) -> str:
        """JSON for ``context.state``."""
        values: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        pending = getattr(self, "pending", None)
        if isinstance(pending, StepBlock):
            values["pending"] = [pending.start, pending.count]
        values["schema_version"] = self.SCHEMA_VERSION
        return json.dumps(values)

    @classmethod
    def from_json(cls: type[Meta], text: str) -> Meta:
        """Inverse of :meth:`to_json`.

        Raises
        ------
        ProtocolError
            The state was written by another schema version of this code.
        """
        values = json.loads(text)
        version = values.pop("schema_version", None)
        if version != cls.SCHEMA_VERSION:
            raise ProtocolError(
                f"{cls.WHO} state has schema {version}, this {cls.WHO} reads {cls.SCHEMA_VERSION}"
            )
        if "pending" in {f.name for f in fields(cls)}:  # type: ignore[arg-type]
            values["pending"] = StepBlock(*values["pending"])
        return cls(**values)
