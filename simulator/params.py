"""Parameters of the simulated deployment: hardware, model, vLLM settings and the calibrated costs.

Physical figures (memory, weights, KV bytes, bandwidth) come from DOMAIN.md §1 and the model's shape;
the cost coefficients (``step_overhead_s``, ``gemm_floor_s``, ``gemm_s_per_seq``, ``decode_s_per_seq``,
``prefill_s_per_token``) and the token budget were tuned so the virtual-time sweep reproduces the field
report (DOMAIN.md §2), its knee included; docs/simulator.md has the equations and the calibration table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True)
class EngineParams:
    """One engine (TP 8 over 8 simulated V100s). Bytes are per GPU unless the name says otherwise."""

    gpu_memory_bytes: float = 32 * 1024**3  # V100-SXM2-32GB: 32768 MiB as nvidia-smi and DCGM report it
    gpu_memory_utilization: float = 0.92
    weight_bytes_per_gpu: float = 5 * GB  # 70B × 4 bit ≈ 40 GB, split over TP 8
    # Activation peak of vLLM's profiling run + CUDA graphs + NCCL buffers: not available to the KV pool.
    non_kv_reserved_bytes: float = 0.5 * GB
    # A 72B model without grouped-query attention: 2 (K,V) × 80 layers × 8192 hidden × 2 bytes ÷ TP 8.
    kv_bytes_per_token: float = 327_680.0
    block_size: int = 16
    bandwidth_bytes_s: float = 900 * GB  # V100 HBM2 peak per GPU
    tensor_parallel: int = 8
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
    decode_s_per_seq: float = 0.0018
    prefill_s_per_token: float = 0.00016
    # Chunked-prefill token budget per step (--max-num-batched-tokens), decodes included: calibrated;
    # it makes long prompts wait behind 32 decodes at high concurrency, as the report saw.
    max_num_batched_tokens: int = 288
    watermark_fraction: float = 0.01  # free blocks kept back when admitting new requests (vLLM)

    def kv_pool_bytes(self) -> float:
        """Bytes of each GPU given to the KV cache after weights and the non-KV reserve."""
        usable = self.gpu_memory_bytes * self.gpu_memory_utilization
        return max(0.0, usable - self.weight_bytes_per_gpu - self.non_kv_reserved_bytes)

    def num_gpu_blocks(self) -> int:
        """KV blocks of ``block_size`` tokens the pool holds (vllm:cache_config_info num_gpu_blocks)."""
        return int(self.kv_pool_bytes() // (self.block_size * self.kv_bytes_per_token))

    def ceiling_tok_s(self) -> float:
        """The report's ceiling: bandwidth per GPU ÷ weight bytes per GPU (tokens/s)."""
        return self.bandwidth_bytes_s / self.weight_bytes_per_gpu

    def step_time_s(self, decode_seqs: int, prefill_tokens: int, context_tokens: int) -> float:
        """Duration of one engine step (seconds).

        ``context_tokens`` is the sum over scheduled sequences of the context their attention reads.
        Decode matmuls: the larger of the weight-streaming floor and the batch's compute (roofline);
        attention: the KV of every context token read at peak bandwidth; then per-sequence and
        per-prompt-token costs.
        """
        gemm_s = max(self.gemm_floor_s, decode_seqs * self.gemm_s_per_seq)
        kv_s = context_tokens * self.kv_bytes_per_token / self.bandwidth_bytes_s
        compute_s = decode_seqs * self.decode_s_per_seq + prefill_tokens * self.prefill_s_per_token
        return self.step_overhead_s + gemm_s + kv_s + compute_s


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
