"""Domain exceptions, and the one translation into a one-line message at the command-line edge.

Tree::

    SweetspotError
    ├── ConfigError        (core.settings)   a setting that cannot be used; names the key
    ├── ScrapeError        (collectors)     a source that could not be read or parsed
    ├── StorageError       (db)             the database refused or is unreachable
    ├── UsageError                          a command-line argument that cannot be used
    └── QueryError         (db.query_*)     a user's SQL was refused (names the rule) or failed
"""

from __future__ import annotations

import traceback


class SweetspotError(Exception):
    """Base of every error the product reports as one line."""

    hint: str = ""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        return f"{self}. {self.hint}" if self.hint else str(self)


class ScrapeError(SweetspotError):
    """A source could not be fetched or its text could not be parsed."""


class StorageError(SweetspotError):
    """The database could not be opened, migrated, written or read."""


class UsageError(SweetspotError):
    """A command-line argument that cannot be used."""


class QueryError(SweetspotError):
    """A user's ad-hoc SQL was refused (``rule`` names the rule that refused it) or failed."""

    def __init__(self, message: str, hint: str = "", rule: str = "") -> None:
        super().__init__(message, hint)
        self.rule = rule


MAX_REFUSAL_CHARS = 500  # of the one line an unforeseen failure is told in


def refusal(exc: BaseException, doing: str) -> str:
    """The one line that an error boundary (each command in ``app/cli.py``, each job in
    ``app/scheduler.py``) tells a failure in: a :class:`SweetspotError`'s own line; any other
    exception (a hostile input a module did not foresee: a 10^5-digit integer, undecodable bytes, a
    recursion) as what was doing it, the exception's type and its first line, its URLs' secrets
    masked and its control characters escaped, never a traceback (that is logged at DEBUG)."""
    from core.redact import masked  # here: core.redact imports nothing of this module, but keep the tree flat
    from core.text import visible

    if isinstance(exc, SweetspotError):
        return visible(masked(exc.one_line()), MAX_REFUSAL_CHARS)
    first = (str(exc).strip().splitlines() or [""])[0]
    where = _innermost_frame(exc)
    shown = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return visible(masked(f"{doing} stopped on what it could not handle ({shown}{where})"),
                   MAX_REFUSAL_CHARS)


def _innermost_frame(exc: BaseException) -> str:
    """`` at module.py:123``: where the exception rose, for a report; "" when unknown."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if not frames:
        return ""
    last = frames[-1]
    return f" at {last.filename.rsplit('/', 1)[-1]}:{last.lineno}"
