"""Building blocks the pages share: the verdict banner, KPI tiles, GPU and target tables.

The ``*_rows``/``*_tiles`` functions are pure (tested without Streamlit); the ``show_*`` ones draw.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import datetime as dt
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

import streamlit as st

from app.formatting import (
    MISSING,
    ago,
    bound_name,
    clock,
    gibibytes,
    mbu_source_text,
    mbu_text,
    number,
    overhead_text,
    percent,
    share,
    share_name,
    slo_attainment_text,
    slo_bucket_warning,
    tokens,
    with_unit,
)
from app.sweet_spot import SweetSpot
from app.ui.charts import Frame, bridges
from app.verdict import CANNOT_TELL, CRITICAL, IN_SWEET_SPOT, NO_DATA, Verdict
from core.bandwidth import choose_bandwidth
from core.durations import format_duration
from core.engines import engine_named, preemption_word
from core.mbu import OVERHEAD_CAUSES, StepBoundBreach
from core.settings import NO_CEILING, SweetSpotSettings
from core.text import markdown
from db.figures import MISSING_HINTS
from db.results import GpuFigures, SeriesPoint, TargetInfo, WindowFigures, wait_label
from db.verdicts import StoredVerdict, shares


def since_text(ts: float | None, now: float, range_start: float) -> str:
    """`` — since 09:12:00 (34 min)``; a spell that reaches back to the chart's start began earlier still."""
    if ts is None:
        return ""
    if ts <= range_start:
        return f" — since before {clock(range_start)} (the whole chosen range)"
    return f" — since {clock(ts)} ({ago(ts, now).removesuffix(' ago')})"


TEXT_LIMIT = 1000  # characters of a reason or clause shown in the banner

# Running below this share of the sweet spot, with nothing queued, is under-loaded: the rules hold
# because little is asked, not because the deployment is tuned.
UNDER_LOADED = 0.8


def load_note(f: WindowFigures, sweetspot: SweetSpotSettings) -> str:
    """Why an "in the sweet spot" verdict may read as a contradiction, or "" when it does not.

    ``under-loaded: 10 running of 16, no queue: room for more traffic (MBU 12 % (measured, NVML GPM))``.
    """
    if f.running_avg is None or sweetspot.concurrency is None or f.running_avg >= UNDER_LOADED * sweetspot.concurrency:
        return ""
    running = f"{number(f.running_avg)} running of {sweetspot.concurrency}"
    share = f" ({mbu_text(f.mbu, f.mbu_source)})" if f.mbu is not None else ""
    if (f.queue_depth_max or 0) > 0 or (f.waiting_max or 0) > 0:
        queued = f"gateway queue {number(f.queue_depth_max)}, vLLM waiting {number(f.waiting_max)}"
        return f"{running} while requests queue ({queued}): is the gateway's limit below the sweet spot?{share}"
    return f"under-loaded: {running}, no queue: room for more traffic{share}"


def engine_note(f: WindowFigures) -> str:
    """The engine's own figures of the window that have no panel, those the engine exposes only:
    ``Engine: waiting for capacity 3, deferred 1 · speculative decoding: 71 % of draft tokens
    accepted, 2.4 tokens per draft · LoRA adapters: 2 running, 1 waiting · asleep (weights offloaded)``."""
    parts = []
    if f.waiting_capacity_max is not None or f.waiting_deferred_max is not None:
        parts.append(f"most requests waiting for KV-cache space {number(f.waiting_capacity_max)}, "
                     f"held back by the scheduler {number(f.waiting_deferred_max)}")
    if f.spec_decode_acceptance_rate is not None:
        length = f.spec_decode_mean_acceptance_length
        parts.append(f"speculative decoding: {percent(f.spec_decode_acceptance_rate)} of draft tokens accepted"
                     + ("" if length is None else f", {number(length)} tokens per draft"))
    if f.lora_running_adapters_max is not None or f.lora_waiting_adapters_max is not None:
        parts.append(f"LoRA adapters: {number(f.lora_running_adapters_max)} running, "
                     f"{number(f.lora_waiting_adapters_max)} waiting (max)")
    if f.sleep_state and f.sleep_state != "awake":
        parts.append(f"asleep ({f.sleep_state.replace('_', ' ')})")
    return "Engine: " + " · ".join(parts) if parts else ""


