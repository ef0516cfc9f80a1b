"""The package's import structure (docs/architecture.md, "Layers").

``scripts/test`` runs import-linter with the contracts in ``pyproject.toml``; these tests
add what those contracts cannot see: no import cycle between any two modules, counting imports
made inside functions and for type checking, a stated reason for every import deferred
into a function, and no private name imported from outside its own package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "reactor"
#: Where the packages whose imports of private names are checked live: ``reactor`` itself, the
#: built-in adapters and the contract suite (their module names are relative to these).
SOURCE_ROOTS = (ROOT, ROOT / "adapters", ROOT / "contract_tests")

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


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _source_modules() -> list[tuple[str, Path]]:
    """``(module name, path)`` of every module of reactor, the adapters and the contract suite."""
    found: list[tuple[str, Path]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found.append((_module_name(path, ROOT), path))
    for root in SOURCE_ROOTS[1:]:
        for package in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
            found.extend((_module_name(path, root), path) for path in sorted(package.rglob("*.py")))
    return found


def private_name_imports(module: str, source: str, is_package: bool) -> list[tuple[int, str]]:
    """The ``from X import _name`` statements of ``module`` whose ``_name`` is private to a
    package ``module`` is not inside: ``(line, "X._name")``.

    A private name belongs to the package that holds it: the package ``X`` itself when ``X``
    is a package, else ``X``'s parent package; anything inside that package may import it
    (as import-linter's ``private_modules`` contract rules for private modules). Dunder names
    are not private.
    """
    own_package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:  # relative: resolved against the importer's package
            base = own_package.split(".")[: len(own_package.split(".")) - node.level + 1]
            origin = ".".join([*base, *([node.module] if node.module else [])])
        else:
            origin = node.module or ""
        holder_is_package = (ROOT / origin.replace(".", "/") / "__init__.py").is_file() or any(
            (root / origin.replace(".", "/") / "__init__.py").is_file()
            for root in SOURCE_ROOTS[1:]
        )
        scope = origin if holder_is_package else origin.rpartition(".")[0]
        for alias in node.names:
            if not _is_private(alias.name):
                continue
            if module == scope or module.startswith(scope + "."):
                continue
            found.append((node.lineno, f"{origin}.{alias.name}"))
    return found


def test_the_private_name_check_finds_an_import_from_another_package() -> None:
    source = (
        "from reactor.cli._common import _adapter_settings\n"
        "from reactor.model.coordination.semaphores import _check, check_arguments\n"
        "from reactor.model.coordination import locks as _locks\n"
        "from reactor.coordination import __all__\n"
    )
    assert private_name_imports("reactor.cli.dead_letters", source, is_package=False) == [
        (2, "reactor.model.coordination.semaphores._check"),
    ]
    assert private_name_imports("reactor_redis.semaphores", source, is_package=False) == [
        (1, "reactor.cli._common._adapter_settings"),
        (2, "reactor.model.coordination.semaphores._check"),
    ]


def test_no_module_imports_a_private_name_from_outside_its_package() -> None:
    modules = _source_modules()
    assert len(modules) > 200  # reactor, the adapters and the contract suite were read
    offending = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for module, path in modules
        for line, name in private_name_imports(
            module, path.read_text(encoding="utf-8"), path.name == "__init__.py"
        )
    ]
    assert offending == [], (
        "private names imported from outside their package (make the name public where it is "
        "a shared API, with a docstring, or move it; docs/architecture.md, Layers):\n"
        + "\n".join(offending)
    )
