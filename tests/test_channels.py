"""The channel registry (core/channels) is the one list: every channel has its table under
[alerts], every delivery table is a channel, and what each declares secret is masked by config."""

from __future__ import annotations

import dataclasses

import pytest

from app.commands.config import shown, with_hook_paths_hidden
from app.notify import channels as held
from core.channels import CHANNELS, HTTP_CHANNELS
from core.channels import webhook as webhook_channel
from core.settings import AlertsSettings, DeliverySettings, Settings
from db.alerts import RESOLVED


def test_every_channel_has_its_table_and_every_delivery_table_is_a_channel() -> None:
    defaults = AlertsSettings()
    tables = {f.name for f in dataclasses.fields(defaults) if isinstance(getattr(defaults, f.name), DeliverySettings)}
    assert [c.name for c in CHANNELS] == list(dict.fromkeys(c.name for c in CHANNELS))  # no name twice
    assert {c.name for c in CHANNELS} == tables


@pytest.mark.parametrize("channel", [c for c in CHANNELS if c.secrets], ids=lambda c: c.name)
def test_what_a_channel_declares_secret_is_masked_by_config(channel) -> None:
    values = {name: f"https://receiver.test/path/SECRET-{name}" for name in channel.secrets}
    alerts = dataclasses.replace(AlertsSettings(), **{channel.name: dataclasses.replace(getattr(AlertsSettings(), channel.name), **values)})
    printed = str(shown(with_hook_paths_hidden(dataclasses.asdict(dataclasses.replace(Settings(), alerts=alerts)))))
    assert "SECRET" not in printed


@pytest.mark.parametrize("channel", HTTP_CHANNELS, ids=lambda c: c.name)
def test_a_posting_channel_is_shown_without_its_password(channel) -> None:
    table = dataclasses.replace(getattr(AlertsSettings(), channel.name), url="https://user:pw-1@receiver.test/p/x")
    assert "pw-1" not in channel.shown(table) and "receiver.test" in channel.shown(table)


def test_the_channels_on_are_in_the_tuples_order() -> None:
    on = {c.name: dataclasses.replace(getattr(AlertsSettings(), c.name), url="http://r.test/") for c in HTTP_CHANNELS}
    alerts = dataclasses.replace(AlertsSettings(), **on)
    assert held.on(alerts) == [c.name for c in HTTP_CHANNELS]


def test_the_webhook_reads_the_stored_state_by_the_evaluators_word() -> None:
    assert webhook_channel.RESOLVED == RESOLVED  # core cannot import db: the word is repeated, and held here
