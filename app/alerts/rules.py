"""The sweet-spot contract (DOMAIN.md §3) as declarative alert rules, and their evaluation.

One rule set serves the Overview's banner, ``status``, the evaluator, the backtest and e-mail: the
defaults below, changed and extended by ``[[alerts.rules]]`` (per target when an entry names
``targets``). A rule is ``expr op threshold`` over the names of :mod:`app.alerts.names`, optionally
guarded by ``when``; expressions are read by ``simpleeval`` (arithmetic, comparisons, and/or/not,
``max``/``min``/``abs``), never by ``eval``.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from simpleeval import EvalWithCompoundTypes, NameNotDefined

from app.alerts.model import CRITICAL, ERROR, NO_DATA, SEVERITIES, WARNING
from app.formatting import bucket, compared, number
from app.panel_names import PANEL_NAMES
from core.durations import format_duration
from core.histogram_slo import CANNOT_TELL as CANNOT_TELL_STATE
from core.limits import MAX_FORMAT_WIDTH, expression_problem
from core.settings import ConfigError, RuleSettings, Settings
from core.text import MAX_NAME, name_problem, visible

HOLDS = "holds"
CLEAR = "clear"
# The bucket bounds neither prove the rule's figure within its threshold nor past it (core/histogram_slo.py):
# the rule neither fires nor clears on it, and says the bucket.
CANNOT_TELL = CANNOT_TELL_STATE

OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
OP_TEXT = {">=": "≥", "<=": "≤", "!=": "≠"}
FUNCTIONS: dict[str, Callable[..., Any]] = {"max": max, "min": min, "abs": abs}

DEFAULT_SOURCE, FILE_SOURCE, TARGET_SOURCE = "default", "file", "target override"


@dataclass(frozen=True)
class Rule:
    """One alert rule: ``expr op threshold`` (while ``when``) over a window of figures.

    ``per_model``: besides the whole target (model ""), one alert per model the target serves.
    ``for_s``: how long the condition must hold before the alert fires (pending until then);
    ``keep_firing_for_s``: how long it stays firing after the condition cleared. ``needs_data``
    False marks the rule that watches the data itself (target down): every other rule is
    ``no_data`` while the window cannot be judged. ``scale``/``unit`` only change how values read.
    """

    name: str
    expr: str
    op: str
    threshold: str
    severity: str
    window_s: float = 300.0
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    when: str = ""
    label: str = ""
    unit: str = ""
    scale: float = 1.0
    detail: str = ""
    recommendation: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    needs_data: bool = True
    per_model: bool = False  # also one alert per model of the target (model "" is the whole target)
    show_values: bool = True  # False: the label says it all ("no data over 5m: the target is down")
    # the state's summary when ``expr`` has no value at all (a figure that needs a source the target
    # lacks): the rule is then not evaluated, whatever ``when`` says, and says why ("" = no data for expr)
    no_value: str = ""
    source: str = DEFAULT_SOURCE
    panel: str = ""  # the dashboard panel an alert e-mail shows (one of app/panel_names.py; "": no chart)
    title: str = ""  # its short name in e-mail subjects and lists ("": the name, underscores as spaces)
    # a name holding the bucket bounds' judgement of ``expr`` against its threshold (within / outside /
    # cannot tell: app/alerts/names.py), and ``{proof}_text`` its words: "cannot tell" is the outcome
    # CANNOT_TELL, never HOLDS or CLEAR from a value interpolated inside the bucket ("": no proof read)
    proof: str = ""
    # a load rule: what a load sweep does on purpose (past the knee, TTFT up, the KV cache full). It is
    # held (judged clear, saying why) while a stored sweep loads its target (app/alerts/sweep_hold.py)
    load: bool = False
    # the clause of the contract this rule alerts about without judging it (an alert about the
    # judgement itself: its TTFT SLO has been "cannot tell" for long): it never makes a minute outside
    # or unjudged (app/verdict.py), and its firing counts for that clause (app/scenarios/score.py)
    watches: str = ""


@dataclass(frozen=True)
class Outcome:
    """One rule applied to one window: ``status`` HOLDS, CLEAR, NO_DATA or ERROR; values unscaled."""

    status: str
    value: float | None = None
    threshold: float | None = None
    summary: str = ""


_SERVING = "not (running_max == 0 and tokens_per_s == 0)"
# Every KV recommendation says so; the reference's figures (0.95 OOMed, 0.92 works) only where the
# target's GPUs are like its own (app/advice.py)
_GPU_MEMORY_CAUTION = ("Raising --gpu-memory-utilization gives the KV cache room at the cost of the memory left for "
                       "activations: too high, the engine runs out of memory (OOM) at load.")
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        "sleeping", "asleep", ">", "0", WARNING, show_values=False,
        title="engine asleep",
        label="engine asleep ({sleep_state}): up, not down, and serving nothing",
        recommendation="The engine was put to sleep (vLLM's POST /sleep): wake it with POST /wake_up, or take it "
        "out of the gateway's pool while it sleeps.",
    ),
    Rule(
        # window 1 m: over 5 m a stall showed only once the window held no step (7 min to fire, a
        # 4-minute stall never did: docs/scenarios.md); `for` 2 m keeps a 30-second stall quiet
        "not_serving", "queued", ">", "0", CRITICAL, window_s=60.0, for_s=120.0,
        panel="throughput", title="up but not serving",
        when="running_max == 0 and tokens_per_s == 0 and asleep == 0",
        label="up but not serving over {window}: queued requests", unit="requests", detail="nothing running, 0 tok/s",
        recommendation="vLLM is up but runs nothing while requests wait: check its log for a stuck engine or a "
        "failed CUDA graph capture (--enforce-eager only as a stopgap, it costs throughput) and restart it.",
    ),
    Rule(
        "ttft_p95", "client_ttft_p95_s", ">", "ttft_p95_slo_s", CRITICAL, for_s=120.0, keep_firing_for_s=60.0, load=True,
        panel="ttft", title="TTFT P95",
        label="TTFT P95 over {window}", unit="s", detail="{ttft_p95_note}{ttft_wait_note}", proof="ttft_slo_judgement",
        recommendation="Lower {limit} toward the sweet spot ({concurrency}) so extra requests wait {wait_where}; "
        "when requests still queue there, the demand is past this target's "
        "capacity: add a replica or more GPUs. Keep chunked prefill on (--enable-chunked-prefill) so long prompts do "
        "not delay short requests' first token.",
    ),
    Rule(
        # "cannot tell" alone never fires ttft_p95 (the buckets prove nothing): with prefix caching off
        # the P95 sat in vLLM's (2.5, 5] s for the whole fault and nothing said so (docs/scenarios.md).
        # `for` 5 m: the TTFT window's own length of a P95 no bound can place against the SLO
        "ttft_slo_cannot_tell", "ttft_cannot_tell", ">", "0", WARNING, for_s=300.0, load=True, watches="ttft_p95",
        panel="ttft", title="TTFT SLO cannot tell", show_values=False,
        label="TTFT P95 SLO not judged over {window}: the engine's {engine_ttft_slo_judgement_text}",
        recommendation="The engine's TTFT histogram has no bucket bound at the SLO ({ttft_p95_slo_s} s), and its P95 "
        "lies in the bucket that holds it: no figure can say whether 95 % of first tokens came within the SLO. Put a "
        "bucket bound at the SLO: set sweetspot.ttft_p95_slo_s (or the target's) to one of the bucket's bounds, or "
        "judge by a gateway whose wait histogram has a bound there; meanwhile the P95 lies between the bucket's bounds.",
    ),
    Rule(
        "preemptions", "preemptions", ">", "0", CRITICAL, load=True,
        panel="preemptions", title="preemptions",
        label="preemptions over {window}",
        recommendation="The KV cache is exhausted: lower --max-num-seqs and --max-model-len{or_gateway_limit}. "
        + _GPU_MEMORY_CAUTION,
    ),
    Rule(
        "kv_cache_critical", "kv_cache_usage_max", ">=", "kv_critical", CRITICAL, load=True,
        panel="kv_cache", title="KV cache critical",
        label="KV-cache usage (max over {window})", unit="%", scale=100.0, detail="preemption imminent",
        recommendation="Preemption is imminent: lower --max-num-seqs or --max-model-len{or_gateway_limit}, now. "
        + _GPU_MEMORY_CAUTION,
    ),
    Rule(
        "kv_cache", "kv_cache_usage_max", ">=", "kv_warning", WARNING, for_s=60.0, load=True,
        panel="kv_cache", title="KV cache",
        label="KV-cache usage (max over {window})", unit="%", scale=100.0,
        recommendation="Close to preemption: lower --max-num-seqs or --max-model-len{or_gateway_limit}, "
        "before preemptions start. " + _GPU_MEMORY_CAUTION,
    ),
    Rule(
        "concurrency", "running_avg", ">", "concurrency", WARNING, for_s=300.0, load=True,
        panel="concurrency", title="concurrency",
        label="running requests (avg over {window})", unit="requests", detail="sweet-spot concurrency, {sweet_spot_source}",
        no_value="{sweet_spot_missing}",
        recommendation="Set {limit} to the sweet-spot concurrency ({concurrency}){and_max_num_seqs}: past the knee "
        "throughput barely grows while latency doubles.",
    ),
    Rule(
        "queue_growing", "queue_now", ">", "queue_before", WARNING, when="queue_growing", load=True,
        panel="concurrency", title="gateway queue growing",
        label="gateway queue growing for {queue_growth}", unit="requests",
        detail="{queue_growth} ago; demand exceeds the sweet-spot capacity",
        recommendation="Demand exceeds the sweet-spot capacity: add a replica or shed load. Raising the gateway "
        "concurrency limit past the sweet spot only moves the wait into vLLM.",
    ),
    Rule(
        # `for` 5 m (was 10 m): a GPU slowed 30 % fired after 12.5 min, past the 10-minute goal. 85 % (was
        # 80 %): a GPU 25 % slower reads 73-84 % of the curve (3-minute windows' noise), a healthy engine
        # 96-112 %, so the threshold sits between the two (docs/scenarios.md). From 2 running (was 1): a
        # night's one stream (1.2 clients) read 84 % of the curve for 5 minutes in the healthy weeks
        "under_delivering", "curve_share", "<", "0.85", WARNING, window_s=180.0, for_s=300.0,
        panel="throughput", title="under-delivering",
        when=f"running_avg >= 2 and asleep == 0 and {_SERVING}",
        label="output tok/s against its own {curve_source} curve at {running_avg} running (over {window})",
        unit="%", scale=100.0, detail="{tokens_per_s} tok/s where the curve gives {expected_tokens_per_s}",
        no_value="{curve_missing}",
        recommendation="The engine delivers less than its own curve at this concurrency: a throttled or degraded GPU "
        "(nvidia-smi -q -d PERFORMANCE: clocks, power cap, thermal slowdown; ECC errors), a bad deploy (another "
        "vLLM version, --enforce-eager, a changed quantisation or TP), or a longer mix of prompts than the curve's "
        "(prefill-heavy). Compare with the last good deploy and run `python -m app sweep` to measure it again.",
    ),
    Rule(
        "requests_failing", "finished_error_per_s", ">", "0", CRITICAL, for_s=60.0, when="errors_exposed",
        title="requests failing",
        label="requests finished by an engine error over {window}", unit="req/s",
        recommendation="vLLM ends requests with finished_reason=\"error\": read its log for the exception (a CUDA "
        "error or an out-of-memory in a step) and restart it if the errors keep coming.",
    ),
    Rule(
        "requests_aborted", "finished_abort_per_s", ">", "0.05 * requests_per_s", WARNING, for_s=300.0,
        title="requests aborted",
        when="aborts_exposed", label="aborted requests over {window}", unit="req/s",
        detail="more than 5 % of finished requests",
        recommendation="Clients give up before their answer: compare their timeout with the TTFT and E2E P95; lower "
        "{limit} toward the sweet spot ({concurrency}) so requests wait less in vLLM.",
    ),
    Rule(
        # for: counted in scrape time from the last good scrape (app/alerts/down_clock.py). 22 s lets a
        # 20-s blip pass (4 failed 5-s scrapes: 20 s) and fires at the 5th (25 s), 2-3 s either side
        # for the scrapes' jitter; sent without group_wait (app/notify/grouping.py): docs/alerts.md
        "target_down", "no_data", ">", "0", CRITICAL, for_s=22.0, needs_data=False, show_values=False,
        title="target down",
        label="no data over {window}: {no_data_reason}",
        recommendation="Check that the collector reaches targets[].vllm_url (python -m app inspect URL) and that "
        "vLLM is running.",
    ),
)  # fmt: skip


# The rules that watch the data itself: while one holds, every other rule of the target reads no data,
# so its alert has nothing to gather and is sent without group_wait (app/notify/grouping.py).
DATA_RULES = frozenset(rule.name for rule in DEFAULT_RULES if not rule.needs_data)

# Rules retired from the defaults: an ``[[alerts.rules]]`` entry of that name brings one back as it was
# (an old file that tuned it keeps it), changed by the entry's keys. The MBU floor fired at the
# reference's own operating points (docs/alerts.md#why-the-mbu-floor-went).
RETIRED_RULES: dict[str, Rule] = {
    "efficiency": Rule(
        "efficiency", "mbu", "<", "min_mbu", WARNING, for_s=600.0,
        panel="mbu", title="low MBU",
        when=f"queued > 0 and {_SERVING} and asleep == 0",
        label="MBU over {window}", unit="%", scale=100.0, detail="{mbu_source}, while {queued} requests wait",
        no_value="not evaluated: {mbu_missing}",
        recommendation="Requests wait while each decode step moves little of the GPUs' memory bandwidth: the steps "
        "are bound by compute or overheads (prefill, kernels, tensor-parallel communication, scheduling), or the "
        "engine is not batching the waiting requests (its running limit, --max-num-seqs, or the KV cache holds them back).",
    ),
}  # fmt: skip


# -- evaluation ------------------------------------------------------------------------------------
# Keyed by the expression's text (a value): each evaluation reads every rule's expressions for every
# target, and simpleeval's parse costs ~65 µs an expression against ~0.1 µs cached.
@lru_cache(maxsize=1024)
def _parsed(text: str) -> ast.AST:
    return EvalWithCompoundTypes().parse(text)


class Names:
    """The names of one window, ready to evaluate many rules' expressions over them."""

    def __init__(self, names: Mapping[str, Any], window_s: float | None = None) -> None:
        self.names = dict(names)
        # the window the figures were computed over (status --window 3m judges every rule over 3m);
        # None: each rule's own window_s, as the evaluator computes each rule's figures
        self.window_s = window_s
        # a copy: simpleeval adds list, tuple, dict and set to the dict it is given
        self._eval = EvalWithCompoundTypes(names=self.names, functions=dict(FUNCTIONS))
        self._fields: dict[str, Any] | None = None

    def fields(self, rule: Rule) -> _Fields:
        """Format fields for ``rule``'s texts; the names are spelled once per window, not per rule."""
        if self._fields is None:
            self._fields = _spelled(self.names)
        return _Fields(self._fields, self.window_of(rule))

    def window_of(self, rule: Rule) -> float:
        """The window ``rule``'s figures were computed over: its texts say this one."""
        return rule.window_s if self.window_s is None else self.window_s

    def value(self, text: str) -> Any:
        return self._eval.eval(text, previously_parsed=_parsed(text))


