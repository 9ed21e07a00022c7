"""The house rules as tests (issue 26 item 3): imports point one way, no cycle anywhere, and
every face's ``__all__`` is sorted, unique and importable.

The import graph is grimp's (``TYPE_CHECKING`` imports counted: a cycle of types is a cycle
too). Layers, highest first; a module may import only modules of its own wing or module
(never in a cycle) or of a lower layer:

- the facade ``memory_ledger``; then ``replay``: its face (the audit library's names for
  hosts), ``__main__``, ``cli`` (the command line, on the surfaces), the surfaces ``mcp``,
  ``ui``, ``langgraph_store``, ``conformance`` (the store kit, which imports nothing of the
  engine), then ``scripts`` (session scripts, the LoCoMo converter) and ``audit`` (the audit
  library, which never imports typer or rich);
- ``commands``: its face, ``aio``, ``engine``, ``session``, ``workspace``, ``context``,
  ``canonical``, ``extraction``, ``store`` (the Protocol the lower wings type the engine as),
  ``recall``, ``embeddings``, ``telemetry`` (OpenTelemetry spans, below every operation
  it traces), ``secret_door``, ``config``, ``openai_endpoint``, ``errors``,
  ``secrets``;
- ``projections``; ``ledger``.

The README's Layout and ``docs/design.md`` draw these layers; ``test_maps.py`` checks that
they name every one.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import grimp
import pytest

ROOT = "memory_ledger"
LAYERS: tuple[str, ...] = (
    "memory_ledger",
    "memory_ledger.replay",
    "memory_ledger.replay.__main__",
    "memory_ledger.replay.cli",
    "memory_ledger.replay.mcp",
    "memory_ledger.replay.ui",
    "memory_ledger.replay.langgraph_store",
    "memory_ledger.replay.conformance",
    "memory_ledger.replay.scripts",
    "memory_ledger.replay.imports",
    "memory_ledger.replay.audit",
    "memory_ledger.commands",
    "memory_ledger.commands.aio",
    "memory_ledger.commands.engine",
    "memory_ledger.commands.session",
    "memory_ledger.commands.workspace",
    "memory_ledger.commands.context",
    "memory_ledger.commands.canonical",
    "memory_ledger.commands.extraction",
    "memory_ledger.commands.store",
    "memory_ledger.commands.recall",
    "memory_ledger.commands.embeddings",
    "memory_ledger.commands.telemetry",
    "memory_ledger.commands.secret_door",
    "memory_ledger.commands.config",
    "memory_ledger.commands.openai_endpoint",
    "memory_ledger.commands.errors",
    "memory_ledger.commands.secrets",
    "memory_ledger.projections",
    "memory_ledger.ledger",
)
"""Highest first. A module belongs to the longest entry that prefixes it."""

FACES = (
    "memory_ledger",
    "memory_ledger.commands",
    "memory_ledger.commands.aio",
    "memory_ledger.commands.canonical",
    "memory_ledger.commands.context",
    "memory_ledger.commands.embeddings",
    "memory_ledger.commands.engine",
    "memory_ledger.commands.extraction",
    "memory_ledger.commands.recall",
    "memory_ledger.commands.secrets",
    "memory_ledger.commands.session",
    "memory_ledger.commands.telemetry",
    "memory_ledger.commands.workspace",
    "memory_ledger.replay.audit",
    "memory_ledger.replay.cli",
    "memory_ledger.replay.conformance",
    "memory_ledger.replay.imports",
    "memory_ledger.replay.langgraph_store",
    "memory_ledger.replay.mcp",
    "memory_ledger.replay.ui",
)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(ROOT, exclude_type_checking_imports=False)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the longest entry that is ``module`` or a package of
    it."""
    best, rank = -1, -1
    for index, entry in enumerate(LAYERS):
        if (module == entry or module.startswith(entry + ".")) and len(entry) > best:
            best, rank = len(entry), index
    assert rank >= 0, module
    return rank


def edges(graph: grimp.ImportGraph) -> Iterator[tuple[str, str]]:
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            yield module, imported


