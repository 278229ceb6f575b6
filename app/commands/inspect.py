"""``python -m app inspect SOURCE``: show what the vLLM collector reads from a URL or a file."""

from __future__ import annotations

import argparse
import json
import math
import time
from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from collectors.catalogue import CATALOGUE, FINISHED_BY_REASON, sleep_state
from collectors.fetch import MAX_BODY_BYTES, fetch_text
from collectors.records import Histogram, ModelFigures, VllmScrape
from collectors.vllm import parse_vllm, total_figures
from core.bounded import TooLarge, read_file
from core.engines import name_versions
from core.errors import ScrapeError, SweetspotError, UsageError
from core.redact import masked
from core.settings import HttpSettings, Settings, http_from_flags
from core.text import terminal, visible

HELP = "read a vLLM /metrics URL or a file of exposition text and print what the collector reads"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE", help="http(s):// URL of vLLM's /metrics, or a file path")
    parser.add_argument("--json", action="store_true", help="print JSON (totals across engines and models)")
    parser.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                        help="send this request header (repeatable)")
    parser.add_argument("--bearer-token-env", default="", metavar="VAR",
                        help="send the bearer token held by this environment variable")
    parser.add_argument("--ca-file", default="", metavar="PEM", help="trust the server certificate's CA from this file")


# The URL is the command's argument, not a setting: its errors name the argument.
HINT = "Check the SOURCE given to inspect: vLLM's /metrics URL (e.g. http://127.0.0.1:8000/metrics) or a file"


def execute(args: argparse.Namespace, settings: Settings) -> int:
    http = http_from_flags(args.header, args.bearer_token_env, args.ca_file, getattr(args, "environ", {}))
    text = _read(args.source, settings.scrape_timeout_s, http)
    try:
        scrape = parse_vllm(text, source=masked(args.source))
    except ScrapeError as exc:
        raise ScrapeError(str(exc), exc.hint and HINT) from None
    report = build_report(scrape, masked(args.source))
    report["cut_line"] = cut_line(text)
    report["incomplete_histograms"] = incomplete_histograms(text)
    report["step_bound_breach"] = step_bound_breach(settings, args.source)
    if args.json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        print(render_table(report, scrape))
        if report["cut_line"] is not None:
            print(terminal(f"WARNING  the page ends inside a line, cut there (a truncated paste?): "
                           f"{visible(report['cut_line'], 120)!r} is left out; the figures above are read from "
                           "the lines before it"))
        if report["step_bound_breach"]:
            print(terminal(f"WARNING: {report['step_bound_breach']}"))
    return 0


# The step rate is a rate: one page cannot give it, the stored history of a configured target can.
STEP_BOUND_WINDOW_S = 300.0


def step_bound_breach(settings: Settings, source: str) -> str | None:
    """The per-step check of the configured target that scrapes ``source``, over the last 5 minutes of
    its stored history: the message when its engine made more decode steps/s than its ceiling's
    inputs allow (core.mbu.StepBoundBreach), else None (no such target, no history, no breach)."""
    from db.queries import Reader

    target = next((t for t in settings.targets if t.vllm_url == source), None)
    if target is None:
        return None
    try:
        breach = Reader(settings.db_url).window(target.name, time.time(), STEP_BOUND_WINDOW_S, gpus=False).step_bound_breach
    except SweetspotError:  # no database yet: nothing stored to check against
        return None
    return None if breach is None else breach.message()


def _read(source: str, timeout_s: float, http: HttpSettings) -> str:
    """The exposition text at ``source`` (a URL or a file)."""
    if source.startswith(("http://", "https://")):
        return fetch_text(source, timeout_s, hint=HINT, http=http)
    try:  # a regular file only, at most as large as a scraped page may be (core/bounded.py)
        return read_file(source, MAX_BODY_BYTES).decode("utf-8")
    except TooLarge as exc:
        raise UsageError(visible(str(exc)), "Give a file of exposition text or an http(s):// URL") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise UsageError(f"cannot read {source} ({reason})", "Give a file of exposition text or an http(s):// URL") from None


_HISTOGRAMS = {alias: spec.key for spec in CATALOGUE if spec.kind == "histogram" for alias in spec.names}


def cut_line(text: str) -> str | None:
    """The page's last line when the page does not end with a newline (the text format ends every line
    with one): the line a truncated paste cut, or None."""
    if not text or text.endswith("\n"):
        return None
    return text.rsplit("\n", 1)[-1]


