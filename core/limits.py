"""The limits of the settings, and the bounds of the work a user or a source can make the product
do (:data:`WORK`, chokepoint (c) of docs/security.md), in one module. The limits of the settings, in one table: each number's range, the pairs that must stay in order,
and the URL settings with the schemes they take.

:func:`check_limits` judges loaded settings against these tables (the loader calls it) and raises a
one-line :class:`~core.errors.SweetspotError` naming the setting, the value and what is allowed;
docs/configuration.md lists the same tables (a test keeps them in step). A key such as
``targets[].ceiling.weight_gb`` stands for that field of every ``[[targets]]`` table; an unset
optional value (None) is not judged.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from core.channels import CHANNELS
from core.durations import format_duration
from core.url_check import HTTP_SCHEMES as _HTTP
from core.url_check import url_problem

DAY = 86400.0
# The longest duration any setting may take (10 years): beyond, datetime arithmetic overflows and a
# figure such as "every 1e308 s" means a typo, not a wish.
MAX_DURATION_S = 3650 * DAY


@dataclass(frozen=True)
class Limit:
    """A closed range [low, high]; ``above`` makes low itself refused (the value must exceed it)."""

    low: float | None = None
    high: float | None = None
    above: bool = False
    duration: bool = False  # shown as 5m, 1d rather than 300, 86400

    def allows(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        return self.high is None or value <= self.high

    def show(self, value: float) -> str:
        return format_duration(value) if self.duration else f"{value:g}"

    def text(self) -> str:
        """The range as the docs and the error line say it, e.g. ``> 0 and ≤ 1d``."""
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.above else '≥'} {self.show(self.low)}")
        if self.high is not None:
            parts.append(f"≤ {self.show(self.high)}")
        return " and ".join(parts)


def _seconds(low: float = 0, high: float = MAX_DURATION_S, above: bool = True) -> Limit:
    return Limit(low, high, above, duration=True)


_FRACTION = Limit(0, 1, above=True)  # a share of something: (0, 1]
# Series (model × engine label sets) one page may keep, at most whatever max_series says: a page of
# label variants parsed and summed took 25 s a round under the old ceiling of 10,000,000
MAX_SERIES_PER_PAGE = 100_000
_PORT = Limit(1, 65535)
_CHANNELS = tuple(channel.name for channel in CHANNELS)  # every channel table has the delivery settings
_DELIVERY = {  # every channel's [alerts.<channel>] delivery settings
    # 0 is "at once" for the grouping waits, as in Alertmanager (its notifiers' defaults are 0)
    "group_wait_s": _seconds(above=False),
    "group_interval_s": _seconds(above=False),
    **{k: _seconds() for k in ("repeat_interval_s", "retry_initial_s", "retry_max_s", "give_up_after_s")},
    # one delivery's deadline: the notify job waits for the longest one, so 3650 d held it for good
    "timeout_s": _seconds(0, 600),
}
_THRESHOLDS = {  # [sweetspot] and each target's [targets.sweetspot] overrides
    "ttft_p95_slo_s": _seconds(0, 3600),
    "concurrency": Limit(1, 1_000_000),
    "kv_warning": _FRACTION,
    "kv_critical": _FRACTION,
    "min_mbu": Limit(0, 1),
    "queue_growth_s": _seconds(0, DAY, above=False),
}
_CEILING = {
    "weight_gb": Limit(0, 100_000, above=True),
    "tensor_parallel": Limit(1, 4096),
    "bandwidth_gbps": Limit(0, 1_000_000, above=True),
    "kv_bytes_per_token": Limit(0, 1e9, above=True),
    "active_params_b": Limit(0, 100_000, above=True),
}

LIMITS: dict[str, Limit] = {
    # a floor, not only > 0: 1e-9 s passed and then ran rounds back to back, every one of them late
    "interval_s": _seconds(0.5, DAY, above=False),
    "scrape_timeout_s": _seconds(0.05, 3600, above=False),
    "raw_retention_s": _seconds(60, MAX_DURATION_S, above=False),
    "rollup_retention_s": _seconds(3600, MAX_DURATION_S, above=False),
    "hourly_retention_s": _seconds(DAY, MAX_DURATION_S, above=False),
    "retired_shown_s": _seconds(0, MAX_DURATION_S, above=False),
    **{f"targets[].ceiling.{k}": v for k, v in _CEILING.items()},
    **{f"prometheus[].ceiling.{k}": v for k, v in _CEILING.items()},
    **{f"sweetspot.{k}": v for k, v in _THRESHOLDS.items()},
    **{f"targets[].sweetspot.{k}": v for k, v in _THRESHOLDS.items()},
    "targets[].gpu.peak_tflops": Limit(0, 1_000_000, above=True),
    "prometheus[].gone_after_s": _seconds(),
    "ui.port": _PORT,
    "ui.refresh_s": _seconds(1, DAY, above=False),
    "alerts.evaluate_every_s": _seconds(1, DAY, above=False),
    "alerts.lease_s": _seconds(0, DAY),
    "alerts.rules[].window_s": _seconds(0, 90 * DAY),
    "alerts.rules[].for_s": _seconds(0, 90 * DAY, above=False),
    "alerts.rules[].keep_firing_for_s": _seconds(0, 90 * DAY, above=False),
    "alerts.rules[].scale": Limit(0, 1e9, above=True),
    "alerts.email.port": Limit(0, 65535),
    **{f"alerts.{channel}.{k}": limit for channel in _CHANNELS for k, limit in _DELIVERY.items()},
    "query.timeout_s": _seconds(0, 3600),
    "query.max_timeout_s": _seconds(0, 3600),
    "query.row_limit": Limit(1, 10_000_000),
    "max_series": Limit(1, MAX_SERIES_PER_PAGE),
    "targets[].max_series": Limit(1, MAX_SERIES_PER_PAGE),
    "targets[].sweet_spot": Limit(1, 1_000_000),
    "targets[].max_num_seqs": Limit(1, 1_000_000),
    "telemetry.port": Limit(0, 65535),
}


@dataclass(frozen=True)
class Order:
    """``first`` must stay below ``second`` (or equal to it, when ``equal``) because of ``why``."""

    first: str
    second: str
    why: str
    equal: bool = False

    def holds(self, a: float, b: float) -> bool:
        return a <= b if self.equal else a < b


ORDERS: tuple[Order, ...] = (
    # strictly: a hung target's GET lasting the whole interval made every round late, and every target lost rounds
    Order("scrape_timeout_s", "interval_s", "a scrape must end, and its round be stored, before the next round starts"),
    Order("raw_retention_s", "rollup_retention_s", "minute rollups are folded from raw rows"),
    Order("rollup_retention_s", "hourly_retention_s", "hourly rollups are folded from minute rollups"),
    Order("sweetspot.kv_warning", "sweetspot.kv_critical", "the warning comes before the critical level", equal=True),
    Order("alerts.evaluate_every_s", "alerts.lease_s", "the evaluator renews its lease each run"),
    Order("query.timeout_s", "query.max_timeout_s", "no query may be given more than the most", equal=True),
    Order("alerts.email.retry_initial_s", "alerts.email.retry_max_s", "retries wait longer each time", equal=True),
)

_HTTP_TABLES = ("targets[].http", "targets[].gateway.http", "targets[].gpu.http", "prometheus[].http")

# URL setting → (schemes it takes, an example shown in the error line)
URLS: dict[str, tuple[tuple[str, ...], str]] = {
    "targets[].vllm_url": (_HTTP, "http://10.0.0.5:8000/metrics"),
    "targets[].gateway.url": (_HTTP, "http://10.0.0.5:4000/metrics"),
    "targets[].gpu.url": (_HTTP, "http://10.0.0.5:9400/metrics"),
    "prometheus[].url": (_HTTP, "http://prometheus:9090"),
    "alerts.email.dashboard_url": (_HTTP, "http://dashboard-host:8501"),
    **{f"{table}.proxy": (("http", "https", "socks5"), "http://proxy:3128") for table in _HTTP_TABLES},
}


def values(obj: Any, key: str, shown: str = "") -> Iterator[tuple[str, Any]]:
    """``(concrete key, value)`` of every field ``key`` names in ``obj``: ``targets[].name`` gives
    ``targets[0].name``, ``targets[1].name``, …"""
    head, _, rest = key.partition(".")
    name = head.removesuffix("[]")
    value = getattr(obj, name)
    at = f"{shown}.{name}" if shown else name
    items = [(f"{at}[{i}]", v) for i, v in enumerate(value)] if head.endswith("[]") else [(at, value)]
    for concrete, item in items:
        if rest:
            yield from values(item, rest, concrete)
        else:
            yield concrete, item


def limit_problems(settings: Any) -> Iterator[str]:
    """One line per setting out of its range, pair out of order or URL that cannot be used."""
    for key, limit in LIMITS.items():
        for concrete, value in values(settings, key):
            if value is not None and not limit.allows(value):
                yield f"{concrete}: {limit.show(value)} is out of range; it must be {limit.text()}"
    for order in ORDERS:
        a, b = next(values(settings, order.first))[1], next(values(settings, order.second))[1]
        if not order.holds(a, b):
            sign = "≤" if order.equal else "<"
            yield (f"{order.first}: {_shown(order.first, a)} must be {sign} {order.second} ({_shown(order.second, b)}): "
                   f"{order.why}; lower {order.first} or raise {order.second}")
    for key, (schemes, example) in URLS.items():
        for concrete, value in values(settings, key):
            problem = value and url_problem(value, schemes, example)
            if problem:
                yield f"{concrete}: {problem}"


def _shown(key: str, value: float) -> str:
    return LIMITS[key].show(value) if key in LIMITS else f"{value:g}"


# The largest integer a setting may be written as: past it a float cannot hold it exactly, and a
# 400-digit one ended `config` in OverflowError.
MAX_SETTING_INT = 2**53


def finite_problem(value: float) -> str:
    """Why a number read from the file cannot be a setting (NaN, ±inf, an integer past 2^53), or ""."""
    if isinstance(value, int):
        return "" if abs(value) <= MAX_SETTING_INT else f"a {len(str(abs(value)))}-digit integer is too large for any setting"
    return "" if math.isfinite(value) else f"{value} is not a finite number"


# -- bounded work (docs/security.md, chokepoint (c)) ----------------------------------------------------
# What a settings file or a source can make the product compute, each bound stated once; the modules
# that enforce them import them from here. Each is judged when the input arrives (the settings load, a
# page is read, a source answers), in time linear in its size, never when the work is already running.
MAX_EXPRESSION_CHARS = 500  # a rule's expr, threshold or when
MAX_EXPRESSION_NODES = 100  # parsed: names, numbers, operators, calls
MAX_EXPRESSION_LITERAL = 1e15  # a number written in an expression (9**9**9 or 10**1000000 froze the collector)
MAX_EXPONENT = 16  # an exponent, written as a number: a ** 2 is fine, a ** b and a ** 99999 are not
MAX_EXPRESSION_STRING = 200  # a text written in an expression
MAX_EXPRESSION_ITEMS = 32  # of a list or tuple written in one (x in (1, 2, 3)); comprehensions are refused
MAX_FORMAT_WIDTH = 200  # a format field's width or precision: "{window:>999999999}" made a 1 GB text at each fill
MAX_LEARNER_SAMPLES = 1_000_000  # a learner's span_s / step_s (a week at 1 s is 604,800; the default 10,080)
MAX_LEARNER_LEVELS = 1000  # a learner's min_levels
MAX_TARGETS_PER_SOURCE = 2000  # targets one Prometheus source may register (20,000 stalled the collector)
MAX_EPOCHS_PER_TARGET = 1000  # configuration epochs kept a target (a restart loop makes one a minute)

WORK = {  # the table docs/security.md shows (a test keeps the two in step)
    "MAX_EXPRESSION_CHARS": MAX_EXPRESSION_CHARS,
    "MAX_EXPRESSION_NODES": MAX_EXPRESSION_NODES,
    "MAX_EXPRESSION_LITERAL": MAX_EXPRESSION_LITERAL,
    "MAX_EXPONENT": MAX_EXPONENT,
    "MAX_EXPRESSION_STRING": MAX_EXPRESSION_STRING,
    "MAX_EXPRESSION_ITEMS": MAX_EXPRESSION_ITEMS,
    "MAX_FORMAT_WIDTH": MAX_FORMAT_WIDTH,
    "MAX_LEARNER_SAMPLES": MAX_LEARNER_SAMPLES,
    "MAX_LEARNER_LEVELS": MAX_LEARNER_LEVELS,
    "MAX_TARGETS_PER_SOURCE": MAX_TARGETS_PER_SOURCE,
    "MAX_EPOCHS_PER_TARGET": MAX_EPOCHS_PER_TARGET,
    "MAX_SERIES_PER_PAGE": MAX_SERIES_PER_PAGE,
}

_REFUSED_NODES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.Starred,
                  ast.Attribute, ast.NamedExpr, ast.JoinedStr, ast.Await, ast.Yield, ast.YieldFrom)  # fmt: skip


def expression_problem(text: str) -> str:
    """Why the expression ``text`` could make its evaluation unbounded, or "" (a syntax error is the
    caller's to report): longer than :data:`MAX_EXPRESSION_CHARS`, more than
    :data:`MAX_EXPRESSION_NODES` parts, a number past :data:`MAX_EXPRESSION_LITERAL`, a power whose
    exponent is not a number up to :data:`MAX_EXPONENT`, a long text or list, or a comprehension.
    Linear in the text: one parse, one walk."""
    if len(text) > MAX_EXPRESSION_CHARS:
        return f"longer than {MAX_EXPRESSION_CHARS} characters"
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""  # not an expression: said by the caller's own parse
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_EXPRESSION_NODES:
        return f"more than {MAX_EXPRESSION_NODES} parts"
    for node in nodes:
        if isinstance(node, _REFUSED_NODES):
            return f"{type(node).__name__} is not allowed in a rule's expression"
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) > MAX_EXPRESSION_LITERAL:
                return f"the number {str(value)[:20]} is beyond {MAX_EXPRESSION_LITERAL:g}"
            if isinstance(value, str | bytes) and len(value) > MAX_EXPRESSION_STRING:
                return f"a text longer than {MAX_EXPRESSION_STRING} characters"
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            items = len(node.keys) if isinstance(node, ast.Dict) else len(node.elts)
            if items > MAX_EXPRESSION_ITEMS:
                return f"a list of more than {MAX_EXPRESSION_ITEMS} items"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exponent = node.right.operand if isinstance(node.right, ast.UnaryOp) else node.right
            if not (isinstance(exponent, ast.Constant) and isinstance(exponent.value, int | float)
                    and abs(exponent.value) <= MAX_EXPONENT):
                return f"a power's exponent must be a number up to {MAX_EXPONENT} (a ** 2)"
            if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(node.left)):
                return "a power of a power ((a ** 16) ** 16 grows past any memory)"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.LShift):
            if any(isinstance(side, ast.List | ast.Tuple | ast.Set) or (isinstance(side, ast.Constant) and isinstance(side.value, str))
                   for side in (node.left, node.right)) or isinstance(node.op, ast.LShift):
                return "repeating a text or a list, or a shift, is not allowed in a rule's expression"
    return ""
