"""Real decode steps, prefills and served levels of a Llama-3-8B-shaped model on one NVIDIA GPU.

The planner's check against real hardware (docs/plan.md, docs/benchmarks.md "The planner against two
real GPUs"): the same model shape measured on an H100 and an H200, so that a step model calibrated on
one GPU's levels can be held against what the other measured. Run on a machine with a GPU and torch:

    python bench/gpu_levels.py --out tests/data/gpu/h100.json

No Hugging Face model and no download: the forward is written here in plain torch, as a serving
engine runs it. Random bf16 weights of Llama-3-8B's shape (8.03 B parameters, 16.06 GB); fused QKV and
gate/up projections; grouped-query attention over a static KV cache (one buffer per batch, the step
attends over the filled slots only, rounded up to a bucket of 32); each decode step captured once as a
CUDA graph per (batch, attention length) and replayed, so a step costs its kernels, not Python; the
prefill runs eager with flash attention (a serving engine's prefill is compute-bound, its launch cost
small beside the matrix products). Three tables:

- ``decode``: a step's time at ``batch`` requests of ``context`` cached tokens (batches 1-64,
  contexts 128-2048), the mean of 50 replays after 10 warm-ups, timed with CUDA events;
- ``prefill``: one eager prefill of ``batch`` prompts of ``prompt`` tokens (the median of 5 after 2);
- ``levels``: a served level the way a static-batch server runs it: ``concurrency`` prompts of 512
  tokens prefilled together, then 128 decode steps, the context growing a token a step;
  ``output_tok_s`` = concurrency × 128 ÷ the whole time (the median of 3).

Also measured, as priors for the planner: a device-to-device copy's bandwidth (bytes read + written)
and an 8192³ bf16 matrix product's FLOP/s. Without torch or a GPU it prints one "skipped" line and
exits 0 (``make bench`` runs every bench). ``--dry-run`` runs a two-layer toy on the CPU (no graphs):
the loop and the JSON, not a measurement.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LLAMA3_8B = dict(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, vocab=128256)
TOY = dict(hidden=256, layers=2, heads=8, kv_heads=2, intermediate=512, vocab=1024)
ROPE_THETA = 500_000.0
BUCKET = 32  # a decode step attends over the filled slots rounded up to this
LEVEL_PROMPT, LEVEL_OUTPUT = 512, 128


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer, bf16: 2 × layers × KV heads × head size × 2 B."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


class Model:
    """Llama's decoder in plain torch: random bf16 weights, a static KV cache per batch."""

    def __init__(self, shape: Shape, device: str) -> None:
        import torch

        self.torch, self.shape, self.device = torch, shape, device
        s, dt = shape, torch.bfloat16
        qkv = s.hidden + 2 * s.kv_heads * s.head_dim

        def w(*size: int) -> Any:
            return torch.empty(*size, device=device, dtype=dt).normal_(0.0, 0.02)

        self.embed, self.lm_head, self.final_norm = (
            w(s.vocab, s.hidden),
            w(s.vocab, s.hidden),
            torch.ones(s.hidden, device=device, dtype=dt),
        )
        self.layers = [
            dict(attn_norm=torch.ones(s.hidden, device=device, dtype=dt), wqkv=w(qkv, s.hidden), wo=w(s.hidden, s.hidden),
                 mlp_norm=torch.ones(s.hidden, device=device, dtype=dt), wgu=w(2 * s.intermediate, s.hidden),
                 wd=w(s.hidden, s.intermediate))
            for _ in range(s.layers)
        ]  # fmt: skip
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, s.head_dim, 2, device=device, dtype=torch.float32) / s.head_dim))
        angles = torch.outer(torch.arange(8192, device=device, dtype=torch.float32), inv)
        self.cos, self.sin = torch.cos(angles).to(dt), torch.sin(angles).to(dt)
        self.kv: Any = None

    def params(self) -> tuple[int, int, int]:
        """(all parameters, their bytes, the bytes one decode step reads: all but the embedding table)."""
        tensors = [self.embed, self.lm_head, self.final_norm, *(t for layer in self.layers for t in layer.values())]
        n = sum(t.numel() for t in tensors)
        return n, 2 * n, 2 * (n - self.embed.numel())

    def allocate(self, batch: int, length: int) -> None:
        """The KV cache: layers × (K, V) × batch × KV heads × length × head size, bf16."""
        s = self.shape
        self.kv = None
        self.kv = self.torch.zeros(
            s.layers, 2, batch, s.kv_heads, length, s.head_dim, device=self.device, dtype=self.torch.bfloat16
        )

    def _norm(self, x: Any, weight: Any) -> Any:
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * weight

    def _rope(self, x: Any, cos: Any, sin: Any) -> Any:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return self.torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def _qkv(self, layer: dict[str, Any], x: Any, cos: Any, sin: Any) -> tuple[Any, Any, Any]:
        s = self.shape
        b, t, _ = x.shape
        qkv = self.torch.nn.functional.linear(self._norm(x, layer["attn_norm"]), layer["wqkv"])
        q, k, v = qkv.split([s.hidden, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], dim=-1)
        q = q.view(b, t, s.heads, s.head_dim).transpose(1, 2)
        k = k.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = v.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        return self._rope(q, cos, sin), self._rope(k, cos, sin), v

    def _mlp(self, layer: dict[str, Any], x: Any) -> Any:
        f = self.torch.nn.functional
        g, u = f.linear(self._norm(x, layer["mlp_norm"]), layer["wgu"]).chunk(2, dim=-1)
        return f.linear(f.silu(g) * u, layer["wd"])

    def prefill(self, tokens: Any) -> Any:
        """Every prompt token through every layer, K and V written to slots [0, prompt); the next token."""
        f, s = self.torch.nn.functional, self.shape
        b, t = tokens.shape
        x = self.embed[tokens]
        cos, sin = self.cos[:t], self.sin[:t]
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, cos, sin)
            self.kv[i, 0, :, :, :t] = k
            self.kv[i, 1, :, :, :t] = v
            group = s.heads // s.kv_heads
            a = f.scaled_dot_product_attention(
                q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), is_causal=True
            )
            x = x + f.linear(a.transpose(1, 2).reshape(b, t, s.hidden), layer["wo"])
            x = x + self._mlp(layer, x)
        return f.linear(self._norm(x[:, -1:], self.final_norm), self.lm_head).argmax(-1)

    def decode(self, token: Any, position: Any, attend: int) -> Any:
        """One step: each request's token at ``position`` (a device tensor: graph-safe), attention over
        the first ``attend`` slots with those past ``position`` masked; the next token."""
        torch, f, s = self.torch, self.torch.nn.functional, self.shape
        b = token.shape[0]
        x = self.embed[token]
        cos, sin = self.cos.index_select(0, position), self.sin.index_select(0, position)
        group = s.heads // s.kv_heads
        visible = torch.arange(attend, device=self.device) <= position  # (attend,)
        bias = torch.zeros(attend, device=self.device, dtype=torch.float32).masked_fill(~visible, float("-inf"))
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, cos, sin)
            self.kv[i, 0].index_copy_(2, position, k)
            self.kv[i, 1].index_copy_(2, position, v)
            keys, values = self.kv[i, 0, :, :, :attend], self.kv[i, 1, :, :, :attend]
            q = q.view(b, s.kv_heads, group, s.head_dim)  # the query heads sharing each KV head, together
            scores = torch.matmul(q, keys.transpose(-1, -2)).float() * s.head_dim**-0.5 + bias
            a = torch.matmul(scores.softmax(-1).to(values.dtype), values)  # (b, kv_heads, group, head_dim)
            x = x + f.linear(a.reshape(b, 1, s.hidden), layer["wo"])
            x = x + self._mlp(layer, x)
        return f.linear(self._norm(x, self.final_norm), self.lm_head).argmax(-1)


