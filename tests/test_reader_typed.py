"""The pages and the notifier hold the query facade typed (issue 42 item 3): ``Context.reader`` and
notify's readers are :class:`db.queries.Reader`, so a misspelled read (``ctx.reader.alert_bored``)
fails mypy instead of passing as ``Any``."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from app.notify import digest, images
from app.notify.notifier import Notifier
from app.ui.page import Context
from db.queries import Reader

ROOT = Path(__file__).resolve().parent.parent


def _hints(obj: object) -> dict[str, object]:
    return typing.get_type_hints(obj, localns={"Reader": Reader})  # notify names it for the type check only


def test_the_context_and_notifys_readers_are_the_facade():
    assert _hints(Context)["reader"] is Reader
    assert _hints(Notifier.reader)["return"] is Reader
    for fn in (images.alert_chart, digest.build, digest.period_charts):
        assert _hints(fn)["reader"] is Reader, fn.__name__


def test_no_reader_is_typed_any_where_pages_and_notify_hold_it():
    untyped = [f"{p.relative_to(ROOT)}:{n}" for folder in ("app/ui", "app/notify") for p in sorted((ROOT / folder).rglob("*.py"))
               for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"reader\w*\s*:\s*Any\b", line)]  # fmt: skip
    assert not untyped, untyped
