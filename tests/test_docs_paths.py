"""Every file of the repository the docs name exists: a module moved or renamed leaves no stale path
in docs/*.md. A path the docs mention as gone says so right after it (`` `x.py` (removed...``), as
the benchmark history does for modules that no longer exist."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# paths under the repository's own folders (not vllm/..., /etc/..., a user's rules/ folder)
FOLDERS = ("app", "bench", "collectors", "core", "db", "deploy", "docs", "simulator", "sweep", "tests")
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(FOLDERS) + r")/(?:[\w.-]+/)*[\w.-]+\.(?:py|toml|sql|json|md|yml|yaml|sh|txt|csv))"
                  r"(`? \(removed)?")


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` names, but those it says were removed."""
    return [m.group(1) for m in PATH.finditer(text) if not m.group(2)]


@pytest.mark.parametrize("doc", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_path_the_docs_name_exists(doc):
    missing = sorted({p for p in named_paths(doc.read_text()) if not (ROOT / p).exists()})
    assert not missing, f"{doc.name} names files that do not exist: {missing}"


def test_the_check_sees_a_stale_path_and_spares_a_removed_one():
    text = "see `db/gone.py` and `app/cli.py`; `collectors/http.py` (removed since: httpx); /etc/rules/x.yml"
    assert named_paths(text) == ["db/gone.py", "app/cli.py"]
