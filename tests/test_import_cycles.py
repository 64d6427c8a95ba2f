"""No import cycles inside forestgen, counting imports placed inside functions too (DESIGN.md:
data flows one way: data -> tree -> components -> families/inference -> torch/metrics ->
learners -> CLI).

Every ``import`` / ``from ... import`` statement of every module is an edge, wherever it
stands (module level, function body, ``try`` block), except those under ``if TYPE_CHECKING:``:
they never run, so they cannot take part in an import-time cycle, and they exist only for
annotations read by type checkers. A package's ``__init__`` reached implicitly when one of its
submodules is imported is not an edge (Python runs it first, whatever the submodule imports).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "forestgen"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, name: str, is_package: bool):
    """Dotted names imported anywhere in ``tree`` (skipping ``if TYPE_CHECKING:`` bodies)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            for a in node.names:
                yield base, a.name
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    """``module -> {forestgen modules it imports}``."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        out = graph.setdefault(name, set())
        for base, member in _imports(tree, name, path.name == "__init__.py"):
            if not base.startswith("forestgen"):
                continue
            target = f"{base}.{member}" if member and f"{base}.{member}" in mods else base
            while target not in mods and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in mods and target != name:
                out.add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _path(graph, comp: list[str]) -> list[str]:
    """One cycle through the component's first module, for the failure message."""
    inside = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & inside):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def test_the_graph_sees_deferred_imports():
    graph = import_graph()
    # base.py imports the inference engine inside its query methods
    assert "forestgen.inference.api" in graph["forestgen.base"]
    assert len(graph) > 80


def test_a_planted_cycle_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    if found:
        lines = [f"{len(c)} modules: " + " -> ".join(_path(graph, c)) for c in found]
        pytest.fail("import cycles:\n" + "\n".join(lines))


def test_dir_lists_the_interface_not_the_plumbing():
    """``dir()`` of a lazily exported package shows its public names, and not the helpers its
    ``__init__`` imports to set itself up."""
    import forestgen
    import forestgen.metrics

    for package in (forestgen, forestgen.metrics):
        names = dir(package)
        assert set(package.__all__) <= set(names)
        assert not {"lazy_attributes", "TYPE_CHECKING"} & set(names), package.__name__
