"""The layout's rules, read from the source: no import cycle (imports inside functions and under
TYPE_CHECKING count), no package importing one above it, small modules and functions."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("api", "workers", "shared", "memory_pool", "client", "integrations")
# Lowest first: a module imports only from its own layer or one below (README, Development).
LAYERS = (
    ("shared.errors", "shared.settings"),
    ("shared.format",),
    ("shared.embedding",),
    ("shared.agents",),
    ("shared.store",),
    ("shared.store.qdrant", "shared.store.edge"),
    ("shared.store.open", "shared.store.migration"),
    ("shared.state",),
    ("shared.pool", "shared.ops"),
    ("shared.runtime",),
    ("shared.memories",),
    ("api.recall",),
    ("api", "workers"),
    ("memory_pool",),
)
# Packages that import no other part of memory-pool: clients of its HTTP API.
STANDALONE = ("client", "integrations")
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 50


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = modules()


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module.split(".")
        if MODULES[module].name != "__init__.py":
            package.pop()
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, *([node.module] if node.module else [])])
    for alias in node.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                # a package's own __init__ (run first by Python) counts where it is named
                found.update(_imported(module, node))
        graph[module] = {name for name in found if name in MODULES and name != module}
    return graph


GRAPH = imports()


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def pop_component(node: str) -> list[str]:
        component = [stack.pop()]
        while component[-1] != node:
            component.append(stack.pop())
        return sorted(component)

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node] and len(component := pop_component(node)) > 1:
            found.append(component)

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or module.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[0]):
                best = (len(prefix), number)
    return None if best is None else best[1]


def test_no_import_cycle() -> None:
    assert cycles() == []


def test_every_module_has_a_layer() -> None:
    top = {module.split(".")[0] for module in MODULES}
    assert top == set(PACKAGES)
    unplaced = [
        m for m in MODULES if layer(m) is None and not m.startswith(STANDALONE) and m != "shared"
    ]
    assert unplaced == []


def test_no_package_imports_one_above_it() -> None:
    upward = [
        f"{module} -> {imported}"
        for module, found in GRAPH.items()
        for imported in found
        if (mine := layer(module)) is not None
        and (theirs := layer(imported)) is not None
        and theirs > mine
    ]
    assert upward == []


def test_api_and_workers_meet_only_in_shared_and_clients_stand_alone() -> None:
    crossing = [
        f"{module} -> {imported}"
        for module, found in GRAPH.items()
        for imported in found
        if (module.startswith("api") and imported.startswith("workers"))
        or (module.startswith("workers") and imported.startswith("api"))
        or (module.startswith(STANDALONE) and not imported.startswith(module.split(".")[0]))
    ]
    assert crossing == []


def test_only_the_qdrant_engine_imports_qdrant_client() -> None:
    importers = sorted(
        module
        for module, path in MODULES.items()
        if module.startswith("shared.store")
        and any(
            name.split(".")[0] == "qdrant_client"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for name in _imported(module, node)
        )
    )
    # the migration reads an old local-mode folder: it stands above both engines
    assert [m for m in importers if not m.startswith("shared.store.qdrant")] == [
        "shared.store.migration"
    ]


def test_shared_keeps_a_few_rooms() -> None:
    entries = [p for p in (ROOT / "shared").iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 12, sorted(p.name for p in entries)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_and_function_sizes(module: str) -> None:
    source = MODULES[module].read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MAX_MODULE_LINES
    long = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            if node.end_lineno - first + 1 > MAX_FUNCTION_LINES:
                long.append(node.name)
    assert long == []


def test_every_package_says_what_it_owns() -> None:
    for init in (ROOT / "shared").rglob("__init__.py"):
        if "scripts" in init.parts:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, init
        assert "import" in doc.lower() or init.parent == ROOT / "shared", init
