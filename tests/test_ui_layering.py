"""The dashboard stays a view: no SQL, no HTTP, no NVML in app/ui (docs/architecture.md).

A test rather than a ruff TID251 rule because the banned-api table in pyproject.toml applies
project-wide; this names the UI folder only.
"""

from __future__ import annotations

import ast
from pathlib import Path

UI = Path(__file__).resolve().parents[1] / "app" / "ui"
BANNED = ("sqlalchemy", "sqlite3", "psycopg", "httpx", "requests", "urllib", "http.client", "pynvml",
          "collectors", "db.engine", "db.schema", "db.writer")  # fmt: skip


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_ui_modules_import_only_the_facade():
    offenders = {
        f"{path.relative_to(UI)}: {name}"
        for path in UI.rglob("*.py")
        for name in imported(path)
        if any(name == b or name.startswith(b + ".") for b in BANNED)
    }
    assert not offenders


def test_pages_are_thin():
    for page in (UI / "views").glob("*.py"):
        assert len(page.read_text().splitlines()) <= 100, page.name