def outcome(rule: Rule, names: Names) -> Outcome:
    """Apply ``rule`` to one window's names. Missing figures give NO_DATA, never CLEAR."""
    if rule.needs_data and names.names.get("no_data"):
        return Outcome(NO_DATA, summary=f"no data: {names.names.get('no_data_reason') or 'the window cannot be judged'}")
    try:
        if rule.no_value and (_maybe(names, rule.expr) is None or _maybe(names, rule.threshold) is None):
            why = fill(rule.no_value, names.fields(rule))
            return Outcome(NO_DATA, summary=why or f"no data for {rule.expr}")
        if rule.when and not _value(names, rule.when):
            label = wording(rule, names)[0]
            return Outcome(CLEAR, _maybe(names, rule.expr), _maybe(names, rule.threshold), f"{label}: only while {rule.when}")
        value, threshold = _number(names, rule.expr), _number(names, rule.threshold)
        if value is None or threshold is None:
            return Outcome(NO_DATA, value, threshold, summary=f"no data for {rule.expr if value is None else rule.threshold}")
        holds = OPS[rule.op](value, threshold)
        if rule.proof and names.names.get(rule.proof) == CANNOT_TELL:
            label = wording(rule, names)[0]
            return Outcome(CANNOT_TELL, value, threshold, f"{label}: {names.names.get(rule.proof + '_text') or CANNOT_TELL}")
    except _Missing as exc:
        return Outcome(NO_DATA, summary=f"no data for {exc}")
    except Exception as exc:  # a rule that cannot be computed is in error, and never stops the others
        return Outcome(ERROR, summary=f"{rule.name}: {type(exc).__name__}: {exc}")
    return Outcome(HOLDS if holds else CLEAR, value, threshold, summary(rule, names, value, threshold, holds))


