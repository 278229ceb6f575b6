"""A recorded NVML: replays what a real NVIDIA H200 reported (tests/data/nvml-h200-probe.json).

It implements the subset of the ``pynvml`` API that ``collectors/nvml.py`` calls, with the real
signatures, the real ctypes result structures and the real ``pynvml`` exception classes. Static
readings (name, UUID, bus width, clocks) come from the probe's ``gpus[0].readings``; dynamic ones
(memory, utilisation, power, temperature, GPM DRAM_BW_UTIL) from its 38-point time series
(phases pre / load / post, 0.5 s apart). Before :meth:`RecordedNvml.advance` is first called the
double answers with the static snapshot the probe took before its load started.

A recorded ``{"error": "NVMLError_X"}`` raises ``pynvml.NVMLError_X`` (the probe recorded
NotSupported for NVLink fields, for instance); variants patch readings in that same form.
"""

from __future__ import annotations

import copy
import ctypes
import json
from pathlib import Path
from typing import Any

import pynvml

PROBE = Path(__file__).resolve().parent.parent / "data" / "nvml-h200-probe.json"

# Readings each call answers from: static key, time-series key.
_DYNAMIC = {
    "memory_info_v2": None,
    "utilization_rates": None,
    "power_usage_mW": "power_mW",
    "temperature_gpu_C_V": "temp_C",
    "temperature_gpu_C": "temp_C",
}
_GPM_NAMES = {
    getattr(pynvml, f"NVML_GPM_METRIC_{name}"): name
    for name in ("DRAM_BW_UTIL", "SM_UTIL", "SM_OCCUPANCY", "GRAPHICS_UTIL", "ANY_TENSOR_UTIL")
}


def _raise(name: str) -> None:
    raise getattr(pynvml, name)()


class _Handle:
    def __init__(self, gpu: int) -> None:
        self.gpu = gpu