def step_text(points: Sequence[SeriesPoint], frame: Frame, wanted_s: float, fields: Sequence[str] = ()) -> str:
    """How a chart's step was chosen: ``one point per 30s: the rounds are 30s apart (a 10s step would
    leave gaps)``; and whether its lines bridge steps no round covered (:func:`charts.bridges`)."""
    step = format_duration(frame.step_s)
    if frame.step_s > wanted_s:
        text = f"one point per {step}: the rounds are that far apart (a {format_duration(wanted_s)} step would leave gaps)"
    else:
        text = f"one point per {step}"
    if bridges(points, frame.step_s, fields):
        text += "; lines bridge steps between rounds further apart than a step"
    return text


def show_banner(verdict: Verdict, since: Mapping[str, float | None], now: float, range_start: float,
                over: str = "", note: str = "") -> None:  # fmt: skip
    """The verdict in one coloured box; ``since`` maps a clause name (or "no_data") to when it began.

    ``over``: what the verdict covers (``over the last 5m``, ``over 16:00–17:00``); ``note``: why an
    "in the sweet spot" reads as it does (:func:`load_note`).
    """
    over = over or f"over the last {format_duration(verdict.window_s)}"
    if verdict.state == IN_SWEET_SPOT:
        why = f" — {note}." if note else "."
        st.success(f"**In the sweet spot** {over}: every rule holds{why}", icon=":material/check_circle:")
        return
    if verdict.state == CANNOT_TELL:  # nothing broke, but not every rule could be judged: say which, and why
        lines = "\n".join(f"- {markdown(u.text, TEXT_LIMIT)}" for u in verdict.unjudged)
        st.info(f"**Cannot tell** {over} whether it is in the sweet spot: no rule broke, but not every rule "
                f"could be judged:\n{lines}", icon=":material/help:")  # fmt: skip
        return
    if verdict.state == NO_DATA:
        no_data = since_text(since.get("no_data"), now, range_start)
        st.error(f"**No data** {over}: {markdown(verdict.reason, TEXT_LIMIT)}{no_data}.", icon=":material/cloud_off:")
        return
    lines = "\n".join(f"- {markdown(c.text, TEXT_LIMIT)}{since_text(since.get(c.name), now, range_start)}" for c in verdict.clauses)
    if verdict.unjudged:  # what it broke is proven; what it could not judge is said, not hidden
        lines += "\n" + "\n".join(f"- not judged: {markdown(u.text, TEXT_LIMIT)}" for u in verdict.unjudged)
    body = f"**Outside the sweet spot** {over}:\n{lines}"
    if verdict.severity == CRITICAL:
        st.error(body, icon=":material/error:")
    else:
        st.warning(body, icon=":material/warning:")


@dataclass(frozen=True)
class Tile:
    label: str
    value: str
    context: str  # the reference the value is read against, shown under it
    help: str


def held_in(f: WindowFigures, name: str) -> str:
    """The hover's note on where a quantile lies in the engine's buckets (docs/metrics.md): a client's
    own figure for the same requests differs, inside or near that bucket."""
    bucket = f.quantile_buckets.get(name)
    if bucket is None:
        return ""
    return f" vLLM's histogram puts it in the bucket ({bucket[0]:g}, {bucket[1]:g}] s; a client timing the same requests measures its own figure."


def p95_slo_note(f: WindowFigures) -> str:
    """`` · inside its bucket (2.5, 5] s`` when the P95's bucket holds the SLO: not to be told apart."""
    bucket = f.ttft_slo_in_p95_bucket()
    return "" if bucket is None else f" · inside its bucket ({number(bucket[0])}, {number(bucket[1])}] s"


