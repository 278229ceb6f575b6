"""GPU figures of this host through NVML (PyPI ``nvidia-ml-py``, module ``pynvml``).

The only module that imports ``pynvml`` (ruff ``TID251`` enforces it). :class:`NvmlCollector` takes
its NVML module as an argument, the real ``pynvml`` being the production default, so tests hand it
the recorded double in ``tests/support/nvml_double.py``.

Every NVML call goes through one choke point, :meth:`NvmlCollector._call`, which returns ``None``
on failure: one unsupported reading costs that reading (stored as NULL, drawn as a gap), never the
round. An unsupported field is logged once per GPU and field and is not asked again (NotSupported
and FunctionNotFound do not heal while the process lives). A lost GPU costs that GPU's readings.

Units (see ``collectors/records.py``): bytes, % 0–100, GB/s (10⁹ bytes per second), W, °C.
Bandwidth: GPM ``DRAM_BW_UTIL`` is % of peak bandwidth (Hopper and newer); NVML
``utilization.memory`` is % of TIME the memory was busy and is stored as ``memory_busy_pct`` only,
never as bandwidth (on an H200 it reads 100 % while GPM reads 88.5 %).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.errors import ScrapeError

from collectors.records import GpuReading

try:
    import pynvml as _pynvml
except ImportError:  # the product still runs without it: the collector reports "no GPU data"
    _pynvml = None

log = logging.getLogger(__name__)

NO_NVML_HINT = "Set targets[].gpu.source = none or dcgm"
INIT_RETRY_S = 60.0
# NVML's GPM needs two samples more than 100 ms apart for a meaningful rate.
GPM_MIN_INTERVAL_S = 0.1
# These errors do not heal while the process lives: skip the call from then on.
_PERMANENT = frozenset({"NVMLError_NotSupported", "NVMLError_FunctionNotFound"})
_LOST = "NVMLError_GpuIsLost"

# One nvmlInit() per process and NVML module (pynvml counts inits; we never need a second one).
_init_lock = threading.Lock()
_initialised: weakref.WeakSet[Any] = weakref.WeakSet()


class _NeverRaised(Exception):
    """Stands in for an exception class a (double or old) NVML module does not define."""


def _ensure_init(nvml: Any) -> None:
    with _init_lock:
        if nvml in _initialised:
            return
        nvml.nvmlInit()
        _initialised.add(nvml)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{text}: {type(exc).__name__}" if text else type(exc).__name__


@dataclass
class _Gpu:
    """What the collector keeps about one GPU between rounds."""

    index: int
    uuid: str
    handle: Any
    name: str | None = None
    peak_bw_gbps: float | None = None
    gpm: bool | None = None  # None: not asked yet
    gpm_samples: list[Any] = field(default_factory=list)
    gpm_prev: Any = None
    gpm_prev_t: float = 0.0


class NvmlCollector:
    """Reads every GPU of this host once per :meth:`collect` call.

    ``nvml``: the NVML module (default: the real ``pynvml``; ``None`` when it is not installed).
    ``peak_bw_gbps``: configured peak bandwidth per GPU (``CeilingSettings.bandwidth_gbps``); when
    None the NVML formula bus width × max memory clock × 2 ÷ 8 is used. ``clock``: monotonic seconds.
    ``retry_init_s``: after NVML failed to start, how long :meth:`collect` re-raises the same
    :class:`ScrapeError` without trying again.
    """

    def __init__(
        self,
        nvml: Any = _pynvml,
        *,
        peak_bw_gbps: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry_init_s: float = INIT_RETRY_S,
        host: str | None = None,
    ) -> None:
        self._nvml = nvml
        self._peak_bw_gbps = peak_bw_gbps
        self._clock = clock
        self._retry_init_s = retry_init_s
        self._host = host if host is not None else socket.gethostname()
        self._lock = threading.Lock()
        self._gpus: dict[str, _Gpu] | None = None
        self._failure: ScrapeError | None = None
        self._failed_at = 0.0
        self._skip: set[tuple[str, str]] = set()
        self._logged: set[tuple[str, str, str]] = set()
        self._lost: set[str] = set()
        self._errors: tuple[type[BaseException], ...] = (
            getattr(nvml, "NVMLError", _NeverRaised),
            getattr(nvml, "NVMLLibraryMismatchError", _NeverRaised),
        )

    # -- public -----------------------------------------------------------------------------------

    def collect(self) -> tuple[GpuReading, ...]:
        """One reading per GPU, keyed by UUID; fields NVML cannot give are None.

        Raises :class:`ScrapeError` ("no GPU data: NVML not available (...)") when NVML cannot
        start; later calls re-raise it cheaply and retry at most every ``retry_init_s`` seconds.
        """
        with self._lock:
            gpus = self._gpus_or_raise()
            return tuple(self._read(gpu) for gpu in gpus.values())

    def close(self) -> None:
        """Free the GPM samples. NVML itself stays initialised: one init per process."""
        with self._lock:
            for gpu in (self._gpus or {}).values():
                for sample in gpu.gpm_samples:
                    self._call(gpu.uuid, "gpm_sample_free", "nvmlGpmSampleFree", sample)
                gpu.gpm_samples, gpu.gpm_prev = [], None

    # -- the choke point --------------------------------------------------------------------------

    def _call(self, owner: str, what: str, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``nvml.<fn_name>(*args)``; None when it fails, is unsupported or the GPU is lost.

        ``owner`` is the GPU's UUID (or ``"index N"`` before the UUID is known), ``what`` the
        reading. Each failure is logged once per owner, reading and error, never once per round.
        """
        if (owner, what) in self._skip or owner in self._lost:
            return None
        fn = getattr(self._nvml, fn_name, None)
        if fn is None:
            self._skip.add((owner, what))
            self._log_once(owner, what, "missing", f"{fn_name} is not in these NVML bindings (old nvidia-ml-py?)")
            return None
        try:
            return fn(*args, **kwargs)
        except self._errors as exc:
            kind = type(exc).__name__
            if kind == _LOST:
                self._lost.add(owner)
                self._log_once(
                    owner, "*", kind, "GPU is lost: its figures are missing until it is reset", logging.WARNING
                )
            elif kind in _PERMANENT:
                self._skip.add((owner, what))
                self._log_once(owner, what, kind, f"{what} unsupported ({_reason(exc)}); stored as missing")
            else:
                self._log_once(owner, what, kind, f"{what} failed ({_reason(exc)})", logging.WARNING)
            return None

    def _log_once(self, owner: str, what: str, kind: str, message: str, level: int = logging.INFO) -> None:
        key = (owner, what, kind)
        if key not in self._logged:
            self._logged.add(key)
            log.log(level, "NVML GPU %s: %s", owner, message)

    # -- discovery --------------------------------------------------------------------------------

    def _gpus_or_raise(self) -> dict[str, _Gpu]:
        if self._gpus is not None:
            return self._gpus
        now = self._clock()
        if self._failure is not None and now - self._failed_at < self._retry_init_s:
            raise self._failure
        try:
            self._gpus = self._discover()
        except ScrapeError as exc:
            if self._failure is None or str(exc) != str(self._failure):
                log.warning("%s", exc.one_line())
            self._failure, self._failed_at = exc, now
            raise
        if self._failure is not None:
            log.warning("NVML available now: %d GPU(s)", len(self._gpus))
            self._failure = None
        return self._gpus

    def _discover(self) -> dict[str, _Gpu]:
        nvml = self._nvml
        if nvml is None:
            raise ScrapeError("no GPU data: NVML not available (nvidia-ml-py is not installed)", NO_NVML_HINT)
        try:
            _ensure_init(nvml)
        except self._errors as exc:
            raise ScrapeError(f"no GPU data: NVML not available ({_reason(exc)})", NO_NVML_HINT) from None
        count = self._call("host", "device_count", "nvmlDeviceGetCount") or 0
        gpus: dict[str, _Gpu] = {}
        for index in range(count):
            owner = f"index {index}"
            handle = self._call(owner, "handle", "nvmlDeviceGetHandleByIndex", index)
            uuid = None if handle is None else self._call(owner, "uuid", "nvmlDeviceGetUUID", handle)
            if uuid is not None:
                gpu = _Gpu(index=index, uuid=_text(uuid), handle=handle)
                name = self._call(gpu.uuid, "name", "nvmlDeviceGetName", handle)
                gpu.name = None if name is None else _text(name)
                gpus[gpu.uuid] = gpu
        if not gpus:
            reason = "it sees no GPU" if not count else f"none of its {count} GPU(s) could be opened"
            raise ScrapeError(f"no GPU data: NVML started but {reason}", NO_NVML_HINT)
        return gpus

    # -- one GPU, one round ----------------------------------------------------------------------

    def _read(self, gpu: _Gpu) -> GpuReading:
        self._lost.discard(gpu.uuid)  # one call per round tells whether a lost GPU came back
        used, total, reserved = self._memory(gpu)
        util = self._call(gpu.uuid, "utilization", "nvmlDeviceGetUtilizationRates", gpu.handle)
        power_mw = self._call(gpu.uuid, "power", "nvmlDeviceGetPowerUsage", gpu.handle)
        dram = self._gpm_dram_bw(gpu)
        peak, peak_source = self._peak(gpu)
        return GpuReading(
            uuid=gpu.uuid,
            index=gpu.index,
            name=gpu.name,
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_reserved_bytes=reserved,
            memory_busy_pct=None if util is None else float(util.memory),
            dram_bw_util_pct=dram,
            dram_bw_source=None if dram is None else "gpm",
            peak_bw_gbps=peak,
            peak_bw_source=peak_source,
            power_w=None if power_mw is None else power_mw / 1000.0,
            temperature_c=self._temperature(gpu),
            host=self._host,
        )

    def _memory(self, gpu: _Gpu) -> tuple[float | None, float | None, float | None]:
        """(used, total, reserved) bytes. v2 splits reserved from used; v1's used includes it."""
        version = getattr(self._nvml, "nvmlMemory_v2", None)
        if version is not None:
            mem = self._call(gpu.uuid, "memory_v2", "nvmlDeviceGetMemoryInfo", gpu.handle, version=version)
            if mem is not None:
                return float(mem.used), float(mem.total), float(mem.reserved)
        mem = self._call(gpu.uuid, "memory_v1", "nvmlDeviceGetMemoryInfo", gpu.handle)
        if mem is None:
            return None, None, None
        return float(mem.used), float(mem.total), None

    def _temperature(self, gpu: _Gpu) -> float | None:
        sensor = getattr(self._nvml, "NVML_TEMPERATURE_GPU", 0)
        value = self._call(gpu.uuid, "temperature_v", "nvmlDeviceGetTemperatureV", gpu.handle, sensor)
        if value is None:  # drivers before the V call, or bindings without it
            value = self._call(gpu.uuid, "temperature", "nvmlDeviceGetTemperature", gpu.handle, sensor)
        return None if value is None else float(value)

    def _peak(self, gpu: _Gpu) -> tuple[float | None, str | None]:
        """Peak bandwidth GB/s and where it came from: "config", "nvml-formula" or (None, None)."""
        if self._peak_bw_gbps is not None:
            return self._peak_bw_gbps, "config"
        if gpu.peak_bw_gbps is None:
            bus_bits = self._call(gpu.uuid, "memory_bus_width", "nvmlDeviceGetMemoryBusWidth", gpu.handle)
            clock_type = getattr(self._nvml, "NVML_CLOCK_MEM", 2)
            mhz = self._call(gpu.uuid, "max_memory_clock", "nvmlDeviceGetMaxClockInfo", gpu.handle, clock_type)
            if bus_bits and mhz:
                # bits × 10⁶ transfers/s × 2 (double data rate) ÷ 8 bits/byte ÷ 10⁹ → GB/s
                gpu.peak_bw_gbps = bus_bits * mhz * 1e6 * 2 / 8 / 1e9
        return (gpu.peak_bw_gbps, "nvml-formula") if gpu.peak_bw_gbps is not None else (None, None)

    # -- GPM (Hopper and newer): true DRAM bandwidth utilisation ------------------------------------

    def _gpm_dram_bw(self, gpu: _Gpu) -> float | None:
        """% of peak DRAM bandwidth since the previous round's sample; None on the first round.

        The previous sample is kept between rounds, so the hot path never sleeps: the interval is
        the scrape interval. A round closer than 100 ms to the kept sample keeps the older one.
        """
        if not self._gpm_ready(gpu):
            return None
        current = gpu.gpm_samples[1] if gpu.gpm_prev is gpu.gpm_samples[0] else gpu.gpm_samples[0]
        now = self._clock()
        if self._call(gpu.uuid, "gpm_sample", "nvmlGpmSampleGet", gpu.handle, current) is None:
            return None
        previous, age = gpu.gpm_prev, now - gpu.gpm_prev_t
        if previous is not None and age < GPM_MIN_INTERVAL_S:
            return None
        gpu.gpm_prev, gpu.gpm_prev_t = current, now
        return None if previous is None else self._gpm_metric(gpu, previous, current)

    def _gpm_ready(self, gpu: _Gpu) -> bool:
        if gpu.gpm is None:
            support = self._call(gpu.uuid, "gpm_support", "nvmlGpmQueryDeviceSupport", gpu.handle)
            if support is None:
                return False
            gpu.gpm = bool(support.isSupportedDevice)
            if not gpu.gpm:
                self._log_once(gpu.uuid, "gpm", "unsupported", "no GPM (Hopper or newer needed): no DRAM bandwidth %")
        if not gpu.gpm:
            return False
        while len(gpu.gpm_samples) < 2:
            sample = self._call(gpu.uuid, "gpm_sample_alloc", "nvmlGpmSampleAlloc")
            if sample is None:
                return False
            gpu.gpm_samples.append(sample)
        return True

    def _gpm_metric(self, gpu: _Gpu, sample1: Any, sample2: Any) -> float | None:
        nvml = self._nvml
        struct = getattr(nvml, "c_nvmlGpmMetricsGet_t", None)
        if struct is None:
            return None
        request = struct()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 1
        request.sample1, request.sample2 = sample1, sample2
        request.metrics[0].metricId = nvml.NVML_GPM_METRIC_DRAM_BW_UTIL
        answer = self._call(gpu.uuid, "gpm_dram_bw", "nvmlGpmMetricsGet", request)
        if answer is None:
            return None
        metric = answer.metrics[0]
        if metric.nvmlReturn != getattr(nvml, "NVML_SUCCESS", 0):
            self._log_once(gpu.uuid, "gpm_dram_bw", f"return {metric.nvmlReturn}", "GPM DRAM_BW_UTIL not returned")
            return None
        return float(metric.value)
