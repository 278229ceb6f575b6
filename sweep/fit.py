"""Fit the request mix to the engine's context before any load (docs/sweep.md, "The engine's context").

vLLM refuses (HTTP 400) a request whose prompt plus ``max_tokens`` exceeds its ``max_model_len``.
A sweep whose classes overran it measured errors, not the engine: on a 4,096-token engine the
default ``long`` class (2,000-3,000 prompt tokens + 500-800 out) got 36 × HTTP 400 that then fed
the verdict. So before the first request the sweep reads ``max_model_len`` from ``GET /v1/models``
and the engine's tokens per estimated token from ``POST /tokenize`` (vLLM's own tokenizer, on the
longest prompt the mix would send), and then, per class:

- it fits: unchanged;
- its longest prompts overrun: the prompt range's top is lowered until the longest prompt plus the
  longest ``max_tokens`` fits (the class keeps its lower bound, so it still is what its name says);
- even its shortest prompt overruns: the sweep is refused, naming the class and the limit.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass

from core.errors import UsageError
from sweep.client import Served, engine_tokens
from sweep.workload import RequestClass, make_request

# The engine's tokens per estimated token vary a little from prompt to prompt (the words are drawn
# at random): room kept on top of the ratio measured on one prompt.
RATIO_SLACK = 0.05


@dataclass(frozen=True)
class Context:
    """What the engine told of its context: ``max_model_len`` tokens (None: not said) and its tokens
    per estimated prompt token (``ratio``; ``ratio_source`` says where it came from)."""

    max_model_len: int | None
    ratio: float = 1.0
    ratio_source: str = "the prompts' estimate (the engine has no /tokenize)"


@dataclass(frozen=True)
class Sized:
    """A class whose prompt range was lowered to fit: its name, the range asked and the range sent."""

    name: str
    asked: tuple[int, int]
    sent: tuple[int, int]


def longest_prompt(cls: RequestClass) -> str:
    """The prompt of ``cls`` at the top of its range (what /tokenize is asked to count)."""
    top = dataclasses.replace(cls, input_tokens=(cls.input_tokens[1], cls.input_tokens[1]))
    return make_request(random.Random(0), ((top, 1.0),)).prompt


def prompt_cap(cls: RequestClass, context: Context) -> int | None:
    """The most estimated prompt tokens a request of ``cls`` may carry (None: no limit known)."""
    if context.max_model_len is None:
        return None
    room = context.max_model_len - cls.max_tokens[1]
    return math.floor(room / (context.ratio * (1 + RATIO_SLACK)))


def fit_mix(
    mix: tuple[tuple[RequestClass, float], ...], context: Context
) -> tuple[tuple[tuple[RequestClass, float], ...], list[Sized]]:
    """The mix with every class sized to ``context``, and the classes that were; raises UsageError
    (before any load) for a class that cannot fit, naming it and the limit."""
    fitted: list[tuple[RequestClass, float]] = []
    sized: list[Sized] = []
    for cls, share in mix:
        cap = prompt_cap(cls, context)
        low, high = cls.input_tokens
        if cap is None or high <= cap:
            fitted.append((cls, share))
            continue
        if cap < low:
            raise _refusal(cls, context)
        fitted.append((dataclasses.replace(cls, input_tokens=(low, cap)), share))
        sized.append(Sized(cls.name, (low, high), (low, cap)))
    return tuple(fitted), sized


def _refusal(cls: RequestClass, context: Context) -> UsageError:
    low, high = cls.input_tokens
    need = math.ceil(low * context.ratio) + cls.max_tokens[1]
    tokens = "" if context.ratio == 1 else f" ({context.ratio:.2f} engine tokens a prompt token, by {context.ratio_source})"
    return UsageError(
        f"--mix: class {cls.name} needs at least {need:,} tokens of context (prompts of {low:,}-{high:,} tokens{tokens} "
        f"+ max_tokens up to {cls.max_tokens[1]:,}) and the engine serves max_model_len {context.max_model_len:,}; "
        "nothing was sent",
        f"sweep without it (e.g. --mix short:1) or serve a longer context (vLLM --max-model-len {_round_up(need)})",
    )


def _round_up(tokens: int) -> int:
    return 1024 * math.ceil(tokens / 1024)


def sized_note(sized: list[Sized], context: Context) -> str:
    """One line per sized class for the start of the sweep ("" when none was)."""
    return "\n".join(
        f"class {s.name} sized to the engine's max_model_len {context.max_model_len:,}: prompts of "
        f"{s.sent[0]:,}-{s.sent[1]:,} tokens instead of {s.asked[0]:,}-{s.asked[1]:,} ({context.ratio:.2f} engine "
        f"tokens a prompt token, by {context.ratio_source})"
        for s in sized
    )


def engine_context(base_url: str, api: str, served: Served, mix: tuple[tuple[RequestClass, float], ...]) -> Context:
    """The engine's context and its tokens per estimated prompt token, measured on the longest prompt
    of the mix (a ratio of 1 where the engine cannot count: only the estimate is known then)."""
    if served.max_model_len is None:
        return Context(None)
    longest = max((cls for cls, _ in mix), key=lambda cls: cls.input_tokens[1])
    count = engine_tokens(base_url, api, served.model, longest_prompt(longest))
    if count is None:
        return Context(served.max_model_len)
    return Context(served.max_model_len, count / longest.input_tokens[1], "the engine's /tokenize")
