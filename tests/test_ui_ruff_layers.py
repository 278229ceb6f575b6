"""The dashboard's side doors are closed by the linter (app/ui/ruff.toml): an import of the driver,
an engine, the writer, the schema, a collector, the alert evaluator's store or the silences' engine
functions fails ruff in app/ui/, and none is there."""

from __future__ import annotations

import pytest

from tests.test_layers import ruff


@pytest.mark.parametrize("line", ["import sqlalchemy\n", "from db.engine import open_engine\n", "from db.writer import Writer\n",
                                  "from db import schema\n", "import sqlite3\n", "def f():\n    from db.migrations import migrate\n",
                                  "from collectors.vllm import parse_vllm\n",
                                  # the Alerts page's side doors: the evaluator's store, the alert rows, the
                                  # silences' functions that take an engine (the facade has a method for each)
                                  "from app.alerts.store import board\n", "from app.alerts import store\n",
                                  "import app.alerts.store\n", "from db.alerts import write_silence\n",
                                  "from db import alerts\n", "from app.alerts.silences import add_silence\n",
                                  "from app.alerts.silences import expire_silence\n",
                                  "from app.alerts.silences import list_silences\n"])  # fmt: skip
def test_ruff_fails_on_a_storage_import_in_the_dashboard(line: str) -> None:
    done = ruff(line, "app/ui/views/new_page.py")
    assert done.returncode == 1 and "is banned" in done.stdout, done.stdout + done.stderr


def test_the_facade_and_the_root_rules():
    assert ruff("from db.queries import Reader\nfrom db.results import SeriesPoint\n", "app/ui/new.py").returncode == 0
    # the alerts' records and the judge's pure matching stay open to the pages
    alerts = "from app.alerts.model import AlertBoard, Silence\nfrom app.alerts.silences import silenced_by\n"
    assert ruff(alerts, "app/ui/views/new_page.py").returncode == 0
    assert ruff("from app.alerts.store import board\n", "app/commands/new_command.py").returncode == 0  # outside app/ui
    assert "`pynvml` is banned" in ruff("import pynvml\n", "app/ui/new.py").stdout
    assert ruff("from db.engine import open_engine\n", "app/new_command.py").returncode == 0  # outside app/ui
