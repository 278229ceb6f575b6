"""``python -m app status``: the figures of one target over the window ending now."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from collections.abc import Iterable
from typing import Any

from app.alerts.names import ttft_judgement
from app.alerts.rules import rule_set
from app.fleet import FleetRow, fleet, table
from app.formatting import (
    ceiling_text,
    dram_text,
    gibibytes,
    is_reference,
    mbu_text,
    overhead_text,
    percent,
    series_limit_warning,
    slo_attainment_text,
)
from app.headroom import Headroom, headroom_of, unreadable
from app.notify.grouping import collector_delivery
from app.operating_point import roofline_json, roofline_text, target_roofline
from app.sweet_spot import SweetSpot, resolve
from app.verdict import CANNOT_TELL, NO_DATA, Unjudged, Verdict, evaluate, slo_note
from collectors.catalogue import CATALOGUE
from core.durations import DurationError, format_duration, parse_duration
from core.engines import DEFAULT as DEFAULT_ENGINE
from core.engines import preemption_word
from core.errors import UsageError
from core.mbu import OVERHEAD_CAUSES
from core.redact import masked
from core.settings import Settings, effective_sweetspot
from core.text import terminal, visible
from db.figures import MFU_OFF, shown_in_status
from db.mbu_figures import missing_reason, peak_gbps
from db.queries import Reader
from db.results import TargetInfo, WindowFigures

HELP = "print the figures of a target over the window ending now (TTFT, tok/s, preemptions, ceiling...)"

# (JSON key, label, unit, scale): the readable table, in the order operators read it (db/figures.py).
ROWS = tuple((f.name, f.label, f.unit, f.scale) for f in shown_in_status())


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", metavar="NAME", help="target name (default: the first configured or stored)")
    parser.add_argument("--window", default="5m", metavar="DURATION", help="window ending now, e.g. 90s, 5m, 1h")
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")
    parser.add_argument("--json", action="store_true", help="print JSON (null where there is no data)")
    parser.add_argument("--all", action="store_true", help="every stored target, worst first (with --json: a list)")


def _target_name(args: argparse.Namespace, settings: Settings, reader: Reader) -> str:
    if args.target:
        known = [t.name for t in reader.targets()]
        if args.target not in known:  # "no data" would read as a target that is down
            raise UsageError(f"--target: no target named {args.target!r} in {masked(settings.db_url)} "
                             f"(stored: {', '.join(known) or 'none'})", "name a stored target, or pass --db")  # fmt: skip
        return str(args.target)
    if settings.targets:
        return settings.targets[0].name
    stored = sorted(reader.targets(), key=lambda t: t.retired_at is not None)  # one still configured first
    if not stored:
        raise UsageError("no target stored in the database yet", "run `python -m app collect` first, or pass --db")
    return stored[0].name


QUANTILE_NAMES = tuple(name for spec in CATALOGUE for _, name in spec.quantiles)


def figures_json(fig: WindowFigures) -> dict[str, Any]:
    """The ``status --json`` document: every WindowFigures field (GPUs and ceiling as objects).

    A figure that is not finite (a scraped page said +Inf) is null: JSON has no infinities, and
    ``json.dumps`` would write ``Infinity``, which strict parsers (jq, JavaScript) refuse.
    """
    data = _finite(dataclasses.asdict(fig))
    data["window"] = format_duration(fig.window_s)
    data["ceiling_missing"] = fig.ceiling_missing if fig.ceiling is None else None  # null: nothing is missing
    # the figures as status prints them: MBU with its source, the ceiling with its inputs or what to set
    data["mbu_text"] = mbu_text(fig.mbu, fig.mbu_source, _mbu_missing(fig))
    data["dram_bw_text"] = dram_text(fig.dram_bw_util, fig.dram_bw_source)
    data["overhead_traffic_text"] = _overhead_line(fig) or None
    data["ceiling_text"] = ceiling_text(fig.ceiling_steps_per_s, fig.ceiling, fig.ceiling_missing)
    data["step_bound_breach_message"] = None if fig.step_bound_breach is None else fig.step_bound_breach.message()
    # both roofs at the window's concurrency (app/operating_point.py)
    data["roofline"] = roofline_json(target_roofline(fig), fig)
    buckets = data.pop("quantile_buckets")
    for name in QUANTILE_NAMES:  # "ttft_p95_bucket": [0.25, 0.5] (null upper: the +Inf bucket)
        data[name.removesuffix("_s") + "_bucket"] = buckets.get(name)
    # the TTFT P95's bucket holds the SLO: the buckets cannot tell whether the P95 meets it
    data["ttft_slo_in_p95_bucket"] = fig.ttft_slo_in_p95_bucket() is not None
    # the clients' TTFT P95 against the SLO as the bucket bounds prove it (within / outside / cannot tell)
    judged = ttft_judgement(fig)
    data["ttft_slo_judgement"] = None if judged is None else {"state": judged.state, "text": judged.text,
                                                              "bucket": _finite(list(judged.bucket))}
    return data


def rows_json(rows: Iterable[FleetRow], settings: Settings) -> list[dict[str, Any]]:
    """``status --all --json``: per target the object ``status --json`` prints, with ``state`` and ``reasons``."""
    return [{**figures_json(r.figures), "state": r.state.state, "reasons": list(r.state.reasons),
             **not_judged_json(r.state.unjudged), "discovered_by": r.discovered_by,
             "headroom": r.headroom.as_json() if r.headroom else None,
             **(r.spot.as_json() if r.spot else {"sweet_spot": None, "sweet_spot_source": None})} for r in rows]  # fmt: skip


def bucket_line(fig: WindowFigures) -> str | None:
    """Where the P95s lie in the engine's own buckets: a client measuring the same requests (``vllm
    bench serve``, a load test) gets another figure, within or near that bucket (docs/metrics.md)."""
    parts = [f"{label} ({lo:g}, {hi:g}]" for name, label in (("ttft_p95_s", "TTFT"), ("itl_p95_s", "ITL"), ("e2e_p95_s", "E2E"))
             if (bucket := fig.quantile_buckets.get(name)) for lo, hi in [bucket]]  # fmt: skip
    return f"  P95 buckets (s)          {', '.join(parts)}" if parts else None


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _format(value: Any, unit: str, scale: float | None) -> str:
    if value is None:
        return "no data"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, str):
        return value
    if scale is None:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    number = value * scale
    # a count: "524,288 tokens", not "524288.0 tokens"; a scaled share (79.0 %) is a measurement and keeps its decimal
    if scale == 1.0 and number == int(number) and abs(number) >= 10:
        return f"{number:,.0f} {unit}".rstrip()
    text = f"{number:.3f}" if abs(number) < 10 else f"{number:.1f}"
    return f"{text} {unit}".rstrip()


def _spelled(fig: WindowFigures) -> dict[str, str]:
    """The lines whose figure reads only with its provenance: MBU with its source, the ceiling with its
    inputs, the report's share of it named as the report's."""
    share = percent(fig.ceiling_share)
    wait = {} if fig.gateway_wait_source is None else {"gateway_wait_s": fig.gateway_wait_source if fig.gateway_wait_s is None
                                                       else f"{_format(fig.gateway_wait_s, 's', 1.0)} ({fig.gateway_wait_source})"}
    return {
        **wait,
        **_engine_traffic(fig),
        "mbu": mbu_text(fig.mbu, fig.mbu_source, _mbu_missing(fig)).removeprefix("MBU "),
        "dram_bw_util": dram_text(fig.dram_bw_util, fig.dram_bw_source).removeprefix("DRAM "),
        "overhead_traffic_gbps": overhead_text(fig.overhead_traffic_gbps, fig.overhead_ratio) or "no data",
        "ceiling_steps_per_s": ceiling_text(fig.ceiling_steps_per_s, fig.ceiling, fig.ceiling_missing),
        "ceiling_share": fig.ceiling_missing if fig.ceiling_share is None and fig.ceiling is None
        else f"{share} (tok/s ÷ steps/s bound)",
    }


def _engine_traffic(fig: WindowFigures) -> dict[str, str]:
    """The engine's memory traffic where its byte counters stood still while it generated: why, not 0 GB/s."""
    if fig.engine_bw_gbps is None and fig.engine_read_bytes_per_s is not None:
        return {"engine_bw_gbps": f"no data: {MFU_OFF}"}
    return {}