def incomplete_histograms(text: str) -> list[dict[str, Any]]:
    """Catalogue histogram series without their ``+Inf`` bucket or ``_count`` (a truncated paste, a
    broken exporter): per series its figure, metric, model, other labels, the buckets it has, and
    what is missing. Read with the reference parser (prometheus_client), whatever the collector kept:
    the collector uses ``_count`` for a missing ``+Inf`` and leaves out a series with neither, whose
    quantiles are unknown (as Prometheus's histogram_quantile needs the ``+Inf`` bucket).
    """
    cut = cut_line(text)
    if cut is not None:  # a cut last line stops the reference parser: read the lines before it
        text = text[: len(text) - len(cut)]
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:  # the collector's parser read it; the reference one may be stricter
        return []
    out = []
    for family in families:
        if family.name not in _HISTOGRAMS:
            continue
        series: dict[frozenset[tuple[str, str]], dict[str, Any]] = {}
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k != "le"}
            entry = series.setdefault(frozenset(labels.items()), {"labels": labels, "buckets": [], "count": False})
            if sample.name.endswith("_bucket"):
                entry["buckets"].append([sample.labels.get("le"), sample.value])
            entry["count"] = entry["count"] or sample.name.endswith("_count")
        for entry in series.values():
            missing = [m for m, ok in (("+Inf bucket", any(le == "+Inf" for le, _ in entry["buckets"])),
                                       ("_count", entry["count"])) if not ok]  # fmt: skip
            if missing:
                labels = dict(entry["labels"])
                out.append({"figure": _HISTOGRAMS[family.name], "metric": family.name,
                            "model": labels.pop("model_name", ""), "labels": labels,
                            "buckets": entry["buckets"], "missing": missing})  # fmt: skip
    return out


def figure_name(key: str, kind: str) -> str:
    """The report's name for a catalogue key: counters say ``_total`` (they are cumulative)."""
    return f"{key}_total" if kind == "counter" else key


def figures_json(figures: ModelFigures) -> dict[str, Any]:
    """Every catalogue figure of ``figures`` by report name; None where absent."""
    out: dict[str, Any] = {}
    for spec in CATALOGUE:
        name = figure_name(spec.key, spec.kind)
        if spec.kind == "counter":
            out[name] = _number(figures.counters.get(spec.key))
        elif spec.kind == "gauge":
            out[name] = _number(figures.gauges.get(spec.key))
        elif spec.kind == "histogram":
            out[name] = histogram_json(figures.histograms.get(spec.key))
    return out | derived_json(figures)


def derived_json(figures: ModelFigures) -> dict[str, Any]:
    """Figures computed from the catalogue's (cumulative since the engine started); None where absent."""
    counters, gauges = figures.counters, figures.gauges
    by_reason = {reason: _number(counters[key]) for reason, key in FINISHED_BY_REASON.items() if key in counters}
    hit_rate = gauges.get("prefix_cache_hit_rate")
    if hit_rate is None:
        hit_rate = _ratio(counters.get("prefix_cache_hits"), counters.get("prefix_cache_queries"))
    drafts, accepted = counters.get("spec_decode_drafts"), counters.get("spec_decode_accepted_tokens")
    per_draft = _ratio(accepted, drafts)
    return {
        "requests_finished_by_reason": by_reason or None,
        "prefix_cache_hit_rate": _number(hit_rate),
        "sleep_state": sleep_state(gauges.get("sleep_weights_offloaded"), gauges.get("sleep_discard_all")),
        "spec_decode_acceptance_rate": _number(_ratio(accepted, counters.get("spec_decode_draft_tokens"))),
        "spec_decode_mean_acceptance_length": None if per_draft is None else 1 + per_draft,
    }


