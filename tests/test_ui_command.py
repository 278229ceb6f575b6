from __future__ import annotations

import argparse

from app.commands import ui
from core.settings import Settings, UiSettings


def test_streamlit_command_is_headless_on_the_given_address():
    command = ui.streamlit_command(Settings(), 8600, "127.0.0.1")
    assert command[1:4] == ["-m", "streamlit", "run"]
    assert command[4].endswith("app/ui/main.py")
    pairs = dict(zip(command[5::2], command[6::2], strict=True))
    assert pairs["--server.port"] == "8600"
    assert pairs["--server.address"] == "127.0.0.1"
    assert pairs["--server.headless"] == "true"
    assert pairs["--browser.gatherUsageStats"] == "false"
    assert pairs["--server.fileWatcherType"] == "none"  # no polling of the app's files while it serves


def test_child_gets_the_effective_settings_through_the_environment(tmp_path):
    config = tmp_path / "sweetspot.toml"
    args = argparse.Namespace(config=str(config), db=None, port=None, address=None)
    settings = Settings(db_url="sqlite:///elsewhere.db", ui=UiSettings(port=9000))
    env = ui.child_environment(args, settings, {"SWEETSPOT_UI_PASSWORD": "pw", "PYTHONPATH": "/x"})
    assert env["SWEETSPOT_CONFIG"] == str(config.resolve())
    assert env["SWEETSPOT_DB_URL"] == "sqlite:///elsewhere.db"  # --db travels as the effective db_url
    assert env["SWEETSPOT_UI_PASSWORD"] == "pw"
    assert env["PYTHONPATH"].split(":")[0] == str(ui.ROOT)
