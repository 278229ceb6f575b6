"""The request mix and its synthetic prompts (DOMAIN.md §2), deterministic for a seed.

Token counts are estimates: every synthetic word is a common English word that BPE tokenizers of
the Llama / GPT families encode as one token (with its leading space), and every sentence ends with
a period (one more token). Real counts land within a few percent of the target, which is all a
throughput sweep needs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from core.errors import UsageError


@dataclass(frozen=True)
class RequestClass:
    """A kind of request: ranges (inclusive) of prompt tokens and of ``max_tokens``."""

    name: str
    input_tokens: tuple[int, int]
    max_tokens: tuple[int, int]
    instruction: str


# The report's mixed load: short Q&A and long summaries.
CLASSES: dict[str, RequestClass] = {
    "short": RequestClass("short", (100, 300), (200, 500), "Answer the question about the following notes."),
    "long": RequestClass("long", (2000, 3000), (500, 800), "Summarize the following document in detail."),
    # Not the report's: a few output tokens, so that requests end many times a second even on a small
    # CPU engine (the real-engine tier's learned knee, docs/benchmarks.md).
    "tiny": RequestClass("tiny", (16, 32), (8, 16), "Answer briefly."),
}
DEFAULT_MIX = "short:0.6,long:0.4"

# One token each in Llama / GPT tokenizers (with the leading space), so words ≈ tokens.
_WORDS = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government number "
    "night point home water room mother area money story fact month lot right study book eye job word "
    "business issue side kind head house service friend father power hour game line end member law car "
    "city community name president team minute idea kid body information back parent face others level "
    "office door health person art war history party result change morning reason research girl guy "
    "moment air teacher force education foot boy age policy process music market sense nation plan "
    "college interest death experience effect class control field development role effort rate heart "
    "drug show leader light voice wife police mind price report decision son view relationship town "
    "road arm difference value building action model season society tax director position player record "
    "paper space ground form event official matter center couple site project activity star table need "
    "court oil situation cost industry figure street image phone data picture practice piece land "
    "product doctor wall patient worker news test movie north love support technology step baby computer "
    "type attention film tree source organization hair window evidence population training"
).split()
_MIN_SENTENCE, _MAX_SENTENCE = 8, 16  # words per sentence


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: its class, prompt, estimated prompt tokens and ``max_tokens``."""

    kind: str
    prompt: str
    prompt_tokens_est: int
    max_tokens: int


def parse_mix(text: str) -> tuple[tuple[RequestClass, float], ...]:
    """Parse ``short:0.6,long:0.4`` into (class, share) pairs; shares are normalised to sum to 1."""
    pairs: list[tuple[RequestClass, float]] = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, weight_text = item.partition(":")
        cls = CLASSES.get(name.strip())
        if cls is None:
            raise UsageError(f"--mix: unknown request class {name.strip()!r}", f"use {', '.join(CLASSES)}")
        try:
            weight = float(weight_text) if weight_text else 1.0
        except ValueError:
            raise UsageError(f"--mix: {item!r} has no numeric share", "write it like short:0.6,long:0.4") from None
        if weight < 0:
            raise UsageError(f"--mix: share of {name} is negative", "write it like short:0.6,long:0.4")
        pairs.append((cls, weight))
    total = sum(weight for _, weight in pairs)
    if total <= 0:
        raise UsageError(f"--mix: {text!r} gives no request a positive share", "write it like short:0.6,long:0.4")
    return tuple((cls, weight / total) for cls, weight in pairs if weight > 0)


def mix_label(mix: tuple[tuple[RequestClass, float], ...]) -> str:
    """The canonical spelling of a mix, stored with the run (``short:0.6,long:0.4``)."""
    return ",".join(f"{cls.name}:{share:g}" for cls, share in mix)


def synthetic_text(rng: random.Random, tokens: int) -> str:
    """About ``tokens`` tokens of sentences made of common words (one token per word or period)."""
    sentences: list[str] = []
    left = tokens
    while left > 1:
        # A sentence of n words costs n + 1 tokens (the period).
        n = min(rng.randint(_MIN_SENTENCE, _MAX_SENTENCE), left - 1)
        words = rng.choices(_WORDS, k=n)
        sentences.append(" ".join(words).capitalize() + ".")
        left -= n + 1
    return " ".join(sentences)


def make_request(rng: random.Random, mix: tuple[tuple[RequestClass, float], ...]) -> RequestSpec:
    """Draw the next request of the mix: class by share, then prompt length and ``max_tokens`` uniformly."""
    cls = rng.choices([c for c, _ in mix], weights=[share for _, share in mix])[0]
    target = rng.randint(*cls.input_tokens)
    instruction_tokens = len(cls.instruction.split()) + 1  # words, plus the period
    body = synthetic_text(rng, max(target - instruction_tokens, 2))
    return RequestSpec(cls.name, f"{cls.instruction}\n\n{body}", target, rng.randint(*cls.max_tokens))


def client_rng(seed: int, concurrency: int, client: int) -> random.Random:
    """The random stream of one client of one level: the same requests in the same order for a seed,
    whatever the interleaving of the clients."""
    return random.Random(f"{seed}:{concurrency}:{client}")