def _overhead_line(fig: WindowFigures) -> str:
    """The overhead traffic with what causes it, or "" without both figures."""
    text = overhead_text(fig.overhead_traffic_gbps, fig.overhead_ratio)
    return f"{text}: {OVERHEAD_CAUSES}" if text and (fig.overhead_traffic_gbps or 0) >= 0 else text


def _mbu_missing(fig: WindowFigures) -> str:
    return "unknown: " + missing_reason(fig.ceiling, peak_gbps(fig.ceiling, fig.gpus), fig.steps_per_s,
                                       fig.ceiling_missing).removeprefix("no MBU: ")


def render(fig: WindowFigures, verdict: Verdict | None = None) -> str:
    """The readable table: one line per figure with its unit, and the window; ``verdict`` the window's
    (its notes say what it said: app/verdict.py ``slo_note``)."""
    over = format_duration(fig.window_s)
    lines = [
        f"{visible(fig.target)}{f' / {visible(fig.model)}' if fig.model else ''}: figures over {over} "
        f"({fig.scrapes} scrapes, {fig.failed_scrapes} failed)"
        # as the Overview's tiles: a down target's figures are the window's scrapes from before it went
        + (" · STALE: the target is down, these figures are from before" if fig.up is False else "")
    ]
    data = figures_json(fig)
    spelled = _spelled(fig)
    for key, label, unit, scale in ROWS:
        if key == "preemptions" and preemption_word(fig.engine) != DEFAULT_ENGINE.preemption:
            label = f"{preemption_word(fig.engine)} (preemptions)"  # the engine's own word (SGLang: retractions)
        if key == "ceiling_share" and not is_reference(fig.ceiling):
            label = "% of the step bound"  # the report's words only on the report's own inputs
        lines.append(f"  {label:24} {spelled[key] if key in spelled else _format(data[key], unit, scale)}")
    if fig.step_bound_breach is not None:
        lines.append(f"  WARNING: {fig.step_bound_breach.message()}")
    if fig.overhead_traffic_gbps is not None and fig.overhead_traffic_gbps >= 0:
        lines.append(f"  (overhead traffic: {OVERHEAD_CAUSES})")
    if fig.ceiling is not None:
        lines.append(f"  roofline                 {roofline_text(target_roofline(fig), fig)}")
    if line := bucket_line(fig):
        lines.append(line)
    if fig.ttft_p95_in_inf_bucket:
        lines.append("  (TTFT P95 fell in the +Inf bucket: the value is the largest finite bound)")
    if text := slo_attainment_text(fig.ttft_slo_s, fig.ttft_slo_attainment, fig.ttft_slo_bounds):
        lines.append(f"  TTFT SLO                 {text}")
    if judged := ttft_judgement(fig):
        lines.append(f"  TTFT P95 vs SLO          {judged.text} (the bucket bounds' proof, clients' TTFT)")
    if verdict is not None and (warning := slo_note(fig, verdict)):  # in the verdict's words (app/verdict.py)
        lines.append(f"  warning: {warning}")
    if fig.ceiling:
        c = fig.ceiling
        kv = f"{c.kv_bytes_per_token:,.0f} bytes ({c.kv_source})" if c.kv_bytes_per_token else "unknown (the weights only)"
        lines.append(f"  ceiling inputs: {c.bandwidth_gbps:g} GB/s ({c.bandwidth_source}) ÷ ({c.weight_gb:g} GB ÷ TP "
                     f"{c.tensor_parallel}); KV per token {kv}"
                     + (f"; unset inputs read from {visible(c.shape_source, 200)}" if c.shape_source else ""))  # fmt: skip
    for g in fig.gpus:
        # GiB, as the GPUs page, NVML and nvidia-smi count it (a "32 GB" V100 holds 32 GiB, not 34.4 GB)
        used = "no data" if g.memory_used_bytes is None else f"{gibibytes(g.memory_used_bytes)} / {gibibytes(g.memory_total_bytes)}"
        busy = "no data" if g.memory_busy_pct_avg is None else f"{g.memory_busy_pct_avg:.0f} % of time"
        lines.append(f"  GPU {g.index if g.index is not None else '?'} {g.uuid}: memory {used}, memory busy {busy}")
    if fig.last_error:
        lines.append(f"  last error: {visible(fig.last_error, 500)}")
    return terminal("\n".join(lines))