def slo_warning(f: WindowFigures) -> str:
    warning = slo_bucket_warning(f)
    return "" if warning is None else f" {warning}"


def slo_tile(f: WindowFigures, w: str) -> Tile:
    """TTFT SLO attainment: ``79 %`` / ``≤ 3 s · 2.5 s: 75 %, 5 s: 95 %`` (the bounds' shares where the SLO
    falls between two; ``exact`` at a bound), as vLLM's Grafana Overview shows it."""
    slo = f"≤ {number(f.ttft_slo_s)} s" if f.ttft_slo_s is not None else "no SLO"
    if f.ttft_slo_attainment is None:
        context = f"{slo} · no request"
    elif f.ttft_slo_bounds is None:
        context = f"{slo} · exact (a bucket bound)"
    else:
        lower_le, lower, upper_le, upper = f.ttft_slo_bounds
        context = (f"{slo} · between {share(lower)} (within {number(lower_le)} s) and {share(upper)} "
                   f"(within {number(upper_le)} s)")
    how = slo_attainment_text(f.ttft_slo_s, f.ttft_slo_attainment, f.ttft_slo_bounds)
    return Tile(f"TTFT SLO attainment · {w}", share(f.ttft_slo_attainment), context,
                "Share of requests whose TTFT was within the SLO, from vLLM's TTFT buckets (as vLLM's Grafana Overview)."
                + (f" {how}." if how else "") + slo_warning(f))  # fmt: skip


def ttft_tile(f: WindowFigures, w: str, engine: str, sweetspot: SweetSpotSettings) -> Tile:
    """TTFT P95 as clients see it where a gateway holds requests, else the engine's own (issue 28); its
    context says how the figure is made, in parts that add up to it (issue 39)."""
    slo = f"SLO {number(sweetspot.ttft_p95_slo_s)} s"
    help_ = "95th percentile time to first token." + held_in(f, "ttft_p95_s") + slo_warning(f)
    if f.gateway_wait_source is None:
        return Tile(f"TTFT P95 · {w}", engine, f"{slo}{p95_slo_note(f)}", help_)
    value = MISSING if f.client_ttft_p95_s is None else _seconds(f.client_ttft_p95_s)  # as its parts are spelled
    return Tile(f"TTFT P95 as clients see it · {w}", value, f"{slo} · {client_parts(f, engine)}",
                "What a client behind the gateway waits for its first token, at the 95th percentile: the larger of the "
                "engine's TTFT P95 and the engine's median plus the gateway wait's P95 (a sum's P95 is not the sum of "
                f"the P95s; where one part dominates, this is it). The wait: {f.gateway_wait_source}. " + help_)  # fmt: skip


def client_parts(f: WindowFigures, engine: str) -> str:
    """How the clients' TTFT P95 was made, in words that add up to it: ``engine median 0.90 s + gateway
    wait P95 6.05 s (estimate) · engine P95 3.25 s``, or ``the engine's P95 (its median 0.90 s + the wait's
    P95 0.40 s is less)``."""
    kind = wait_label(f.gateway_wait_source or "").split(",", 1)[0]  # measured or estimate
    wait95, median, client = f.gateway_wait_p95_s, f.ttft_p50_s, f.client_ttft_p95_s
    if f.gateway_wait_s is None or wait95 is None or median is None or client is None:
        return f"engine {engine} + gateway wait unknown ({kind})"
    if client == f.ttft_p95_s:
        return f"the engine's P95 (its median {_seconds(median)} + the wait's P95 {_seconds(wait95)} ({kind}) is less)"
    total, first = _seconds(client), _seconds(median)
    # the wait's part as the total less the median, both as shown: the three figures add up as read
    rest = float(total.removesuffix(" s")) - float(first.removesuffix(" s"))
    return f"engine median {first} + gateway wait P95 {_seconds(rest)} ({kind}) · engine P95 {engine}"


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if abs(value) < 10 else f"{value:.1f} s"