class RecordedNvml:
    """Stands in for the ``pynvml`` module. Constants and exception classes are the real ones.

    ``gpus``: how many GPUs to show; GPUs after the first are clones of the recorded H200 with
    their own UUID (the probe had one GPU). ``patch``: readings to replace, per GPU index, e.g.
    ``{0: {"memory_info_v2": {"error": "NVMLError_FunctionNotFound"}}}``. ``lost``: GPU index →
    time-series point from which every call on that GPU raises ``NVMLError_GpuIsLost``.
    ``init_error``: the exception class name ``nvmlInit`` raises, if any.
    """

    def __init__(
        self,
        probe: Path = PROBE,
        *,
        gpus: int = 1,
        patch: dict[int, dict[str, Any]] | None = None,
        lost: dict[int, int] | None = None,
        init_error: str | None = None,
        no_gpm: bool = False,
    ) -> None:
        data = json.loads(probe.read_text())
        self.series: list[dict[str, Any]] = [p for p in data["timeseries"] if p["gpu"] == 0]
        self.summary: dict[str, Any] = data["summary"][0]
        self._static = [self._clone(data["gpus"][0]["readings"], i) for i in range(gpus)]
        for index, readings in (patch or {}).items():
            self._static[index].update(readings)
        self._lost = lost or {}
        self._init_error = init_error
        self._no_gpm = no_gpm
        self.cursor: int | None = None  # None: the static snapshot; else an index into series
        self.init_calls = 0
        self.calls: dict[str, int] = {}
        self._samples: dict[int, tuple[int, int | None]] = {}
        self._buffers: dict[int, Any] = {}
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError", "nvmlMemory_v", "nvmlTemperature_v")):
                setattr(self, name, getattr(pynvml, name))
        self.NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError
        self.c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    @staticmethod
    def _clone(readings: dict[str, Any], index: int) -> dict[str, Any]:
        clone = copy.deepcopy(readings)
        if index:
            clone["index"] = index
            clone["uuid"] = f"{readings['uuid'][:-4]}{index:04x}"
        return clone

    # -- replay control -------------------------------------------------------------------------

    def advance(self, points: int = 1) -> None:
        """Move to the next recorded point(s) of the time series."""
        start = -1 if self.cursor is None else self.cursor
        self.cursor = min(start + points, len(self.series) - 1)

    def seek(self, phase: str, offset: int = 0) -> None:
        """Move to the ``offset``-th point of a phase ("pre", "load", "post"); negative from its end."""
        indexes = [i for i, p in enumerate(self.series) if p["phase"] == phase]
        self.cursor = indexes[offset]

    def clock(self) -> float:
        """Recorded time of the current point, seconds (the static snapshot is at 0)."""
        return 0.0 if self.cursor is None else float(self.series[self.cursor]["t"])

    @property
    def point(self) -> dict[str, Any] | None:
        return None if self.cursor is None else self.series[self.cursor]

    # -- helpers ----------------------------------------------------------------------------------

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _gpu(self, handle: _Handle, call: str) -> dict[str, Any]:
        self._count(call)
        if self.init_calls == 0:
            _raise("NVMLError_Uninitialized")
        lost_at = self._lost.get(handle.gpu)
        if lost_at is not None and self.cursor is not None and self.cursor >= lost_at:
            _raise("NVMLError_GpuIsLost")
        return self._static[handle.gpu]

    def _reading(self, handle: _Handle, call: str, key: str) -> Any:
        readings = self._gpu(handle, call)
        value = readings.get(key)
        if isinstance(value, dict) and "error" in value:
            _raise(value["error"])
        if value is None:
            _raise("NVMLError_NotSupported")
        series_key = _DYNAMIC.get(key, "")
        if self.point is not None and series_key:
            return self.point[series_key]
        return value

    # -- the pynvml API subset ------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._count("nvmlInit")
        if self._init_error:
            _raise(self._init_error)
        self.init_calls += 1

    def nvmlShutdown(self) -> None:
        self.init_calls = max(0, self.init_calls - 1)

    def nvmlDeviceGetCount(self) -> int:
        if self.init_calls == 0:
            _raise("NVMLError_Uninitialized")
        return len(self._static)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        if not 0 <= index < len(self._static):
            _raise("NVMLError_InvalidArgument")
        return _Handle(index)

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        return str(self._reading(handle, "uuid", "uuid"))

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return str(self._reading(handle, "name", "name"))

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle, version: int | None = None) -> Any:
        if not version:
            v1 = self._reading(handle, "memory_v1", "memory_info_v1")
            if self.point is None:
                return pynvml.c_nvmlMemory_t(total=v1["total"], free=v1["free"], used=v1["used"])
            p = self.point  # v1 "used" includes what v2 reports as reserved
            return pynvml.c_nvmlMemory_t(
                total=p["mem_total_B"], free=p["mem_free_B"], used=p["mem_used_B"] + p["mem_reserved_B"]
            )
        if version != pynvml.nvmlMemory_v2:
            _raise("NVMLError_ArgumentVersionMismatch")
        v2 = self._reading(handle, "memory_v2", "memory_info_v2")
        p = self.point
        values = (
            (v2["total"], v2["reserved"], v2["free"], v2["used"])
            if p is None
            else (p["mem_total_B"], p["mem_reserved_B"], p["mem_free_B"], p["mem_used_B"])
        )
        return pynvml.c_nvmlMemory_v2_t(version, *values)

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> Any:
        rates = self._reading(handle, "utilization", "utilization_rates")
        p = self.point
        if p is None:
            return pynvml.c_nvmlUtilization_t(gpu=rates["gpu"], memory=rates["memory"])
        return pynvml.c_nvmlUtilization_t(gpu=p["util_gpu_pct"], memory=p["util_mem_pct"])

    def nvmlDeviceGetMemoryBusWidth(self, handle: _Handle) -> int:
        return int(self._reading(handle, "bus_width", "memory_bus_width_bits"))

    def nvmlDeviceGetMaxClockInfo(self, handle: _Handle, type: int) -> int:
        keys = {pynvml.NVML_CLOCK_MEM: "clock_mem_max_MHz", pynvml.NVML_CLOCK_SM: "clock_sm_max_MHz"}
        if type not in keys:
            _raise("NVMLError_InvalidArgument")
        return int(self._reading(handle, "max_clock", keys[type]))

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return int(self._reading(handle, "power", "power_usage_mW"))

    def nvmlDeviceGetTemperatureV(self, handle: _Handle, sensor: int, version: int = pynvml.nvmlTemperature_v1) -> int:
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            _raise("NVMLError_NotSupported")
        return int(self._reading(handle, "temperature_v", "temperature_gpu_C_V"))

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            _raise("NVMLError_NotSupported")
        return int(self._reading(handle, "temperature", "temperature_gpu_C"))

    # GPM: samples are real ctypes pointers (so the collector's request struct is the real one);
    # the double remembers which GPU and which recorded point each sample was taken at.

    def nvmlGpmQueryDeviceSupport(self, handle: _Handle) -> Any:
        supported = self._reading(handle, "gpm_support", "gpm_device_support")
        answer = pynvml.c_nvmlGpmSupport_t()
        answer.version = pynvml.NVML_GPM_SUPPORT_VERSION
        answer.isSupportedDevice = 0 if self._no_gpm else int(bool(supported))
        return answer

    def nvmlGpmSampleAlloc(self) -> Any:
        self._count("gpm_alloc")
        buffer = ctypes.create_string_buffer(16)
        sample = ctypes.cast(buffer, pynvml.c_nvmlGpmSample_t)
        address = ctypes.cast(sample, ctypes.c_void_p).value or 0
        self._buffers[address] = buffer
        self._samples[address] = (-1, None)
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        address = self._address(sample)
        del self._samples[address], self._buffers[address]

    def nvmlGpmSampleGet(self, handle: _Handle, sample: Any) -> Any:
        self._gpu(handle, "gpm_sample")
        if self._no_gpm:
            _raise("NVMLError_NotSupported")
        self._samples[self._address(sample)] = (handle.gpu, self.cursor)
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self._count("gpm_metrics")
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            _raise("NVMLError_ArgumentVersionMismatch")
        gpu1, at1 = self._samples[self._address(request.sample1)]
        gpu2, at2 = self._samples[self._address(request.sample2)]
        first = -1 if at1 is None else at1
        last = -1 if at2 is None else at2
        if gpu1 != gpu2 or gpu1 < 0 or last <= first:
            _raise("NVMLError_InvalidArgument")
        points = self.series[first + 1 : last + 1]
        for i in range(request.numMetrics):
            metric = request.metrics[i]
            name = _GPM_NAMES.get(metric.metricId)
            if name is None:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            # The rate over the whole interval: the recorded sub-interval rates weighted by length.
            weights = [p["gpm"]["interval_s"] for p in points]
            metric.value = sum(p["gpm"][name] * w for p, w in zip(points, weights, strict=True)) / sum(weights)
            metric.nvmlReturn = pynvml.NVML_SUCCESS
        return request

    def _address(self, sample: Any) -> int:
        address = ctypes.cast(sample, ctypes.c_void_p).value or 0
        if address not in self._samples:
            _raise("NVMLError_InvalidArgument")
        return address


def no_library() -> RecordedNvml:
    """A host without the NVIDIA driver: ``nvmlInit`` raises LibraryNotFound."""
    return RecordedNvml(init_error="NVMLError_LibraryNotFound")


def old_driver() -> RecordedNvml:
    """A driver from before memory v2, GPM and TemperatureV: those raise FunctionNotFound."""
    missing = {"error": "NVMLError_FunctionNotFound"}
    keys = ("memory_info_v2", "temperature_gpu_C_V", "gpm_device_support")
    return RecordedNvml(patch={0: dict.fromkeys(keys, missing)})


def no_gpm_device() -> RecordedNvml:
    """A GPU older than Hopper (a V100, say): the driver answers but the device has no GPM."""
    return RecordedNvml(no_gpm=True)


def lost_gpu(at_point: int, gpus: int = 2, index: int = 1) -> RecordedNvml:
    """``gpus`` GPUs; GPU ``index`` falls off the bus at time-series point ``at_point``."""
    return RecordedNvml(gpus=gpus, lost={index: at_point})
