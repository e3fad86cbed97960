"""Vertical partitioning: which party holds which columns.

Every column goes to exactly one party and every party gets at least one column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
import pandas as pd

__all__ = ["PartitionStrategy", "partition_columns", "split_frame"]

PartitionStrategy = Literal["even", "explicit", "random"]


def partition_columns(
    columns: Sequence[str],
    n_parties: int,
    *,
    strategy: str = "even",
    explicit: Sequence[Sequence[str]] | None = None,
    seed: int | None = None,
) -> list[list[str]]:
    """Assign columns to parties.

    Parameters
    ----------
    columns
        All column names, unique, in table order.
    n_parties
        Number of parties, at least 2 and at most ``len(columns)``.
    strategy
        ``"even"``: contiguous blocks in column order whose sizes differ by at most one,
        earlier parties taking the extra columns (15 columns over 2 parties: 8 + 7).
        ``"explicit"``: the assignment in ``explicit``, checked. ``"random"``: a seeded
        permutation split like ``"even"``; each party's columns keep table order.
    explicit
        One list of column names per party, for ``strategy="explicit"`` only.
    seed
        Seed of the permutation; required for ``strategy="random"``, ignored otherwise.

    Returns
    -------
    list of list of str
        ``n_parties`` disjoint, non-empty lists covering ``columns``.

    Raises
    ------
    TypeError
        If ``columns`` is a string or ``n_parties``/``seed`` is not an int.
    ValueError
        If ``columns`` is empty or repeats a name, ``n_parties`` is out of range, the
        strategy is unknown, ``explicit`` is given without ``strategy="explicit"`` (or
        missing with it), ``seed`` is missing for ``"random"``, or the explicit
        assignment is invalid (unknown, repeated or unassigned columns, an empty party,
        or a number of parties other than ``n_parties``).
    """
    names = _check_columns(columns)
    if isinstance(n_parties, bool) or not isinstance(n_parties, int):
        raise TypeError(f"n_parties must be an int, got {type(n_parties).__name__}")
    if n_parties < 2:
        raise ValueError(f"n_parties must be >= 2 for a vertical split, got {n_parties}")
    if n_parties > len(names):
        raise ValueError(
            f"n_parties={n_parties} but only {len(names)} columns: every party needs at "
            f"least one column"
        )
    valid = list(get_args(PartitionStrategy))
    if strategy not in valid:
        raise ValueError(f"unknown partition strategy {strategy!r}; valid strategies: {valid}")
    if strategy != "explicit" and explicit is not None:
        raise ValueError(
            f"explicit is only used with strategy='explicit', got strategy={strategy!r}"
        )
    if strategy == "explicit":
        if explicit is None:
            raise ValueError("strategy='explicit' needs explicit=[[columns of party 0], ...]")
        return _check_explicit(names, n_parties, explicit)
    if strategy == "random":
        if seed is None:
            raise ValueError("strategy='random' needs an int seed, got seed=None")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        order = np.random.default_rng(seed).permutation(len(names))
        return [[names[i] for i in np.sort(block)] for block in _even_blocks(order, n_parties)]
    return [[names[i] for i in block] for block in _even_blocks(np.arange(len(names)), n_parties)]


def _check_columns(columns: Sequence[str]) -> list[str]:
    if isinstance(columns, str):
        raise TypeError(f"columns must be a sequence of names, got the string {columns!r}")
    names = list(columns)
    if not names:
        raise ValueError("columns must not be empty")
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"column names must be strings, got {name!r}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"column names must be unique; repeated: {repeated}")
    return names


def _even_blocks(items: np.ndarray, n_parties: int) -> list[np.ndarray]:
    """Contiguous blocks with sizes differing by at most one, larger blocks first."""
    base, extra = divmod(len(items), n_parties)
    sizes = [base + 1 if party < extra else base for party in range(n_parties)]
    bounds = np.cumsum([0, *sizes])
    return [items[bounds[party] : bounds[party + 1]] for party in range(n_parties)]


def _check_explicit(
    names: list[str], n_parties: int, explicit: Sequence[Sequence[str]]
) -> list[list[str]]:
    if isinstance(explicit, str) or any(isinstance(part, str) for part in explicit):
        raise TypeError("explicit must be a list of column lists, one per party")
    parts = [list(part) for part in explicit]
    if len(parts) != n_parties:
        raise ValueError(f"n_parties={n_parties} but explicit lists {len(parts)} parties")
    owner: dict[str, int] = {}
    for party, part in enumerate(parts):
        if not part:
            raise ValueError(f"explicit: party {party} has no columns; every party needs one")
        for name in part:
            if name not in names:
                raise ValueError(
                    f"explicit: unknown column {name!r} in party {party}; valid columns: {names}"
                )
            if name in owner:
                raise ValueError(
                    f"explicit: column {name!r} is assigned to both party {owner[name]} and "
                    f"party {party}"
                )
            owner[name] = party
    unassigned = [name for name in names if name not in owner]
    if unassigned:
        raise ValueError(f"explicit: columns {unassigned} are not assigned to any party")
    return parts


def split_frame(frame: pd.DataFrame, parts: Sequence[Sequence[str]]) -> list[pd.DataFrame]:
    """Cut ``frame`` into one frame per party, with that party's columns in order.

    Parameters
    ----------
    frame
        The full table.
    parts
        Columns of each party, for example from :func:`partition_columns`.

    Returns
    -------
    list of pandas.DataFrame
        Copies sharing ``frame``'s index.

    Raises
    ------
    TypeError
        If ``frame`` is not a DataFrame or ``parts`` is a string.
    ValueError
        If a party has no columns or names a column ``frame`` lacks.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    if isinstance(parts, str):
        raise TypeError(f"parts must be a list of column lists, got the string {parts!r}")
    pieces = []
    for party, part in enumerate(parts):
        if isinstance(part, str) or not part:
            raise ValueError(f"party {party} must have a non-empty list of columns, got {part!r}")
        missing = [name for name in part if name not in frame.columns]
        if missing:
            raise ValueError(
                f"party {party}: columns {missing} are not in the frame; it has "
                f"{list(frame.columns)}"
            )
        pieces.append(frame[list(part)].copy())
    return pieces
