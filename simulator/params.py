"""Parameters of the simulated deployment: hardware, model, vLLM settings and the calibrated costs.

Physical figures (memory, weights, KV bytes, bandwidth) come from DOMAIN.md §1 and the model's shape;
they are the decode step model's inputs (core.mbu.StepModel), from which the engine counts the bytes
every step moves: the engine byte counters and DCGM's DRAM_ACTIVE follow from them. The cost coefficients (``step_overhead_s``, ``gemm_floor_s``, ``gemm_s_per_seq``, ``decode_s_per_seq``,
``prefill_s_per_token``) and the token budget were tuned so the virtual-time sweep reproduces the field
report (DOMAIN.md §2), its knee included; docs/simulator.md has the equations and the calibration table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.mbu import GB, StepModel


@dataclass(frozen=True)
class EngineParams:
    """One engine (TP 8 over 8 simulated V100s). Bytes are per GPU unless the name says otherwise."""

    gpu_memory_bytes: float = 32 * 1024**3  # V100-SXM2-32GB: 32768 MiB as nvidia-smi and DCGM report it
    gpu_memory_utilization: float = 0.92
    # The step model's inputs, in core.mbu.StepModel's terms (all GPUs; per GPU is ÷ tensor_parallel).
    weight_gb: float = 40.0  # 70B × 4 bit
    tensor_parallel: int = 8
    bandwidth_gbps: float = 900.0  # V100 HBM2 peak per GPU
    # Llama-70B's grouped-query KV, the one shape of the docs and the demo: 2 (K,V) × 80 layers × 8 KV
    # heads × 128 dims × 2 bytes = 327,680 bytes a token over all GPUs, 40,960 on each at TP 8.
    kv_bytes_per_token: float = 327_680.0
    # The KV pool per GPU, as vLLM's --kv-cache-memory-bytes sets it (cache_config_info states it):
    # 4,980 blocks of 16 tokens, ~80k tokens, what fills at concurrency 64 and makes the report's
    # preemption storm there (a pool of the whole free memory would hold 8× more). None: the memory
    # left after the weights and the non-KV reserve, as --gpu-memory-utilization gives it.
    kv_cache_memory_bytes: float | None = 4980 * 16 * 40_960.0
    # Activation peak of vLLM's profiling run + CUDA graphs + NCCL buffers: not available to the KV pool.
    non_kv_reserved_bytes: float = 0.5 * GB
    block_size: int = 16
    # Calibrated costs (seconds). Decode matmuls follow a roofline: the int4 weights are streamed and
    # dequantised once per step whatever the batch (``gemm_floor_s``: 5 GB at an effective ~140 GB/s,
    # 15 % of peak: AWQ kernels on V100, which has no int4 tensor-core path), while their arithmetic,
    # on CUDA cores, grows with every decoding sequence (``gemm_s_per_seq``). A step pays the larger
    # of the two: up to gemm_floor_s ÷ gemm_s_per_seq ≈ 13 sequences the batch rides free on the
    # weight stream, beyond it each sequence pays its full compute: that is the knee between 16 and 32.
    # ``decode_s_per_seq`` is the rest of a sequence's cost (sampling, its share of the TP all-reduce,
    # input preparation); the fixed overhead covers scheduling, kernel launches and synchronisation.
    step_overhead_s: float = 0.034
    gemm_floor_s: float = 0.036
    gemm_s_per_seq: float = 0.0027
    decode_s_per_seq: float = 0.0023  # 0.0018 while the KV cache was full multi-head (8× the bytes)
    prefill_s_per_token: float = 0.00016
    # Chunked-prefill token budget per step (--max-num-batched-tokens), decodes included: calibrated;
    # it makes long prompts wait behind 32 decodes at high concurrency, as the report saw.
    max_num_batched_tokens: int = 288
    watermark_fraction: float = 0.01  # free blocks kept back when admitting new requests (vLLM)
    # A fault knob (``python -m app sim --slowdown 0.3``, POST /admin/slowdown?fraction=0.3): the GPUs
    # deliver this share less work per second, every step lasting 1 ÷ (1 − slowdown) times as long,
    # as a throttled GPU or a degraded engine would (the under_delivering rule's test, docs/alerts.md).
    slowdown: float = 0.0
    # The scenario library's knobs (app/scenarios, docs/scenarios.md). ``rank_slowdown``: one
    # tensor-parallel rank this share slower (a throttled GPU): every step ends at the all-reduce,
    # which waits for the slowest rank, so the whole step lasts 1 ÷ (1 − rank_slowdown) as long.
    # ``prefix_hit_share``: prefix caching on, this share of prompt tokens is found in the cache
    # and not computed (0: caching off, the simulator's default).
    rank_slowdown: float = 0.0
    prefix_hit_share: float = 0.0

    def step_model(self) -> StepModel:
        """The decode step model of this deployment (core/mbu.py): bytes per step, the steps/s bound."""
        return StepModel(self.weight_gb, self.tensor_parallel, self.bandwidth_gbps, self.kv_bytes_per_token)

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.step_model().weight_bytes_per_gpu

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        return self.kv_bytes_per_token / max(self.tensor_parallel, 1)

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_gbps * GB

    def step_read_bytes(self, seqs: int, context_tokens: int) -> float:
        """Bytes one step reads per GPU: its weight share once, and the KV cache of the ``context_tokens``
        that its ``seqs`` scheduled sequences' attention reads (prefill chunks included)."""
        return self.step_model().bytes_per_step(seqs, context_tokens / seqs if seqs else 0.0)

    def step_write_bytes(self, tokens: int) -> float:
        """Bytes one step writes per GPU: the KV of the ``tokens`` it computes."""
        return tokens * self.kv_bytes_per_token_per_gpu

    def kv_pool_bytes(self) -> float:
        """Bytes of each GPU given to the KV cache after weights and the non-KV reserve."""
        if self.kv_cache_memory_bytes is not None:
            return self.kv_cache_memory_bytes
        usable = self.gpu_memory_bytes * self.gpu_memory_utilization
        return max(0.0, usable - self.weight_bytes_per_gpu - self.non_kv_reserved_bytes)

    def num_gpu_blocks(self) -> int:
        """KV blocks of ``block_size`` tokens the pool holds (vllm:cache_config_info num_gpu_blocks)."""
        return int(self.kv_pool_bytes() // (self.block_size * self.kv_bytes_per_token_per_gpu))

    def step_time_s(self, decode_seqs: int, prefill_tokens: int, read_bytes: float) -> float:
        """Duration of one engine step (seconds).

        ``read_bytes``: what the step reads per GPU (:meth:`step_read_bytes`). Decode matmuls: the
        larger of the weight-streaming floor and the batch's compute (roofline); attention: the KV
        part of ``read_bytes`` at peak bandwidth; then per-sequence and per-prompt-token costs. Time
        is not bandwidth-bound: the weights' share of it is the calibrated floor, not bytes ÷ peak.
        """
        gemm_s = max(self.gemm_floor_s, decode_seqs * self.gemm_s_per_seq)
        kv_s = max(0.0, read_bytes - self.weight_bytes_per_gpu) / self.bandwidth_bytes_s
        prefill_s = prefill_tokens * self.prefill_s_per_token * (1.0 - self.prefix_hit_share)
        compute_s = decode_seqs * self.decode_s_per_seq + prefill_s
        slowest = max(self.slowdown, self.rank_slowdown)  # the step waits for its slowest rank
        return (self.step_overhead_s + gemm_s + kv_s + compute_s) / (1.0 - slowest)


@dataclass(frozen=True)
class EngineConfig:
    """vLLM command-line settings the simulator honours."""

    model: str = "sweetspot/sim-70b-awq"
    max_num_seqs: int = 32
    max_model_len: int = 8192
    params: EngineParams = EngineParams()

    def blocks_for(self, tokens: int) -> int:
        """KV blocks needed to hold ``tokens`` tokens."""
        return math.ceil(tokens / self.params.block_size)
