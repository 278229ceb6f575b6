"""The live simulator's options (the ``python -m app sim`` flags): what the server and the
simulator's owner (simulator/api.py) both know of it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from core.engines import DEFAULT as DEFAULT_ENGINE
from simulator.params import EngineConfig, EngineParams

DEFAULT_MODEL = "sweetspot/sim-70b-awq"


@dataclass(frozen=True)
class SimOptions:
    """Options of the live simulator (the ``python -m app sim`` flags).

    ``speed``: simulated seconds per wall second. ``restart_every_s``: simulated seconds between
    vLLM restarts (None: never). ``load``: closed-loop clients of the built-in load (0: none; with
    ``load_pattern="daily"`` it is the peak demand, default 28). ``dcgm_interval_s``: simulated
    seconds between two readings of the GPUs, dcgm-exporter's ``--collect-interval`` (30 s by
    default there too); between readings every GET gets the same page, as from the exporter.
    """

    port: int = 0
    seed: int = 0
    max_num_seqs: int = 32
    max_model_len: int = 8192
    gateway_limit: int = 16
    vllm_version: str = "v1"
    engine: str = DEFAULT_ENGINE.name  # a name of core.engines.ENGINES: whose metric names the page uses
    api_servers: int = 1  # vLLM --api-server-count; > 1 serves /metrics as in multiprocess mode
    load: int = 0
    load_pattern: str | None = None
    speed: float = 1.0
    restart_every_s: float | None = None
    dcgm_interval_s: float = 30.0
    model: str = DEFAULT_MODEL
    params: EngineParams = field(default_factory=EngineParams)
    slowdown: float = 0.0  # the fault knob: the GPUs this share slower from the start (0–1)

    def engine_config(self) -> EngineConfig:
        params = dataclasses.replace(self.params, slowdown=self.slowdown) if self.slowdown else self.params
        return EngineConfig(self.model, self.max_num_seqs, self.max_model_len, params)
