"""A vLLM + gateway + dcgm-exporter stand-in calibrated on the reference deployment (DOMAIN.md §2).

Public API (documented in docs/simulator.md):
- ``start_simulator(SimOptions) -> RunningSim``: the live server on 127.0.0.1 (``.urls``, ``.stop()``).
- ``calibrate(...)`` and ``run_closed_loop(...)``: virtual-time closed-loop runs.
- ``generate_history(start_ts, end_ts, step_s, seed, pattern="daily") -> Iterator[HistorySample]``.
"""

from simulator.api import RunningSim, SimOptions, start_simulator
from simulator.calibrate import REFERENCE, calibrate, run_closed_loop
from simulator.history import HistorySample, generate_history
from simulator.params import EngineConfig, EngineParams

__all__ = [
    "REFERENCE",
    "EngineConfig",
    "EngineParams",
    "HistorySample",
    "RunningSim",
    "SimOptions",
    "calibrate",
    "generate_history",
    "run_closed_loop",
    "start_simulator",
]
