"""The docs are part of the product: an undocumented command, option or setting fails here."""

import argparse
import re
from pathlib import Path

import pytest

from app.cli import COMMANDS, build_parser
from core.settings import ENVIRONMENT_VARIABLES, iter_settings

GLOBAL_OPTIONS = {"--help", "--config", "--verbose"}  # documented once, in the table atop docs/commands.md
ROOT = Path(__file__).resolve().parent.parent
COMMANDS_DOC = (ROOT / "docs" / "commands.md").read_text()
CONFIG_DOC = (ROOT / "docs" / "configuration.md").read_text()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_readme_starts_with_the_two_commands():
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    block = lines[lines.index("```sh") + 1 : lines.index("```")]
    assert [line.split()[0:2] for line in block] == [["make", "run"], ["make", "test"]]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_a_section(command):
    assert re.search(rf"^## `{command}`", COMMANDS_DOC, re.M), f"docs/commands.md lacks a '## `{command}`' section"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_is_documented(command):
    section = COMMANDS_DOC.split(f"## `{command}`", 1)[1].split("\n## ", 1)[0]
    for action in _subparsers()[command]._actions:
        for option in action.option_strings:
            if option.startswith("--") and option not in GLOBAL_OPTIONS:
                assert f"`{option}" in section, f"{command} {option} is not documented in docs/commands.md"


def test_global_options_are_documented():
    for option in GLOBAL_OPTIONS - {"--help"}:
        assert f"`{option}" in COMMANDS_DOC.split("\n## ", 1)[0]


@pytest.mark.parametrize("key", [key for key, *_ in iter_settings()])
def test_every_setting_is_documented(key):
    assert f"`{key}`" in CONFIG_DOC, f"setting {key} is missing from docs/configuration.md"


@pytest.mark.parametrize("name", sorted(ENVIRONMENT_VARIABLES))
def test_every_environment_variable_is_documented(name):
    assert f"`{name}`" in CONFIG_DOC
