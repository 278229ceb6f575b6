"""E-mail: alert notifications as messages over SMTP ([alerts.email]; app/notify/smtp.py sends them).

Its group keys have no prefix: they are the keys stored before there were other channels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.channels.base import GROUP_BY_KEYS, group_by_problems
from core.text import escaped, visible

TLS_MODES = ("none", "starttls", "ssl")
SEVERITIES = ("", "warning", "critical")


class Email:
    name = "email"
    secrets: tuple[str, ...] = ()  # the password is read from SWEETSPOT_SMTP_PASSWORD only, never the table

    def problems(self, table: Any, key: str) -> Iterator[str]:
        if table.tls not in TLS_MODES:
            yield f"{key}.tls: {table.tls!r} is not one of none, starttls, ssl (or SWEETSPOT_SMTP_TLS)"
        yield from group_by_problems(table, key, GROUP_BY_KEYS)
        for i, route in enumerate(table.routes):
            if route.severity not in SEVERITIES:
                yield f"{key}.routes[{i}].severity: {route.severity!r} is not warning or critical"
            if not route.to:
                yield f"{key}.routes[{i}].to: a route needs at least one recipient"
        yield from _address_problems(f"{key}.from_address", (table.from_address,), "SWEETSPOT_ALERT_FROM")
        yield from _address_problems(f"{key}.to", table.to, "SWEETSPOT_ALERT_TO")
        for i, route in enumerate(table.routes):
            yield from _address_problems(f"{key}.routes[{i}].to", route.to, "")
        if table.enabled and not table.from_address:
            yield f"{key}.from_address: required once {key}.host is set (or SWEETSPOT_ALERT_FROM)"
        if table.enabled and not table.to and not table.routes:
            yield f"{key}.to: no recipient; name one (or SWEETSPOT_ALERT_TO, comma-separated)"


def _address_problems(key: str, addresses: tuple[str, ...], variable: str) -> Iterator[str]:
    """An address goes into a mail header: a line break or other control character in it is refused
    here, with the setting's name, rather than failing every e-mail later."""
    for address in addresses:
        if escaped(address) != address:
            where = f" (or {variable}, comma-separated)" if variable else ""
            yield (f"{key}: '{visible(address)}' holds a line break or control character; "
                   f"give one e-mail address per entry{where}")  # fmt: skip


CHANNEL = Email()
