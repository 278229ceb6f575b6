"""No import circle between the product's modules: every import counted, a late one inside a
function too (it hides a circle, it does not break it), a relative one and an ``importlib.import_module``
of a constant name as well. A circle is broken by moving the shared piece down into a lower module
(as db/errors.py, app/notify/channels.py, db/gpu_reads.py and simulator/options.py were), never by a
late import."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "collectors", "db", "app", "simulator", "sweep")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = imported(node, module, path.name == "__init__.py")
            for name in names:
                found = resolve(name)
                # a package's __init__ is not its submodules' importer
                if found and found != module and not (module.startswith(found + ".") and modules[found].name == "__init__.py"):
                    graph[module].add(found)
    return graph


def imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names ``node`` imports, relative ones made absolute (from ``module``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
            base = ".".join([*parts, *([base] if base else [])])
        return [base, *(f"{base}.{a.name}" for a in node.names)] if base else []
    if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                 or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
        return [node.args[0].value]
    return []


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


def test_no_import_circle():
    found = circles(import_graph())
    assert not found, f"import circles: {[sorted(c) for c in found]} (move the shared piece down, not into a late import)"


def test_a_late_relative_or_dynamic_import_is_an_edge():
    tree = ast.parse("def f():\n    from app.b import x\n    from . import c\n    from .d import y\n    importlib.import_module('app.e')\n")
    found = [name for node in ast.walk(tree) for name in imported(node, "app.a", False)]
    assert {"app.b", "app", "app.c", "app.d", "app.e"} <= set(found)
    in_package = [name for node in ast.walk(ast.parse("from .m import z\n")) for name in imported(node, "app.p", True)]
    assert "app.p.m" in in_package


def test_the_check_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset({"a", "b", "c"})}
    assert circles({"a": {"b"}, "b": set()}) == set()
