"""The notifier job: queue what the alert states call for, then deliver the outbox. A plain function
(:meth:`Notifier.run_once`) the collector schedules beside the evaluator; runnable once.

Exactly-once, as far as SMTP allows: a notification is queued in the transaction that records it
in its group's log, and marked sent in a transaction after the server accepted it. A crash before
the first commit queues it again on restart (the states are still there); a crash between the
server's acceptance and the second commit sends it once more: the one duplicate (same Message-ID).
Failures are retried with a doubling backoff (``retry_initial_s`` … ``retry_max_s``) until
``give_up_after_s``; their errors are kept per attempt. Nothing here raises into the collector:
a failed e-mail is a row with its error.

Channels do not wait on each other: each delivers in a thread of its own, and every notification
has a wall-clock deadline of its own for the whole of its delivery (the channel's ``timeout_s``:
the host's lookup, connecting, sending, reading the answer; core/deadline.py). One that passes it
fails alone and is retried with backoff: a webhook's or Alertmanager's notifications are POSTed
several at once (:data:`MAX_POSTS_AT_ONCE`), so one the receiver hangs on holds no other; an
e-mail past its deadline ends its SMTP session, and the rest go on a new one (after
:data:`MAX_LATE_A_TURN` such, the rest wait for the next run, untouched). The job waits for its channels at most the longest deadline (plus a second), and a
channel still busy then is skipped by later runs until its thread ends, never waited for.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from app.alerts import store
from app.alerts.model import AlertState
from app.alerts.rules import Rule, declared
from app.notify import channels, grouping, hooks, message, outbox, smtp
from app.notify.grouping import Held
from app.notify.outbox import SUPPRESSED, Outgoing
from core.channels import HTTP_CHANNELS, HttpChannel
from core.errors import SweetspotError
from core.settings import DeliverySettings, Settings, WebhookSettings

if TYPE_CHECKING:
    from db.queries import Reader

log = logging.getLogger(__name__)
JOIN_GRACE_S = 1.0  # past the longest deadline, what the job still waits for its channels
MAX_POSTS_AT_ONCE = 8  # a webhook's or Alertmanager's notifications sent at once, each with its own deadline
MAX_LATE_A_TURN = 3  # SMTP messages past their deadline in one turn; past them the rest wait for the next
Muted = Callable[[AlertState, float], bool]


def never_muted(_state: AlertState, _now: float) -> bool:
    return False


class Notifier:
    """Delivers the alert e-mails of one database (run by the process that holds the evaluator's lease)."""

    def __init__(self, engine: Engine, settings: Settings, clock: Callable[[], float] = time.time,
                 muted: Muted = never_muted, lock: threading.Lock | None = None,
                 leading: Callable[[], bool] = lambda: True) -> None:  # fmt: skip
        self.engine = engine
        self.settings = settings
        self.email = settings.alerts.email
        self.clock = clock
        self.muted = muted
        # only the process holding the evaluator's lease delivers: two would send each e-mail twice
        self.leading = leading
        # the collector's write lock (SQLite takes one writer at a time); SMTP runs outside it
        self.lock: Any = lock or contextlib.nullcontext()
        self._reader: Reader | None = None
        self.delivered: collections.Counter[tuple[str, str]] = collections.Counter()  # (channel, sent|failed) → count
        self._senders: dict[str, hooks.Sender] = {}
        self._workers: dict[str, threading.Thread] = {}  # channel → the thread delivering it now
        self._results: dict[str, tuple[int, int]] = {}

    def hooks(self) -> list[tuple[HttpChannel, WebhookSettings]]:
        """The POSTing channels that are on: (channel, its settings)."""
        return channels.hooks_on(self.settings.alerts)

    def channels(self) -> list[str]:
        return channels.on(self.settings.alerts)

    def run_once(self) -> str:
        """Queue due notifications, then send what the outbox holds; one line saying what happened."""
        if not self.channels():
            urls = " or ".join(f"alerts.{c.name}.url" for c in HTTP_CHANNELS)
            return f"e-mail off (no alerts.email.host / SWEETSPOT_SMTP_HOST) and no {urls}: alerts are stored, not sent"
        if not self.leading():
            return "another process holds the evaluator's lease and delivers the notifications"
        queued = self.queue(self.clock())
        sent, failed, busy = self.deliver_apart()
        still = f"; still sending: {', '.join(busy)} (each delivery ends within its timeout_s)" if busy else ""
        return f"{queued} queued, {sent} sent, {failed} failed{still}"

    def deliver_apart(self) -> tuple[int, int, list[str]]:
        """Deliver every channel in a thread of its own; wait at most the longest deadline (plus
        :data:`JOIN_GRACE_S`). Returns (sent, failed attempts, the channels still busy)."""
        work: dict[str, tuple[Callable[[], tuple[int, int]], float]] = {}
        if self.email.enabled:
            work[outbox.EMAIL] = (lambda: self.deliver(self.clock()), self.email.timeout_s)
        for hook, settings in self.hooks():
            work[hook.name] = (lambda c=hook, h=settings: self.deliver_hook(c, h, self.clock()), settings.timeout_s)  # type: ignore[misc]
        started: list[str] = []
        for channel, (deliver, _) in work.items():
            running = self._workers.get(channel)
            if running is not None and running.is_alive():
                continue  # its last turn is still on (within its deadline): never two at once
            self._results.pop(channel, None)
            thread = threading.Thread(target=self._turn, args=(channel, deliver), name=f"sweetspot-notify-{channel}", daemon=True)
            self._workers[channel] = thread
            thread.start()
            started.append(channel)
        end = time.monotonic() + max((t for _, t in work.values()), default=0.0) + JOIN_GRACE_S
        for channel in started:
            self._workers[channel].join(max(0.0, end - time.monotonic()))
        sent = failed = 0
        for channel in started:
            s, f = self._results.get(channel, (0, 0))
            sent, failed = sent + s, failed + f
        return sent, failed, [c for c in work if self._workers[c].is_alive()]

    def _turn(self, channel: str, deliver: Callable[[], tuple[int, int]]) -> None:
        try:
            self._results[channel] = deliver()
        except Exception:  # a bug in one channel must not silence the others, nor kill the job
            log.exception("delivering the %s notifications failed", channel)

    # -- queueing ---------------------------------------------------------------------------------
    def queue(self, now: float) -> int:
        """Record the notifications the states call for now, on every channel that is on; returns
        how many were queued."""
        with self.engine.connect() as conn:
            states = list(store.load_states(conn).values())
            logs = outbox.read_groups(conn)
        prefixes = tuple(channels.prefix(c) for c in HTTP_CHANNELS)
        outgoing: list[Outgoing] = []
        groups: list[outbox.GroupLog] = []
        if self.email.enabled:
            own = {k: v for k, v in logs.items() if not k.startswith(prefixes)}
            plan = grouping.plan(states, own, self.email, self.muted, now)
            # composing (charts: about a second each) happens before the transaction, outside the lock
            outgoing += [message.compose(due, self.email, now, lambda s: self._chart(s, now), self.rule_of) for due in plan.due]
            outgoing += [_held_entry(held, outbox.EMAIL, self.rule_of) for held in plan.held]
            groups += plan.groups
        for channel, settings in self.hooks():
            own = {k: v for k, v in logs.items() if k.startswith(channels.prefix(channel))}
            plan = grouping.plan(states, own, settings, self.muted, now, hooks.grouper(channel, settings))
            outgoing += [hooks.compose(channel, due, self.email.dashboard_url, now, self.rule_of) for due in plan.due]
            outgoing += [_held_entry(held, channel.name, self.rule_of) for held in plan.held]
            groups += plan.groups
        if not outgoing and not groups:
            return 0
        with self.lock, self.engine.begin() as conn:
            outbox.record(conn, outgoing, groups, int(now))
        for item in outgoing:
            log.info("%s: %s %s", item.group_key, "queued" if item.status != SUPPRESSED else "held back:", item.subject)
        return sum(item.status != SUPPRESSED for item in outgoing)

    def enqueue(self, item: Outgoing, hold_s: float = 0.0) -> int:
        """Queue one message outside the alert groups (the digest, a test); returns its id. ``hold_s``:
        the collector's delivery leaves it alone that long (a command sending it itself meanwhile)."""
        now = int(self.clock())
        with self.lock, self.engine.begin() as conn:
            return outbox.record(conn, [item], (), now, now + int(hold_s))[0]

    def reader(self) -> Reader:
        """The query facade over this database (charts and the digest read through it)."""
        if self._reader is None:
            from db.queries import Reader

            self._reader = Reader(engine=self.engine)
        return self._reader

    def rule_of(self, state: AlertState) -> Rule | None:
        """The rule ``state`` comes from, as it applies to its target now (its e-mail title and panel)."""
        return declared(self.settings, state.target, state.rule)

    def _chart(self, state: AlertState, now: float) -> bytes | None:
        from app.notify.images import alert_chart

        return alert_chart(self.reader(), self.settings, state, now)

    # -- delivery ---------------------------------------------------------------------------------
    def deliver(self, now: float, only: Sequence[int] | None = None) -> tuple[int, int]:
        """Send every queued notification that is due, or only the ones of ``only`` (due or not: a
        command sending its own message without the lease must not send the alerts' rows); returns
        (sent, failed attempts)."""
        with self.engine.connect() as conn:
            due = outbox.due(conn, int(now), ids=only)
        if not due:
            return 0, 0
        where = f"{self.email.host}:{self.email.effective_port}"
        sent = failed = late = 0
        left = list(due)
        while left and late < MAX_LATE_A_TURN:
            try:
                with smtp.connect(self.email, self.settings.smtp_password) as session:
                    while left:
                        item = left.pop(0)
                        try:  # each message its own deadline
                            answer = smtp.send(session, _message(item, self.email.from_address), where, self.email.timeout_s)
                        except smtp.DeadlineError as exc:
                            # this message is the one the server hangs on: it alone fails (and is
                            # retried with backoff); the session is gone, the rest go on a new one
                            self._failed(item, exc)
                            failed, late = failed + 1, late + 1
                            break
                        except smtp.MailError as exc:
                            self._failed(item, exc)
                            failed += 1
                            continue
                        with self.lock, self.engine.begin() as conn:
                            outbox.mark_sent(conn, item, int(self.clock()), answer)
                        log.info("sent notification %d (%s): %s", item.id, item.subject, answer)
                        self.delivered[outbox.EMAIL, "sent"] += 1
                        sent += 1
            except smtp.MailError as exc:  # the server could not be reached: every due one waits
                for item in left:
                    self._failed(item, exc)
                    failed += 1
                break
        return sent, failed

    def deliver_hook(self, channel: HttpChannel, settings: WebhookSettings, now: float) -> tuple[int, int]:
        """POST every due notification of ``channel``, oldest first; returns (sent, failed attempts)."""
        with self.engine.connect() as conn:
            due = outbox.due(conn, int(now), channel=channel.name)
        if not due:
            return 0, 0
        sender = self._senders.get(channel.name)
        if sender is None:
            sender = self._senders[channel.name] = hooks.Sender(channel, settings, self.email.dashboard_url)
        sent = failed = 0
        # Each notification its own POST and deadline, several at once: a receiver that hangs on one
        # holds that one only (it fails and is retried with backoff), never the others of the channel.
        with concurrent.futures.ThreadPoolExecutor(min(len(due), MAX_POSTS_AT_ONCE), f"sweetspot-{channel.name}") as pool:
            posts = {pool.submit(sender.send, item, self.clock()): item for item in due}  # oldest first
            for done in concurrent.futures.as_completed(posts):
                item = posts[done]
                try:
                    answer = done.result()
                except hooks.HookError as exc:  # a DeadlineError too: this notification's own
                    self._failed(item, exc, settings)
                    failed += 1
                    continue
                with self.lock, self.engine.begin() as conn:
                    outbox.mark_sent(conn, item, int(self.clock()), answer)
                log.info("sent notification %d (%s) to %s: %s", item.id, item.subject, channel.name, answer)
                self.delivered[channel.name, "sent"] += 1
                sent += 1
        return sent, failed

    def close(self) -> None:
        for sender in self._senders.values():
            sender.close()

    def _failed(self, item: outbox.Notification, exc: SweetspotError, timing: DeliverySettings | None = None) -> None:
        """One failed attempt: retried with the channel's doubling backoff, or given up (after
        ``give_up_after_s``, or at once when retrying cannot help: a webhook's 4xx)."""
        timing = timing or self.email
        self.delivered[item.channel, "failed"] += 1
        now = int(self.clock())
        wait = min(timing.retry_max_s, timing.retry_initial_s * 2**item.attempts)
        give_up = now - item.created_at >= timing.give_up_after_s or not getattr(exc, "retry", True)
        retry_at = None if give_up else int(now + wait)
        with self.lock, self.engine.begin() as conn:
            outbox.mark_failed(conn, item, now, exc.one_line(), retry_at)
        if give_up:
            log.error("notification %d (%s) given up after %d attempts: %s", item.id, item.subject, item.attempts + 1, exc.one_line())
        else:
            log.warning("notification %d (%s) not sent, retry in %g s: %s", item.id, item.subject, wait, exc.one_line())


def _message(item: outbox.Notification, sender: str) -> EmailMessage:
    try:
        return message.mime(item, sender)
    except Exception as exc:  # a row that cannot become a message must not block the ones after it
        raise smtp.MailError(f"notification {item.id} cannot be built into a message: {type(exc).__name__}: {exc}") from None


def _held_entry(held: Held, channel: str, rule_of: message.RuleOf) -> Outgoing:
    names = ", ".join(dict.fromkeys(message.title(s, rule_of) for s in held.alerts))
    why = "resolved while silenced: nothing is sent" if held.resolved else "held back by a silence or mute window"
    text = f"{names} on {held.label}: {why}"
    alerts = tuple(message.summary_of(s) for s in held.alerts)
    kind = outbox.RESOLVED_KIND if held.resolved else outbox.FIRING_KIND
    return Outgoing(held.group_key, kind, held.recipients, f"[SILENCED] {text}", text, "", {}, alerts, status=SUPPRESSED,
                    channel=channel)  # fmt: skip


def digest_once(notifier: Notifier) -> str:
    """Queue the scheduled digest when its instant has passed and it is not recorded yet (the
    outbox is the memory: a collector down at 08:00 sends it on start, a restart not twice)."""
    from app.notify import digest
    from core.schedule import last_due, parse_schedule

    settings = notifier.settings.alerts.digest
    if not settings.to or not notifier.email.enabled:
        return "digest off (no alerts.digest.to, or e-mail off)"
    schedule = parse_schedule(settings.schedule)
    due = last_due(schedule, settings.timezone, notifier.clock())
    key = digest.scheduled_key(due)
    with notifier.engine.connect() as conn:
        if outbox.exists(conn, key):
            return f"digest of {key.split()[-1]} already queued"
    reader = notifier.reader()
    report = digest.build(reader, notifier.engine, notifier.settings, due - schedule.period_s, due)
    charts = digest.period_charts(reader, notifier.settings, due - schedule.period_s, due)
    notifier.enqueue(digest.outgoing(report, tuple(settings.to), charts, key))
    return f"digest queued for {', '.join(settings.to)}"
