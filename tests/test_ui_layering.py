"""The dashboard stays a view: no SQL, no HTTP, no NVML in app/ui (docs/architecture.md).

A test rather than a ruff TID251 rule because the banned-api table in pyproject.toml applies
project-wide; this names the UI folder only.
"""

from __future__ import annotations

import ast
from pathlib import Path

UI = Path(__file__).resolve().parents[1] / "app" / "ui"
BANNED = ("sqlalchemy", "sqlite3", "psycopg", "httpx", "requests", "urllib", "http.client", "pynvml",
          "collectors", "db.engine", "db.schema", "db.writer", "db.migrations", "db.alerts", "app.alerts.store",
          "app.alerts.silences.add_silence", "app.alerts.silences.expire_silence")  # fmt: skip


def imported(path: Path) -> set[str]:
    return imported_by(path.read_text())


def imported_by(source: str) -> set[str]:
    """Every module a source imports, and each name of a ``from`` import as module.name (``from
    app.alerts import store`` imports app.alerts.store)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def engine_reaches(source: str) -> list[str]:
    """Where a source takes an engine off the facade (``ctx.reader.engine``, ``reader.engine``, or
    ``getattr(reader, "engine")``): the page would read or write around Reader's methods."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "engine" and "reader" in ast.unparse(node.value).lower():
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value == "engine"):  # fmt: skip
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def banned(names: set[str]) -> set[str]:
    return {name for name in names if any(name == b or name.startswith(b + ".") for b in BANNED)}


def test_ui_modules_import_only_the_facade():
    offenders = {f"{path.relative_to(UI)}: {name}" for path in UI.rglob("*.py") for name in banned(imported(path))}
    assert not offenders


def test_no_ui_module_takes_the_engine_off_the_reader():
    offenders = [f"{path.relative_to(UI)} {where}" for path in UI.rglob("*.py") for where in engine_reaches(path.read_text())]
    assert not offenders


# The Alerts page as it was before Reader.alert_board: both checks would have failed on it.
OLD_ALERTS_PAGE = """
from app.alerts.silences import create_silence, end_silence
from app.alerts.store import board
data = guard("the alerts", board, ctx.reader.engine, now, ctx.settings.alerts.mute_windows)
def expire(db_url):
    from app.alerts import store
    return getattr(ctx.reader, "engine")
"""


def test_the_checks_catch_the_old_alerts_page():
    assert banned(imported_by(OLD_ALERTS_PAGE)) == {"app.alerts.store", "app.alerts.store.board"}
    assert engine_reaches(OLD_ALERTS_PAGE) == ['line 4: ctx.reader.engine', "line 7: getattr(ctx.reader, 'engine')"]
    # what the page does now passes both
    now = 'data = guard("the alerts", ctx.reader.alert_board, now)\nctx.reader.add_silence(silence)\n'
    assert not banned(imported_by(now)) and not engine_reaches(now)


def test_pages_are_thin():
    for page in (UI / "views").glob("*.py"):
        assert len(page.read_text().splitlines()) <= 100, page.name