def client_slo_tile(f: WindowFigures, w: str) -> Tile:
    """TTFT SLO attainment as clients see it (the gateway wait counted), the engine's own beside it."""
    slo = f"≤ {number(f.ttft_slo_s)} s" if f.ttft_slo_s is not None else "no SLO"
    return Tile(f"TTFT SLO attainment as clients see it · {w}", share(f.client_ttft_slo_attainment),
                f"{slo} · engine alone {share(f.ttft_slo_attainment)}",
                "Share of requests whose gateway wait + TTFT was within the SLO: the engine's TTFT buckets judged "
                f"against the SLO less the gateway's mean wait ({wait_label(f.gateway_wait_source)}).")  # fmt: skip


TOKENS_HELP = ("Output tokens per second of the whole deployment. The bandwidth bound (the report's ceiling on the "
               "reference deployment), bandwidth ÷ (weights ÷ TP), bounds decode steps per second: each step reads "
               "the weights once. Each step yields a token per running request, so tok/s passes it as soon as "
               "batching works; its % of the step bound is tok/s ÷ that bound, not an efficiency. How well the "
               "GPUs' bandwidth is used is MBU (docs/ceiling.md).")


def gateway_tile(f: WindowFigures, w: str, gateway_source: str | None) -> Tile:
    """Gateway queue depth; a target whose gateway is not configured says so and names the setting."""
    waiting = f"vLLM waiting {number(f.waiting_max)}"
    if f.queue_depth_max is None and gateway_source == "none":
        return Tile(f"Gateway queue · max {w}", "no gateway", f"set targets[].gateway to read its queue · {waiting}",
                    "No gateway is configured for this target: set targets[].gateway (a preset such as litellm and "
                    "its /metrics url, docs/gateways.md) to chart the requests it holds. vLLM's own waiting queue below.")
    return Tile(f"Gateway queue · max {w}", with_unit(f.queue_depth_max, "req"), waiting,
                "Requests held in the gateway (max); vLLM's own waiting queue below.")


def kpi_tiles(f: WindowFigures, sweetspot: SweetSpotSettings, spot: SweetSpot | None = None,
              gateway_source: str | None = None) -> list[Tile]:
    """The Overview's tiles: each value with the threshold or reference it is judged against."""
    w = format_duration(f.window_s)
    ttft = with_unit(f.ttft_p95_s, "s") + (" +" if f.ttft_p95_in_inf_bucket else "")
    ceiling = f"no ceiling: {f.ceiling_missing}"
    if f.ceiling_steps_per_s is not None:
        ceiling = f"at most {number(f.ceiling_steps_per_s)} steps/s: {bound_name(f.ceiling)}"
    if f.ceiling_share is not None:
        ceiling = f"{percent(f.ceiling_share)}: {share_name(f.ceiling)} (tok/s ÷ steps/s bound) · {ceiling}"
    # the tile reads "23 %" / "of 1.2 M tokens · warn … · crit …": the capacity under the value
    kv_of = "" if f.kv_capacity_tokens is None else f"of {tokens(f.kv_capacity_tokens)} tokens · "
    preempted = preemption_word(f.engine).capitalize()  # the engine's own word (SGLang: retractions)
    return [
        ttft_tile(f, w, ttft, sweetspot),
        client_slo_tile(f, w) if f.gateway_wait_source is not None else slo_tile(f, w),
        Tile(f"Output tok/s · {w}", with_unit(f.tokens_per_s, "tok/s"), ceiling, TOKENS_HELP),
        mbu_tile(f, sweetspot),
        dram_tile(f),
        Tile(f"{preempted} · {w}", number(f.preemptions), "should stay 0: each one redoes a request's work",
             "Requests pushed out of the KV cache to make room, whose prompt and output so far are computed again "
             "later (vllm:num_preemptions_total increase; SGLang: sglang:num_retracted_requests_total)."),
        Tile(f"Running · avg {w}", number(f.running_avg), f"max {number(f.running_max)} · sweet spot {spot_text(sweetspot, spot)}", "Running requests in vLLM (concurrency). " + spot_help(spot)),
        gateway_tile(f, w, gateway_source),
        Tile(f"KV usage · max {w}", percent(f.kv_cache_usage_max), f"{kv_of}warn {percent(sweetspot.kv_warning)} · crit {percent(sweetspot.kv_critical)}", "KV-cache usage of its capacity in tokens (cache_config_info); near 100 % vLLM preempts."),
    ]  # fmt: skip


