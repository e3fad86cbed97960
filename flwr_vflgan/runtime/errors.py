"""Errors of the wire protocol, importable without Flower."""

from __future__ import annotations


class ProtocolError(ValueError):
    """A message broke the protocol (wrong type, missing record, bad shape or values)."""
