"""Row alignment between parties: an ID digest each party can publish, and the check.

VFL needs row ``i`` to be the same entity at every party. Each party computes
:func:`id_digest` of its ID column and reports it with its row count; the server calls
:func:`check_aligned` before any training.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

__all__ = ["AlignmentError", "check_aligned", "id_digest"]


class AlignmentError(ValueError):
    """The parties' rows do not line up (different counts, IDs or order).

    Attributes
    ----------
    parties
        The parties that differ from the reference party (the smallest index).
    """

    def __init__(self, message: str, parties: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.parties = tuple(parties)


def id_digest(ids: pd.Series) -> str:
    """SHA-256 (hex) of the IDs in row order.

    Each ID is turned into a canonical string (whole-number floats as integers, so
    ``7``, ``7.0`` and ``"7"`` agree) and hashed with its length as a prefix, so the
    digest changes with any ID or with the order.

    Raises
    ------
    TypeError
        If ``ids`` is not a Series.
    ValueError
        If an ID is missing.

    Notes
    -----
    The digest proves that rows line up without sending the IDs, but it hides nothing
    about IDs an attacker can guess (``0 .. n-1`` included).
    """
    if not isinstance(ids, pd.Series):
        raise TypeError(f"ids must be a pandas Series, got {type(ids).__name__}")
    n_missing = int(ids.isna().sum())
    if n_missing:
        raise ValueError(f"ids has {n_missing} missing values")
    digest = hashlib.sha256()
    for value in ids.tolist():
        token = _canonical_id(value).encode("utf-8")
        digest.update(len(token).to_bytes(8, "big"))
        digest.update(token)
    return digest.hexdigest()


def _canonical_id(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def check_aligned(digests: Mapping[int, str], row_counts: Mapping[int, int]) -> None:
    """Check that every party holds the same rows in the same order.

    Parameters
    ----------
    digests
        :func:`id_digest` of each party's IDs, by party index.
    row_counts
        Each party's number of rows, by party index.

    Raises
    ------
    AlignmentError
        If a party's row count or digest differs from the lowest-indexed party's; the
        message names every such party and both sides of each mismatch.
    ValueError
        If the two mappings are empty or cover different parties.
    """
    if set(digests) != set(row_counts):
        raise ValueError(
            f"digests and row_counts must cover the same parties: digests has "
            f"{sorted(digests)}, row_counts has {sorted(row_counts)}"
        )
    if not digests:
        raise ValueError("check_aligned needs at least one party, got none")
    reference, *others = sorted(digests)
    problems, parties = [], []
    for party in others:
        if row_counts[party] != row_counts[reference]:
            problems.append(
                f"party {party} has {row_counts[party]} rows, party {reference} has "
                f"{row_counts[reference]}"
            )
            parties.append(party)
        elif digests[party] != digests[reference]:
            problems.append(
                f"party {party}'s row IDs do not match party {reference}'s (same count, "
                f"different IDs or order)"
            )
            parties.append(party)
    if problems:
        raise AlignmentError("rows are not aligned: " + "; ".join(problems), parties)
