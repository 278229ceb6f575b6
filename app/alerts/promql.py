"""The effective rule set as a Prometheus rule file (``python -m app rules export``, docs/alerts.md).

Each figure a rule reads becomes a recording rule over the engine's series as Prometheus stores
them, translated from its row of the figures table (db/figures.py ``FIGURES``: how it is computed
and from which catalogue metrics; :func:`figure_expr`) with the metric names and their renames
across versions from collectors/catalogue.py (an ``or`` over old and new names, the preferred
first). A figure the engine's series cannot give says why, from the same row (:func:`why_not`). Each rule becomes an alerting rule with its ``for``, ``keep_firing_for``,
severity, labels and its recommendation as an annotation; per target where its thresholds differ
(the target's series are those whose target label equals its name). A rule over a name PromQL
cannot be given (the gateway's queue, the bandwidth ceiling, the engine's sleep state, "no data")
is left out, with a comment naming it and why.

Every rule is emitted by a YAML library (PyYAML's ``safe_dump``), one list item at a time so that
the comments between them survive; comments hold names only through :func:`core.text.visible` (no
line break can end one). A label value in an expression is a PromQL string (:func:`promql_string`:
``"`` and ``\\`` escaped), and a rule or label name a rule cannot have is refused when the settings
load (``app/alerts/rules.py`` ``check_rules``).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import yaml

from app.alerts.names import THRESHOLDS
from app.alerts.rules import Rule, fill, limit_words, names_in, rule_set
from collectors.catalogue import CATALOGUE, MetricSpec
from core.durations import format_duration
from core.settings import Settings, SweetSpotSettings, effective_sweetspot
from core.text import visible
from db.figures import BY_NAME, Figure

PREFIX = "sweetspot"
# names that only say whether the engine exposes a figure: in PromQL a series that is absent makes
# no alert anyway, so the guard is always true there
EXPOSURE_GUARDS = frozenset({"errors_exposed", "aborts_exposed"})
_SPECS = {s.key: s for s in CATALOGUE}
# the client-seen figures judge the engine's in Prometheus: the gateway's queue is not among the
# engine's series, so the exported rule leaves the gateway wait out (docs/alerts.md)
ENGINE_SIDE = {"client_ttft_p95_s": "ttft_p95_s", "queued": "waiting_max"}
# Rule names that are not figures of the table (app/alerts/names.py DERIVED), and record figures
# whose reason says more than their kind does: why PromQL over the engine's series cannot give them.
WHY_NOT = {
    "queue_depth_max": "the gateway's queue is not among the engine's series",
    "queue_growing": "queue growth is judged on Sweetspot's own series of the gateway queue",
    "queue_before": "queue growth is judged on Sweetspot's own series of the gateway queue",
    "queue_now": "queue growth is judged on Sweetspot's own series of the gateway queue",
    "ceiling_steps_per_s": "the report's ceiling is computed from NVML or the settings, not a series",
    "ceiling_share": "the report's ceiling is computed from NVML or the settings, not a series",
    "mbu": "MBU is chosen between the engine's byte counters and the step model (per engine) by Sweetspot, not a series",
    "dram_bw_util": "the GPUs' DRAM reading is NVML's or dcgm-exporter's; export it from Sweetspot's /metrics instead",
    "overhead_traffic_gbps": "overhead traffic sets the GPUs' DRAM reading against Sweetspot's MBU; export it from its /metrics",
    "overhead_ratio": "overhead traffic sets the GPUs' DRAM reading against Sweetspot's MBU; export it from its /metrics",
    "kv_resident_tokens_avg": "the KV tokens resident multiply kv_cache_usage_perc by cache_config_info per engine in Sweetspot",
    "engines_max": "the engines are counted by Sweetspot from the engine labels",
    "engine_bw_gbps": "GPU bandwidth is per GPU and per engine in Sweetspot; export it from its /metrics instead",
    "sleep_state": "the engine's sleep state is a label of vllm:engine_sleep_state, read by Sweetspot",
    "up": "use Prometheus' own up series",
    "curve_share": "the target's own curve (its sweep or the learned fit) is Sweetspot's, not a series: "
    "export with its points written in (Options.curve, rules export --curve)",
    "expected_tokens_per_s": "the target's own curve (its sweep or the learned fit) is Sweetspot's, not a series: "
    "export with its points written in (Options.curve, rules export --curve)",
    "ttft_cannot_tell": "the TTFT SLO judgement reads the shares at the engine's bucket bounds either side of each "
    "target's SLO, found by Sweetspot in the stored bucket layout",
    # a recording rule per figure and window knows no target's SLO; vLLM's Grafana tile divides the
    # bucket at the SLO by the count, which holds only where the SLO is a bucket bound
    "ttft_slo_attainment": "the share within each target's SLO is interpolated between bucket bounds by Sweetspot "
    "(in PromQL: rate(vllm:time_to_first_token_seconds_bucket{le=\"<SLO>\"}) / rate(..._count), the SLO a bound)",
}
# A figure's kind in the table → why the engine's series cannot give it (when WHY_NOT says nothing more).
_WHY_KIND = {
    "record": "computed by Sweetspot where its result record is built (db/queries.py), not a series of the engine",
    "share": "a share within each target's own threshold, interpolated between bucket bounds by Sweetspot",
    "derived": "derived by Sweetspot from other figures (db/derived.py)",
}


class Unsupported(Exception):
    """A rule Prometheus cannot express; the message says why."""


@dataclass(frozen=True)
class Options:
    names: str = "colon"  # "colon": vllm:x as vLLM exposes it; "underscore": vllm_x (an OpenMetrics-escaping scrape)
    target_label: str = "instance"
    # the own curve under_delivering judges by, (concurrency, output tok/s) points written in as numbers
    # (as sweetspot.concurrency is): Sweetspot resolves it from the target's sweep or traffic; () leaves it out
    curve: tuple[tuple[float, float], ...] = ()
    gateway_queue: str = "sweetspot_gateway_queue_depth"  # the gateway's queue gauge (queue_growing), "" for none


def metric_name(name: str, options: Options) -> str:
    return name.replace(":", "_") if options.names == "underscore" else name


def record_name(figure: str, window_s: float) -> str:
    return f"{PREFIX}:{figure}:{format_duration(window_s)}"


def _split_by_label(spec: MetricSpec, name: str) -> bool:
    # a family several catalogue rows split by a label (vLLM's request_success_total by reason): the
    # row's label matchers select its part; another engine's own name for the figure has no such label
    return bool(spec.where) and sum(name in s.names for s in CATALOGUE) > 1


def _selector(spec: MetricSpec, name: str, options: Options, suffix: str = "") -> str:
    matchers = ",".join(f'{k}="{v}"' for k, v in spec.where) if _split_by_label(spec, name) else ""
    return metric_name(name, options) + suffix + (f"{{{matchers}}}" if matchers else "")


def _over(function: str, spec: MetricSpec, options: Options, window: str, suffix: str = "") -> str:
    """``f(a[5m]) or f(b[5m])``: the first exposed name wins where both are (a version in between)."""
    return " or ".join(f"{function}({_selector(spec, n, options, suffix)}[{window}])" for n in spec.names)


def why_not(figure: str) -> str | None:
    """Why ``figure`` has no PromQL form over the engine's series (from its row of the figures
    table), or None when :func:`figure_expr` translates it."""
    row = BY_NAME.get(figure)
    if figure in WHY_NOT or row is None:
        return WHY_NOT.get(figure, "not a figure of the engine's series")
    if row.rows == "target":
        return f"read from Sweetspot's own scrapes{' or the gateway' if row.inputs else ''}, not the engine's series"
    if row.compute in _WHY_KIND:
        return _WHY_KIND[row.compute]
    unread = [key for key in row.inputs if key != "covered_ms" and not _SPECS[key].names]
    if unread:
        return f"{', '.join(unread)}: read by Sweetspot from an info metric's labels, which PromQL cannot sum"
    return None


def figure_expr(figure: str, window_s: float, options: Options) -> str:
    """The PromQL of one figure over a window, per target, from its row of the figures table (its
    kind, its catalogue inputs, how several models combine); raises :class:`Unsupported`."""
    reason = why_not(figure)
    if reason is not None:
        raise Unsupported(f"needs {figure}: {reason}")
    row = BY_NAME[figure]
    by, window = options.target_label, format_duration(window_s)
    spec = _SPECS[row.inputs[0]]
    if row.compute == "quantile":
        return f"histogram_quantile({row.quantile:g}, sum by ({by}, le) ({_over('rate', spec, options, window, '_bucket')}))"
    if row.compute in ("rate", "count"):  # a histogram's rate is its count's (engine steps)
        function, suffix = ("rate" if row.compute == "rate" else "increase"), ("_count" if spec.kind == "histogram" else "")
        return f"sum by ({by}) ({_over(function, spec, options, window, suffix)})"
    if row.compute in ("gauge_avg", "gauge_max"):
        function = "avg_over_time" if row.compute == "gauge_avg" else "max_over_time"
        return f"{row.across} by ({by}) ({_over(function, spec, options, window)})"
    return _ratio(row, options, by, window)


def _ratio(row: Figure, options: Options, by: str, window: str) -> str:
    """One counter's increase ÷ another's; where the counters are absent, the engine's own gauge of
    the ratio averaged over the window (``fallback``: SGLang's hit rate)."""
    top, bottom = (f"sum by ({by}) ({_over('rate', _SPECS[key], options, window)})" for key in row.inputs)
    expr = f"({top} / {bottom})"
    if row.fallback and _SPECS[row.fallback].names:
        expr += f" or avg by ({by}) ({_over('avg_over_time', _SPECS[row.fallback], options, window)})"
    return expr


# -- rules ------------------------------------------------------------------------------------------
_OPS = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


class _Translator:
    """A rule expression as PromQL: figures → their recording rules (with the target matchers),
    thresholds → the target's numbers, arithmetic and comparisons as they are."""

    def __init__(self, window_s: float, thresholds: SweetSpotSettings, matchers: str, options: Options | None = None) -> None:
        self.window_s, self.thresholds, self.matchers = window_s, asdict(thresholds), matchers
        self.options = options or Options()
        self.figures: set[str] = set()

    @staticmethod
    def _needs(name: str) -> set[str]:
        """The recording rules a derived form reads (the curve's: running and tokens)."""
        return {"running_avg", "tokens_per_s"} if name in ("curve_share", "expected_tokens_per_s") else set()

    def __call__(self, text: str) -> str:
        return self.node(ast.parse(text, mode="eval").body)

    def node(self, n: ast.AST) -> str:
        if isinstance(n, ast.Constant) and isinstance(n.value, int | float) and not isinstance(n.value, bool):
            return repr(float(n.value)) if isinstance(n.value, float) else str(n.value)
        if isinstance(n, ast.Name):
            return self.name(n.id)
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
            return f"({self.node(n.left)} {_ARITH[type(n.op)]} {self.node(n.right)})"
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _OPS:
            return f"{self.node(n.left)} {_OPS[type(n.ops[0])]} {self.node(n.comparators[0])}"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return self.node(_negated(n.operand))
        if isinstance(n, ast.BoolOp):
            parts = [self.node(v) for v in n.values if not (isinstance(v, ast.Name) and v.id in EXPOSURE_GUARDS)]
            word = " and " if isinstance(n.op, ast.And) else " or "
            return word.join(f"({p})" for p in parts)
        raise Unsupported(f"{ast.unparse(n)!r} has no PromQL form here")

    def name(self, name: str) -> str:
        if name in self.thresholds:
            return f"{float(self.thresholds[name]):g}"
        form = derived_form(name, self.window_s, self.options, self.matchers)
        if form is not None:
            self.figures |= self._needs(name)
            return form
        name = ENGINE_SIDE.get(name, name)
        figure_expr(name, self.window_s, Options())  # raises Unsupported for a name without a series
        self.figures.add(name)
        return record_name(name, self.window_s) + self.matchers


_NEGATED = {ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


def _negated(n: ast.expr) -> ast.expr:
    """``not n`` without ``not`` (PromQL has none): comparisons flipped, and/or swapped (De Morgan)."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _NEGATED:
        return ast.Compare(n.left, [_NEGATED[type(n.ops[0])]()], n.comparators)
    if isinstance(n, ast.BoolOp):
        return ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(), [_negated(v) for v in n.values])
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return n.operand
    raise Unsupported(f"'not {ast.unparse(n)}' has no PromQL form here")


def derived_form(name: str, window_s: float, options: Options, matchers: str) -> str | None:
    """The PromQL of a derived name (app/alerts/names.py DERIVED) over the engine's series, ``up`` and
    the gateway's queue, or None where it has none here (a figure, a threshold, or :data:`WHY_NOT`)."""
    by, window = options.target_label, format_duration(window_s)
    running = _over("last_over_time", _SPECS["requests_running"], options, "1h")
    if name == "no_data":  # the last scrape failed, on a target that exposed vLLM's series within the hour
        return f"((max by ({by}) (up{matchers}) == bool 0) and on ({by}) group by ({by}) ({running}))"
    if name == "asleep":  # 0 where the engine exposes no sleep state (older vLLM): awake
        asleep = f'max_over_time({metric_name("vllm:engine_sleep_state", options)}{{sleep_state=~"weights_offloaded|discard_all"}}[{window}])'
        return f"(max by ({by}) ({asleep}) or on ({by}) (0 * max by ({by}) (up{matchers})))"
    if name in ("queue_growing", "queue_before", "queue_now"):
        return _queue_form(name, options, matchers)
    if name in ("curve_share", "expected_tokens_per_s") and options.curve:
        expected = curve_form(options.curve, record_name("running_avg", window_s) + matchers)
        return expected if name == "expected_tokens_per_s" else f"({record_name('tokens_per_s', window_s)}{matchers} / {expected})"
    return None


def _queue_form(name: str, options: Options, matchers: str) -> str | None:
    """The gateway queue over ``queue_growth_s`` (3m by default): growing (never drained, a positive
    slope), its depth then and now, as app/alerts/names.py ``queue_growth`` judges it."""
    if not options.gateway_queue:
        return None
    q, by, span = f"{options.gateway_queue}{matchers}", options.target_label, format_duration(SweetSpotSettings().queue_growth_s)
    return {"queue_now": f"max by ({by}) ({q})", "queue_before": f"max by ({by}) ({q} offset {span})",
            "queue_growing": f"(min by ({by}) (min_over_time({q}[{span}])) > 0 and max by ({by}) (deriv({q}[{span}])) > 0)"}[name]  # fmt: skip


def curve_form(curve: Sequence[tuple[float, float]], running: str) -> str:
    """app/sweet_spot.py's ``expected_at`` in PromQL over ``running``: through the origin to the first
    point, linear in ln(concurrency) between points, flat past the last (each segment's share by clamp)."""
    points = sorted(curve)
    c0, t0 = points[0]
    parts = [f"clamp_max({running}, {c0:g}) * {t0 / c0:.12g}"]
    for (a, ta), (b, tb) in zip(points, points[1:], strict=False):
        span = math.log(b / a)
        parts.append(f"clamp(ln(clamp_min({running}, {a:g})) - {math.log(a):.12g}, 0, {span:.12g}) * {(tb - ta) / span:.12g}")
    return "(" + " + ".join(parts) + ")"


def _guard(rule: Rule) -> str:
    """The rule's ``when`` without its exposure guards ("" when nothing is left)."""
    tree = ast.parse(rule.when, mode="eval").body if rule.when else None
    if tree is None or (isinstance(tree, ast.Name) and tree.id in EXPOSURE_GUARDS):
        return ""
    return rule.when


@dataclass(frozen=True)
class Alerting:
    rule: Rule
    expr: str
    targets: tuple[str, ...]  # () = every target not named by another entry of the same rule
    thresholds: SweetSpotSettings


def _alerting(rule: Rule, thresholds: SweetSpotSettings, matchers: str, options: Options | None = None) -> tuple[str, set[str]]:
    unknown = [k for k in sorted(names_in(rule) & set(THRESHOLDS)) if getattr(thresholds, k) is None]
    if unknown:  # the sweet spot unless configured: Sweetspot's own (its sweep, learned), not a number here
        raise Unsupported(f"needs {unknown[0]}: not configured (each target's own comes from its sweep or its "
                          "traffic, in Sweetspot); set sweetspot.concurrency or targets[].sweet_spot to export it")
    tr = _Translator(rule.window_s, thresholds, matchers, options)
    expr = f"{tr(rule.expr)} {rule.op} {tr(rule.threshold)}"
    guard = _guard(rule)
    if guard:
        expr = f"({expr}) and ({tr(guard)})"
    return expr, tr.figures


def _matchers(label: str, targets: Sequence[str], exclude: Sequence[str]) -> str:
    if targets:
        return f"{{{label}={promql_string(targets[0])}}}"
    if exclude:
        return f"{{{label}!~{promql_string('|'.join(_regex_quote(t) for t in exclude))}}}"
    return ""


def promql_string(value: str) -> str:
    """``value`` as a PromQL string literal: double-quoted, ``"`` and ``\\`` escaped, control characters
    as ``\\n``/``\\uXXXX`` (PromQL reads Go's escapes, of which JSON's are a part)."""
    return json.dumps(value, ensure_ascii=False)


def _regex_quote(value: str) -> str:
    """``value`` matched literally by an RE2 regular expression (each metacharacter backslashed)."""
    return "".join(f"\\{c}" if c in r".^$*+?()[]{}|\\" else c for c in value)


Entry = tuple[Rule, tuple[str, ...], SweetSpotSettings, tuple[str, ...]]  # rule, its targets, thresholds, targets left out


def entries(settings: Settings) -> list[Entry]:
    """The alerting rules to write: each rule as every target without its own version sees it (the
    global thresholds; no target named), and one copy per target whose rule or thresholds differ
    (an ``[[alerts.rules]]`` entry with ``targets``, a ``[targets.sweetspot]`` key the rule reads).
    A rule disabled for a target leaves that target out of the global copy."""
    names = [t.name for t in settings.targets]
    own = {n: {r.name: r for r in rule_set(settings, n)} for n in names}

    def key(rule: Rule | None, thresholds: SweetSpotSettings) -> tuple[Rule | None, tuple[float, ...]]:
        used = sorted(names_in(rule) & set(THRESHOLDS)) if rule else []
        return (dataclasses.replace(rule, source="") if rule else None), tuple(getattr(thresholds, k) for k in used)

    out: list[Entry] = []
    base = {r.name: r for r in rule_set(settings, "")}
    for name in dict.fromkeys([*base, *(r for rules in own.values() for r in rules)]):
        shared = key(base.get(name), settings.sweetspot)
        apart = [n for n in names if key(own[n].get(name), effective_sweetspot(settings, n)) != shared]
        if name in base:
            out.append((base[name], (), settings.sweetspot, tuple(apart)))
        out += [(own[n][name], (n,), effective_sweetspot(settings, n), ()) for n in apart if name in own[n]]
    return out


def export(settings: Settings, options: Options) -> str:
    """The rule file of the effective rule set (one copy of a rule per target where it differs)."""
    out: list[str] = [
        "# Generated by `python -m app rules export --format prometheus` from Sweetspot's effective rule set.",
        f"# Series as Prometheus stores them ({'vllm_x' if options.names == 'underscore' else 'vllm:x'}), one target per value of {options.target_label}.",
    ]  # fmt: skip
    records: dict[tuple[str, float], str] = {}
    alerts: list[tuple[str, dict[str, object]]] = []
    left_out: dict[str, str] = {}
    for rule, targets, thresholds, exclude in entries(settings):
        try:
            expr, figures = _alerting(rule, thresholds, _matchers(options.target_label, targets, exclude), options)
        except Unsupported as exc:
            left_out.setdefault(rule.name, f"#   {visible(rule.name)}: {visible(exc, 500)}")
            continue
        for f in figures:
            records[(f, rule.window_s)] = figure_expr(f, rule.window_s, options)
        alerts.append(_alert_item(rule, expr, thresholds, targets, options.target_label))
    out += ["groups:", f"  - name: {PREFIX}-figures", "    rules:"]
    out += _yaml_items(("", {"record": record_name(figure, window_s), "expr": expr})
                       for (figure, window_s), expr in sorted(records.items()))
    out += [f"  - name: {PREFIX}-alerts", "    rules:", *_yaml_items(alerts)]
    if left_out:
        out += ["# Left out: Prometheus cannot express these rules over the engine's series:", *left_out.values()]
    return "\n".join(out) + "\n"


class _Fill(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _text(template: str, rule: Rule, thresholds: SweetSpotSettings) -> str:
    fields = _Fill({k: "unknown" if v is None else f"{v:g}" for k, v in asdict(thresholds).items()},
                   window=format_duration(rule.window_s))
    fields["queue_growth"] = format_duration(thresholds.queue_growth_s)
    fields["min_mbu_pct"] = f"{thresholds.min_mbu * 100:g}"
    fields.update(limit_words(None))
    # the label's text fields that are Sweetspot's judgement, in the words of the exported expression
    fields.update(no_data_reason="the last scrape failed (up == 0)", sleep_state="weights offloaded or discarded")
    return fill(template, fields)


def _yaml_items(items: Iterator[tuple[str, dict[str, object]]] | Sequence[tuple[str, dict[str, object]]]) -> list[str]:
    """Each ``(comment, rule)`` as a YAML list item of a group's ``rules`` (the library quotes every
    value), after its comment line ("" for none)."""
    lines = []
    for comment, item in items:
        if comment:
            lines.append(f"      # {visible(comment, 500)}")
        dumped = yaml.safe_dump([item], sort_keys=False, allow_unicode=False, width=1 << 30, default_flow_style=False)
        lines += [f"      {line}" for line in dumped.splitlines()]
    return lines


def _alert_item(rule: Rule, expr: str, thresholds: SweetSpotSettings, targets: tuple[str, ...],
                label: str) -> tuple[str, dict[str, object]]:
    # a target's own rule names it in its labels too: the series have it already, and two rules of
    # one name with the same labels are a lint error for promtool
    labels = {"severity": rule.severity, **rule.labels, **({label: targets[0]} if targets else {})}
    limit = asdict(thresholds).get(rule.threshold, rule.threshold)
    summary = f"{_text(rule.label or rule.name, rule, thresholds)} {rule.op} {limit * rule.scale:g}{rule.unit and ' ' + rule.unit}" if not isinstance(limit, str) \
        else f"{_text(rule.label or rule.name, rule, thresholds)} {rule.op} {limit}"
    if not rule.show_values:  # the label says it all ("no data over 5m: the last scrape failed")
        summary = _text(rule.label or rule.name, rule, thresholds)
    annotations = {"summary": summary, "recommendation": _text(rule.recommendation, rule, thresholds)}
    item: dict[str, object] = {"alert": rule.name, "expr": expr}
    if rule.for_s:
        item["for"] = format_duration(rule.for_s)
    if rule.keep_firing_for_s:
        item["keep_firing_for"] = format_duration(rule.keep_firing_for_s)
    # Prometheus expands every label and annotation value of an alerting rule as a Go template: a
    # target name holding "{{" would run as one (or fail the whole file's load)
    item["labels"] = {k: go_template_literal(str(v)) for k, v in labels.items()}
    item["annotations"] = {k: go_template_literal(v) for k, v in annotations.items() if v}
    return (f"{rule.name} for {targets[0]}: its own rule or thresholds" if targets else ""), item


def go_template_literal(text: str) -> str:
    """``text`` as a Go template that expands to ``text`` itself: each ``{{`` written as the action
    ``{{ "{{" }}`` (what Go's text/template documents for a literal delimiter)."""
    return text.replace("{{", '{{ "{{" }}')


def alert_names(text: str) -> Iterator[str]:
    """The alert names of an exported file (for its checks)."""
    for group in yaml.safe_load(text)["groups"]:
        yield from (r["alert"] for r in group["rules"] if "alert" in r)
