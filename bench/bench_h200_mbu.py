"""MBU end to end on a real GPU: a decode's modelled bandwidth (core.mbu) against NVML GPM's reading.

Run on a machine with an NVIDIA GPU, PyTorch and Hugging Face transformers:

    python bench/bench_h200_mbu.py --out decode_mbu_bench.json

It builds a Llama-architecture model from a ``LlamaConfig`` with random bf16 weights (no download;
by default Llama-3-8B's shape: 8.03 B parameters, 16.06 GB) and decodes at batch 1, 8, 32 and 64:
first eager (a dynamic KV cache), then, while the time budget lasts, with a static KV cache and a
compiled forward (CUDA graphs). Meanwhile the project's ``collectors.nvml.NvmlCollector`` reads the
GPU every 0.5 s on a thread of its own. Per batch it prints the step time, steps/s and tok/s, the
MBU ``core.mbu.StepModel`` models for that step rate (the weights a step reads, TP 1, NVML's peak,
the KV bytes per token from the config, mean context = prompt + new ÷ 2), the median and the mean
of the GPM readings taken wholly inside the decode (prefill excluded) and their ratios to the
model, and writes every row
to the JSON file (after each row, so a run cut short keeps what it measured).

``--dry-run`` decodes a tiny model on the CPU with no NVML (no GPM figures): it checks the loop,
the accounting and the JSON on a machine without a GPU. Without torch, transformers or a GPU (and
no ``--dry-run``) the script prints one "skipped" line and exits 0, as ``make bench`` expects.

Imports only what ``core/mbu.py`` and ``collectors/nvml.py`` need (the standard library and
``pynvml``), so it runs on a GPU machine that has none of the product's other dependencies.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectors.nvml import NvmlCollector  # noqa: E402
from core import mbu  # noqa: E402
from core.errors import ScrapeError  # noqa: E402

# Llama-3-8B's shape: the 8B model of docs/ceiling.md's worked example (b).
LLAMA3_8B = dict(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, vocab=128256)
TINY = dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=256)
SAMPLE_EVERY_S = 0.5


# -- the GPU's own reading, on a thread ------------------------------------------------------------


@dataclass
class GpmSample:
    """One collector reading: GPM's DRAM bandwidth % over (start, end] and NVML's memory busy %."""

    start: float
    end: float
    dram_pct: float | None
    busy_pct: float | None


@dataclass
class Sampler:
    """Reads GPU ``index`` through :class:`NvmlCollector` every ``every_s`` seconds until stopped.

    The collector keeps its previous GPM sample between calls, so a reading at ``end`` covers the
    time since the previous call: that interval is kept with the figure to place it in a phase."""

    collector: NvmlCollector
    index: int = 0
    every_s: float = SAMPLE_EVERY_S
    samples: list[GpmSample] = field(default_factory=list)
    peak_gbps: float | None = None
    peak_source: str | None = None
    name: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        first = self._read(time.monotonic())  # the first GPM sample: no figure yet
        self._thread = threading.Thread(target=self._run, args=(first,), name="gpm-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.collector.close()

    def _run(self, previous: float) -> None:
        while not self._stop.wait(self.every_s):
            previous = self._read(previous)

    def _read(self, previous: float) -> float:
        now = time.monotonic()
        reading = next((r for r in self.collector.collect() if r.index == self.index), None)
        if reading is not None:
            self.peak_gbps, self.peak_source, self.name = reading.peak_bw_gbps, reading.peak_bw_source, reading.name
            self.samples.append(GpmSample(previous, now, reading.dram_bw_util_pct, reading.memory_busy_pct))
        return now

    def within(self, start: float, end: float) -> list[GpmSample]:
        """The readings whose whole interval lies inside [start, end] (a decode, not its prefill)."""
        return [s for s in list(self.samples) if s.start >= start and s.end <= end and s.dram_pct is not None]


# -- the model ------------------------------------------------------------------------------------


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

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """Layers × KV heads × head size × 2 (K and V) × bytes per value."""
        return self.layers * self.kv_heads * self.head_dim * 2 * dtype_bytes


def build_model(shape: Shape, device: str) -> Any:
    """A Llama with random bf16 weights made on ``device`` (no download, no fp32 copy first)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads, intermediate_size=shape.intermediate, vocab_size=shape.vocab,
        max_position_embeddings=8192, tie_word_embeddings=False,
    )  # fmt: skip
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    with torch.no_grad():  # defined values whatever the library's init did (uninitialised memory may hold NaN)
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    return model.eval()


