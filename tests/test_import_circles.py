"""No new import circle between the product's modules (every import counted, a late one inside a
function too: it hides a circle, it does not break it). The circles still there are listed, to be
broken by moving the shared piece down; the test fails when one appears and when one listed is gone
(strike it from the list)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "collectors", "db", "app", "simulator", "sweep")
KNOWN = {
    frozenset({"db.engine", "db.migrations", "db.rollup", "db.thresholds"}),
    frozenset({"app.notify.grouping", "app.notify.hooks", "app.notify.message"}),
    frozenset({"app.commands.status", "app.fleet"}),
}


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
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                found = resolve(name)
                # a package's __init__ is not its submodules' importer
                if found and found != module and not (module.startswith(found + ".") and modules[found].name == "__init__.py"):
                    graph[module].add(found)
    return graph


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


def test_no_new_import_circle_and_the_known_ones_still_listed():
    found = circles(import_graph())
    new = found - KNOWN
    assert not new, f"a new import circle: {[sorted(c) for c in new]} (move the shared piece down, not into a late import)"
    gone = KNOWN - found
    assert not gone, f"broken, strike from KNOWN: {[sorted(c) for c in gone]}"


def test_the_check_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset({"a", "b", "c"})}
    assert circles({"a": {"b"}, "b": set()}) == set()
