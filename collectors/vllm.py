"""The vLLM collector: scrape ``/metrics``, read the catalogue's metrics, aggregate across engines.

Rules (DOMAIN.md §4, docs/metrics.md):

- Figures are kept per model (label ``model_name``; samples without it go under ``""``) and
  aggregated across engines (label ``engine``, V1 >= 0.8.3) and any other label (``finished_reason``)
  with the catalogue's rule: counters and histograms are summed, gauges summed or maxed.
- When several aliases of one metric are exposed (``kv_cache_usage_perc`` and ``gpu_cache_usage_perc``
  in 0.9.2-0.10), only the first in catalogue order is read: never double counted.
- Histogram bounds come from each scrape. A series without a ``+Inf`` bucket uses its ``_count`` as
  ``+Inf``; engines with different bounds are combined on the bounds they share (exact, since counts
  are cumulative). A model's histogram whose series have no ``+Inf`` and no ``_count`` is left out.
- Absent is not zero: a metric with no sample is absent from the mappings and listed in ``missing``.
- SGLang pages (``sglang:`` names, the same catalogue rows) repeat a scheduler's figures on every
  ``tp_rank``/``pp_rank``/``moe_ep_rank``: only the lowest rank's sample of each series is read, so
  ranks are never double counted; data-parallel ranks (``dp_rank``) are separate schedulers and
  combine like vLLM's engines.
- Derived figures (catalogue rows without names): KV capacity from every engine's
  ``cache_config_info`` (``kv_cache_size_tokens``, else ``num_gpu_blocks × block_size``; bytes from
  ``kv_cache_memory_bytes``) and LoRA adapter counts from the newest ``lora_requests_info``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from itertools import groupby
from operator import itemgetter, methodcaller
from typing import Any, NamedTuple, cast

from collectors.catalogue import CATALOGUE, PROCESS_START, MetricSpec, wanted_sample_names
from collectors.expfmt import SelectiveParser
from collectors.fetch import Fetcher, fetch_text
from collectors.records import INF, Histogram, ModelFigures, VllmScrape
from core.engines import detected
from core.errors import ScrapeError
from core.redact import masked
from core.settings import HttpSettings

HINT = "Is vLLM running? Check targets[].vllm_url"
# A series: one model on one engine (SGLang's data-parallel rank is its engine)
_PARSER = SelectiveParser(wanted_sample_names(), series_labels=("model_name", "engine", "dp_rank"))
# Samples by name while reading: (name, labels, value), in page order.
Rows = list[tuple[str, Mapping[str, str], float]]
SeriesKey = frozenset[tuple[str, str]]
_NAME = itemgetter(0)
_LABELS = itemgetter(1)
_ENGINE = methodcaller("get", "engine")
_DP_RANK = methodcaller("get", "dp_rank")  # SGLang's data-parallel rank: its "engine"


def scrape_vllm(url: str, timeout_s: float, fetcher: Fetcher | None = None, http: HttpSettings | None = None) -> VllmScrape:
    """GET ``url`` (vLLM's ``/metrics``) and parse it; any failure raises ScrapeError naming the URL."""
    return vllm_from_page(masked(url), fetch_text(url, timeout_s, fetcher, HINT, http))


def vllm_from_page(url: str, text: str, engine: str = "auto", max_series: int | None = None) -> VllmScrape:
    """Parse the page fetched from ``url``; a parse failure raises ScrapeError naming the URL.

    ``engine`` ("vllm" or "sglang"; "auto": either) is the target's setting: a page of the other
    engine's names is refused rather than read as if it were the one configured. ``max_series``:
    see :func:`parse_vllm`.
    """
    try:
        scrape = parse_vllm(text, source=url, max_series=max_series)
    except ScrapeError as exc:
        if str(exc).startswith("no vLLM metrics"):
            raise
        raise ScrapeError(f"{url}: {exc}", "Check that targets[].vllm_url is vLLM's /metrics") from None
    if engine != "auto" and scrape.engine != engine:
        raise ScrapeError(f"{url} serves {scrape.engine}'s metrics, not {engine}'s",
                          f"Set targets[].engine = \"{scrape.engine}\" (or \"auto\"), or point vllm_url at the {engine} server")
    return scrape


def parse_vllm(text: str, *, source: str = "this input", max_series: int | None = None) -> VllmScrape:
    """Read one exposition page into a VllmScrape (see the module docstring for the rules).

    With ``max_series``, only the samples of the page's first ``max_series`` series (model × engine
    label sets, in page order) are read; the others are dropped and counted in ``series_dropped``.
    Raises ScrapeError when a catalogue line is malformed, or when no catalogue metric is present
    at all (the page is not vLLM's).

    One path in two steps: which sample feeds which figure depends on the page's series alone (its
    sample names and label sets), so :func:`_plan` reads them into a plan of sample indices, and
    :func:`_apply` fills the plan with the page's values. A target serves the same series scrape
    after scrape, so a plan is kept by the series' raw text (``_PLANS``): a usual page only has its
    values applied (bench/bench_parse.py, docs/benchmarks.md: the parser's goal of issue 31).
    """
    page = _PARSER.parse_page(text, max_series)
    key = (page.names, page.blocks) if page.blocks is not None else None
    plan = _PLANS.get(key) if key is not None else None
    if plan is None:
        plan = _plan(page.names, page.labels, source)
        if key is not None:
            if len(_PLANS) >= _PLANS_MAX:
                _PLANS.clear()  # endless distinct pages must not grow memory forever
            _PLANS[key] = plan
    return _apply(plan, page.values, page.dropped, max_series, page.refused)


class _Figures(NamedTuple):
    """One model's counters, gauges or ``created`` times: each figure's samples (engines) by index."""

    model: str
    section: str  # the ModelFigures field
    keys: tuple[str, ...]
    aggs: tuple[str, ...]
    indices: tuple[tuple[int, ...], ...]
    labels: tuple[tuple[Mapping[str, str], ...], ...]  # each sample's, for the engines left out
    single: tuple[int, ...] | None  # each figure's one sample, when every figure has exactly one


# (bounds, cumulative's indices, count's, sum's, the series' labels): one engine's histogram
_Series = tuple[tuple[float, ...], tuple[int, ...], int | None, int | None, Mapping[str, str]]
_Hist = tuple[str, str, tuple[_Series, ...]]  # (model, key, its series)


class _Plan(NamedTuple):
    """What a page's series say, with sample indices where its values go (see parse_vllm)."""

    figures: tuple[_Figures, ...]
    histograms: tuple[_Hist, ...]
    used: dict[str, str]
    missing: tuple[str, ...]  # catalogue keys of no sample (derived ones may yet be filled)
    engines: tuple[str, ...]
    process_start: tuple[int, ...]
    cache_config: dict[str, str]
    kv_capacity: dict[str, float]
    per_engine: _EnginePlan  # engines and KV tokens resident, per model (_per_engine)
    lora: tuple[tuple[int, Mapping[str, str]], ...]  # lora_requests_info samples
    engine: str
    duplicates: int  # samples that repeated a name and label set already on the page (the first kept)


_PLANS: dict[tuple[tuple[str, ...], tuple[str, ...]], _Plan] = {}
_SECTIONS = ("counters", "gauges", "histograms", "created", "partial")
_PLANS_MAX = 64  # distinct pages' series: a few per target (its layouts)
# (model, section) → (key, agg, indices, labels) of each figure, in catalogue order
_Scalars = dict[tuple[str, str], list[tuple[str, str, tuple[int, ...], tuple[Mapping[str, str], ...]]]]


def _plan(names: tuple[str, ...], labels: list[Mapping[str, str]], source: str) -> _Plan:
    """The page's plan from its series alone: each row's value is its index in the page."""
    by_name, duplicates = _group(list(zip(names, labels, range(len(names)), strict=True)))
    used: dict[str, str] = {}
    info: dict[str, Rows] = {}
    scalars: _Scalars = {}
    histograms: list[_Hist] = []
    for spec in CATALOGUE:
        alias = _chosen_alias(spec, by_name)
        if alias is None:
            continue
        used[spec.key] = alias
        if spec.kind == "info":
            info[spec.key] = by_name.get(alias, [])
            continue
        _plan_metric(spec, alias, by_name, scalars, histograms)
    if not used:
        raise ScrapeError(f"no vLLM metrics found at {source} — is this vLLM's /metrics?")
    lora = info.get("lora_requests", [])
    return _Plan(
        figures=tuple(group for (model, section), rows in scalars.items() for group in _figures(model, section, rows)),
        histograms=tuple(histograms),
        used=used,
        missing=tuple(spec.key for spec in CATALOGUE if spec.key not in used),
        engines=_engines(by_name, used),
        process_start=tuple(int(i) for _, _, i in by_name.get(PROCESS_START, [])),
        cache_config=_info_labels(info.get("cache_config", [])),
        kv_capacity=_kv_capacity(info.get("cache_config", [])),
        per_engine=_per_engine(by_name, used, info.get("cache_config", [])),
        lora=tuple((int(i), row_labels) for _, row_labels, i in lora),
        engine=detected(used.values()).name,
        duplicates=duplicates,
    )


def _plan_metric(spec: MetricSpec, alias: str, by_name: Mapping[str, Rows], scalars: _Scalars, histograms: list[_Hist]) -> None:
    """One metric under its chosen alias into the plan's parts (rows' values are sample indices)."""
    if spec.kind == "histogram":
        histograms.extend((model, spec.key, series) for model, series in _histogram_series(alias, by_name).items())
    else:
        section = "counters" if spec.kind == "counter" else "gauges"
        for model, rows in _per_model_rows(_where(spec, by_name.get(alias))).items():
            scalars.setdefault((model, section), []).append(
                (spec.key, spec.agg, tuple(int(i) for _, i in rows), tuple(lb for lb, _ in rows)))
    created = spec.created_name(alias)
    if created:
        for model, rows in _per_model_rows(_where(spec, by_name.get(created))).items():
            scalars.setdefault((model, "created"), []).append((spec.key, "max", tuple(int(i) for _, i in rows), ()))


def _figures(model: str, section: str, rows: list[tuple[str, str, tuple[int, ...], tuple[Mapping[str, str], ...]]]) -> Iterable[_Figures]:
    """The figures of one model's section in two groups: those of one sample each, and the others."""
    for one in (True, False):
        part = [row for row in rows if (len(row[2]) == 1) == one]
        if part:
            keys, aggs, indices, labels = zip(*part, strict=True)
            yield _Figures(model, section, keys, aggs, indices, labels, tuple(i[0] for i in indices) if one else None)


def _apply(plan: _Plan, values: list[float], dropped: int, max_series: int | None, refused: int = 0) -> VllmScrape:
    """The scrape of a page of ``plan``'s series with these values."""
    sections: dict[str, dict[str, dict[str, Any]]] = {}  # model → ModelFigures' field → figures
    clean = _all_usable(values)  # the usual page: no value to leave out, nothing to check per figure
    for group in plan.figures:
        if clean and group.single is not None:  # one engine, no value to leave out: the values as they are
            into = sections.setdefault(group.model, {}).setdefault(group.section, {})
            into.update(zip(group.keys, map(values.__getitem__, group.single), strict=True))
            continue
        for key, agg, indices, row_labels in zip(group.keys, group.aggs, group.indices, group.labels, strict=True):
            got = [values[i] for i in indices]
            # One engine's NaN, infinity or negative count costs that engine's share, not the figure:
            # a sum with NaN in it hid every other engine's tokens, preemptions and TTFT.
            good = got if clean or group.section == "created" else [value for value in got if _usable(value, agg)]
            if good:
                parts = sections.setdefault(group.model, {})
                parts.setdefault(group.section, {})[key] = _combine(good, agg)
                if group.section == "counters" and len(good) < len(got):
                    left = _left_out(lb for lb, value in zip(row_labels, got, strict=True) if not _usable(value, agg))
                    parts.setdefault("partial", {})[key] = left
    for model, key, series in plan.histograms:
        merged, left_out = _merged(series, values, clean)
        if merged is not None:
            parts = sections.setdefault(model, {})
            parts.setdefault("histograms", {})[key] = merged
            if left_out:
                parts.setdefault("partial", {})[key] = left_out
    models = {model: ModelFigures(**{name: parts.get(name, {}) for name in _SECTIONS}) for model, parts in sections.items()}
    lora = _newest_labels([("", lb, values[i]) for i, lb in plan.lora])
    derived = {**plan.kv_capacity, **_lora_counts(lora)}
    used = dict(plan.used)
    used.update({key: "vllm:cache_config_info" if key.startswith("kv_") else "vllm:lora_requests_info"
                 for key in derived if key not in used})
    per_engine = _engine_gauges(plan.per_engine, values)
    for model, figures in models.items():
        gauges = cast(dict[str, float], figures.gauges)  # built here as a dict
        for key, value in derived.items():
            gauges.setdefault(key, value)  # SGLang states its capacity itself
        gauges.update(per_engine.get(model, {}))
    used.update({key: "vllm:cache_config_info" if key == "kv_resident_tokens" else used.get("requests_running", "")
                 for figures in per_engine.values() for key in figures})  # fmt: skip
    return VllmScrape(
        models=dict(sorted(models.items())),
        engines=plan.engines,
        process_start_time_s=max((values[i] for i in plan.process_start), default=None),
        metric_names_used=used,
        missing=tuple(key for key in plan.missing if key not in used),
        cache_config=dict(plan.cache_config),
        engine=plan.engine,
        lora=lora,
        series_dropped=dropped,
        series_limit=max_series,
        lines_refused=refused,
        duplicate_samples=plan.duplicates,
    )


def _group(rows: Rows) -> tuple[dict[str, Rows], int]:
    """Rows by name, and how many samples repeated a label set already read for their name.

    A page lists a family's samples together, so this loops over runs, not samples. A repeated
    sample (the same name and labels: a broken exporter, a proxy that joins pages) is dropped, the
    first kept, as Prometheus refuses the duplicate of a scrape: summing them would multiply a gauge.
    """
    by_name: dict[str, Rows] = {}
    for name, run in groupby(rows, key=_NAME):
        by_name.setdefault(name, []).extend(run)
    duplicates = 0
    for name, named in by_name.items():
        firsts = {frozenset(labels.items()): row for row in reversed(named) for labels in (row[1],)}
        if len(firsts) < len(named):  # reversed: each label set keeps its first row, in page order
            duplicates += len(named) - len(firsts)
            by_name[name] = named = [row for row in named if firsts.get(frozenset(row[1].items())) is row]
    for name, named in by_name.items():
        if any(_RANKS[0] in labels for _, labels, _ in named):
            by_name[name] = _lowest_rank(named)
    return by_name, duplicates


# SGLang's per-rank labels: one scheduler's figure repeated by each tensor/pipeline/expert rank.
_RANKS = ("tp_rank", "pp_rank", "moe_ep_rank")


def _lowest_rank(rows: Rows) -> Rows:
    """Of samples equal but for their rank labels, only those of the lowest rank (as numbers)."""
    def rank(labels: Mapping[str, str]) -> tuple[int, ...]:
        return tuple(int(labels[r]) if labels.get(r, "").isdigit() else 0 for r in _RANKS)

    def series(labels: Mapping[str, str]) -> SeriesKey:
        return frozenset((k, v) for k, v in labels.items() if k not in _RANKS)

    best: dict[SeriesKey, tuple[int, ...]] = {}
    for _, labels, _ in rows:
        key, r = series(labels), rank(labels)
        if key not in best or r < best[key]:
            best[key] = r
    return [row for row in rows if rank(row[1]) == best[series(row[1])]]


def _where(spec: MetricSpec, rows: Rows | None) -> Rows:
    """The rows of ``spec``'s part of a family (see MetricSpec.where)."""
    if not rows or not spec.where:
        return rows or []
    return [row for row in rows if all(row[1].get(k, v) == v for k, v in spec.where)]


def _chosen_alias(spec: MetricSpec, by_name: Mapping[str, Rows]) -> str | None:
    """The first exposed alias with at least one sample (an empty family does not count)."""
    for alias in spec.names:
        if any(_where(spec, by_name.get(sample)) for sample in spec.sample_names(alias)):
            return alias
    return None


def _usable(value: float, agg: str) -> bool:
    """A value that can enter a sum or a mean: finite and not negative (no vLLM count or level is).
    A NaN stays for ``max``, which lets it hide no other engine (see _max)."""
    return math.isfinite(value) and value >= 0 or agg == "max" and math.isnan(value)


def _left_out(labels: Iterable[Mapping[str, str]]) -> str:
    """The engines left out of a sum, as the writer keys its baseline (``"1"``, ``"0,3"``)."""
    return ",".join(sorted({lbl.get("engine") or lbl.get("dp_rank") or "?" for lbl in labels}))


def _per_model_rows(rows: Rows) -> dict[str, list[tuple[Mapping[str, str], float]]]:
    """Each model's samples of one metric (its engines, any other label) with their labels, in page order."""
    out: dict[str, list[tuple[Mapping[str, str], float]]] = {}
    for _, labels, value in rows:
        out.setdefault(labels.get("model_name", ""), []).append((labels, value))
    return out


def _combine(values: list[float], agg: str) -> float:
    """One figure from several samples, in page order: "sum", "mean", or "max" where a NaN engine hides none."""
    out = values[0]
    for value in values[1:]:
        out = _max(out, value) if agg == "max" else out + value
    return out / len(values) if agg == "mean" else out


def _max(a: float, b: float) -> float:
    """max() that lets a NaN engine not hide the others (NaN only when every engine says NaN)."""
    if math.isnan(a):
        return b
    return a if math.isnan(b) or a >= b else b


def _histogram_series(alias: str, by_name: Mapping[str, Rows]) -> dict[str, tuple[_Series, ...]]:
    """Per model, its series (engines) of one histogram, with the indices of their samples.

    A series without a ``+Inf`` bucket takes its ``_count`` there; one with neither is left out.
    """
    buckets: dict[SeriesKey, dict[float, int]] = {}
    models: dict[SeriesKey, str] = {}
    for _, labels, index in by_name.get(alias + "_bucket", []):
        le = labels.get("le")
        key = frozenset(labels.items()).difference((("le", le),))
        series = buckets.get(key)
        if series is None:
            series = buckets[key] = {}
            models[key] = labels.get("model_name", "")
        series[_bound(le, alias)] = int(index)
    counts = {_series_key(labels): int(i) for _, labels, i in by_name.get(alias + "_count", [])}
    sums = {_series_key(labels): int(i) for _, labels, i in by_name.get(alias + "_sum", [])}
    per_model: dict[str, list[_Series]] = {}
    for key in {*buckets, *counts, *sums}:
        bucket, count = buckets.get(key, {}), counts.get(key)
        if INF not in bucket and count is not None:
            bucket = {**bucket, INF: count}  # DOMAIN.md: a missing +Inf bucket is the _count
        if INF not in bucket:
            continue
        bounds = tuple(sorted(bucket))
        model = models.get(key) or dict(key).get("model_name", "")
        per_model.setdefault(model, []).append((bounds, tuple(map(bucket.__getitem__, bounds)), count, sums.get(key), dict(key)))
    return {model: tuple(series) for model, series in per_model.items()}


def _merged(series: tuple[_Series, ...], values: list[float], clean: bool) -> tuple[Histogram | None, str]:
    """A model's series (engines) summed on the bounds they share (merge_histograms), and the
    engines left out because a bucket, the count or the sum was NaN, infinite or negative
    (``clean``: no value of the page is)."""
    good: list[Histogram] = []
    bad: list[Mapping[str, str]] = []
    for bounds, cumulative, count, total, labels in series:
        histogram = Histogram(bounds, tuple([values[i] for i in cumulative]),
                              None if count is None else values[count], None if total is None else values[total])
        if clean or _usable_histogram(histogram):
            good.append(histogram)
        else:
            bad.append(labels)
    if not good:
        return None, ""
    return merge_histograms(good), _left_out(bad) if bad else ""


def _usable_histogram(h: Histogram) -> bool:
    return _all_usable([*h.cumulative, *(v for v in (h.count, h.sum) if v is not None)])


def _all_usable(values: list[float]) -> bool:
    """Every value finite and not negative (C-level: this runs for every figure of every scrape)."""
    return all(map(math.isfinite, values)) and (not values or min(values) >= 0)


def _series_key(labels: Mapping[str, str]) -> SeriesKey:
    """The series a sample belongs to: its labels (without ``le``), whatever their order on the page."""
    return frozenset(labels.items())


def _bound(le: str | None, alias: str) -> float:
    try:
        bound = float(le) if le is not None else math.nan
    except ValueError:
        bound = math.nan
    if math.isnan(bound):
        raise ScrapeError(f"{alias}_bucket has a bucket whose le={le!r} is not a bound")
    return bound


def merge_histograms(histograms: Iterable[Histogram]) -> Histogram | None:
    """Sum histograms on the bounds they all share (+Inf always is); None when given none.

    ``count`` and ``sum`` are summed, or None when any input lacks them.
    """
    items = list(histograms)
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    bounds = items[0].bounds
    if all(h.bounds == bounds for h in items):  # the usual case: engines share their buckets
        cumulative = tuple([sum(column) for column in zip(*(h.cumulative for h in items), strict=True)])
    else:
        bounds = tuple(sorted(set(bounds).intersection(*(h.bounds for h in items[1:]))))
        maps = [dict(zip(h.bounds, h.cumulative, strict=True)) for h in items]
        cumulative = tuple(sum(m[b] for m in maps) for b in bounds)
    return Histogram(bounds, cumulative, _sum_or_none(h.count for h in items), _sum_or_none(h.sum for h in items))


def _sum_or_none(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += value
    return total


def _engines(by_name: Mapping[str, Rows], used: Mapping[str, str]) -> tuple[str, ...]:
    """Engine labels seen on the catalogue metrics read (C-level map: buckets are many)."""
    engines: set[str | None] = set()
    for spec in CATALOGUE:
        if spec.key in used:
            for sample in spec.sample_names(used[spec.key]):
                engines.update(map(_ENGINE, map(_LABELS, by_name.get(sample, ()))))
                engines.update(map(_DP_RANK, map(_LABELS, by_name.get(sample, ()))))
    engines.discard(None)
    return tuple(sorted((e for e in engines if e is not None), key=lambda e: (len(e), e)))  # "2" before "10"


def _info_labels(rows: Rows) -> dict[str, str]:
    """Labels of the first info sample, without the per-engine/model labels."""
    if not rows:
        return {}
    return {k: v for k, v in rows[0][1].items() if k not in ("engine", "model_name")}


def _newest_labels(rows: Rows) -> dict[str, str]:
    """Labels of the info sample with the largest value (lora_requests_info: values are timestamps)."""
    if not rows:
        return {}
    _, labels, _ = max(rows, key=lambda row: row[2])
    return {k: v for k, v in labels.items() if k not in ("engine", "model_name")}


def _kv_capacity(rows: Rows) -> dict[str, float]:
    """KV capacity summed over engines' cache_config_info samples; {} when a label is missing."""
    tokens = total_bytes = 0.0
    for _, labels, _ in rows:
        size = _int(labels.get("kv_cache_size_tokens"))
        if size is None:
            blocks, block_size = _int(labels.get("num_gpu_blocks")), _int(labels.get("block_size"))
            if blocks is None or block_size is None:
                return {}
            size = blocks * block_size
        tokens += size
        memory = _int(labels.get("kv_cache_memory_bytes"))
        total_bytes = math.nan if memory is None else total_bytes + memory
    if not rows:
        return {}
    if math.isnan(total_bytes):
        return {"kv_capacity_tokens": tokens}
    # KV bytes one token holds on one GPU: the engine's own figure (vLLM ≥ 0.32), what the step model reads
    per_token = {"kv_token_bytes": total_bytes / tokens} if tokens else {}
    return {"kv_capacity_tokens": tokens, "kv_capacity_bytes": total_bytes, **per_token}


# Per model: its data-parallel engines (None: one) and the KV cache's (sample index, capacity in tokens)
# of each engine (None: not every input is there)
_EnginePlan = dict[str, tuple[float | None, tuple[tuple[int, float], ...] | None]]


def _per_engine(by_name: Mapping[str, Rows], used: Mapping[str, str], cache_rows: Rows) -> _EnginePlan:
    """Per model (a page's series alone: rows' values are sample indices): its data-parallel engines
    (distinct ``engine`` labels of num_requests_running, where there are several: absent means one)
    and where the KV tokens resident in their caches come from: each engine's kv_cache_usage_perc
    sample with that engine's capacity in tokens (cache_config_info: kv_cache_size_tokens, else
    num_gpu_blocks × block_size; one sample without an engine label stands for every engine)."""
    running = by_name.get(used.get("requests_running", ""), [])
    out: _EnginePlan = {}
    for model, rows in _per_model_rows(running).items():
        engines = {lbl.get("engine") or lbl.get("dp_rank") for lbl, _ in rows} - {None}
        if len(engines) > 1:  # one engine (or no engine label: V0, before 0.8.3) is the default
            out[model] = (float(len(engines)), None)
    capacity = {labels.get("engine"): _size(labels) for _, labels, _ in cache_rows}
    if used.get("kv_cache_usage", "").startswith("vllm:") and capacity and None not in capacity.values():
        for model, rows in _per_model_rows(by_name.get(used["kv_cache_usage"], [])).items():
            sizes = [capacity.get(lbl.get("engine"), next(iter(capacity.values())) if len(capacity) == 1 else None)
                     for lbl, _ in rows]  # fmt: skip
            if rows and None not in sizes:
                count = out.get(model, (None, None))[0]
                out[model] = (count, tuple((int(i), cast(float, n)) for (_, i), n in zip(rows, sizes, strict=True)))
    return out


def _engine_gauges(plan: _EnginePlan, values: list[float]) -> dict[str, dict[str, float]]:
    """:func:`_per_engine`'s plan filled with a page's values: ``engine_count`` and ``kv_resident_tokens``
    (Σ usage × capacity) per model; a part is left out when its input is (a NaN usage)."""
    out: dict[str, dict[str, float]] = {}
    for model, (count, kv) in plan.items():
        figures = out.setdefault(model, {})
        if count is not None:
            figures["engine_count"] = count
        if kv is not None and all(math.isfinite(values[i]) for i, _ in kv):
            figures["kv_resident_tokens"] = sum(values[i] * n for i, n in kv)
    return {model: figures for model, figures in out.items() if figures}


def _size(labels: Mapping[str, str]) -> float | None:
    """One engine's KV capacity in tokens from its cache_config_info labels; None when unstated."""
    size = _int(labels.get("kv_cache_size_tokens"))
    if size is None:
        blocks, block_size = _int(labels.get("num_gpu_blocks")), _int(labels.get("block_size"))
        size = None if blocks is None or block_size is None else blocks * block_size
    return None if size is None else float(size)


def _lora_counts(lora: Mapping[str, str]) -> dict[str, float]:
    if not lora:
        return {}
    return {f"lora_{part}_adapters": float(len([a for a in lora.get(f"{part}_lora_adapters", "").split(",") if a]))
            for part in ("running", "waiting")}


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def total_figures(scrape: VllmScrape) -> ModelFigures:
    """All models combined with the catalogue's rules (what ``inspect`` shows for a whole server)."""
    specs = {spec.key: spec for spec in CATALOGUE}
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    created: dict[str, float] = {}
    for figures in scrape.models.values():
        for key, value in figures.counters.items():
            counters[key] = counters.get(key, 0.0) + value
        for key, value in figures.gauges.items():
            old = gauges.get(key)
            gauges[key] = value if old is None else (old + value if specs[key].agg == "sum" else _max(old, value))
        for key, value in figures.created.items():
            created[key] = max(created.get(key, value), value)
    histograms = {}
    for key in {k for f in scrape.models.values() for k in f.histograms}:
        merged = merge_histograms(f.histograms[key] for f in scrape.models.values() if key in f.histograms)
        if merged is not None:
            histograms[key] = merged
    return ModelFigures(counters=counters, gauges=gauges, histograms=histograms, created=created)