def weight_bytes(model: Any) -> tuple[int, int]:
    """(all weights, the weights one decode step reads): a step reads the input embedding table only
    for the rows of its tokens, so the table is left out of the second (untied embeddings)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    table = model.get_input_embeddings().weight
    return total, total - table.numel() * table.element_size()


# -- decoding -------------------------------------------------------------------------------------


@dataclass
class Timed:
    prefill_s: float
    decode_start: float
    decode_end: float
    steps: int

    @property
    def step_s(self) -> float:
        return (self.decode_end - self.decode_start) / self.steps


def _sync(device: str) -> float:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    return time.monotonic()


def decode_eager(model: Any, batch: int, prompt: int, new: int, device: str) -> Timed:
    """Prefill ``prompt`` random tokens per request, then ``new`` greedy steps (dynamic KV cache)."""
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    with torch.inference_mode():
        start = _sync(device)
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        decode_start = _sync(device)
        for _ in range(new):
            out = model(input_ids=token, past_key_values=cache, use_cache=True, logits_to_keep=1)
            token = out.logits[:, -1:].argmax(-1)
        decode_end = _sync(device)
    return Timed(decode_start - start, decode_start, decode_end, new)


def decode_compiled(model: Any, step: Any, batch: int, prompt: int, new: int, device: str) -> Timed:
    """The same with a static KV cache of prompt + new tokens and ``step`` (the compiled forward) for
    the decode; the prefill runs eager. Three warm-up steps first compile and record the graphs."""
    import torch
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=prompt + new)
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)

    def run(steps: int) -> Timed:
        # no_grad, not inference_mode: the cache's tensors are updated in place between runs, and
        # compiled graphs do not take inference tensors as inputs kept across calls
        with torch.no_grad():
            cache.reset()
            start = _sync(device)
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1,
                        cache_position=torch.arange(prompt, device=device))  # fmt: skip
            token = out.logits[:, -1:].argmax(-1)
            decode_start = _sync(device)
            for i in range(steps):
                position = torch.tensor([prompt + i], device=device)
                out = step(input_ids=token, past_key_values=cache, use_cache=True, logits_to_keep=1,
                           cache_position=position, position_ids=position.unsqueeze(0).expand(batch, 1))  # fmt: skip
                token = out.logits[:, -1:].argmax(-1).clone()
            decode_end = _sync(device)
        return Timed(decode_start - start, decode_start, decode_end, steps)

    run(3)
    return run(new)


# -- one row --------------------------------------------------------------------------------------


def row(mode: str, batch: int, prompt: int, new: int, timed: Timed, model: mbu.StepModel, sampler: Sampler | None,
        full_cache: int | None = None) -> dict[str, Any]:  # fmt: skip
    """The figures of one decode, the model's and the GPU's side by side."""
    steps_per_s = 1.0 / timed.step_s
    context = prompt + new / 2  # the KV cache grows by one token a step
    modelled = model.mbu(steps_per_s, batch, context)
    out: dict[str, Any] = dict(
        mode=mode, batch=batch, prompt=prompt, new=new, prefill_s=timed.prefill_s, decode_s=timed.step_s * new,
        step_ms=timed.step_s * 1000, steps_per_s=steps_per_s, tok_s=batch * steps_per_s, mean_context=context,
        step_bound_per_s=model.step_bound_per_s, roofline_tok_s=model.roofline_tokens_per_s(batch, context),
        modelled_mbu=modelled, modelled_gbps=modelled * model.peak_gbps,
    )  # fmt: skip
    if full_cache is not None:  # a static cache's attention reads every slot, filled or not
        out["full_cache_len"] = full_cache
        out["modelled_mbu_full_cache"] = model.mbu(steps_per_s, batch, full_cache)
    out.update(gpm_figures(sampler, timed, modelled, model.peak_gbps))
    return out


def gpm_figures(sampler: Sampler | None, timed: Timed, modelled: float, peak_gbps: float) -> dict[str, Any]:
    inside = [] if sampler is None else sampler.within(timed.decode_start, timed.decode_end)
    dram = [s.dram_pct for s in inside if s.dram_pct is not None]
    if not dram:
        return dict(gpm_samples=[], gpm_dram_pct_median=None, gpm_mbu=None, gpm_gbps=None, gpm_over_modelled=None,
                    gpm_dram_pct_mean=None, gpm_mean_over_modelled=None)  # fmt: skip
    measured = mbu.dram_bw_util(statistics.median(dram))
    assert measured is not None
    # The readings are equal windows, so their mean is the decode's average bandwidth: what bytes ×
    # steps ÷ time is. The median is steadier against a stray reading, but reads high when the pace
    # wanders (a CPU-bound eager decode: 12 % above the mean at batch 1 on an H200).
    mean = statistics.mean(dram)
    return dict(
        gpm_samples=dram, memory_busy_pct=[s.busy_pct for s in inside], gpm_dram_pct_median=statistics.median(dram),
        gpm_mbu=measured.value, gpm_gbps=measured.value * peak_gbps, gpm_over_modelled=measured.value / modelled,
        gpm_dram_pct_mean=mean, gpm_mean_over_modelled=mean / 100 / modelled,
    )  # fmt: skip


def show(r: dict[str, Any]) -> None:
    gpm, ratio = "n/a", "n/a"
    if r["gpm_mbu"] is not None:
        gpm = f"median {r['gpm_mbu']:.1%} mean {r['gpm_dram_pct_mean']:.1f}% ({len(r['gpm_samples'])} samples)"
        ratio = f"{r['gpm_over_modelled']:.3f} / {r['gpm_mean_over_modelled']:.3f}"
    print(f"{r['mode']:8} batch {r['batch']:3}: step {r['step_ms']:7.2f} ms, {r['steps_per_s']:6.1f} steps/s, "
          f"{r['tok_s']:8.1f} tok/s; MBU modelled {r['modelled_mbu']:.1%}, GPM {gpm}, "
          f"GPM ÷ modelled (median / mean) {ratio}", flush=True)  # fmt: skip


# -- the run --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    p.add_argument("--batches", default="1,8,32,64")
    p.add_argument("--prompt", type=int, default=512, help="prompt tokens per request")
    p.add_argument("--new-eager", type=int, default=128, help="decode steps per batch, eager")
    p.add_argument("--new-compiled", type=int, default=512, help="decode steps per batch, compiled (0: skip)")
    p.add_argument("--budget-s", type=float, default=480.0, help="start no compiled batch after this many seconds")
    p.add_argument("--layers", type=int, default=None, help="override the model's layer count")
    p.add_argument("--dry-run", action="store_true", help="a tiny model on the CPU, no NVML")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    device = "cpu" if args.dry_run else "cuda"
    reason = missing(device)
    if reason:
        print(f"skipped: {reason} (run this on a machine with an NVIDIA GPU, torch and transformers)")
        return 0
    sampler = None if args.dry_run else start_sampler()
    if sampler is None and not args.dry_run:
        return 0
    shape = Shape(**(TINY if args.dry_run else LLAMA3_8B))
    if args.dry_run:  # a few steps: the loop, the accounting and the JSON, not a measurement
        args.prompt, args.new_eager, args.new_compiled = 8, 4, 4
    if args.layers:
        shape = Shape(**{**shape.__dict__, "layers": args.layers})
    model = build_model(shape, device)
    total, per_step = weight_bytes(model)
    peak = (sampler.peak_gbps if sampler else None) or 4800.0  # the dry run's stand-in: an H200's datasheet
    step_model = mbu.StepModel(per_step / mbu.GB, 1, peak, shape.kv_bytes_per_token())
    result = header(shape, total, per_step, step_model, sampler, args)
    print(f"model: {total / 1e9:.2f} GB of bf16 weights ({per_step / 1e9:.2f} GB read per step), "
          f"KV {shape.kv_bytes_per_token():,} B/token; peak {peak:.1f} GB/s ({result['peak_source']}); "
          f"step bound {step_model.step_bound_per_s:.1f} steps/s", flush=True)  # fmt: skip
    batches = [int(b) for b in args.batches.split(",")]
    try:
        run_eager(model, batches, args, device, step_model, sampler, result)
        run_compiled(model, batches, args, device, step_model, sampler, result, began)
    finally:
        if sampler is not None:
            sampler.stop()
        write(result, args.out)
    return 0


def missing(device: str) -> str | None:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed"
    if device == "cuda" and not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    return None


def start_sampler() -> Sampler | None:
    sampler = Sampler(NvmlCollector())
    try:
        sampler.start()
    except ScrapeError as exc:
        print(f"skipped: {exc}")
        return None
    return sampler


def header(shape: Shape, total: int, per_step: int, model: mbu.StepModel, sampler: Sampler | None,
           args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    import torch
    import transformers

    return dict(
        gpu=(sampler.name if sampler else "cpu (dry run)"), peak_gbps=model.peak_gbps,
        peak_source=(sampler.peak_source if sampler else "assumed (dry run)"),
        weight_bytes=total, step_weight_bytes=per_step, kv_bytes_per_token=shape.kv_bytes_per_token(),
        layers=shape.layers, shape=shape.__dict__, prompt=args.prompt, sample_every_s=SAMPLE_EVERY_S,
        torch=torch.__version__, transformers=transformers.__version__,
        step_bound_per_s=model.step_bound_per_s, rows=[], notes=[],
    )  # fmt: skip


def run_eager(model: Any, batches: list[int], args: argparse.Namespace, device: str, step_model: mbu.StepModel,
              sampler: Sampler | None, result: dict[str, Any]) -> None:  # fmt: skip
    decode_eager(model, 1, 16, 4, device)  # warm-up: kernels chosen, allocator grown
    for batch in batches:
        timed = decode_eager(model, batch, args.prompt, args.new_eager, device)
        result["rows"].append(row("eager", batch, args.prompt, args.new_eager, timed, step_model, sampler))
        show(result["rows"][-1])
        write(result, args.out)


def run_compiled(model: Any, batches: list[int], args: argparse.Namespace, device: str, step_model: mbu.StepModel,
                 sampler: Sampler | None, result: dict[str, Any], began: float) -> None:  # fmt: skip
    if not args.new_compiled:
        return
    import torch

    # The dry run checks the static-cache loop on the CPU, without compiling (CUDA graphs need a GPU).
    step = model.forward if device == "cpu" else torch.compile(model.forward, mode="reduce-overhead")
    for batch in batches:
        if time.monotonic() - began > args.budget_s:
            note(result, f"compiled batch {batch} not run: past the {args.budget_s:.0f} s budget")
            continue
        try:
            timed = decode_compiled(model, step, batch, args.prompt, args.new_compiled, device)
        except Exception as exc:  # a compile failure costs the compiled rows, never the eager ones
            note(result, f"compiled batch {batch} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            return
        full = args.prompt + args.new_compiled
        result["rows"].append(row("compiled", batch, args.prompt, args.new_compiled, timed, step_model, sampler, full))
        show(result["rows"][-1])
        write(result, args.out)


def note(result: dict[str, Any], text: str) -> None:
    print(text, flush=True)
    result["notes"].append(text)


def write(result: dict[str, Any], out: Path | None) -> None:
    if out is not None:
        out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
