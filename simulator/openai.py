"""OpenAI-compatible request parsing and response bodies, shaped like vLLM's.

Pure functions (no I/O): the HTTP layer feeds JSON bodies in and writes what comes out.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from simulator.workload import CHAT_TOKENS_PER_MESSAGE, CHAT_TOKENS_PRIMING, count_tokens

DEFAULT_COMPLETION_MAX_TOKENS = 16  # the OpenAI / vLLM default for /v1/completions


class ApiError(Exception):
    """A request vLLM would refuse; becomes ``{"error": {...}}`` with this HTTP status."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param = param

    def body(self) -> bytes:
        error = {"message": str(self), "type": self.kind, "param": self.param, "code": self.status}
        return json.dumps({"error": error}).encode()


@dataclass(frozen=True)
class ParsedRequest:
    """What the engine needs from a request (token counts in the simulator's tokenizer)."""

    chat: bool
    prompt_tokens: int
    max_tokens: int | None  # None: the client set no limit
    stream: bool
    include_usage: bool
    model: str


def parse_request(body: bytes, chat: bool, model: str, max_model_len: int) -> ParsedRequest:
    """Validate a completions or chat request; raises ApiError like vLLM (400/404)."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    requested = data.get("model") or model
    if requested != model:
        raise ApiError(404, f"The model `{requested}` does not exist.", "NotFoundError", "model")
    prompt_tokens = _chat_tokens(data) if chat else _prompt_tokens(data)
    max_tokens = data.get("max_completion_tokens", data.get("max_tokens")) if chat else data.get("max_tokens")
    if max_tokens is None and not chat:
        max_tokens = DEFAULT_COMPLETION_MAX_TOKENS
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
    _check_length(prompt_tokens, max_tokens, max_model_len, chat)
    options = data.get("stream_options") or {}
    stream = bool(data.get("stream", False))
    return ParsedRequest(chat, prompt_tokens, max_tokens, stream, stream and bool(options.get("include_usage")),
                         model)


def tokenize(body: bytes, model: str, max_model_len: int) -> dict[str, Any]:
    """vLLM's ``POST /tokenize``: the count of a ``prompt`` or of chat ``messages`` (template
    included) in the simulator's tokenizer, with the served ``max_model_len``; raises ApiError."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    count = _chat_tokens(data) if "messages" in data else _prompt_tokens(data)
    return {"count": count, "max_model_len": max_model_len, "tokens": list(range(count))}


def _prompt_tokens(data: dict[str, Any]) -> int:
    prompt = data.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)  # token ids
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt must be a string, a list of one string or a list of token ids", param="prompt")
    return max(1, count_tokens(prompt))


def _chat_tokens(data: dict[str, Any]) -> int:
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages")
    total = CHAT_TOKENS_PRIMING
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise ApiError(400, "each message needs a role and content", param="messages")
        content = message.get("content") or ""
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        total += CHAT_TOKENS_PER_MESSAGE + count_tokens(str(content))
    return total


def _check_length(prompt_tokens: int, max_tokens: int | None, max_model_len: int, chat: bool) -> None:
    where = "messages" if chat else "prompt"
    if prompt_tokens >= max_model_len or (max_tokens is not None and prompt_tokens + max_tokens > max_model_len):
        requested = prompt_tokens + (max_tokens or 0)
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{requested} tokens ({prompt_tokens} in the {where}, {max_tokens or 0} in the completion). "
            f"Please reduce the length of the {where} or completion.",
        )


class ResponseBuilder:
    """Builds the chunks and bodies of one response (ids and ``created`` fixed per request)."""

    def __init__(self, request: ParsedRequest) -> None:
        self.request = request
        prefix = "chatcmpl-" if request.chat else "cmpl-"
        self.id = prefix + uuid.uuid4().hex
        self.created = int(time.time())
        self.object = "chat.completion.chunk" if request.chat else "text_completion"

    def _chunk(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None,
               with_null_usage: bool = False) -> bytes:
        body: dict[str, Any] = {"id": self.id, "object": self.object, "created": self.created,
                                "model": self.request.model, "choices": choices}
        if usage is not None or with_null_usage:
            body["usage"] = usage
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    def role_chunk(self) -> bytes:
        """Chat streams open with the assistant role, as vLLM sends it."""
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        return self._chunk([choice])

    def token_chunk(self, text: str, finish_reason: str | None = None) -> bytes:
        """One streamed token; the last one carries the finish reason."""
        if self.request.chat:
            # vLLM writes chat chunks with exclude_unset=True: stop_reason only when finishing.
            choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "logprobs": None,
                                      "finish_reason": finish_reason}
            if finish_reason is not None:
                choice["stop_reason"] = None
            return self._chunk([choice])
        # ... and completion chunks with exclude_unset=False: every field, "usage": null included.
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return self._chunk([choice], None, with_null_usage=True)

    def usage_chunk(self, completion_tokens: int) -> bytes:
        """The final chunk with ``stream_options.include_usage``: no choices, only usage."""
        return self._chunk([], self.usage(completion_tokens))

    def usage(self, completion_tokens: int) -> dict[str, int]:
        prompt = self.request.prompt_tokens
        return {"prompt_tokens": prompt, "total_tokens": prompt + completion_tokens,
                "completion_tokens": completion_tokens}

    def full_body(self, text: str, completion_tokens: int, finish_reason: str) -> bytes:
        """The non-streaming response body with ``usage``."""
        if self.request.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                                      "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                      "stop_reason": None, "prompt_logprobs": None}
            obj = "text_completion"
        body = {"id": self.id, "object": obj, "created": self.created, "model": self.request.model,
                "choices": [choice], "usage": self.usage(completion_tokens)}
        return json.dumps(body).encode()


DONE = b"data: [DONE]\n\n"