def spot_text(sweetspot: SweetSpotSettings, spot: SweetSpot | None) -> str:
    """``16 (learned)``, ``unknown``: the sweet spot with its source (configured when none is resolved)."""
    if spot is not None:
        return spot.text
    return "unknown" if sweetspot.concurrency is None else f"{sweetspot.concurrency} (configured)"


def spot_help(spot: SweetSpot | None) -> str:
    """Where the sweet spot came from, or how to get one (the tile's hover)."""
    if spot is None:
        return ""
    if spot.value is None:
        return "Sweet spot: " + spot.missing().removeprefix("not evaluated: ") + "."
    return f"Sweet spot {spot.value}: {spot.detail}."


def mbu_missing(f: WindowFigures) -> str:
    """Why a window has no MBU, with the setting or source that adds one."""
    if f.ceiling is None:
        return f.ceiling_missing
    if f.steps_per_s is None:
        return "unknown: no step rate (the engine exposes no vllm:iteration_tokens_total)"
    return "no bandwidth source"


def mbu_tile(f: WindowFigures, sweetspot: SweetSpotSettings) -> Tile:
    """MBU with its source (``23 %`` / ``measured, NVML GPM · min 30 %``); its hover holds every
    source's value and the step model's inputs. Without a source the tile says which setting adds one."""
    w = format_duration(f.window_s)
    if f.mbu is None or not f.mbu_source:
        return Tile(f"MBU · {w}", MISSING, mbu_missing(f), MBU_HELP + mbu_inputs(f))
    context = mbu_source_text(f.mbu_source)  # a figure, not a threshold: no default rule has an MBU floor
    return Tile(f"MBU · {w}", percent(f.mbu), context, MBU_HELP + mbu_inputs(f))


MBU_HELP = ("Model bandwidth utilisation: the bytes a decode step must read (weights ÷ TP + the KV cache resident ÷ TP) "
            "× steps/s ÷ peak bandwidth per GPU, per data-parallel engine: the model's bytes (vLLM's byte counters, "
            "else the step model), never the GPU's DRAM reading. ")
DRAM_HELP = ("DRAM bandwidth utilisation: every byte the GPUs moved (NVML GPM, or dcgm-exporter's DRAM_ACTIVE), "
             "averaged over the target's GPUs. Beside MBU, the gap is overhead traffic: ")


def dram_tile(f: WindowFigures) -> Tile:
    """The GPUs' DRAM bandwidth utilisation with its source, and the overhead traffic beside MBU
    (``77.5 %`` / ``NVML GPM · 3,060 GB/s per GPU beyond the model's bytes (5.6×)``)."""
    w = format_duration(f.window_s)
    help_ = DRAM_HELP + OVERHEAD_CAUSES + "."
    if f.dram_bw_util is None or not f.dram_bw_source:
        return Tile(f"DRAM bandwidth · {w}", MISSING, "no NVML GPM (Hopper or newer) or DCGM DRAM_ACTIVE reading", help_)
    overhead = overhead_text(f.overhead_traffic_gbps, f.overhead_ratio)
    return Tile(f"DRAM bandwidth · {w}", percent(f.dram_bw_util), " · ".join(p for p in (f.dram_bw_source, overhead) if p), help_)