class _Missing(Exception):
    """A name the expression needs has no data (None) or no form here (a window-only figure)."""


def _value(names: Names, text: str) -> Any:
    try:
        return names.value(text)
    except NameNotDefined as exc:
        raise _Missing(str(getattr(exc, "name", text))) from None
    except TypeError:  # arithmetic or a comparison with a None figure
        raise _Missing(text) from None


def _number(names: Names, text: str) -> float | None:
    value = _value(names, text)
    return None if value is None else float(value)


def _maybe(names: Names, text: str) -> float | None:
    try:
        return _number(names, text)
    except _Missing:
        return None


def summary(rule: Rule, names: Names, value: float, threshold: float, holds: bool = True) -> str:
    """``TTFT P95 over 5m 4.8 s > 3 s (detail)``: the clause as people read it (when it holds), or
    ``TTFT P95 over 5m 2.1 s (alerts when > 3 s)``."""
    label, detail = wording(rule, names)
    op = OP_TEXT.get(rule.op, rule.op)
    spelled, shown = compared(value * rule.scale, threshold * rule.scale, rule.unit)
    spelled += held_in(rule, names)
    if not rule.show_values:
        return label if holds else f"{rule.name} does not hold over {format_duration(names.window_of(rule))}"
    if not holds:
        return f"{label} {spelled} (alerts when {op} {shown})"
    main = f"{label} {spelled} {op} {shown}"
    return f"{main} ({detail})" if detail else main


