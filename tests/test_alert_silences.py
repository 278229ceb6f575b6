"""Silences (stored, matched, expired) and recurring mute windows in named time zones."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from app.alerts.model import AlertState, Silence
from app.alerts.silences import (
    active_silences,
    add_silence,
    check_mute_windows,
    expire_silence,
    in_window,
    is_silenced,
    list_silences,
    silenced_by,
)
from core.settings import ConfigError, MuteWindowSettings
from db.engine import open_engine

PARIS = ZoneInfo("Europe/Paris")


def at(text: str, tz: ZoneInfo = PARIS) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=tz).timestamp()


def alert(rule: str = "ttft_p95", target: str = "prod", severity: str = "critical") -> AlertState:
    return AlertState(rule, target, "", "firing", severity, 0, 0)


NIGHTS = MuteWindowSettings(name="nights", weekdays=("fri",), start="22:00", end="06:00", timezone="Europe/Paris")


@pytest.mark.parametrize(
    ("when", "muted"),
    [
        ("2026-12-04 21:59", False),  # Friday, before the window
        ("2026-12-04 22:00", True),
        ("2026-12-05 05:59", True),  # Saturday morning: the Friday night window still holds
        ("2026-12-05 06:00", False),
        ("2026-12-05 23:00", False),  # Saturday night: not a Friday
        ("2026-12-03 23:00", False),  # Thursday night
    ],
)
def test_a_window_that_wraps_past_midnight_belongs_to_its_start_day(when, muted):
    assert in_window(NIGHTS, at(when)) is muted


def test_the_window_is_read_in_its_own_time_zone():
    # 22:30 in Paris is 21:30 UTC in winter: a UTC window of 22:00-06:00 does not hold yet.
    utc = MuteWindowSettings(weekdays=("fri",), start="22:00", end="06:00", timezone="UTC")
    moment = at("2026-12-04 22:30")
    assert in_window(NIGHTS, moment) and not in_window(utc, moment)


def test_every_day_and_whole_day_windows():
    assert in_window(MuteWindowSettings(start="00:00", end="00:00"), at("2026-12-02 13:00"))
    assert in_window(MuteWindowSettings(weekdays=("sat", "sun")), at("2026-12-05 13:00"))
    assert not in_window(MuteWindowSettings(weekdays=("sat", "sun")), at("2026-12-07 13:00"))


def test_mute_window_matchers_and_silences_hold_back_matching_alerts_only():
    warnings_at_night = MuteWindowSettings(name="n", start="22:00", end="06:00", timezone="Europe/Paris",
                                           matchers={"severity": "warning"})  # fmt: skip
    night = at("2026-12-02 23:00")
    assert not is_silenced(alert(), night, [], [warnings_at_night])
    assert silenced_by(alert(severity="warning"), night, [], [warnings_at_night]) == "mute window n"
    s = Silence({"target": "prod", "rule": "ttft_p95"}, int(night) - 60, int(night) + 60, "me", "x", 0, id=7)
    assert silenced_by(alert(), night, [s], []) == "silence 7"
    assert not is_silenced(alert(rule="preemptions"), night, [s], [])
    assert not is_silenced(alert(), night + 61, [s], [])  # ended


@pytest.mark.parametrize(
    ("window", "key"),
    [
        (MuteWindowSettings(weekdays=("friday",)), "alerts.mute_windows[0].weekdays"),
        (MuteWindowSettings(start="25:00"), "alerts.mute_windows[0].start"),
        (MuteWindowSettings(end="6pm"), "alerts.mute_windows[0].end"),
        (MuteWindowSettings(timezone="Mars/Olympus"), "alerts.mute_windows[0].timezone"),
        (MuteWindowSettings(matchers={"team": "x"}), "alerts.mute_windows[0].matchers"),
    ],
)
def test_a_bad_mute_window_names_its_key(window, key):
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        check_mute_windows([window])


def test_silences_are_stored_listed_and_expired(db_url):
    engine = open_engine(db_url)
    now = 1_800_000_000
    sid = add_silence(engine, Silence({"target": "prod"}, now, now + 3600, "ann", "maintenance", now))
    later = add_silence(engine, Silence({"rule": "kv_cache"}, now + 600, now + 1200, "bob", "later", now))
    assert [s.id for s in active_silences(engine, now + 1)] == [sid]
    assert [s.id for s in list_silences(engine, now + 1)] == [later, sid]  # future ones listed too
    assert expire_silence(engine, sid, now + 10)
    assert not expire_silence(engine, sid, now + 20)  # already ended
    assert active_silences(engine, now + 11) == []
    assert [s.id for s in list_silences(engine, now + 11, include_ended=True)] == [later, sid]
    with pytest.raises(ConfigError, match="at least one matcher"):
        add_silence(engine, Silence({}, now, now + 1, "x", "y", now))
    with pytest.raises(ConfigError, match="severity"):
        add_silence(engine, Silence({"severity": "page"}, now, now + 1, "x", "y", now))
    engine.dispose()
