"""GPU figures of remote hosts from NVIDIA dcgm-exporter's Prometheus endpoint (default port 9400).

Fields read (one table, :data:`FIELDS`): framebuffer used / free / reserved (MiB → bytes; total =
used + free + reserved, reserved counting 0 when the exporter does not send it), memory copy
utilisation (% of TIME the memory was busy → ``memory_busy_pct``, never bandwidth), profiling DRAM
active (ratio 0–1 → ``dram_bw_util_pct`` 0–100, source "dcgm"), power (W), GPU temperature (°C).
Labels: ``gpu`` (index), ``UUID``, ``modelName``, ``Hostname``. A field the exporter does not send
is None. Parsed with the selective parser (collectors.expfmt, differentially tested against
prometheus_client's), which keeps only these fields: 40× faster, and the demo backfill parses
tens of thousands of these payloads.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from collectors.expfmt import SelectiveParser, require_exposition
from collectors.fetch import Fetcher, fetch_text
from collectors.records import GpuReading
from core.errors import ScrapeError
from core.redact import masked
from core.settings import HttpSettings

MIB = 1024 * 1024
HINT = "Check targets[].gpu.url: it must be a dcgm-exporter /metrics URL (default port 9400)"

# sample name → (GpuReading field, conversion to the record's unit)
FIELDS: dict[str, tuple[str, Callable[[float], float]]] = {
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", lambda mib: float(mib * MIB)),
    "DCGM_FI_DEV_FB_FREE": ("_free_bytes", lambda mib: float(mib * MIB)),
    "DCGM_FI_DEV_FB_RESERVED": ("memory_reserved_bytes", lambda mib: float(mib * MIB)),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("memory_busy_pct", float),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_bw_util_pct", lambda ratio: float(ratio) * 100.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", float),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", float),
}

_PARSER = SelectiveParser(FIELDS)


def parse_dcgm(text: str, peak_bw_gbps: float | None = None) -> tuple[GpuReading, ...]:
    """Readings of every GPU in a dcgm-exporter payload, ordered by host then index.

    ``peak_bw_gbps``: configured peak bandwidth (dcgm-exporter does not export bus width or max
    memory clock), stored with source "config"; None leaves the peak unknown. Text that is not
    Prometheus exposition, or has no DCGM GPU sample at all, raises :class:`ScrapeError`. A NaN
    sample is skipped (absent, not zero; a repeated sample may then win).
    """
    try:
        names, labels, values = _PARSER.parse_columns(text)
    except ScrapeError as exc:
        raise ScrapeError(f"not Prometheus text ({str(exc)[:120]})", HINT) from None
    gpus: dict[tuple[str, str], tuple[dict[str, object], dict[str, object]]] = {}
    for sample_name, sample_labels, value in zip(names, labels, values, strict=True):
        if math.isnan(value):
            continue
        get = sample_labels.get
        host, index, uuid = get("Hostname", ""), get("gpu", ""), get("UUID", "")
        if not (uuid or index):
            continue
        # Without a UUID label (unusual exporter configs) host + index still names one GPU.
        key = (host, uuid or f"{host or 'host'}/gpu{index}")
        if key not in gpus:
            gpus[key] = {"uuid": key[1], "index": _int(index), "name": get("modelName") or None, "host": host or None}, {}
        field, convert = FIELDS[sample_name]
        gpus[key][1].setdefault(field, convert(value))  # first sample wins (MIG exporters repeat fields)
    if not gpus:
        require_exposition(text, HINT)
        raise ScrapeError("no DCGM_FI_* GPU sample in the payload; is this a dcgm-exporter?", HINT)
    return tuple(_reading({**fixed, **fields}, peak_bw_gbps) for _, (fixed, fields) in sorted(gpus.items(), key=_order))


def scrape_dcgm(
    url: str, timeout_s: float, fetcher: Fetcher | None = None, peak_bw_gbps: float | None = None,
    http: HttpSettings | None = None,
) -> tuple[GpuReading, ...]:
    """GET ``url`` and parse it with :func:`parse_dcgm`; any failure raises :class:`ScrapeError`."""
    return dcgm_from_page(masked(url), fetch_text(url, timeout_s, fetcher, HINT, http), peak_bw_gbps)


def dcgm_from_page(url: str, text: str, peak_bw_gbps: float | None = None) -> tuple[GpuReading, ...]:
    """Parse the page fetched from ``url`` with :func:`parse_dcgm`; failures name the URL."""
    try:
        return parse_dcgm(text, peak_bw_gbps)
    except ScrapeError as exc:
        raise ScrapeError(f"{url}: {exc}", exc.hint) from None


def _reading(fields: dict[str, object], peak_bw_gbps: float | None) -> GpuReading:
    free = fields.pop("_free_bytes", None)
    used, reserved = fields.get("memory_used_bytes"), fields.get("memory_reserved_bytes")
    if isinstance(used, float) and isinstance(free, float):
        fields["memory_total_bytes"] = used + free + (reserved if isinstance(reserved, float) else 0.0)
    if fields.get("dram_bw_util_pct") is not None:
        fields["dram_bw_source"] = "dcgm"
    if peak_bw_gbps is not None:
        fields["peak_bw_gbps"], fields["peak_bw_source"] = peak_bw_gbps, "config"
    return GpuReading(**fields)  # type: ignore[arg-type]


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _order(item: tuple[tuple[str, str], tuple[dict[str, object], object]]) -> tuple[str, int, str]:
    (host, uuid), (fixed, _) = item
    index = fixed["index"]
    return host, index if isinstance(index, int) else -1, uuid