def held_in(rule: Rule, names: Names) -> str:
    """`` (vLLM's bucket (2.5, 5] s)`` after a rule's value that is a latency quantile (its expression
    one quantile figure, unscaled): the bucket is all the engine's histogram knows, and a client timing
    the same requests measures its own figure within or near it (docs/metrics.md)."""
    held = names.names.get("quantile_buckets", {}).get(rule.expr) if rule.scale == 1.0 else None
    return f" (vLLM's bucket {bucket(held, rule.unit)})" if held else ""


def wording(rule: Rule, names: Names) -> tuple[str, str]:
    """The rule's label and detail with their fields filled in (``TTFT P95 over 5m``, ``...``)."""
    fields = names.fields(rule)
    label = fill(rule.label or rule.name, fields)
    return label, fill(rule.detail, fields) if rule.detail else ""


def recommendation(rule: Rule, names: Names) -> str:
    return fill(rule.recommendation, names.fields(rule)) if rule.recommendation else ""


# The rule texts that are templates ({window}, {concurrency}, ...): every reader fills them through fill().
TEMPLATE_FIELDS = ("label", "detail", "recommendation")


def fill(template: str, fields: Mapping[str, Any]) -> str:
    """``template`` with its ``{name}`` fields filled in. Never raises: a text that is not a template
    (a stray ``{`` or ``}``, ``{0}``, ``{a.b}``) is shown as written, so one rule's text can cost
    neither its evaluation, nor the others', nor `status`, `rules export` or an e-mail. The loader
    refuses such texts first (:func:`template_problem`); this is for what reaches it anyway."""
    if _format_problem(template):
        return template
    try:
        return string.Formatter().vformat(template, (), fields)
    except (ValueError, KeyError, IndexError, AttributeError, TypeError):
        return template




