"""Imports run one way: the layer order of docs/architecture.md, read from the source.

Every ``import`` of the project's own modules (at module level or inside a function) is
checked against the layers below; module-level imports must also form no cycle. The
core never imports Hydra, Flower's ServerApp or ClientApp packages.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = {
    "flwr_vflgan": REPO / "flwr_vflgan",
    "flwr_vflgan.strategies": REPO / "strategies",
    "flwr_vflgan.clients": REPO / "clients",
    "flwr_vflgan.simulations": REPO / "simulations",
}

LAYERS: list[set[str]] = [
    {"flwr_vflgan", "checked", "atomic", "plugin"},
    {"data", "nn"},
    {"runtime", "metrics"},
    {"privacy", "evaluation"},
    {"gan", "vtgan", "gafm", "marginals", "series", "latent", "dplt"},  # the algorithm families
    {"config"},  # the umbrella of a run's settings (every family's)
    {"strategies", "clients"},
    {"simulations"},
]
"""Lowest first, by the package right under ``flwr_vflgan`` (``config`` is config.py, the
umbrella of every family's settings):
a module imports from its own package, lower layers, and peers this test allows."""

PEERS: dict[str, set[str]] = {
    "vtgan": {"gan"},  # VT-GAN builds on VFLGAN's schedule, losses and settings
    "series": {"gan"},  # VFLGAN-TS rides VFLGAN's step protocol, schedule and server
    "dplt": {"marginals"},  # DPLT codes its columns from the public domain as AIM and MST do
}
"""Imports within a layer. ``strategies`` and ``clients`` (server and party side) never
import each other, and GAFM stands alone."""

KNOWN_BACK_ARROWS: set[tuple[str, str]] = set()
"""Imports against the design that PEERS allows for now, to be removed: the test fails
once one is gone, so that this list and PEERS shrink with it. None are left."""

PLUGIN_PATH = re.compile(r"flwr_vflgan(\.[a-z_0-9]+)+(:[A-Za-z_0-9]+)?")
"""A plug-in path string (:func:`flwr_vflgan.plugin.load_attribute`), or a module path a
registry imports with ``importlib``."""

CORE_NEVER_IMPORTS = ("hydra", "omegaconf", "flwr.serverapp", "flwr.clientapp")


def _module_name(root: str, path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([root, *parts])


def _modules() -> Iterator[tuple[str, Path]]:
    for root, base in SOURCES.items():
        for path in sorted(base.rglob("*.py")):
            if root == "flwr_vflgan" and path.parent.name == "bundled":
                continue
            yield _module_name(root, path, base), path


def _imports(name: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import in ``path``."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # A name may be a submodule ("from pkg import protocol"); the resolver below
            # keeps the longest prefix that is a module.
            targets = [f"{module}.{alias.name}" for alias in node.names]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and PLUGIN_PATH.fullmatch(node.value)
            and _package(node.value) != "conf"  # Hydra's config package: data, not code
        ):
            # A plug-in path ("flwr_vflgan.x.y:attr", imported when first used) is an
            # import the registry defers: it obeys the layer order like any other.
            targets = [node.value.replace(":", ".")]
            yield targets[0], node.lineno, False
            continue
        else:
            continue
        for target in targets:
            yield target, node.lineno, id(node) in top_level


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "flwr_vflgan"


def _layer(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(f"flwr_vflgan.{package} is in no layer of this test: add it")


def _edges() -> list[tuple[str, str, str, int, bool]]:
    """(importer, imported, file, line, module level) for imports of the project's modules."""
    edges = []
    for name, path in _modules():
        for target, line, top in _imports(name, path):
            if target == "flwr_vflgan" or target.startswith("flwr_vflgan."):
                edges.append((name, target, str(path.relative_to(REPO)), line, top))
    return edges


def test_every_package_has_a_layer():
    for name, _ in _modules():
        _layer(_package(name))


def test_imports_follow_the_layer_order():
    wrong = []
    for importer, imported, where, line, _ in _edges():
        source, target = _package(importer), _package(imported)
        if source == target or _layer(target) < _layer(source):
            continue
        if _layer(target) == _layer(source) and target in PEERS.get(source, set()):
            continue
        wrong.append(f"{where}:{line}: {importer} imports {imported}")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_known_back_arrows_still_exist():
    seen = {(_package(a), _package(b)) for a, b, *_ in _edges()}
    gone = KNOWN_BACK_ARROWS - seen
    assert not gone, f"{sorted(gone)} no longer exist: remove them from KNOWN_BACK_ARROWS and PEERS"


def test_imports_form_no_cycle():
    # Imports inside functions count too: deferring one end of a loop hides it from
    # Python, not from the design.
    known = {name for name, _ in _modules()}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for importer, imported, *_ in _edges():
        # "from package import name" may name a submodule: count the longest known prefix.
        while imported not in known and "." in imported:
            imported = imported.rsplit(".", 1)[0]
        # A package's __init__ re-exporting its own modules is not a loop of the design
        # (a module importing its package's __init__ is, and is kept).
        if imported in known and imported != importer and not imported.startswith(importer + "."):
            graph[importer].add(imported)
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for child in sorted(graph[node]):
            if state.get(child) == 1:
                return [*stack[stack.index(child) :], child]
            if child not in state and (found := visit(child)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("forbidden", CORE_NEVER_IMPORTS)
def test_the_core_imports_no_hydra_and_no_flower_apps(forbidden: str):
    hits = [
        f"{path.relative_to(REPO)}:{line}"
        for name, path in _modules()
        if _layer(_package(name)) < _layer("strategies")
        for target, line, _ in _imports(name, path)
        if target == forbidden or target.startswith(forbidden + ".")
    ]
    assert not hits, f"the core imports {forbidden}: {hits}"
