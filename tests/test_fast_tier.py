"""The fast tier (`make check`, marker `fast`) keeps its promise: no test in it needs a server, a
browser or an engine. tests/conftest.py decides by what a test module imports; these tests fail
when a helper that starts a server or a process is not among the imports it looks for, when a test
module starts one itself, or when NOT_FAST names a file that is gone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests import conftest

TESTS = Path(__file__).resolve().parent
# What starting a server, a process or a browser looks like in source text.
STARTS = re.compile(r"\b(?:serve_forever|HTTPServer|socketserver|Popen|subprocess|multiprocessing|chromium|"
                    r"playwright|aiosmtpd|create_server|start_server|AppTest|pg_ctl)\b")  # fmt: skip


def _helpers() -> list[Path]:
    """The modules under tests/ that are not test modules (shared helpers)."""
    return [p for p in TESTS.rglob("*.py") if not p.name.startswith("test_") and p.name not in ("conftest.py", "__init__.py")
            and "data" not in p.relative_to(TESTS).parts]  # fmt: skip


def _identifiers(path: Path) -> set[str]:
    """The names a module's code uses (imports, names, attributes): what it does, not what its docstrings say."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update(a.name for a in node.names)
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def _starts(path: Path) -> bool:
    return any(STARTS.search(name) for name in _identifiers(path))


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)


def test_every_helper_that_starts_a_server_or_process_keeps_its_importers_out_of_the_fast_tier():
    starting = [p for p in _helpers() if _starts(p)]
    assert starting, "the pattern finds no helper at all: it is broken"
    missing = [_module_name(p) for p in starting
               if not any(_module_name(p) == n or _module_name(p).startswith(n + ".") for n in conftest.NEEDS_SERVER)]  # fmt: skip
    assert not missing, f"add to tests/conftest.py NEEDS_SERVER: {missing}"


def test_no_fast_test_module_starts_a_server_or_process_itself():
    offenders = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name == Path(__file__).name or not conftest.fast_module(path):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        if any(STARTS.search(call) for call in calls):
            offenders.append(path.name)
    assert not offenders, f"fast-tier modules that start a server or a process: {offenders} (import it through a helper or add to NOT_FAST)"


def test_not_fast_names_existing_test_modules_with_a_reason():
    for name, why in conftest.NOT_FAST.items():
        assert (TESTS / name).exists(), f"NOT_FAST names {name}, which is gone"
        assert why.strip(), name


def test_a_module_importing_a_server_helper_is_out_of_the_tier(tmp_path):
    module = tmp_path / "test_probe.py"
    module.write_text("from tests.support.http_server import serve\n\ndef test_x():\n    pass\n")
    assert conftest.module_needs(module) == ("tests.support.http_server",)
    assert not conftest.fast_module(module)
    plain = tmp_path / "test_plain.py"
    plain.write_text("import math\n\ndef test_x():\n    assert math.pi\n")
    assert conftest.fast_module(plain)
    marked = tmp_path / "test_marked.py"
    marked.write_text("import pytest\n\npytestmark = pytest.mark.slow\n")
    assert not conftest.fast_module(marked)