def _format_problem(template: str) -> str:
    """Why ``template``'s format specs would make bounded work unbounded, or "": a width or precision
    over :data:`MAX_FORMAT_WIDTH`, a field nested in a spec. Judged on the parse, before any filling."""
    try:
        for _, field, spec, _ in string.Formatter().parse(template):
            if field is None or not spec:
                continue
            if "{" in spec:
                return "a field nested in a format spec"
            if any(int(n) > MAX_FORMAT_WIDTH for n in re.findall(r"\d+", spec)):
                return f"a format width or precision over {MAX_FORMAT_WIDTH} ({spec[:20]!r})"
    except ValueError:
        return ""  # not a template: the Formatter's own error says so
    return ""


def template_problem(template: str) -> str:
    """Why ``template`` cannot be filled (one clause), or "". Filled as at evaluation, with every
    field present as text (the figures are spelled as text before they are filled in)."""

    class Every(dict[str, str]):
        def __missing__(self, key: str) -> str:
            return "1"

    problem = _format_problem(template)
    if problem:
        return problem
    try:
        string.Formatter().vformat(template, (), Every())
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _spelled(names: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: number(v) if isinstance(v, float) else v for k, v in names.items() if v is not None}
    if "queue_growth_s" in names:
        out["queue_growth"] = format_duration(names["queue_growth_s"])
    if "concurrency" in names and names["concurrency"] is None:
        out["concurrency"] = UNKNOWN_SPOT  # no sweet spot yet: a recommendation says so and how, never a number
    out.update(limit_words(bool(names.get("gateway"))))
    if "min_mbu" in names:
        out["min_mbu_pct"] = number(names["min_mbu"] * 100)
    return out


