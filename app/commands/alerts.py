"""``python -m app alerts``: the stored alerts, their history, the effective rules, a backtest, silences.

Each subcommand is one entry of :data:`SUBCOMMANDS` (help, configure, run): adding one costs an
entry and two functions. Reads go through read-only connections; only ``silence add|expire`` write.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any

from sqlalchemy import Engine

from app.alerts import store
from app.alerts.model import FIRING, AlertState, Silence, Transition
from app.alerts.rules import Rule, by_name, rule_set
from app.alerts.silences import active_silences, add_silence, expire_silence, list_silences, silenced_by
from app.commands import alerts_email
from app.formatting import clock, number
from core.durations import DurationError, format_duration, parse_duration
from core.errors import UsageError
from core.settings import Settings, SweetSpotSettings, effective_sweetspot
from core.text import visible

HELP = "alerts firing and pending now, their history, the effective rules, a backtest, silences"

Configure = Callable[[argparse.ArgumentParser], None]
# --db is accepted after a subcommand too (`alerts list --db URL`); SUPPRESS keeps a value given
# before it when it is not repeated.
_COMMON = argparse.ArgumentParser(add_help=False)
_COMMON.add_argument("--db", metavar="URL", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
Run = Callable[[argparse.Namespace, Settings], int]


def _reader_engine(settings: Settings) -> Engine:
    from db.queries import Reader

    return Reader(settings.db_url).engine


def _writer_engine(settings: Settings) -> Engine:
    from db.engine import open_engine

    return open_engine(settings.db_url)


def _duration(text: str, flag: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _json(value: Any) -> None:
    print(json.dumps(value, indent=2, allow_nan=False))


# -- list ---------------------------------------------------------------------------------------------
def _configure_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", metavar="NAME", help="only this target's alerts")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")


def alert_json(s: AlertState, silenced: str | None) -> dict[str, Any]:
    """One alert as ``alerts list --json`` prints it."""
    return {
        "rule": s.rule, "target": s.target, "model": s.model, "state": s.state, "severity": s.severity,
        "since": s.firing_since if s.state == FIRING else s.pending_since, "value": s.value,
        "threshold": s.threshold, "silenced": silenced is not None, "silenced_by": silenced,
        "summary": s.summary, "recommendation": s.recommendation, "labels": dict(s.labels),
        "last_eval_at": s.last_eval_at,
    }  # fmt: skip


def _run_list(args: argparse.Namespace, settings: Settings) -> int:
    engine, now = _reader_engine(settings), time.time()
    silences, windows = active_silences(engine, now), settings.alerts.mute_windows
    alerts = [alert_json(s, silenced_by(s, now, silences, windows)) for s in store.current(engine, args.target)]
    if args.json:
        _json(alerts)
        return 0
    if not alerts:
        print("no alert firing or pending")
    for a in alerts:
        held = f" [silenced: {a['silenced_by']}]" if a["silenced"] else ""
        # names come from outside (model from /metrics, target and rule from the settings): escaped
        where = visible(a["target"]) + (f" / model {visible(a['model'])}" if a["model"] else "")
        print(f"{a['state'].upper():8} {a['severity']:8} {where} {visible(a['rule'])} since {clock(a['since'])}{held}")
        print(f"         {visible(a['summary'], 1000)}")
        if a["recommendation"]:
            print(f"         → {visible(a['recommendation'], 1000)}")
    return 0


# -- history ------------------------------------------------------------------------------------------
def _configure_history(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", default="24h", metavar="DURATION", help="transitions this far back (default 24h)")
    p.add_argument("--target", metavar="NAME", help="only this target's transitions")
    p.add_argument("--rule", metavar="NAME", help="only this rule's transitions")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--notifications", action="store_true", help="the e-mail notification log instead (sent, retried, failed, held back)")


def transition_json(t: Transition) -> dict[str, Any]:
    return {
        "rule": t.rule, "target": t.target, "model": t.model, "from": t.from_state, "to": t.to_state, "at": t.at,
        "value": t.value, "threshold": t.threshold, "severity": t.severity, "summary": t.summary,
    }  # fmt: skip


def _run_history(args: argparse.Namespace, settings: Settings) -> int:
    if args.notifications:
        return alerts_email.print_notifications(settings, _duration(args.since, "--since"), args.json)
    since = time.time() - _duration(args.since, "--since")
    rows = [transition_json(t) for t in store.history(_reader_engine(settings), since, args.target, args.rule)]
    if args.json:
        _json(rows)
        return 0
    if not rows:
        print(f"no transition in the last {args.since}")
    for r in rows:
        where = visible(r["target"]) + (f" / model {visible(r['model'])}" if r["model"] else "")
        print(f"{clock(r['at'])} {where} {visible(r['rule'])}: {r['from']} → {r['to']} ({visible(r['summary'], 1000)})")
    return 0


# -- rules --------------------------------------------------------------------------------------------
def _configure_rules(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", metavar="NAME", help="this target's rules (default: every configured target)")
    p.add_argument("--json", action="store_true", help="print the rules as JSON")


def condition(r: Rule) -> str:
    return f"{r.expr} {r.op} {r.threshold}" + (f" while {r.when}" if r.when else "")


def thresholds_in_effect(settings: Settings, target: str, r: Rule) -> list[tuple[str, float | None, str]]:
    """The ``[sweetspot]`` keys the rule's threshold names, each with its value for ``target`` and
    where it comes from: ``target override`` (its ``[targets.sweetspot]`` or ``sweet_spot``), ``file``
    or ``default``. None: not configured (the sweet spot: its own, from its sweep or its traffic)."""
    entry = next((t for t in settings.targets if t.name == target), None)
    own = None if entry is None else dataclasses.replace(entry.sweetspot, concurrency=entry.sweet_spot or entry.sweetspot.concurrency)
    effective, found = effective_sweetspot(settings, target), []
    for key in (f.name for f in fields(SweetSpotSettings)):
        if not re.search(rf"\b{key}\b", r.threshold):
            continue
        if own is not None and getattr(own, key) is not None:
            source = "target override"
        else:
            source = "file" if getattr(settings.sweetspot, key) != getattr(SweetSpotSettings(), key) else "default"
        value = getattr(effective, key)
        found.append((key, None if value is None else float(value), source))
    return found


def _given(r: Rule, key: str, value: float | None, source: str) -> str:
    if value is None:
        return f"{key} = unknown unless configured: the target's own, from its sweep or learned from its traffic"
    # a threshold that is the key alone reads in the rule's unit (3 s, 90 %); inside an expression, bare
    shown = f"{number(value * r.scale)}{r.unit and ' ' + r.unit}" if key == r.threshold else number(value)
    return f"{key} = {shown} ({source})"


def _run_rules(args: argparse.Namespace, settings: Settings) -> int:
    names = [args.target] if args.target else [t.name for t in settings.targets] or ["(any target)"]
    sets = {name: rule_set(settings, name) for name in names}
    if args.json:
        _json({name: [_rule_json(settings, name, r) for r in rules] for name, rules in sets.items()})
        return 0
    for name, rules in sets.items():
        print(f"{name}:")
        for r in rules:
            given = "; ".join(_given(r, *t) for t in thresholds_in_effect(settings, name, r))
            timing = f"window {format_duration(r.window_s)}, for {format_duration(r.for_s)}, keep firing {format_duration(r.keep_firing_for_s)}"
            print(f"  {r.name:18} {r.severity:8} {condition(r)}  ({timing}; {r.source}){given and ' where ' + given}")
    return 0


def _rule_json(settings: Settings, target: str, r: Rule) -> dict[str, Any]:
    given = {key: {"value": value, "source": source} for key, value, source in thresholds_in_effect(settings, target, r)}
    return {**asdict(r), "labels": dict(r.labels), "thresholds": given}


# -- backtest -----------------------------------------------------------------------------------------
def _configure_backtest(p: argparse.ArgumentParser) -> None:
    p.add_argument("rule", metavar="RULE", help="rule name (alerts rules lists them)")
    p.add_argument("--since", default="7d", metavar="DURATION", help="history to replay (default 7d)")
    p.add_argument("--target", metavar="NAME", help="target (default: the first configured or stored)")
    p.add_argument("--step", metavar="DURATION", help="evaluation step (default: the rule's window)")
    p.add_argument("--json", action="store_true", help="print the transitions as JSON")


def _run_backtest(args: argparse.Namespace, settings: Settings) -> int:
    from app.alerts.backtest import backtest
    from db.queries import Reader

    reader = Reader(settings.db_url)
    target = args.target or (settings.targets[0].name if settings.targets else next((t.name for t in reader.targets()), None))
    if target is None:
        raise UsageError("no target stored in the database yet", "run `python -m app collect` first, or pass --db")
    rule = by_name(rule_set(settings, target), args.rule)
    if rule is None:
        known = ", ".join(r.name for r in rule_set(settings, target))
        raise UsageError(f"no rule named {args.rule!r} for {target}", f"Rules: {known}")
    end = time.time()
    step = _duration(args.step, "--step") if args.step else None
    result = backtest(reader, settings, target, rule, end - _duration(args.since, "--since"), end, step)
    if args.json:
        _json([transition_json(t) for t in result.transitions])
        return 0
    print(f"{rule.name} on {target}: {condition(rule)}, replayed over {args.since} at {format_duration(result.step_s)} "
          f"steps ({result.evaluations} evaluations; for {format_duration(rule.for_s)}, keep firing "
          f"{format_duration(rule.keep_firing_for_s)})")  # fmt: skip
    for t in result.transitions:
        if t.to_state in ("firing", "resolved"):
            print(f"  {clock(t.at)} {'fired' if t.to_state == 'firing' else 'resolved':8} {t.summary}")
    share = result.firing_s / max(result.end - result.start, 1.0) * 100
    print(f"would have fired {result.fired} time(s), firing {format_duration(result.firing_s)} ({number(share)} % of the time)")
    return 0


# -- silences -----------------------------------------------------------------------------------------
def _configure_silence(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="silence_action", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="hold back the notifications of matching alerts", parents=[_COMMON])
    for key in ("rule", "target", "model", "severity"):
        add.add_argument(f"--{key}", help=f"match alerts of this {key}")
    add.add_argument("--duration", default="2h", metavar="DURATION", help="how long from --start (default 2h)")
    add.add_argument("--start", metavar="DURATION", default="0s", help="start this far from now (default: now)")
    add.add_argument("--author", default="", help="who (default: the login name)")
    add.add_argument("--comment", required=True, help="why")
    lst = sub.add_parser("list", help="silences not ended yet (--all: every one)", parents=[_COMMON])
    lst.add_argument("--all", action="store_true", help="include ended and expired silences")
    lst.add_argument("--json", action="store_true", help="print JSON")
    exp = sub.add_parser("expire", help="end a silence now", parents=[_COMMON])
    exp.add_argument("id", type=int, help="the silence's id (alerts silence list)")


def silence_json(s: Silence) -> dict[str, Any]:
    return asdict(s)


def _run_silence(args: argparse.Namespace, settings: Settings) -> int:
    now = time.time()
    if args.silence_action == "add":
        matchers = {k: getattr(args, k) for k in ("rule", "target", "model", "severity") if getattr(args, k) is not None}
        if not matchers:
            raise UsageError("a silence needs at least one of --rule, --target, --model, --severity")
        start = now + _duration(args.start, "--start")
        silence = Silence(matchers, int(start), int(start + _duration(args.duration, "--duration")),
                          args.author or getpass.getuser(), args.comment, int(now))  # fmt: skip
        sid = add_silence(_writer_engine(settings), silence)
        print(f"silence {sid}: {matchers} until {clock(silence.ends_at)}")
    elif args.silence_action == "list":
        rows = list_silences(_reader_engine(settings), now, include_ended=args.all)
        if args.json:
            _json([silence_json(s) for s in rows])
            return 0
        if not rows:
            print("no silence")
        for s in rows:
            state = "active" if s.active(now) else "ended" if s.ends_at <= now or s.expired_at else "future"
            print(f"{s.id:4} {state:7} {s.matchers} {clock(s.starts_at)} → {clock(s.ends_at)} by {s.author}: {s.comment}")
    elif not expire_silence(_writer_engine(settings), args.id, now):
        raise UsageError(f"no silence {args.id} in force or to come", "See `python -m app alerts silence list`")
    else:
        print(f"silence {args.id} expired")
    return 0


SUBCOMMANDS: dict[str, tuple[str, Configure, Run]] = {
    "list": ("alerts firing or pending now, and which are silenced", _configure_list, _run_list),
    "history": ("state transitions, oldest first", _configure_history, _run_history),
    "rules": ("the effective rule set and where each rule comes from", _configure_rules, _run_rules),
    "backtest": ("replay one rule over stored history: when it would have fired and resolved", _configure_backtest, _run_backtest),
    "silence": ("add, list or expire silences", _configure_silence, _run_silence),
    "test-email": ("send a test e-mail and print the SMTP server's answer", lambda p: None,
                   lambda args, settings: alerts_email.test_email(settings)),
}  # fmt: skip


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")
    sub = parser.add_subparsers(dest="alerts_command", metavar="SUBCOMMAND", required=True)
    for name, (help_text, configure_sub, _run) in SUBCOMMANDS.items():
        configure_sub(sub.add_parser(name, help=help_text, description=help_text, parents=[_COMMON]))


def execute(args: argparse.Namespace, settings: Settings) -> int:
    return SUBCOMMANDS[args.alerts_command][2](args, settings)
