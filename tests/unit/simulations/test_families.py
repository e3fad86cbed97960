"""The family registry: every algorithm has one family, and every entry a family names
exists with the shape its command expects."""

from __future__ import annotations

import inspect

import pytest

from flwr_vflgan.config import Variant
from flwr_vflgan.simulations.families import FAMILIES, families_of, family_of

HOOKS = ("specs", "run_one", "write", "announce")


def test_every_algorithm_belongs_to_exactly_one_family():
    claimed = [v for family in FAMILIES for v in family.variants]
    assert sorted(claimed) == sorted(Variant), "an algorithm has no family, or two"
    for variant in Variant:
        assert variant in family_of(variant.value).variants


def test_an_unknown_algorithm_is_refused_with_the_valid_names():
    with pytest.raises(ValueError, match=r"unknown algorithm variant 'pategan'.*vflgan"):
        family_of("pategan")


def test_families_of_keeps_registry_order_and_names_each_family_once():
    assert [f.name for f in families_of(["gafm", "vflgan", "splitnn", "wgan_gp"])] == [
        "vflgan",
        "gafm",
    ]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_entry_of_a_family_resolves(family):
    run = family.runner()
    assert {"spec", "grid", "progress", "observer"} <= set(inspect.signature(run).parameters)
    assert list(inspect.signature(family.benchmark()).parameters) == ["cfg"]
    reproduction = family.reproduction()
    assert isinstance(reproduction.TABLE, str) and reproduction.TABLE
    for hook in HOOKS:
        assert callable(getattr(reproduction, hook, None)), f"{family.name} lacks {hook}"
    # Families may share a reproduction module (the marginal baselines join Table 1),
    # which then writes one table for them all; distinct modules never share a table.
    modules = {f.reproduce: f.reproduction().TABLE for f in FAMILIES}
    assert len(modules) == len(set(modules.values())), "two modules write the same table"