UNKNOWN_SPOT = "unknown: measure it with `python -m app sweep`, or set targets[].sweet_spot"


def limit_words(gateway: bool | None) -> dict[str, str]:
    """The knob that caps in-flight requests, as the recommendations name it: the gateway's limit
    where the target has a gateway, else vLLM's own ``--max-num-seqs`` (extra requests then wait in
    vLLM's queue, which is where they wait without a gateway); both where it is not known (None:
    the Prometheus rule export, which sees the engine's series only)."""
    if gateway is None:
        return {"limit": "the gateway concurrency limit (vLLM's --max-num-seqs without a gateway)",
                "wait_where": "in the gateway (in vLLM's queue without one), not in vLLM's running batch",
                "or_gateway_limit": ", or the gateway concurrency limit",
                "and_max_num_seqs": " and --max-num-seqs no higher than the KV cache holds"}  # fmt: skip
    if gateway:
        return {"limit": "the gateway concurrency limit", "wait_where": "in the gateway, not in vLLM",
                "or_gateway_limit": ", or the gateway concurrency limit",
                "and_max_num_seqs": " and --max-num-seqs no higher than the KV cache holds"}  # fmt: skip
    return {"limit": "vLLM's --max-num-seqs (no gateway is configured)",
            "wait_where": "in vLLM's queue, not in its running batch", "or_gateway_limit": "",
            "and_max_num_seqs": ", no higher than the KV cache holds"}  # fmt: skip


