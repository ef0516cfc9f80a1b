"""The package's import structure (docs/architecture.md, "Layers").

``scripts/test`` runs import-linter with the layer contract in ``pyproject.toml``; these tests
add what that contract cannot see: no import cycle between any two modules, counting imports
made inside functions and for type checking, and a stated reason for every import deferred
into a function.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parent.parent / "reactor"

#: The comment every import inside a function carries (the only accepted reason is start-up
#: cost or an optional dependency: a cycle is not a reason, it is a layering bug).
DEFERRED_MARK = "# deferred:"


def _import_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("reactor", exclude_type_checking_imports=False, cache_dir=None)
    return {
        module: {m for m in graph.find_modules_directly_imported_by(module) if m != module}
        for module in graph.modules
        if module == "reactor" or module.startswith("reactor.")
    }


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in edges:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_reactor_is_part_of_an_import_cycle() -> None:
    edges = _import_graph()
    assert len(edges) > 100  # the whole package was read
    cycles = _cycles(edges)
    assert cycles == [], "import cycles (deferred and type-checking imports count):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def _deferred_imports(path: Path) -> list[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    found.append((inner.lineno, lines[inner.lineno - 1]))
    return found


def test_every_import_inside_a_function_states_why_it_is_deferred() -> None:
    unexplained = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in _deferred_imports(path)
        if DEFERRED_MARK not in text
    ]
    assert unexplained == [], (
        f"imports inside functions need a '{DEFERRED_MARK} <reason>' comment (start-up cost "
        "or an optional dependency; a cycle is a layering bug):\n" + "\n".join(unexplained)
    )


def test_importing_the_declarations_does_not_import_the_engine() -> None:
    edges = _import_graph()
    reached: set[str] = set()
    todo = [m for m in edges if m.startswith("reactor.dsl")]
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        todo.extend(edges.get(module, ()))
    assert not {m for m in reached if m.startswith(("reactor.engine", "reactor.jobs"))}
    assert sys.modules  # the graph was built from source, not from what is imported
