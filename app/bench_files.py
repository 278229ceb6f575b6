"""Benchmark files from other tools, read into :class:`db.results.BenchRun` (no I/O beyond the text given).

Two formats are read:

- ``vllm bench serve --save-result``: one JSON object per run (``vllm/benchmarks/serve.py``,
  ``result_json``): ``date`` (``%Y%m%d-%H%M%S``, the benchmarking machine's local time),
  ``backend``, ``model_id``, ``max_concurrency``, ``request_rate``, ``completed``, ``failed``,
  ``duration``, ``output_throughput`` (tok/s), and ``p95_ttft_ms`` / ``p95_itl_ms`` when
  ``--metric-percentiles`` asked for 95 (its default is 99 only).
- GuideLLM's report (``GenerativeBenchmarksReport``, ``benchmarks.json``): ``args`` and a list of
  ``benchmarks``, each with ``config.strategy`` and ``metrics`` whose values are distributions split by
  status (``metrics.output_tokens_per_second.successful.mean``, ``...percentiles.p95``), times in unix
  seconds (``start_time``).

Whatever else a file is, it is refused with one line naming what is wrong (:class:`BenchFileError`):
not JSON, a NaN or infinity, another tool's file, a field missing or of the wrong kind.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

from core.errors import UsageError
from db.results import BenchPoint, BenchRun

VLLM = "vllm bench serve"
GUIDELLM = "guidellm"
VLLM_DATE = "%Y%m%d-%H%M%S"
# The settings of a vLLM run kept with it (shown in the tooltip and by `bench list`).
VLLM_SETTINGS = ("backend", "label", "num_prompts", "request_rate", "burstiness", "max_concurrency")


class BenchFileError(UsageError):
    """A benchmark file that cannot be imported; the message names the file and what is wrong."""


def read_bench(text: str, name: str) -> BenchRun:
    """The run in ``text`` (the contents of the file ``name``); raises :class:`BenchFileError`."""
    doc = _json(text, name)
    if not isinstance(doc, dict):
        raise BenchFileError(f"{name} holds a JSON {type(doc).__name__}, not the object a benchmark tool writes",
                             _FORMATS)  # fmt: skip
    if "benchmarks" in doc and "args" in doc:
        return _guidellm(doc, name)
    if "output_throughput" in doc or ("model_id" in doc and "backend" in doc):
        return _vllm(doc, name)
    raise BenchFileError(f"{name} is not a benchmark file Sweetspot reads: {_foreign(doc)}", _FORMATS)


_FORMATS = "Import the JSON of `vllm bench serve --save-result` or GuideLLM's report (benchmarks.json)"


def _foreign(doc: Mapping[str, Any]) -> str:
    # Name the tool where its keys say it: what users most often pick up by mistake.
    if "levels" in doc and "recommendation" in doc:
        return "it is a Sweetspot load sweep (`sweep --json`), which `sweep` stores itself"
    if "experiments" in doc or "profile_export" in json.dumps(list(doc)[:20]):
        return "it looks like genai-perf's export"
    keys = ", ".join(list(doc)[:6]) or "none"
    return f"it has neither `output_throughput` (vllm bench serve) nor `benchmarks` (GuideLLM); its keys: {keys}"


def _json(text: str, name: str) -> Any:
    def refuse(constant: str) -> None:
        raise BenchFileError(f"{name} holds {constant}, which is not a number", "Fix or re-run the benchmark")

    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise BenchFileError(f"{name} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                             _FORMATS) from None  # fmt: skip
    except RecursionError:
        raise BenchFileError(f"{name} nests lists or objects deeper than the JSON reader follows", _FORMATS) from None
    except ValueError as exc:  # an integer of 4,300+ digits: Python will not convert it
        raise BenchFileError(f"{name} holds a number no benchmark has ({str(exc).split(':')[0]})", _FORMATS) from None


# --- vllm bench serve -------------------------------------------------------------------------------


def _vllm(doc: Mapping[str, Any], name: str) -> BenchRun:
    where = f"{name} (vllm bench serve)"
    date = _field(doc, "date", str, where)
    try:
        run_at = time.mktime(time.strptime(date, VLLM_DATE))
    except ValueError:
        raise BenchFileError(f"{where}: date {date!r} is not {VLLM_DATE}", "Fix or re-run the benchmark") from None
    completed = int(_number(doc, "completed", where))
    tokens_per_s = _number(doc, "output_throughput", where)
    concurrency, source = _vllm_concurrency(doc, where)
    rate = doc.get("request_rate")
    point = BenchPoint(
        concurrency=concurrency,
        concurrency_source=source,
        tokens_per_s=tokens_per_s,
        requests=completed,
        failed=int(_number(doc, "failed", where, required=False) or 0),
        duration_s=_number(doc, "duration", where, required=False),
        request_rate=None if rate in (None, "inf") else _number(doc, "request_rate", where),
        ttft_p95_s=_ms(doc, "p95_ttft_ms", where),
        itl_p95_s=_ms(doc, "p95_itl_ms", where),
        label=(f"max_concurrency {doc['max_concurrency']}" if source == "max_concurrency"
               else f"request_rate {rate}"),  # fmt: skip
    )
    settings = {k: doc[k] for k in VLLM_SETTINGS if doc.get(k) is not None}
    return BenchRun(VLLM, run_at, _field(doc, "model_id", str, where), settings, (point,), name)


def _vllm_concurrency(doc: Mapping[str, Any], where: str) -> tuple[float, str]:
    """``max_concurrency`` where the run was capped; else Little's law over the run: request/s × mean
    end-to-end latency (requests in flight on average)."""
    if doc.get("max_concurrency") is not None:
        return _number(doc, "max_concurrency", where), "max_concurrency"
    if "mean_e2el_ms" not in doc:
        raise BenchFileError(f"{where}: neither max_concurrency nor mean_e2el_ms, so no concurrency to place it at",
                             "Re-run with --max-concurrency, or with --percentile-metrics including e2el")  # fmt: skip
    return _number(doc, "request_throughput", where) * _number(doc, "mean_e2el_ms", where) / 1000, "little"


# --- GuideLLM --------------------------------------------------------------------------------------


def _guidellm(doc: Mapping[str, Any], name: str) -> BenchRun:
    where = f"{name} (GuideLLM report)"
    benchmarks = doc["benchmarks"]
    if not isinstance(benchmarks, list) or not benchmarks:
        raise BenchFileError(f"{where}: `benchmarks` is empty", "The run stored no benchmark: re-run GuideLLM")
    args = doc["args"] if isinstance(doc["args"], dict) else {}
    points = tuple(_guidellm_point(b, f"{where} benchmark {i + 1}") for i, b in enumerate(benchmarks))
    starts = [_number(b, "start_time", f"{where} benchmark {i + 1}") for i, b in enumerate(benchmarks)]
    model = args.get("model") or _nested(benchmarks[0], ("config", "requests", "model"))
    if not isinstance(model, str) or not model:
        raise BenchFileError(f"{where}: no model (args.model)", "Re-run GuideLLM with --model")
    settings = {k: args[k] for k in ("target", "profile", "rate", "data", "max_seconds", "max_requests")
                if args.get(k) is not None}  # fmt: skip
    return BenchRun(GUIDELLM, min(starts), model, settings, points, name)


def _guidellm_point(bench: Any, where: str) -> BenchPoint:
    if not isinstance(bench, dict):
        raise BenchFileError(f"{where} is not an object", "Fix or re-run the benchmark")
    strategy = _nested(bench, ("config", "strategy")) or {}
    kind = strategy.get("type_", "?") if isinstance(strategy, dict) else "?"
    streams, rate = (strategy.get("streams"), strategy.get("rate")) if isinstance(strategy, dict) else (None, None)
    totals = _nested(bench, ("metrics", "request_totals")) or {}
    label = f"{kind} {streams} streams" if streams is not None else (f"{kind} {rate:g} req/s" if isinstance(rate, (int, float)) else str(kind))
    ttft, itl = _summary(bench, "time_to_first_token_ms", "p95", where, False), _summary(bench, "inter_token_latency_ms", "p95", where, False)
    return BenchPoint(
        concurrency=_summary(bench, "request_concurrency", "mean", where),
        concurrency_source="measured mean",
        tokens_per_s=_summary(bench, "output_tokens_per_second", "mean", where),
        requests=int(totals.get("successful", 0) or 0) if isinstance(totals, dict) else 0,
        failed=int(totals.get("errored", 0) or 0) if isinstance(totals, dict) else 0,
        duration_s=bench.get("duration") if isinstance(bench.get("duration"), (int, float)) else None,
        request_rate=float(rate) if isinstance(rate, (int, float)) else None,
        ttft_p95_s=None if ttft is None else ttft / 1000,
        itl_p95_s=None if itl is None else itl / 1000,
        label=label,
    )  # fmt: skip


def _summary(bench: Mapping[str, Any], metric: str, stat: str, where: str, required: bool = True) -> Any:
    path = ("metrics", metric, "successful", *(("percentiles", stat) if stat.startswith("p") else (stat,)))
    value = _nested(bench, path)
    if value is None:
        if not required:
            return None
        raise BenchFileError(f"{where}: no {'.'.join(path)}", "Is this GuideLLM 0.4 or later's report (benchmarks.json)?")
    return _finite(value, ".".join(path), where)


def _nested(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


# --- fields ----------------------------------------------------------------------------------------


def _field(doc: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in doc or doc[key] is None:
        raise BenchFileError(f"{where}: no `{key}`", "The file is cut short or from another tool")
    if not isinstance(doc[key], kind):
        raise BenchFileError(f"{where}: `{key}` is {doc[key]!r}, not a {kind.__name__}", "Fix or re-run the benchmark")
    return doc[key]


def _number(doc: Mapping[str, Any], key: str, where: str, required: bool = True) -> Any:
    if doc.get(key) is None and not required:
        return None
    if key not in doc or doc[key] is None:
        raise BenchFileError(f"{where}: no `{key}`", "The file is cut short or from another tool")
    return _finite(doc[key], key, where)


def _finite(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BenchFileError(f"{where}: `{key}` is {value!r}, not a number", "Fix or re-run the benchmark")
    if not math.isfinite(value) or value < 0:
        raise BenchFileError(f"{where}: `{key}` is {value}, not a finite number ≥ 0", "Fix or re-run the benchmark")
    return float(value)


def _ms(doc: Mapping[str, Any], key: str, where: str) -> float | None:
    value = _number(doc, key, where, required=False)
    return None if value is None else value / 1000
