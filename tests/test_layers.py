"""The layers hold: ruff refuses an import of app/ in collectors/ or db/ (their ruff.toml), and
none is there (collectors/nvml.py, which may import NVML, imports nothing of app/ either)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def ruff(source: str, as_path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "TID251", "--stdin-filename", as_path, "-"],
        input=source, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )


@pytest.mark.parametrize("path", ["collectors/new_source.py", "db/new_table.py", "core/new_setting.py"])
@pytest.mark.parametrize("line", ["from app.cli import main\n", "import app.jobs\n", "def f():\n    from app import jobs\n"])
def test_ruff_fails_on_an_app_import_in_collectors_and_db(path: str, line: str) -> None:
    done = ruff(line, path)
    assert done.returncode == 1 and "`app` is banned" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("path", ["app/new_page.py", "tests/test_new.py"])
def test_app_and_tests_may_import_app(path: str) -> None:
    assert ruff("from app.cli import main\n", path).returncode == 0


def test_the_root_rules_still_hold_under_the_nested_configurations() -> None:
    assert "`pynvml` is banned" in ruff("import pynvml\n", "db/gpu.py").stdout
    assert "`apscheduler` is banned" in ruff("import apscheduler\n", "collectors/timer.py").stdout


@pytest.mark.parametrize("layer", ["collectors", "db"])
def test_ruff_fails_on_an_import_of_a_higher_layer_in_core(layer: str) -> None:
    done = ruff(f"from {layer} import schema\n", "core/new_setting.py")
    assert done.returncode == 1 and f"`{layer}` is banned" in done.stdout, done.stdout + done.stderr


def test_no_module_of_collectors_db_or_core_imports_app() -> None:
    for path in [*ROOT.glob("collectors/*.py"), *ROOT.glob("db/*.py"), *ROOT.glob("core/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n == "app" or n.startswith("app.") for n in names), f"{path} imports {names}"


def test_db_never_imports_the_http_fetcher() -> None:
    # a string helper (URL masking) lives in core/redact.py, not beside the HTTP client
    done = ruff("from collectors.fetch import masked\n", "db/new_table.py")
    assert done.returncode == 1 and "`collectors.fetch` is banned" in done.stdout, done.stdout + done.stderr
    assert ruff("from core.redact import masked\n", "db/new_table.py").returncode == 0
