"""How figures are spelled for people (UI tiles, verdict clauses, alert e-mails). Pure functions.

``None`` is always spelled "—" (no data), never 0.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from core.settings import NO_CEILING, REFERENCE_CEILING

if TYPE_CHECKING:
    from db.results import CeilingInfo, WindowFigures

MISSING = "—"  # a figure that is None (the state "no data" is app.alerts.model.NO_DATA)


def number(value: float | None) -> str:
    """Few significant digits, no trailing zeros: 4.8, 3, 126, 0.93, 1,234."""
    if value is None:
        return MISSING
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 0.1 or magnitude == 0:
        text = f"{value:.2f}"
    else:
        text = f"{value:.2g}"
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


def with_unit(value: float | None, unit: str) -> str:
    """``4.8 s``, ``93 %``; a bare number when ``unit`` is empty."""
    if value is None:
        return MISSING
    return f"{number(value)} {unit}" if unit else number(value)


def compared(value: float, threshold: float, unit: str) -> tuple[str, str]:
    """``value`` and ``threshold`` spelled as :func:`with_unit` does, with more decimals where a value
    that breaks its threshold would read equal to it (``16.02 requests > 16 requests``, never
    ``16 requests > 16 requests``)."""
    left, right = number(value), number(threshold)
    digits = 1
    while left == right and value != threshold and digits <= 9:
        left, right = (f"{v:,.{digits}f}".rstrip("0").rstrip(".") for v in (value, threshold))
        digits += 1
    return (f"{left} {unit}", f"{right} {unit}") if unit else (left, right)


def bucket(bounds: tuple[float, float] | None, unit: str = "") -> str:
    """The engine's histogram bucket ``(lower, upper]`` that holds a quantile: ``(2.5, 5] s``, or
    ``(160, +Inf] s`` past the largest finite bound; "" when unknown. The value shown beside it is an
    interpolation inside it: a client timing the same requests measures its own figure (docs/metrics.md)."""
    if bounds is None:
        return ""
    lower, upper = (f"{b:g}" if b != float("inf") else "+Inf" for b in bounds)
    return f"({lower}, {upper}]" + (f" {unit}" if unit else "")


def percent(fraction: float | None) -> str:
    """A 0–1 fraction as a whole percentage: 0.934 → ``93 %``."""
    return MISSING if fraction is None else f"{fraction * 100:.0f} %"


GIB = 2**30


def gibibytes(n_bytes: float | None) -> str:
    """Memory in GiB (2³⁰ bytes), as nvidia-smi counts it: a "32 GB" V100 holds ``32 GiB``, not 34.4 GB.

    (Bandwidth stays in GB/s, 10⁹ bytes a second, as NVIDIA's datasheets give it.)
    """
    return MISSING if n_bytes is None else f"{number(n_bytes / GIB)} GiB"


def ago(ts: float | None, now: float | None = None) -> str:
    """``12 s ago``, ``3 min 20 s ago``, ``1 h 29 min ago``; "never" for None (see :func:`elapsed`)."""
    if ts is None:
        return "never"
    return f"{elapsed(max(0.0, (time.time() if now is None else now) - ts))} ago"


_AGE_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def elapsed(seconds: float) -> str:
    """An age in its two largest units, each truncated, never rounded up: ``1 h 29 min``, ``45 s``.

    One rule for every age: two events 80 s apart read 80 s apart (``1 h 29 min`` and ``1 h 30 min``,
    not "1 h" and "2 h" as rounding to whole hours gave).
    """
    left = int(seconds)
    parts: list[str] = []
    for size, unit in _AGE_UNITS:
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size} {unit}")
            left %= size
        elif parts:
            break  # the second unit is the next one down, even when it is zero
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if not (len(parts) == 2 and p.startswith("0 ")))


def clock(ts: float | None, form: str = "%Y-%m-%d %H:%M:%S") -> str:
    """Local wall-clock time with date: ``2026-11-30 09:24:17`` (``form``: a strftime format).

    A stored time no calendar holds (year 10,000 and past, NaN, before 1900) is shown as its number,
    never an error: what pages and commands show from the database is read as untrusted (a bad
    import once stopped ``bench list`` and the Operating point page for good)."""
    if ts is None:
        return MISSING
    try:
        return time.strftime(form, time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return f"an impossible time ({ts!r} s)"


def minute(ts: float | None) -> str:
    """:func:`clock` to the minute: ``2026-11-30 09:24``."""
    return clock(ts, "%Y-%m-%d %H:%M")


def tokens(n: float | None) -> str:
    """A token count in few digits: ``1.2 M``, ``483 k``, ``950``."""
    if n is None:
        return MISSING
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{number(n / size)} {unit}"
    return number(n)



def counted(n: int, noun: str) -> str:
    """``1 target``, ``3 targets``: a count with its noun in the number it takes (plural with an s)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def series_limit_warning(dropped: int, limit: int | None) -> str | None:
    """What a target's last page left out over its ``max_series`` (Targets page, ``status``); None: nothing."""
    if not dropped:
        return None
    return (f"{dropped:,} series over max_series = {limit:,} were dropped: only the page's first {limit:,} "
            "model × engine label sets are stored. Raise targets[].max_series if they are all wanted.")  # fmt: skip


def mbu_text(mbu: float | None, source: str | None, missing: str = "unknown (no bandwidth source)") -> str:
    """``MBU 23 % (measured, NVML GPM)``: the figure always with where it came from."""
    if mbu is None or not source:
        return f"MBU {missing}"
    return f"MBU {percent(mbu)} ({mbu_source_text(source)})"


def dram_text(dram: float | None, source: str | None, missing: str = "unknown (no NVML GPM or DCGM reading)") -> str:
    """``DRAM 77.5 % of peak (NVML GPM)``: the GPUs' own bandwidth reading, never called MBU."""
    if dram is None or not source:
        return f"DRAM {missing}"
    return f"DRAM {percent(dram)} of peak ({source})"


def overhead_text(gbps: float | None, ratio: float | None) -> str:
    """``3,060 GB/s per GPU beyond the model's bytes (5.6×)``; "" when either figure is missing. Below
    the model's bytes (a reading that lags the steps, or an MBU model that counts too much) there is
    no overhead to show: that is said, never a negative traffic."""
    if gbps is None or ratio is None:
        return ""
    if gbps < 0:
        return (f"none: the GPUs moved {ratio:.2f}× the model's bytes, less than a step must read (the DRAM "
                "reading lags the steps, or the MBU model's inputs count too many bytes)")
    return f"{number(gbps)} GB/s per GPU beyond the model's bytes ({ratio:.1f}×)"


def mbu_source_text(source: str | None) -> str:
    """``measured (NVML GPM)`` (core.mbu's name) as a sentence reads it: ``measured, NVML GPM``."""
    return (source or "").replace(" (", ", ").removesuffix(")")


REFERENCE_SHAPE = "Llama 3 70B AWQ"  # the table's row of the reference's model (core/model_shapes.json)


def is_reference(ceiling: CeilingInfo | None) -> bool:
    """Whether a ceiling is the field report's own (its 70B AWQ over TP 8 at 900 GB/s: the demo's, with
    the report's 40 GB or the shape's 37.67 GB): only there do the words "the report's ceiling" mean
    something to the reader; elsewhere plain words say it."""
    r = REFERENCE_CEILING
    if ceiling is None or (ceiling.tensor_parallel, ceiling.bandwidth_gbps) != (r.tensor_parallel, r.bandwidth_gbps):
        return False
    return ceiling.weight_gb == r.weight_gb or REFERENCE_SHAPE in (ceiling.shape_source or "")


def bound_name(ceiling: CeilingInfo | None) -> str:
    """``the report's ceiling`` on the reference, ``the bandwidth bound`` elsewhere (both: at most this
    many decode steps/s, bandwidth per GPU ÷ weights per GPU)."""
    return "the report's ceiling" if is_reference(ceiling) else "the bandwidth bound"


def share_name(ceiling: CeilingInfo | None) -> str:
    """``the report's % of ceiling`` on the reference, ``% of the step bound`` elsewhere (tok/s ÷ steps/s bound)."""
    return "the report's % of ceiling" if is_reference(ceiling) else "% of the step bound"


def ceiling_text(steps_per_s: float | None, ceiling: CeilingInfo | None, missing: str = NO_CEILING) -> str:
    """``at most 180 steps/s (the report's ceiling: 40 GB ÷ TP 8 at 900 GB/s, config)``, or the line
    that says which inputs to set."""
    if steps_per_s is None or ceiling is None:
        return missing
    return (f"at most {number(steps_per_s)} steps/s ({bound_name(ceiling)}: {ceiling.weight_gb:g} GB ÷ TP "
            f"{ceiling.tensor_parallel} at {number(ceiling.bandwidth_gbps)} GB/s, {ceiling.bandwidth_source})")
# The vLLM option that adds a bucket at the SLO (read in vLLM 0.32.0's engine arguments; absent in 0.31).
BUCKET_FLAG = "--custom-histogram-buckets"
BUCKET_FLAG_SINCE = "vLLM ≥ 0.32"


def share(fraction: float | None) -> str:
    """A 0–1 share to one decimal: 0.9666 → ``96.7 %`` (an SLO's 99 % and 99.4 % differ)."""
    return MISSING if fraction is None else f"{fraction * 100:.1f} %"


def slo_attainment_text(slo_s: float | None, attainment: float | None,
                        bounds: tuple[float, float, float, float] | None) -> str | None:  # fmt: skip
    """``TTFT ≤ 3 s: 66.0 % of requests, interpolated between ≤ 2.5 s: 60.0 % and ≤ 5 s: 90.0 %``
    (``…, exact (a bucket bound)`` where the SLO is one; WindowFigures' ``ttft_slo_*`` fields); None
    without an SLO or a request."""
    if slo_s is None or attainment is None:
        return None
    head = f"TTFT ≤ {number(slo_s)} s: {share(attainment)} of requests"
    if bounds is None:
        return f"{head}, exact (a bucket bound)"
    lower_le, lower, upper_le, upper = bounds
    if upper_le == float("inf"):
        return f"{head} at least: the SLO is above the last bucket bound ({number(lower_le)} s)"
    return f"{head}, interpolated between ≤ {number(lower_le)} s: {share(lower)} and ≤ {number(upper_le)} s: {share(upper)}"


def slo_bucket_warning(f: WindowFigures) -> str | None:
    """Why the TTFT P95 cannot be judged against the SLO when both lie in one bucket, and the fix."""
    return slo_in_bucket_text(f.ttft_slo_s, f.ttft_slo_in_p95_bucket())


def slo_in_bucket_text(slo_s: float | None, bucket: tuple[float, float] | None) -> str | None:
    """:func:`slo_bucket_warning` from the SLO and the P95's bucket that holds it (None: it does not)."""
    if bucket is None or slo_s is None:
        return None
    slo = number(slo_s)
    return (f"TTFT P95 lies in vLLM's bucket ({number(bucket[0])}, {number(bucket[1])}] s, which holds the {slo} s SLO: "
            f"the buckets cannot tell whether it meets the SLO. Add a bucket at {slo} s with {BUCKET_FLAG} "
            f"({BUCKET_FLAG_SINCE}; the time_to_first_token list replaces the default one, so list every bound).")
