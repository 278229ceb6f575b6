"""Domain exceptions, and the one translation into a one-line message at the command-line edge.

Tree::

    SweetspotError
    ├── ConfigError        (core.settings)   a setting that cannot be used; names the key
    ├── ScrapeError        (collectors)     a source that could not be read or parsed
    ├── StorageError       (db)             the database refused or is unreachable
    └── UsageError                          a command-line argument that cannot be used
"""

from __future__ import annotations


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
