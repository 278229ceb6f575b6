"""Local GPUs read on their own thread: an NVML call that hangs costs the GPU source, not the round."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.jobs import RoundReader
from collectors.nvml import NvmlCollector
from core.settings import GpuSettings, Settings, TargetSettings
from tests.support.http_server import started
from tests.support.nvml_double import RecordedNvml
from tests.support.sources import Sources
from tests.support.waiting import wait_until


class HangingNvml(RecordedNvml):
    """The recorded H200 whose memory call blocks while ``hang`` is set, as a failing GPU's driver can."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = threading.Event()
        self.released = threading.Event()
        self.hung_calls = 0  # calls made while ``hang`` was set

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:  # noqa: N802 (NVML's name)
        if self.hang.is_set():
            self.hung_calls += 1
            self.released.wait(HANG_S)
        return super().nvmlDeviceGetMemoryInfo(handle, version)


# A hung call's length, and the rounds' deadline: the local page must come within the deadline at a
# load average of 20 (0.2-0.5 s did not always), and a hung call outlasts anything a round may wait.
HANG_S = 30.0
DEADLINE_S = 2.0


@pytest.fixture
def server() -> Iterator[Sources]:
    for make in started(lambda: Sources({})):
        yield make()


def test_a_hanging_nvml_call_costs_the_gpu_source_only_and_readings_resume(server: Sources) -> None:
    double = HangingNvml()
    target = TargetSettings(name="local", vllm_url=server.url("/metrics"), gpu=GpuSettings(source="nvml"))
    collector = RoundReader(Settings(targets=(target,), scrape_timeout_s=DEADLINE_S))
    collector._nvml = NvmlCollector(double, host="h")  # the double instead of the real library
    try:
        assert len(collector.collect(target).gpus) == 1  # a healthy reading
        double.hang.set()
        timings, rounds = [], []
        for _ in range(2):  # the call hangs, then is still hanging at the next round
            start = time.monotonic()
            rounds.append(collector.collect(target))
            timings.append(time.monotonic() - start)
        double.hang.clear()
        double.released.set()  # the stuck call returns; the next round starts a new reading
        after = wait_until(lambda: (r := collector.collect(target)).gpu_status is not None and r.gpu_status.ok and r,
                           "a reading once the stuck call returned")  # fmt: skip
    finally:
        collector.close()
    assert all(r.vllm_status.ok for r in rounds)  # vLLM is read all the same
    assert all(not r.gpus and r.gpu_status is not None and not r.gpu_status.ok for r in rounds)
    assert f"NVML has not answered for {DEADLINE_S:.1f} s" in str(rounds[0].gpu_status.error)
    # the first round waited its deadline, not the hung call; the second started no reading of its
    # own (it met the one still under way, past its deadline: no new wait), whatever the pace
    assert DEADLINE_S <= timings[0] < HANG_S and timings[1] < HANG_S and double.hung_calls == 1
    assert "a reading is still under way" in str(rounds[1].gpu_status.error)
    assert after.gpu_status is not None and after.gpu_status.ok and len(after.gpus) == 1


def test_closing_while_an_nvml_call_hangs_returns_at_once(server: Sources) -> None:
    double = HangingNvml()
    double.hang.set()
    target = TargetSettings(name="local", vllm_url=server.url("/metrics"), gpu=GpuSettings(source="nvml"))
    collector = RoundReader(Settings(targets=(target,), scrape_timeout_s=DEADLINE_S))
    collector._nvml = NvmlCollector(double, host="h")
    round_ = collector.collect(target)
    start = time.monotonic()
    collector.close()
    assert time.monotonic() - start < HANG_S / 3 and round_.vllm_status.ok  # it did not wait for the hung call
    double.released.set()
