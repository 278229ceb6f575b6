"""The report's request mix (DOMAIN.md §2) and how the simulated model decides when to stop.

Short Q&A 60 %: input 100–300 tokens, max output 200–500. Long summaries 40 %: input 2000–3000,
max output 500–800. The "model" stops early on most requests, so the mean output is ≈ 300 tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SHORT_SHARE = 0.6
SHORT_INPUT = (100, 300)
SHORT_OUTPUT = (200, 500)
LONG_INPUT = (2000, 3000)
LONG_OUTPUT = (500, 800)
# Early stop: with this probability the answer ends at a uniform fraction of max_tokens. Chosen so
# that the mean output is ≈ 300 tokens: 470 × (0.3 + 0.7 × 0.5) ≈ 305.
EARLY_STOP_P = 0.7
EARLY_STOP_FRACTION = (0.15, 0.85)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request as a client sends it: prompt size and the max_tokens cap (tokens)."""

    kind: str  # "short" or "long"
    prompt_tokens: int
    max_tokens: int


def sample_request(rng: random.Random, short_share: float = SHORT_SHARE) -> RequestSpec:
    """Draw one request of the report's mix."""
    if rng.random() < short_share:
        return RequestSpec("short", rng.randint(*SHORT_INPUT), rng.randint(*SHORT_OUTPUT))
    return RequestSpec("long", rng.randint(*LONG_INPUT), rng.randint(*LONG_OUTPUT))


def answer_length(rng: random.Random, max_tokens: int) -> tuple[int, str]:
    """How many tokens the simulated model generates, and the finish reason ("stop" or "length")."""
    if max_tokens > 1 and rng.random() < EARLY_STOP_P:
        fraction = rng.uniform(*EARLY_STOP_FRACTION)
        return max(1, min(max_tokens - 1, round(max_tokens * fraction))), "stop"
    return max(1, max_tokens), "length"


def count_tokens(text: str) -> int:
    """The simulator's tokenizer: one token per whitespace-separated word, one more per 8 characters
    beyond the first 8 of a long word. Deterministic and cheap; real tokenizers differ."""
    return sum(1 + max(0, len(word) - 1) // 8 for word in text.split())


# Chat templates add tokens around each message (role markers); the figures follow OpenAI's counting recipe.
CHAT_TOKENS_PER_MESSAGE = 3
CHAT_TOKENS_PRIMING = 3

_VOCAB = (
    "the model reads every weight once per step so decode speed follows memory bandwidth and the batch "
    "shares that cost while the cache of keys and values grows with each token until blocks run out"
).split()


def token_text(request_seed: int, index: int) -> str:
    """Text of generated token ``index`` (a word with its leading space)."""
    return " " + _VOCAB[(request_seed * 7 + index * 13) % len(_VOCAB)]