def mbu_inputs(f: WindowFigures) -> str:
    """``engine estimate — · modelled 4 %. Model: 40 GB ÷ TP 8 at 900 GB/s (config), …``."""
    sources = f"Sources: engine estimate {percent(f.mbu_engine)} · modelled {percent(f.mbu_modelled)}."
    c = f.ceiling
    if c is None:
        return f"{sources} Model: no inputs ({f.ceiling_missing})."
    kv = f"{number(c.kv_bytes_per_token)} B per token ({c.kv_source})" if c.kv_bytes_per_token else "unknown (weights only)"
    shape = f" (unset inputs read from {c.shape_source})" if c.shape_source else ""
    return (f"{sources} Model{shape}: {number(c.weight_gb)} GB ÷ TP {c.tensor_parallel} at {number(c.bandwidth_gbps)} GB/s "
            f"({c.bandwidth_source}); KV {kv}; {number(f.steps_per_s)} steps/s over {number(f.engines_max or 1)} engine(s), "
            f"{number(f.running_avg)} running; KV tokens {number(f.kv_resident_tokens_avg)} resident, mean context "
            f"{number(f.mean_context_tokens)} tokens; KV term: {f.mbu_kv_source or 'none'}.{API_SERVERS}")


# vLLM's comment on iteration_tokens_total: several API servers each count the engine's steps.
API_SERVERS = (" With vllm serve --api-server-count > 1 every API server observes the engine's steps:"
               " steps/s and the modelled MBU read that many times too high.")


def show_breach(breach: StepBoundBreach) -> None:
    """The per-step truth check failed: the ceiling's inputs are wrong, and which would make it hold."""
    st.error(f"**The ceiling's inputs are wrong**: {markdown(breach.message(), TEXT_LIMIT)}.", icon=":material/report:")


# The tiles are one HTML block, not six st.metric elements in two rows of columns: the browser builds
# one element instead of twenty (~0.15 s of the Overview's render, docs/benchmarks.md). Colours are
# relative (opacity, grey borders) so light and dark themes both read; a tile's title is its help.
TILE_GRID = "display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:1rem"
TILE = "border:1px solid rgba(128,128,128,0.3);border-radius:0.5rem;padding:0.75rem 1rem"
TILE_VALUE = "font-size:2.25rem;line-height:1.3;white-space:nowrap;overflow:hidden;text-overflow:ellipsis"
TILE_CONTEXT = "display:inline-block;font-size:0.875rem;padding:0 0.4rem;border-radius:0.5rem;background:rgba(128,128,128,0.12)"


def tiles_html(tiles: Sequence[Tile]) -> str:
    """The tiles as one HTML block: label (its help on hover), value, and the reference it is read against."""
    cells = "".join(
        f'<div style="{TILE}" title="{escape(t.help)}"><div style="font-size:0.875rem">{escape(t.label)}</div>'
        f'<div style="{TILE_VALUE}">{escape(t.value)}</div><div style="{TILE_CONTEXT}">{escape(t.context)}</div></div>'
        for t in tiles
    )
    return f'<div style="{TILE_GRID}">{cells}</div>'


def show_tiles(tiles: Sequence[Tile]) -> None:
    st.html(tiles_html(tiles))


def marked_stale(tiles: Sequence[Tile], f: WindowFigures, last_good: float | None) -> list[Tile]:
    """The tiles, each marked stale once the target is down or unread: their figures are the window's
    scrapes from before it went (``last_good``: the end of the last step with a successful scrape),
    not now's (``STALE · as of 14:02 · SLO 3 s``)."""
    if f.up is not False:
        return list(tiles)
    when = f"as of {clock(last_good)}, before the target went down" if last_good else "no successful scrape in this range"
    mark = f"STALE · {when}"
    return [dataclasses.replace(t, context=f"{mark} · {t.context}", help=f"{mark}: not now's figure. {t.help}") for t in tiles]


def bandwidth_text(g: GpuFigures) -> str:
    """A true bandwidth figure when one exists; otherwise NVML's memory-busy %, named as time-based."""
    source = g.dram_bw_source or "unknown"
    figure = choose_bandwidth(g.dram_bw_util_pct_avg, g.memory_busy_pct_avg, g.peak_bw_gbps, source)
    if figure is None:
        return MISSING
    if figure.time_based:
        return f"{number(figure.pct)} % busy (time-based, not bandwidth)"
    if figure.gbps is not None:
        return f"{number(figure.gbps)} GB/s ({figure.source})"
    return f"{number(figure.pct)} % of peak ({figure.source})"