def test_every_module_has_a_layer(graph: grimp.ImportGraph) -> None:
    assert len(graph.modules) > 100
    for module in graph.modules:
        layer_of(module)


def test_imports_point_down(graph: grimp.ImportGraph) -> None:
    upward = [
        f"{module} -> {imported}"
        for module, imported in edges(graph)
        if layer_of(imported) < layer_of(module)
    ]
    assert upward == []


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components over every import of ``graph`` that hold two
    modules or more (each sorted): the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]
    successors = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}

    def visit(node: str) -> None:
        work = [(node, iter(successors[node]))]
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        while work:
            current, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[current])
                if low[current] == index[current]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == current:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(successors[child])))
            elif child in on_stack:
                low[current] = min(low[current], index[child])

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    assert import_cycles(graph) == []


def test_no_import_cycle_in_the_benchmarks() -> None:
    """The benchmarks keep the house rule too (issue 38 item 2: ``append`` and
    ``append_postgres`` share ``append_batches`` rather than import each other)."""
    benchmarks = grimp.build_graph("benchmarks", exclude_type_checking_imports=False)
    assert len(benchmarks.modules) > 30
    assert import_cycles(benchmarks) == []


def test_the_audit_library_never_imports_typer_or_rich() -> None:
    external = grimp.build_graph(
        ROOT, include_external_packages=True, exclude_type_checking_imports=False
    )
    offenders = [
        f"{module} -> {imported}"
        for module, imported in edges(external)
        if module.startswith("memory_ledger.replay.")
        and layer_of(module) == LAYERS.index("memory_ledger.replay.audit")
        and imported.split(".")[0] in ("typer", "rich", "click")
    ]
    assert offenders == []


def test_the_conformance_kit_imports_nothing_of_the_engine(graph: grimp.ImportGraph) -> None:
    """The kit holds any ``BaseStore`` to the same bar: it knows the store by LangGraph's
    interface only (issue 36 item 3), never by a module of the engine."""
    kit = "memory_ledger.replay.conformance"
    allowed = {"memory_ledger.ledger.lazy_exports"}
    offenders = [
        f"{module} -> {imported}"
        for module, imported in edges(graph)
        if module.startswith(kit + ".") or module == kit
        if not imported.startswith(kit) and imported not in allowed
    ]
    assert offenders == []


@pytest.mark.parametrize("face", FACES)
def test_every_face_lists_sorted_unique_importable_names(face: str) -> None:
    module = importlib.import_module(face)
    names = list(module.__all__)
    assert names == sorted(names), f"{face}.__all__ is not sorted"
    assert len(names) == len(set(names)), f"{face}.__all__ repeats a name"
    for name in names:
        assert getattr(module, name) is not None, f"{face}.{name}"


def _face_of(module: str) -> str | None:
    """The wing face a private module sits behind (the longest face that is its package)."""
    behind = [face for face in FACES[2:] if module.startswith(face + ".")]
    return max(behind, key=len) if behind else None


def test_tests_import_what_a_face_exports_through_the_face() -> None:
    """Tests follow the wings and use the faces (issue 26 item 6): a test may reach into a
    wing's private module only for a name its face does not export (an internal under test)."""
    import ast
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    faces = {face: set(importlib.import_module(face).__all__) for face in FACES[2:]}
    offenders: list[str] = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            face = _face_of(node.module)
            if face is None:
                continue
            offenders += [
                f"{path.relative_to(tests)}:{node.lineno} {node.module}.{alias.name}"
                for alias in node.names
                if alias.name in faces[face]
            ]
    assert offenders == []


def test_every_test_module_sits_in_a_wing_folder() -> None:
    """Tests follow the wings: ``tests/`` keeps at its top only shared helpers and child
    scripts; every ``test_*.py`` lives in a folder named for the wing or layer it covers."""
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    assert sorted(path.name for path in tests.glob("test_*.py")) == []
    folders = {path.parent.name for path in tests.rglob("test_*.py")}
    assert all((tests / folder / "__init__.py").exists() for folder in folders)