def _ratio(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


def histogram_json(histogram: Histogram | None) -> dict[str, Any] | None:
    """``{"buckets": [[le, cumulative], ...], "count", "sum"}``, the last le written "+Inf"."""
    if histogram is None:
        return None
    buckets = [[_number(le), _number(n)] for le, n in zip(histogram.bounds, histogram.cumulative, strict=True)]
    return {"buckets": buckets, "count": _number(histogram.count), "sum": _number(histogram.sum)}


def _number(value: float | None) -> float | str | None:
    """JSON-safe: NaN becomes null (no value), infinities the strings "+Inf"/"-Inf"."""
    if value is None or math.isnan(value):
        return None
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return value


def build_report(scrape: VllmScrape, source: str) -> dict[str, Any]:
    """The JSON document: totals across engines and models, then per-model figures."""
    total = total_figures(scrape)
    return {
        "source": source,
        "engine": scrape.engine,
        "model_names": list(scrape.models),
        "engines": list(scrape.engines),
        **figures_json(total),
        "process_start_time_s": _number(scrape.process_start_time_s),
        "created": {key: _number(value) for key, value in sorted(total.created.items())},
        "cache_config": dict(scrape.cache_config),
        "metric_names_used": dict(scrape.metric_names_used),
        "metric_versions": {key: name_versions(name) for key, name in scrape.metric_names_used.items()},
        "lora": _lora_json(scrape.lora),
        "missing": list(scrape.missing),
        "models": {model: figures_json(figures) for model, figures in scrape.models.items()},
    }


def _lora_json(lora: dict[str, str] | Any) -> dict[str, Any] | None:
    if not lora:
        return None
    names = {part: [a for a in lora.get(f"{part}_lora_adapters", "").split(",") if a] for part in ("running", "waiting")}
    return {**names, "max_lora": lora.get("max_lora")}


def render_table(report: dict[str, Any], scrape: VllmScrape) -> str:
    """A readable summary with units (totals across engines and models)."""
    rows = [("figure", "value", "exposed as", "unit", "versions")]
    for spec in CATALOGUE:
        if spec.kind == "info":
            continue
        name = figure_name(spec.key, spec.kind)
        exposed = scrape.metric_names_used.get(spec.key, "(not exposed)")
        versions = report["metric_versions"].get(spec.key, "")
        if spec.kind == "histogram":
            count, detail = _histogram_cells(report[name], spec.unit)
            rows.append((name, count, exposed, detail, versions))
        else:
            rows.append((name, _fmt(report[name], spec.unit), exposed, spec.unit, versions))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    table = [f"{a:{widths[0]}}  {b:>{widths[1]}}  {c:{widths[2]}}  {d:{widths[3]}}  {e}".rstrip()
             for a, b, c, d, e in rows]
    incomplete = report.get("incomplete_histograms", [])
    names = dict.fromkeys([*report["model_names"], *(h["model"] for h in incomplete)])
    models = [visible(name) if name else "(no model_name label)" for name in names]
    engines = report["engines"]
    head = [
        f"source   {report['source']}",
        f"engine   {report['engine']}" + (f", sleeping ({report['sleep_state']})"
                                          if report["sleep_state"] not in (None, "awake") else ""),
        f"models   {', '.join(models) or '(none)'}",
        # the labels, quoted: a count would read the same as a single engine labelled "0"
        f"engines  {len(engines)}: " + ", ".join(f'engine="{e}"' for e in engines)
        if engines
        else "engines  (no engine label: V0 or a single engine)",
        f"process  {_started(report['process_start_time_s'])}",
        "",
    ]
    tail = ["", f"missing  {', '.join(report['missing']) or '(none)'}", *map(_incomplete_line, incomplete)]
    if report["cache_config"]:
        tail.insert(1, "cache    " + ", ".join(f"{k}={v}" for k, v in sorted(report["cache_config"].items())))
    return terminal("\n".join(head + table + tail))


def _incomplete_line(h: dict[str, Any]) -> str:
    """``WARNING  ttft (vllm:…) model llama engine="0": buckets le=0.5: 4, le=1.0: 9; no +Inf bucket, no _count …``"""
    labels = "".join(f' {visible(k)}="{visible(v)}"' for k, v in sorted(h["labels"].items()))
    buckets = ", ".join(f"le={le}: {_fmt(n)}" for le, n in h["buckets"]) or "none"
    if "+Inf bucket" in h["missing"] and "_count" in h["missing"]:
        effect = "quantiles unknown (the collector leaves this series out)"
    elif "+Inf bucket" in h["missing"]:
        effect = "its _count stands in for the +Inf bucket"
    else:
        effect = "the +Inf bucket stands in for the count"
    missing = ", ".join(f"no {m}" for m in h["missing"])
    return f"WARNING  {h['figure']} ({h['metric']}) model {visible(h['model']) if h['model'] else '(none)'}{labels}: buckets {buckets}; {missing}: {effect}"


def _started(unix_s: Any) -> str:
    if not isinstance(unix_s, float):
        return "start time not exposed (process_start_time_seconds)"
    when = datetime.fromtimestamp(unix_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"started {when} (unix {unix_s:.0f} s)"


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if unit.startswith("ratio"):
        return f"{value:.3f} ({value * 100:.1f} %)"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3f}"


def _histogram_cells(value: dict[str, Any] | None, unit: str) -> tuple[str, str]:
    """(value, unit) cells: the observation count, then sum, mean and bucket count."""
    if value is None:
        return "-", unit
    count, total = value["count"], value["sum"]
    detail = f"observations; sum {_fmt(total)} {unit}"
    if isinstance(count, float) and count and isinstance(total, float):
        detail += f", mean {total / count:.3g} {unit}"
    return _fmt(count), f"{detail}, {len(value['buckets'])} buckets"
