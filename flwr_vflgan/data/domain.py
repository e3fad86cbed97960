"""Public metadata of a table: each column's kind, numeric bounds and category list.

An encoder fitted on the private rows publishes their statistics (means, deviations,
minima and maxima, which categories occur), and those are outside any DP guarantee.
``dp=end_to_end`` therefore builds every encoder from a :class:`PublicDomain` the
operator supplies (``dataset.domain``: a JSON or YAML file, or a mapping), taken from a
codebook or other public knowledge, never from the rows:

.. code-block:: yaml

    age: {kind: integer, min: 17, max: 90}
    hours-per-week: {kind: integer, min: 1, max: 99}
    workclass: {kind: categorical, categories: [Private, Self-emp-not-inc, ...], missing: true}

Numeric columns are then scaled by their bounds, ``(x - mid) / half_range`` with
``mid`` and ``half_range`` of ``[min, max]``; a private value outside the bounds is
clipped to them when encoded (the number clipped is logged by the holder only). A
categorical column's one-hot block has the listed categories in the listed order, plus a
missing-value slot when ``missing: true``; a private value not listed is an error that
names it. The domain also fixes each column's kind, so nothing about the encoding is
inferred from the rows (the column dtypes recorded for decoding are the one exception,
and they are the file's storage types, not statistics).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from flwr_vflgan.checked import is_finite_number
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema, parse_kind

__all__ = [
    "ColumnDomain",
    "PublicDomain",
    "bundled_domain",
    "bundled_domains",
    "required_domain",
    "resolve_domain",
]

_KEYS = {
    ColumnKind.CATEGORICAL: {"kind", "categories", "missing"},
    ColumnKind.INTEGER: {"kind", "min", "max", "missing"},
    ColumnKind.CONTINUOUS: {"kind", "min", "max", "missing"},
}


def _bound(column: str, key: str, value: object) -> float:
    if not is_finite_number(value):
        raise ValueError(
            f"dataset.domain: column {column!r} {key} must be a finite number, got {value!r}"
        )
    return float(value)


def _missing(column: str, entry: Mapping[str, Any]) -> bool:
    missing = entry.get("missing", False)
    if not isinstance(missing, bool):
        raise ValueError(f"dataset.domain: column {column!r} missing must be true or false")
    return missing


@dataclass(frozen=True)
class ColumnDomain:
    """What is publicly known about one column.

    Parameters
    ----------
    name
        Column name.
    kind
        ``categorical``, ``integer`` or ``continuous``.
    categories
        Categorical only: every value the column may take, in one-hot order.
    minimum, maximum
        Numeric only: the bounds values are clipped to (``minimum < maximum``).
    missing
        Whether a value may be missing: a categorical column gets a missing slot, a
        numeric one a ``[present, missing]`` indicator.
    """

    name: str
    kind: ColumnKind
    categories: tuple[str | int | float | bool, ...] = ()
    minimum: float = 0.0
    maximum: float = 0.0
    missing: bool = False

    @classmethod
    def from_mapping(cls, name: str, entry: object) -> ColumnDomain:
        """Parse one column's entry; every error names the column and the rule."""
        if not isinstance(entry, Mapping) or "kind" not in entry:
            raise ValueError(
                f"dataset.domain: column {name!r} must be a mapping with a 'kind' "
                f"(categorical, integer or continuous), got {entry!r}"
            )
        kind = parse_kind(str(entry["kind"]), column=name)
        unknown = sorted(set(entry) - _KEYS[kind])
        if unknown:
            raise ValueError(
                f"dataset.domain: column {name!r} ({kind.value}) has unknown keys {unknown}; "
                f"valid: {sorted(_KEYS[kind])}"
            )
        if kind is ColumnKind.CATEGORICAL:
            return cls._categorical(name, entry)
        if "min" not in entry or "max" not in entry:
            raise ValueError(f"dataset.domain: numeric column {name!r} needs 'min' and 'max'")
        low, high = _bound(name, "min", entry["min"]), _bound(name, "max", entry["max"])
        if not low < high:
            raise ValueError(
                f"dataset.domain: column {name!r} needs min < max, got [{low:g}, {high:g}]"
            )
        return cls(name, kind, minimum=low, maximum=high, missing=_missing(name, entry))

    @classmethod
    def _categorical(cls, name: str, entry: Mapping[str, Any]) -> ColumnDomain:
        categories = entry.get("categories")
        if not isinstance(categories, Sequence) or isinstance(categories, str) or not categories:
            raise ValueError(
                f"dataset.domain: categorical column {name!r} needs a non-empty list "
                f"'categories', got {categories!r}"
            )
        for value in categories:
            if not isinstance(value, str | int | float | bool) or value != value:
                raise ValueError(
                    f"dataset.domain: column {name!r} lists {value!r}; categories must be "
                    "strings, numbers or booleans (declare missing values with missing: true)"
                )
        if len(set(categories)) != len(categories):
            raise ValueError(f"dataset.domain: column {name!r} lists a category twice")
        missing = _missing(name, entry)
        return cls(name, ColumnKind.CATEGORICAL, categories=tuple(categories), missing=missing)

    def to_mapping(self) -> dict[str, Any]:
        """Inverse of :meth:`from_mapping`."""
        if self.kind is ColumnKind.CATEGORICAL:
            return {
                "kind": self.kind.value,
                "categories": list(self.categories),
                "missing": self.missing,
            }
        return {
            "kind": self.kind.value,
            "min": self.minimum,
            "max": self.maximum,
            "missing": self.missing,
        }