def execute(args: argparse.Namespace, settings: Settings) -> int:
    try:
        window_s = parse_duration(args.window)
    except DurationError as exc:
        raise UsageError(f"--window: {exc}") from None
    if window_s <= 0:
        raise UsageError("--window must be longer than 0")
    reader = Reader(settings.db_url)
    if args.all:
        rows = fleet(reader, settings.sweetspot, time.time(), window_s, settings, headroom=args.json)
        email = _delivery_json(reader, settings)  # as in one target's object
        cut = {t.name: _series_json(t) for t in reader.targets()}
        print(json.dumps(_finite([{**row, **cut.get(row["target"], {}), **email} for row in rows_json(rows, settings)]), indent=2,
                         allow_nan=False) if args.json else table(rows))  # fmt: skip
        return 0
    name = _target_name(args, settings, reader)
    # Rounds are stored at their second rounded to the nearest (db/writer.py): the one just stored may
    # lie up to half a second ahead, and a window ending at the wall clock would miss it.
    now = math.ceil(time.time())
    fig = reader.window(name, now, window_s, ttft_slo_s=effective_sweetspot(settings, name).ttft_p95_slo_s)
    spot = resolve(reader, settings, name, now)
    verdict = judge(reader, settings, fig, spot)
    # Exit 0 whatever the verdict: scripts read the JSON's "state" (docs/commands.md).
    info = next((t for t in reader.targets() if t.name == name), None)
    over = _series_json(info)
    if args.json:
        email = _delivery_json(reader, settings)
        print(json.dumps({"state": verdict.state, "reasons": reasons(verdict), **not_judged_json(verdict.unjudged), **spot.as_json(),
                          "headroom": _headroom(reader, name, now, spot).as_json(),
                          **figures_json(fig), **over, **email}, indent=2, allow_nan=False))  # fmt: skip
    else:
        print(terminal(verdict.headline))
        print(render(fig, verdict))
        print(f"  {'sweet spot':24} {spot.line()}")
        print(f"  {'headroom':24} {_headroom(reader, name, now, spot).text()}")
        for u in verdict.unjudged:  # what the verdict could not judge: "every rule holds" only without any
            print(f"  {f'{u.rule} rule' if u.rule else 'window'} not judged: {u.reason}")
        if warning := series_limit_warning(over["series_dropped"], over["series_limit"]):
            print(f"  warning: {warning}")
        print(f"  alerts: {collector_delivery(reader.delivery(time.time()), settings.alerts, time.time())[0]}")
    return 0


