"""The dashboard's side doors are closed by the linter (app/ui/ruff.toml): an import of the driver,
an engine, the writer, the schema or a collector fails ruff in app/ui/, and none is there."""

from __future__ import annotations

import pytest

from tests.test_layers import ruff


@pytest.mark.parametrize("line", ["import sqlalchemy\n", "from db.engine import open_engine\n", "from db.writer import Writer\n",
                                  "from db import schema\n", "import sqlite3\n", "def f():\n    from db.migrations import migrate\n",
                                  "from collectors.vllm import parse_vllm\n"])  # fmt: skip
def test_ruff_fails_on_a_storage_import_in_the_dashboard(line: str) -> None:
    done = ruff(line, "app/ui/views/new_page.py")
    assert done.returncode == 1 and "is banned" in done.stdout, done.stdout + done.stderr


def test_the_facade_and_the_root_rules():
    assert ruff("from db.queries import Reader\nfrom db.results import SeriesPoint\n", "app/ui/new.py").returncode == 0
    assert "`pynvml` is banned" in ruff("import pynvml\n", "app/ui/new.py").stdout
    assert ruff("from db.engine import open_engine\n", "app/new_command.py").returncode == 0  # outside app/ui