class _Fields(dict[str, Any]):
    """Format fields: every name (numbers as people read them), ``window``, ``queue_growth``."""

    def __init__(self, spelled: Mapping[str, Any], window_s: float) -> None:
        super().__init__(spelled)
        self["window"] = format_duration(window_s)

    def __missing__(self, key: str) -> str:
        return "no data"


# -- the effective rule set --------------------------------------------------------------------------
_TEXT_FIELDS = (
    "expr", "op", "threshold", "when", "severity", "label", "unit", "detail", "recommendation", "panel", "title",
)  # fmt: skip
_OPTIONAL_FIELDS = ("window_s", "for_s", "keep_firing_for_s", "scale")


def rule_set(settings: Settings, target: str) -> tuple[Rule, ...]:
    """The rules that apply to ``target``: defaults, then every ``[[alerts.rules]]`` entry in order."""
    rules = {r.name: r for r in DEFAULT_RULES}
    for entry in settings.alerts.rules:
        if entry.targets and target not in entry.targets:
            continue
        source = TARGET_SOURCE if entry.targets else FILE_SOURCE
        if not entry.enabled:
            rules.pop(entry.name, None)
            continue
        base = rules.get(entry.name) or RETIRED_RULES.get(entry.name) or Rule(entry.name, "", "", "", WARNING)
        rules[entry.name] = _apply(base, entry, source)
    return tuple(rules.values())


def _apply(rule: Rule, entry: RuleSettings, source: str) -> Rule:
    changes: dict[str, Any] = {k: getattr(entry, k) for k in _TEXT_FIELDS if getattr(entry, k)}
    changes.update({k: getattr(entry, k) for k in _OPTIONAL_FIELDS if getattr(entry, k) is not None})
    if entry.labels:
        changes["labels"] = {**rule.labels, **entry.labels}
    if entry.per_model:
        changes["per_model"] = True
    if "expr" in changes and changes["expr"] != rule.expr:
        changes["no_value"] = ""  # its reason was the default expression's
    return dataclasses.replace(rule, **changes, source=source)


def check_rules(settings: Settings, known_names: frozenset[str]) -> None:
    """Raise ConfigError naming the key of the first ``[[alerts.rules]]`` entry that cannot be used."""
    defaults = {r.name for r in DEFAULT_RULES} | set(RETIRED_RULES)
    targets = {t.name for t in settings.targets}
    seen: set[str] = set()  # names of the entries before: linear in the entries, not quadratic
    for i, entry in enumerate(settings.alerts.rules):
        key = f"alerts.rules[{i}]"
        if not entry.name:
            raise ConfigError(f"{key}.name: required (a default rule's name to change it, a new one to add one)")
        _check_names(entry, key)
        new = entry.name not in defaults and entry.name not in seen
        seen.add(entry.name)
        if new and entry.enabled:
            for required in ("expr", "op", "threshold"):
                if not getattr(entry, required):
                    raise ConfigError(f"{key}.{required}: required for the new rule {entry.name!r}")
        if entry.op and entry.op not in OPS:
            raise ConfigError(f"{key}.op: {entry.op!r} is not one of {', '.join(OPS)}")
        if entry.severity and entry.severity not in SEVERITIES:
            raise ConfigError(f"{key}.severity: {entry.severity!r} is not one of {', '.join(SEVERITIES)}")
        if entry.panel and entry.panel not in PANEL_NAMES:
            raise ConfigError(f"{key}.panel: {entry.panel!r} is not one of {', '.join(PANEL_NAMES)}")
        for name in ("expr", "threshold", "when"):
            _check_expression(getattr(entry, name), f"{key}.{name}", known_names)
        for name in TEMPLATE_FIELDS:
            problem = template_problem(getattr(entry, name))
            if problem:
                raise ConfigError(f"{key}.{name}: {getattr(entry, name)[:80]!r} is not a text with {{fields}} ({problem}); "
                                  "write {{ and }} for a brace itself, {window} or a figure's name for a field")
        unknown = [t for t in entry.targets if targets and t not in targets]
        if unknown:
            raise ConfigError(f"{key}.targets: no target named {unknown[0]!r} (known: {', '.join(sorted(targets))})")


