"""The import structure: no cycle between modules, and packages import only the layers below.

Every import counts: top level, inside ``if TYPE_CHECKING:``, and inside functions, because each
is a dependency a reader must follow. The layers, top to bottom, are ``LAYERS``; a package may
import itself and any package of a lower layer, never one of its own layer or above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("receiver", "handlers")

# Top to bottom. Packages of one layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("receiver.__main__",),
    ("receiver.cli",),
    ("receiver.client",),
    ("receiver.service",),
    ("receiver.console",),
    ("receiver.intake", "receiver.admin", "receiver.sim"),
    ("handlers",),
    ("receiver.pipeline", "receiver.ops"),
    ("receiver.config",),
    ("receiver.providers", "receiver.signatures", "receiver.store"),
    (
        "receiver.errors",
        "receiver.models",
        "receiver.completion",
        "receiver.secret",
        "receiver.files",
        "receiver.jsontext",
        "receiver.backoff",
        "receiver.loops",
        "receiver.tracing",
        "receiver.importer",
        "receiver.sockets",
    ),
)
ROOT_VOCABULARY = set(LAYERS[-1])
# The store's backends: each may use the shared store modules, none another backend, and
# nothing else may name one except the factory that picks a backend by URL.
BACKENDS = ("receiver.store.sqlite", "receiver.store.postgres")
BACKEND_FACTORY = "receiver.store"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    }
    del found["receiver"]  # the package's docstring; it imports nothing
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports, wherever in the file the import stands."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # ``from package import module`` depends on that module; any other name, on the
            # module it is taken from (a package's face, when it re-exports).
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                for alias in node.names
            ]
        for target in targets:
            # the longest known module the dotted name starts with
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the unit it belongs to); root vocabulary modules are units of their own."""
    for index, layer in enumerate(LAYERS):
        for unit in layer:
            if module == unit or module.startswith(unit + "."):
                return index, unit
    raise AssertionError(
        f"{module} belongs to no layer: add its package to LAYERS in tests/test_layers.py"
    )


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle in the graph, as a path that starts and ends at the same module, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    problems = []
    for source, targets in sorted(edges.items()):
        source_layer, source_unit = layer_of(source)
        for target in sorted(targets):
            target_layer, target_unit = layer_of(target)
            if source_unit == target_unit:
                continue
            if source_layer == len(LAYERS) - 1 == target_layer:
                continue  # root vocabulary modules may use each other (cycles are caught apart)
            if target_layer <= source_layer:
                problems.append(f"{source} imports {target}")
    return problems


def backend_of(module: str) -> str | None:
    return next((b for b in BACKENDS if module == b or module.startswith(b + ".")), None)


def backend_imports(edges: dict[str, set[str]]) -> list[str]:
    """Imports of a backend from outside it, except by the factory."""
    problems = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            backend = backend_of(target)
            if backend not in (None, backend_of(source)) and source != BACKEND_FACTORY:
                problems.append(f"{source} imports {target}")
    return problems


def test_every_module_belongs_to_a_layer() -> None:
    for name in modules():
        layer_of(name)


def test_no_module_imports_its_way_back_to_itself() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_packages_import_only_the_layers_below() -> None:
    assert upward_imports(graph()) == []


def test_only_the_store_factory_imports_a_backend() -> None:
    """Shared store modules, the other backend and the rest of the code base talk to the
    contract (``receiver.store.base``); only ``open_store`` knows which backend it built."""
    assert backend_imports(graph()) == []


def test_an_import_of_a_backend_from_elsewhere_is_reported() -> None:
    edges = {
        "receiver.store": {"receiver.store.sqlite.store", "receiver.store.postgres.store"},
        "receiver.store.sqlite.store": {"receiver.store.sqlite.operations", "receiver.store.sql"},
        "receiver.store.postgres.store": {"receiver.store.sqlite.operations"},
        "receiver.store.queries": {"receiver.store.postgres.sql"},
        "receiver.admin.views": {"receiver.store.sqlite.store"},
    }
    assert backend_imports(edges) == [
        "receiver.admin.views imports receiver.store.sqlite.store",
        "receiver.store.postgres.store imports receiver.store.sqlite.operations",
        "receiver.store.queries imports receiver.store.postgres.sql",
    ]


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"a.x"}, "a.x": {"a"}}, ["a", "a.x", "a"]),
    ],
)
def test_the_cycle_finder_finds_cycles(
    edges: dict[str, set[str]], expected: list[str] | None
) -> None:
    assert find_cycle(edges) == expected


def test_an_import_back_up_the_layers_is_reported(tmp_path: Path) -> None:
    """A TYPE_CHECKING import inside a function still counts, and is named."""
    module = tmp_path / "dispatcher.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "def f():\n"
        "    if TYPE_CHECKING:\n"
        "        from receiver.service.app import create_app\n"
    )
    known = {"receiver.service.app", "receiver.pipeline.dispatcher"}
    found = imports_of("receiver.pipeline.dispatcher", module, known)
    assert found == {"receiver.service.app"}
    edges = {"receiver.pipeline.dispatcher": found, "receiver.service.app": set()}
    assert upward_imports(edges) == ["receiver.pipeline.dispatcher imports receiver.service.app"]