@dataclass(frozen=True)
class PublicDomain:
    """Public metadata of some columns (:class:`ColumnDomain` by name)."""

    columns: Mapping[str, ColumnDomain]

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> PublicDomain:
        """Parse ``{column: {kind: ..., ...}}``.

        Raises
        ------
        ValueError
            The mapping is empty, or an entry is malformed (the column is named).
        """
        if not isinstance(mapping, Mapping) or not mapping:
            raise ValueError(f"dataset.domain must map column names to entries, got {mapping!r}")
        return cls(
            {str(name): ColumnDomain.from_mapping(str(name), e) for name, e in mapping.items()}
        )

    @classmethod
    def load(cls, path: str | Path) -> PublicDomain:
        """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) domain file."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"dataset.domain file {str(path)!r} does not exist")
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            import yaml  # PyYAML comes with Hydra

            content = yaml.safe_load(text)
        elif path.suffix == ".json":
            content = json.loads(text)
        else:
            raise ValueError(f"dataset.domain file {str(path)!r} must be .json, .yaml or .yml")
        return cls.from_mapping(content)

    def to_mapping(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {name: column.to_mapping() for name, column in self.columns.items()}

    def schema_for(self, schema: Schema) -> Schema:
        """``schema``'s columns with the domain's kinds (the label kept).

        Raises
        ------
        ValueError
            A column of ``schema`` is not in the domain (all such columns are named).
        """
        missing = [name for name in schema.names if name not in self.columns]
        if missing:
            raise ValueError(
                f"dataset.domain has no entry for columns {missing}: under dp=end_to_end every "
                "column's bounds or categories must come from public metadata"
            )
        return Schema(
            tuple(ColumnSpec(name, self.columns[name].kind) for name in schema.names),
            label=schema.label,
        )


def bundled_domain(name: str) -> PublicDomain | None:
    """The domain shipped for registered dataset ``name`` (:func:`bundled_domains`:
    ``adult``, ``adult_thesis``, ``german_credit``), or ``None``.

    Adult's (``bundled/adult.domain.json``) lists the categories of UCI's ``adult.names``
    codebook in its order and hand-chosen numeric bounds (census top-codes and round
    numbers; ``bundled/README.md`` says which and how they were chosen); no code computes
    them from the rows.
    """
    resource = resources.files("flwr_vflgan.data").joinpath("bundled", f"{name}.domain.json")
    if not resource.is_file():
        return None
    return PublicDomain.from_mapping(json.loads(resource.read_text(encoding="utf-8")))


def bundled_domains() -> list[str]:
    """The names of the registered datasets with a bundled domain, sorted."""
    suffix = ".domain.json"
    folder = resources.files("flwr_vflgan.data").joinpath("bundled")
    return sorted(p.name[: -len(suffix)] for p in folder.iterdir() if p.name.endswith(suffix))


def resolve_domain(value: object) -> PublicDomain | None:
    """``dataset.domain`` as given: ``None``, a mapping, a registered dataset's name with
    a bundled domain (``adult``), or a ``.json``/``.yaml`` file.

    Raises
    ------
    ValueError
        A name with no bundled domain that is not a file either, or a malformed domain.
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        return PublicDomain.from_mapping(value)
    if isinstance(value, str | Path):
        bundled = bundled_domain(str(value)) if isinstance(value, str) else None
        if bundled is not None:
            return bundled
        if Path(value).suffix in (".json", ".yaml", ".yml"):
            return PublicDomain.load(value)
        raise ValueError(
            f"dataset.domain={str(value)!r} is neither a bundled domain "
            f"({', '.join(bundled_domains())}) nor a .json/.yaml file"
        )
    raise ValueError(f"dataset.domain must be a file, a bundled name or a mapping, got {value!r}")


def required_domain(given: PublicDomain | None, source: str) -> PublicDomain:
    """The domain ``dp=end_to_end`` builds encoders from: ``given``, else the one bundled
    for dataset ``source``.

    Raises
    ------
    ValueError
        Neither exists; the message says how to give one.
    """
    domain = given if given is not None else bundled_domain(source)
    if domain is None:
        raise ValueError(
            "dp=end_to_end builds every encoder from public metadata, and "
            f"{source!r} has none bundled: give dataset.domain=FILE.json or .yaml "
            "with each column's kind and bounds or categories (docs/privacy.md)"
        )
    return domain
