"""The simulated vLLM engine: a V1-style scheduler over a paged KV cache, with calibrated step times.

The engine never reads a clock: the driver asks for a step plan at time ``now`` (simulated seconds),
lets the step's duration pass (really, or in virtual time) and commits the plan at its end time.
That keeps it deterministic and lets virtual-time runs cover many simulated minutes in seconds.
The engine is not thread-safe; the live server guards it with one lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from simulator.params import EngineConfig
from simulator.stats import EngineStats


@dataclass(eq=False, slots=True)
class Sequence:
    """One request inside the engine. Token counts are tokens; times are simulated seconds."""

    req_id: str
    prompt_tokens: int
    target_output: int  # tokens generated before it finishes
    finish_reason: str  # reason reported when target_output is reached: "stop" or "length"
    arrival: float
    on_tokens: Callable[[Sequence, int, float], None] | None = None  # (seq, new tokens, time)
    on_finish: Callable[[Sequence, str, float], None] | None = None  # (seq, reason, time)
    computed: int = 0  # tokens whose KV is in the cache
    generated: int = 0
    blocks: int = 0
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    preempted: int = 0
    done: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    def known_tokens(self) -> int:
        """Prompt plus generated tokens: what the KV cache must hold before the next token is sampled."""
        return self.prompt_tokens + self.generated


@dataclass(slots=True)
class StepPlan:
    """What one step computes: (sequence, tokens computed) pairs and the step's duration (seconds)."""

    start: float
    duration: float
    work: list[tuple[Sequence, int]]
    decode_seqs: int
    prefill_tokens: int
    read_bytes: float  # per GPU: the step model's bytes per step (simulator.params.EngineParams.step_read_bytes)
    write_bytes: float  # per GPU: the KV of the tokens the step computes