class Step:
    """One decode step at a fixed (batch, attention length), captured as a CUDA graph that also
    advances the position, so replays run a decode without Python in between."""

    def __init__(
        self, model: Model, batch: int, attend: int, position: Any, token: Any, graphs: bool, pool: Any
    ) -> None:
        self.model, self.attend, self.position, self.token, self.graph = model, attend, position, token, None
        torch = model.torch
        if graphs:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                self._eager()
                self.position.sub_(1)
            torch.cuda.current_stream().wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool):
                self._eager()

    def _eager(self) -> None:
        self.token.copy_(self.model.decode(self.token, self.position, self.attend))
        self.position.add_(1)

    def __call__(self) -> None:
        self.graph.replay() if self.graph is not None else self._eager()


class Timer:
    def __init__(self, torch: Any, device: str) -> None:
        self.torch, self.cuda = torch, device == "cuda"

    def __call__(self, fn: Any, repeat: int) -> float:
        """Seconds for ``repeat`` calls of ``fn`` together (CUDA events on a GPU)."""
        if self.cuda:
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeat):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        began = time.perf_counter()
        for _ in range(repeat):
            fn()
        return time.perf_counter() - began


def _ceil(n: int, to: int) -> int:
    return -(-n // to) * to


def _at(step: Step, position: Any, context: int) -> None:
    position.fill_(context)
    step()


def _decode_all(steps: dict[int, Step], position: Any, prompt: int, output: int) -> None:
    position.fill_(prompt)
    for i in range(output):
        steps[_ceil(prompt + i + 1, BUCKET)]()


def _prefill_into(model: Model, prompts: Any, token: Any) -> None:
    token.copy_(model.prefill(prompts))


def decode_grid(
    model: Model, timer: Timer, batches: list[int], contexts: list[int], graphs: bool, warm: int, reps: int
) -> list[dict[str, Any]]:
    torch, rows = model.torch, []
    for batch in batches:
        model.allocate(batch, max(contexts) + BUCKET)
        pool = torch.cuda.graph_pool_handle() if graphs else None
        for context in contexts:
            position = torch.tensor([context], device=model.device)
            token = torch.randint(0, model.shape.vocab, (batch, 1), device=model.device)
            with torch.no_grad():
                step = Step(model, batch, _ceil(context + 1, BUCKET), position, token, graphs, pool)

                one = functools.partial(_at, step, position, context)  # the same slot every replay
                timer(one, warm)
                seconds = timer(one, reps) / reps
            rows.append(dict(batch=batch, context=context, attend=step.attend, step_s=seconds, tok_s=batch / seconds))
            print(
                f"decode batch {batch:3} context {context:5}: {seconds * 1e3:7.3f} ms/step, {batch / seconds:8.1f} tok/s",
                flush=True,
            )
    model.kv = None
    return rows


def prefill_grid(
    model: Model, timer: Timer, pairs: list[tuple[int, int]], warm: int, reps: int
) -> list[dict[str, Any]]:
    torch, rows = model.torch, []
    for batch, prompt in pairs:
        model.allocate(batch, prompt)
        tokens = torch.randint(0, model.shape.vocab, (batch, prompt), device=model.device)
        with torch.no_grad():
            run = functools.partial(model.prefill, tokens)
            timer(run, warm)
            times = [timer(run, 1) for _ in range(reps)]
        seconds = statistics.median(times)
        rows.append(dict(batch=batch, prompt=prompt, time_s=seconds, tok_s=batch * prompt / seconds))
        print(
            f"prefill batch {batch:3} prompt {prompt:5}: {seconds * 1e3:8.2f} ms, {batch * prompt / seconds:9.0f} prompt tok/s",
            flush=True,
        )
    model.kv = None
    return rows


def levels(
    model: Model, timer: Timer, concurrencies: list[int], graphs: bool, reps: int, prompt: int, output: int
) -> list[dict[str, Any]]:
    """A static-batch server's level: prefill every prompt together, then ``output`` steps."""
    torch, rows = model.torch, []
    for c in concurrencies:
        model.allocate(c, _ceil(prompt + output + 1, BUCKET))
        pool = torch.cuda.graph_pool_handle() if graphs else None
        position = torch.tensor([prompt], device=model.device)
        token = torch.zeros((c, 1), dtype=torch.long, device=model.device)
        prompts = torch.randint(0, model.shape.vocab, (c, prompt), device=model.device)
        with torch.no_grad():
            steps = {
                end: Step(model, c, end, position, token, graphs, pool)
                for end in range(_ceil(prompt + 1, BUCKET), _ceil(prompt + output, BUCKET) + 1, BUCKET)
            }
            decode_all = functools.partial(_decode_all, steps, position, prompt, output)
            prefill = functools.partial(_prefill_into, model, prompts, token)
            runs = []
            for _ in range(reps + 1):  # the first run warms up
                prefill_s = timer(prefill, 1)
                decode_s = timer(decode_all, 1)
                runs.append((prefill_s + decode_s, prefill_s, decode_s))
            total_s, prefill_s, decode_s = sorted(runs[1:])[len(runs[1:]) // 2]
        steps.clear()
        rows.append(dict(concurrency=c, prompt=prompt, output=output, prefill_s=prefill_s, decode_s=decode_s, total_s=total_s,
                         output_tok_s=c * output / total_s))  # fmt: skip
        print(
            f"level {c:3}: prefill {prefill_s:6.3f} s + decode {decode_s:6.3f} s -> {c * output / total_s:8.1f} output tok/s",
            flush=True,
        )
    model.kv = None
    return rows


def hardware(torch: Any, device: str) -> dict[str, Any]:
    """What the GPU measures for a plain copy and a large bf16 matrix product, and NVML's peak."""
    if device != "cuda":
        return dict(gpu="cpu (dry run)")
    timer = Timer(torch, device)
    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    timer(functools.partial(dst.copy_, src), 3)
    copy_s = timer(functools.partial(dst.copy_, src), 20) / 20
    src = dst = None
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    timer(functools.partial(torch.matmul, a, b), 3)
    mm_s = timer(functools.partial(torch.matmul, a, b), 20) / 20
    out = dict(gpu=torch.cuda.get_device_name(0), copy_gbps=2 * 2 * 1024**3 / copy_s / 1e9, bf16_matmul_tflops=2 * 8192**3 / mm_s / 1e12,
               sm_count=torch.cuda.get_device_properties(0).multi_processor_count)  # fmt: skip
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        bus = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
        clock = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        out.update(peak_gbps=bus * clock * 2 / 8 / 1000, peak_source="nvml (bus width × max memory clock × 2)")
    except Exception as exc:  # the peak is a label here, not an input of the measurement
        out.update(peak_gbps=None, peak_source=f"nvml unavailable: {exc}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed (run this on a machine with an NVIDIA GPU and torch)")
        return 0
    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("skipped: torch sees no CUDA GPU")
        return 0
    dry = args.dry_run
    shape = Shape(**(TOY if dry else LLAMA3_8B))
    torch.manual_seed(0)
    result: dict[str, Any] = dict(hardware(torch, device), torch=torch.__version__, shape=asdict(shape), dtype="bf16", tp=1,
                                  kv_bytes_per_token=shape.kv_bytes_per_token, bucket=BUCKET)  # fmt: skip
    print(json.dumps(result), flush=True)
    model = Model(shape, device)
    n, total, per_step = model.params()
    result.update(params=n, active_params=n, weight_bytes=total, step_weight_bytes=per_step)
    timer = Timer(torch, device)
    batches = [1, 2, 4] if dry else [1, 2, 4, 8, 16, 32, 64]
    contexts = [16, 64] if dry else [128, 512, 1024, 2048]
    pairs = (
        [(1, 16), (2, 32)]
        if dry
        else [(1, 128), (1, 256), (1, 512), (1, 1024), (1, 2048), (4, 512), (8, 2048), (16, 512), (64, 512)]
    )
    prompt, output = (16, 8) if dry else (LEVEL_PROMPT, LEVEL_OUTPUT)
    began = time.monotonic()
    try:
        result["decode"] = decode_grid(model, timer, batches, contexts, not dry, 2 if dry else 10, 3 if dry else 50)
        result["prefill"] = prefill_grid(model, timer, pairs, 1 if dry else 2, 3 if dry else 5)
        result["levels"] = levels(model, timer, batches, not dry, 1 if dry else 3, prompt, output)
    finally:
        result["seconds"] = time.monotonic() - began
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