# A label name as Prometheus reads one; "__" begins the names it keeps for itself.
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _check_names(entry: RuleSettings, key: str) -> None:
    """A rule's name is one line of visible text (it is the alert's name in e-mails, webhooks and a
    Prometheus rule file); its labels' names are Prometheus label names."""
    name = entry.name
    if visible(name, len(name)) != name or name != name.strip() or len(name) > MAX_NAME:
        raise ConfigError(f"{key}.name: '{visible(name, 60)}' holds a line break, control character, space at an end "
                          f"or more than {MAX_NAME} characters; a rule's name is one short line (e.g. ttft_p95)")
    problem = name_problem(name)  # the one name type (core/text.py): no invisible, look-alike or unnormalised letters
    if problem:
        raise ConfigError(f"{key}.name: {problem}; a rule's name is one short line (e.g. ttft_p95)")
    for label, value in entry.labels.items():
        if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
            raise ConfigError(f"{key}.labels: '{visible(label, 60)}' is not a label name; use letters, digits and _ "
                              "(not starting with a digit or __)")
        problem = name_problem(value) if value else ""  # an empty value is no label, as Prometheus reads it
        if problem:
            raise ConfigError(f"{key}.labels.{label}: {problem}; a label's value is shown and sent as it is written")


def _check_expression(text: str, key: str, known: frozenset[str]) -> None:
    if not text:
        return
    problem = expression_problem(text)  # bounded work (core/limits.py), before it is ever evaluated
    if problem:
        raise ConfigError(f"{key}: {text[:80]!r} cannot be used: {problem}; write the figures and numbers a rule compares")
    try:
        tree = _parsed(text)
    except SyntaxError as exc:
        raise ConfigError(f"{key}: {text!r} is not an expression ({exc.msg})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known and node.id not in FUNCTIONS:
            raise ConfigError(f"{key}: unknown name {node.id!r} (figures are listed in docs/alerts.md)")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            raise ConfigError(f"{key}: only {', '.join(FUNCTIONS)} may be called")


# Keyed by the expression's text (a value): the evaluator asks for a rule's names at every evaluation.
@lru_cache(maxsize=1024)
def _names_of(text: str) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(_parsed(text)) if isinstance(n, ast.Name)) if text else frozenset()


def names_in(rule: Rule) -> frozenset[str]:
    """Every name the rule's expressions read."""
    return _names_of(rule.expr) | _names_of(rule.threshold) | _names_of(rule.when)


def by_name(rules: Sequence[Rule], name: str) -> Rule | None:
    return next((r for r in rules if r.name == name), None)


def declared(settings: Settings, target: str, name: str) -> Rule | None:
    """The rule ``name`` as it applies to ``target`` now (its panel and title for an e-mail), or None
    when no rule of that name applies there any more (a stored alert of a removed rule)."""
    return by_name(rule_set(settings, target), name)