class Engine:
    """Scheduler, KV block pool and statistics of one vLLM engine."""

    def __init__(self, config: EngineConfig, started_at: float) -> None:
        self.config = config
        self.params = config.params
        self.total_blocks = self.params.num_gpu_blocks()
        self.free_blocks = self.total_blocks
        self.running: list[Sequence] = []
        self.waiting: deque[Sequence] = deque()
        self.stats = EngineStats(started_at=started_at)
        self.steps = 0

    # -- requests -----------------------------------------------------------------------------------
    def submit(self, seq: Sequence) -> None:
        """Queue a request (FCFS)."""
        self.waiting.append(seq)

    def abort(self, seq: Sequence, now: float) -> None:
        """Drop a request whose client went away; counted as finished_reason="abort"."""
        if seq.done:
            return
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self._finish(seq, "abort", now)

    def reconfigure(self, config: EngineConfig) -> None:
        """Apply new max-num-seqs / max-model-len (the daily pattern's operator mistakes) or a slowdown
        (the fault knob); the block pool is unchanged."""
        self.config = config
        self.params = config.params

    def usage(self) -> float:
        """KV-cache usage, fraction 0–1 of the block pool."""
        return 1.0 - self.free_blocks / self.total_blocks if self.total_blocks else 0.0

    def idle(self) -> bool:
        return not self.running and not self.waiting

    # -- one step -----------------------------------------------------------------------------------
    def plan_step(self, now: float) -> StepPlan | None:
        """Schedule the next step at ``now``; None when there is nothing to run."""
        budget = self.params.max_num_batched_tokens
        work: list[tuple[Sequence, int]] = []
        preemptions_before = self.stats.preemptions
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.known_tokens() - seq.computed, budget)
            if not self._reserve(seq, n):
                break  # it was the newest running sequence and got preempted itself
            work.append((seq, n))
            budget -= n
            i += 1
        # Like vLLM V1: a step that had to preempt admits nobody new.
        if self.stats.preemptions == preemptions_before:
            budget = self._admit(now, budget, work)
        if not work:
            return None
        return self._plan(now, work)

    def _reserve(self, seq: Sequence, n: int) -> bool:
        """Allocate blocks for ``n`` more tokens of ``seq``, preempting the newest sequences if needed."""
        need = self.config.blocks_for(seq.computed + n) - seq.blocks
        while need > self.free_blocks:
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return False
        self.free_blocks -= need
        seq.blocks += need
        return True

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption (vLLM V1): free its blocks, queue it first, count it."""
        self.running.remove(seq)
        self.free_blocks += seq.blocks
        seq.blocks = 0
        seq.computed = 0
        seq.preempted += 1
        self.waiting.appendleft(seq)
        self.stats.preemptions += 1

    def _admit(self, now: float, budget: int, work: list[tuple[Sequence, int]]) -> int:
        """Move waiting requests to running while seats, budget and blocks (above the watermark) allow."""
        watermark = int(self.total_blocks * self.params.watermark_fraction)
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.known_tokens() - seq.computed, budget)
            need = self.config.blocks_for(n)
            if self.free_blocks - need < watermark:
                break
            self.waiting.popleft()
            self.free_blocks -= need
            seq.blocks = need
            self.running.append(seq)
            if seq.scheduled_at is None:
                seq.scheduled_at = now
                self.stats.hists["queue"].observe(now - seq.arrival)
            work.append((seq, n))
            budget -= n
        return budget

    def _plan(self, now: float, work: list[tuple[Sequence, int]]) -> StepPlan:
        decode = sum(1 for seq, n in work if n == 1 and seq.generated > 0)
        prefill = sum(n for seq, n in work if not (n == 1 and seq.generated > 0))
        context = sum(seq.computed + n for seq, n in work)
        read = self.params.step_read_bytes(len(work), context)
        write = self.params.step_write_bytes(sum(n for _, n in work))
        duration = self.params.step_time_s(decode, prefill, read)
        return StepPlan(now, duration, work, decode, prefill, read, write)

    def commit(self, plan: StepPlan, now: float) -> None:
        """Apply a planned step that ended at ``now``: advance KV, emit tokens, finish sequences."""
        self.steps += 1
        # What vLLM's MFU metrics estimate per GPU, and what the simulated GPUs move (simulator/gpus.py).
        self.stats.read_bytes += plan.read_bytes
        self.stats.write_bytes += plan.write_bytes
        finished: list[Sequence] = []
        emitted = 0  # tokens this step produced, and the prompts whose prefill ended in it
        for seq, n in plan.work:
            if seq.done or seq.blocks == 0:
                continue  # aborted or preempted while the step ran
            seq.computed += n
            if seq.computed >= seq.known_tokens():
                emitted += 1 + (seq.prompt_tokens if seq.first_token_at is None else 0)
                self._emit(seq, now)
                if seq.generated >= seq.target_output:
                    finished.append(seq)
        # As vLLM counts its steps (v1/metrics/stats.py IterationStats): one observation per step in which
        # a request produced a token, of the new tokens plus the prompts whose prefill ended in it; a
        # step of prefill chunks alone is not observed.
        if emitted:
            self.stats.hists["iteration"].observe(emitted)
        for seq in finished:
            self.running.remove(seq)
            self._finish(seq, seq.finish_reason, now)

    def _emit(self, seq: Sequence, now: float) -> None:
        hists = self.stats.hists
        seq.generated += 1
        self.stats.generation_tokens += 1
        if seq.first_token_at is None:
            seq.first_token_at = now
            self.stats.prompt_tokens += seq.prompt_tokens
            hists["ttft"].observe(now - seq.arrival)
        elif seq.last_token_at is not None:
            hists["itl"].observe(now - seq.last_token_at)
        seq.last_token_at = now
        if seq.on_tokens is not None:
            seq.on_tokens(seq, 1, now)

    def _finish(self, seq: Sequence, reason: str, now: float) -> None:
        seq.done = True
        self.free_blocks += seq.blocks
        seq.blocks = 0
        stats = self.stats
        stats.success[reason] = stats.success.get(reason, 0.0) + 1
        if reason != "abort":
            hists = stats.hists
            hists["e2e"].observe(now - seq.arrival)
            hists["prompt_len"].observe(seq.prompt_tokens)  # the request-length histograms, as vLLM 0.32
            hists["generation_len"].observe(seq.generated)
            scheduled = seq.scheduled_at if seq.scheduled_at is not None else now
            first = seq.first_token_at if seq.first_token_at is not None else now
            hists["prefill"].observe(first - scheduled)
            hists["decode"].observe(now - first)
            if seq.generated > 1:  # as vLLM: decode time over the tokens after the first
                hists["tpot"].observe((now - first) / (seq.generated - 1))
        if seq.on_finish is not None:
            seq.on_finish(seq, reason, now)