def _delivery_json(reader: Reader, settings: Settings) -> dict[str, Any]:
    """``email``: where the collector's notifications go, as the collector stored it (db/delivery.py),
    and ``delivery``: who stored it, when, whether it still evaluates (null: no collector yet)."""
    now = time.time()
    stored = reader.delivery(now)
    line, sending = collector_delivery(stored, settings.alerts, now)
    about = None if stored is None else {"channels": list(stored.channels), "holder": stored.holder,
                                         "stored_at": stored.written_at, "collector_live": stored.live}  # fmt: skip
    return {"email": line, "sending": sending, "delivery": about}


def _headroom(reader: Reader, name: str, now: float, spot: SweetSpot) -> Headroom:
    """The peak-hour demand's forecast against the sweet spot (app/headroom.py); a failed read of the
    history is its own line ("no forecast: …"), never the command's failure."""
    try:
        return headroom_of(reader, name, now, None if spot.value is None else float(spot.value), spot.source or "")
    except Exception as exc:  # noqa: BLE001 - one line among many
        return unreadable(exc)


def _series_json(info: TargetInfo | None) -> dict[str, Any]:
    """What the target's last page left out over its max_series (0 and null for a target never read)."""
    return {"series_dropped": info.series_dropped if info else 0, "series_limit": info.series_limit if info else None}


def judge(reader: Reader, settings: Settings, fig: WindowFigures, spot: SweetSpot | None = None) -> Verdict:
    """The sweet-spot verdict of the window: the target's effective rules and thresholds, its own sweet
    spot and curve (resolved here unless given)."""
    sweetspot = effective_sweetspot(settings, fig.target)
    spot = spot or resolve(reader, settings, fig.target, fig.end)
    recent = reader.series(fig.target, fig.end - sweetspot.queue_growth_s - 30, fig.end, 30.0, fields=("queue_depth_max",))
    return evaluate(fig, sweetspot, recent, rule_set(settings, fig.target), spot)


def not_judged_json(unjudged: Iterable[Unjudged]) -> dict[str, Any]:
    """``not_judged``: each default rule the verdict could not judge, ``{"rule", "reason"}`` (rule "":
    the whole window, an outage inside it); ``not_evaluated``: the same as rule → reason (older key)."""
    listed = [{"rule": u.rule, "reason": u.reason} for u in unjudged]
    return {"not_judged": listed, "not_evaluated": {u["rule"]: u["reason"] for u in listed}}


def reasons(verdict: Verdict) -> list[str]:
    """One string per broken clause (figure, value, threshold, window), why there is no data, or what
    could not be judged (cannot tell)."""
    if verdict.state == NO_DATA:
        return [verdict.reason]
    if verdict.state == CANNOT_TELL:
        return [u.text for u in verdict.unjudged]
    return [c.text for c in verdict.clauses]