def gpu_rows(gpus: Sequence[GpuFigures]) -> list[dict[str, str]]:
    """Rows for ``st.table``, whose cells are Markdown: names read from exporters are escaped."""
    return [
        {
            "GPU": f"#{g.index}" if g.index is not None else markdown(g.uuid[:12]),
            "name": markdown(g.name) if g.name else MISSING,
            "host": markdown(g.host) if g.host else MISSING,
            "memory used / total": f"{gibibytes(g.memory_used_bytes)} / {gibibytes(g.memory_total_bytes)}",
            "bandwidth": bandwidth_text(g),
            "peak bandwidth": f"{with_unit(g.peak_bw_gbps, 'GB/s')} ({g.peak_bw_source or 'unknown'})",
            "power": with_unit(g.power_w_avg, "W"),
            "temperature (max)": with_unit(g.temperature_c_max, "°C"),
        }
        for g in gpus
    ]


def metric_rows(info: TargetInfo) -> list[dict[str, str]]:
    rows = [
        {"figure": key, "exposed as": name, "version hint": info.metric_versions.get(key, "")}
        for key, name in sorted(info.metric_names_used.items())
    ]
    rows += [
        {"figure": key, "exposed as": "missing", "version hint": MISSING_HINTS.get(key, "")}
        for key in info.missing_metrics
    ]
    return rows


def engine_text(info: TargetInfo) -> str:
    """The engine, its KV capacity and its LoRA adapters, as the last scrape stated them."""
    engine = engine_named(info.engine)
    name = engine.display if engine is not None else "not known yet"
    parts = [f"- engine: {name}"]
    config = info.cache_config
    size = config.get("kv_cache_size_tokens") or (
        str(int(config["num_gpu_blocks"]) * int(config["block_size"]))
        if config.get("num_gpu_blocks", "").isdigit() and config.get("block_size", "").isdigit() else ""
    )
    if size:
        parts.append(f"- KV capacity: {tokens(float(size))} tokens per engine (cache_config_info)")
    if info.lora:
        running = markdown(info.lora.get("running_lora_adapters") or "none")
        waiting = markdown(info.lora.get("waiting_lora_adapters") or "none")
        parts.append(f"- LoRA adapters: running {running}; waiting {waiting} (max {info.lora.get('max_lora', '?')})")
    return "\n".join(parts)


def health_text(info: TargetInfo, now: float) -> str:
    if info.stale_age(now) is not None:  # nobody has read it for two intervals and a timeout
        return f":red[**stale**] · last scrape {clock(info.last_scrape_at)} ({ago(info.last_scrape_at, now)}): not scraped since"
    state = {True: ":green[**up**]", False: ":red[**down**]", None: ":gray[**never scraped**]"}[info.up]
    return f"{state} · last scrape {clock(info.last_scrape_at)} ({ago(info.last_scrape_at, now)})"


def ceiling_text(info: TargetInfo) -> str:
    """The ceiling's inputs, each with where it came from, or that there are none (never a borrowed figure)."""
    c = info.ceiling
    if c is None:
        lacks = info.ceiling_missing.removeprefix("unknown: ")
        return f"Ceiling: none: {'no ceiling inputs (' + lacks + ')' if info.ceiling_missing == NO_CEILING else lacks}"
    kv = (f"{number(c.kv_bytes_per_token)} B per token ({c.kv_source})" if c.kv_bytes_per_token
          else "unknown (set targets[].ceiling.kv_bytes_per_token, or vLLM's cache_config_info gives it)")  # fmt: skip
    return (
        f"Ceiling: **at most {number(c.steps_per_s)} decode steps/s** = bandwidth ÷ (weights ÷ TP)\n"
        f"- weights: {number(c.weight_gb)} GB (config) · tensor parallel: {c.tensor_parallel} (config)\n"
        f"- bandwidth: {number(c.bandwidth_gbps)} GB/s per GPU ({c.bandwidth_source})\n"
        f"- KV cache: {kv}"
    )


def series_csv(points: Sequence[SeriesPoint], fields: Sequence[str]) -> str:
    """Series steps as CSV: ``time`` (ISO 8601 UTC), ``ts`` (unix s), then ``fields`` (empty = no data)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time", "ts", *fields])
    for p in points:
        values = [getattr(p, f) for f in fields]
        iso = dt.datetime.fromtimestamp(p.ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        writer.writerow([iso, int(p.ts), *("" if v is None else v for v in values)])
    return out.getvalue()


def chart_downloads(points: Sequence[SeriesPoint], ttft: Sequence[SeriesPoint], fields: Sequence[str], ttft_fields: Sequence[str]) -> None:
    """CSV downloads of the data behind the Overview's charts (users paste them into tickets)."""
    a, b = st.columns(2)
    a.download_button("Download the charts' data (CSV)", series_csv(points, fields), "overview.csv", "text/csv",
                      icon=":material/download:")  # fmt: skip
    b.download_button("Download the TTFT and finished-requests data (CSV)", series_csv(ttft, ttft_fields), "overview-ttft.csv",
                      "text/csv", icon=":material/download:")  # fmt: skip


SPARK_W, SPARK_H = 120, 24  # the sparkline's drawing box (the cell scales it to its height)


def sparkline_svg(values: Sequence[float | None], color: str = "#1f77b4") -> str | None:
    """A sparkline as an SVG data URL: one x unit per value, a gap where a value is None.

    Streamlit's ``LineChartColumn`` refuses None (the cell shows an error) and draws 0 for a
    substitute: a minute without data would read as a minute without traffic. A path restarts
    (``M``) after every gap; a value between two gaps is a dot (a zero-length segment, round caps).
    The y axis runs from 0 to the largest value; None (an empty cell) when there is no value at all.
    """
    top = max((v for v in values if v is not None), default=None)
    if top is None:
        return None
    x_of = (SPARK_W - 4) / max(1, len(values) - 1)
    y_of = (SPARK_H - 4) / top if top > 0 else 0.0
    path, pen_down = [], False
    for i, v in enumerate(values):
        if v is None:
            pen_down = False
            continue
        path.append(f"{'L' if pen_down else 'M'}{2 + i * x_of:.1f} {SPARK_H - 2 - v * y_of:.1f}")
        path.append("" if pen_down else "l0 0")  # a dot if no segment follows
        pen_down = True
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{SPARK_W}" height="{SPARK_H}" viewBox="0 0 {SPARK_W} {SPARK_H}">'
           f'<path d="{"".join(path)}" fill="none" stroke="{color}" stroke-width="1.5" stroke-linecap="round" '
           'stroke-linejoin="round"/></svg>')  # fmt: skip
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def history_text(history: Sequence[StoredVerdict], start: float, end: float) -> str:
    """The range's minutes as the alert evaluator judged them (stored verdicts): ``Minutes of this
    range: 70 % in the sweet spot, 12 % outside, 12 % cannot tell, 1 % no data, 5 % not judged (…)``."""
    s = shares(history, start, end)
    if not s.minutes or s.not_stored == 1.0:
        return ("Minutes of this range: none judged yet (the collector judges each minute as it runs; minutes from "
                "before it ran, or from a backfill, have no verdict).")
    parts = [f"{percent(s.in_sweet_spot)} in the sweet spot", f"{percent(s.outside)} outside",
             f"{percent(s.cannot_tell)} cannot tell", f"{percent(s.no_data)} no data"]  # fmt: skip
    if s.not_stored:
        parts.append(f"{percent(s.not_stored)} not judged (no collector ran then, or backfilled)")
    return "Minutes of this range, as the alert evaluator judged them: " + ", ".join(parts) + "."
