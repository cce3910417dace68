"""The OpenAI-compatible chat completions wire, as OpenAI and DeepSeek send it.

Pure functions from a resolved reply to response bytes: the streamed
``chat.completion.chunk`` frames, the non-streamed ``chat.completion`` object,
the usage object of each cache rule, and the error bodies. The DeepSeek flavour
adds ``reasoning_content`` deltas, a ``: keep-alive`` comment first, and its
``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens`` usage fields
(docs/providers.md, "OpenAI-compatible body" and "Prompt caches").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tapelog.cache._api import (
    CacheOutcome,
    SegmentSource,
    openai_reply_message,
    openai_reply_sources,
)
from tapelog.emulator._script import Reply
from tapelog.emulator._sse import Stream, comment_frame, data_frame, split_even, split_every
from tapelog.log import encode

__all__ = [
    "alternative",
    "completion_body",
    "diagnose",
    "error_body",
    "error_frame",
    "error_object",
    "message_of",
    "overflow_body",
    "reply_sources",
    "stream_frames",
    "usage_of",
]

_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_exceeded"}


def error_body(
    status: int, message: str, kind: str | None = None, code: str | None = None
) -> bytes:
    """``{"error": {"message", "type", "param", "code"}}`` as OpenAI answers errors."""
    return encode({"error": error_object(status, message, kind, code)})


def error_object(
    status: int, message: str, kind: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The ``error`` object of an OpenAI error answer."""
    if kind is None:
        kind = _ERROR_TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
    if code is None and status == 429:
        code = "rate_limit_exceeded"
    return {"message": message, "type": kind, "param": None, "code": code}


def error_frame(status: int, message: str, kind: str | None = None) -> bytes:
    """An error inside a stream: one ``data:`` frame with the error object, then the end."""
    return data_frame({"error": error_object(status, message, kind)})


def overflow_body(prompt_tokens: int, window: int) -> bytes:
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
    )
    return encode(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    )


def usage_of(outcome: CacheOutcome, reply: Reply, *, deepseek: bool) -> dict[str, Any]:
    """OpenAI reports ``cached_tokens``; DeepSeek adds hit/miss counts summing to the prompt."""
    output = reply.output_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": outcome.prompt,
        "completion_tokens": output,
        "total_tokens": outcome.prompt + output,
        "prompt_tokens_details": {"cached_tokens": outcome.read},
    }
    if deepseek:
        usage["prompt_cache_hit_tokens"] = outcome.read
        usage["prompt_cache_miss_tokens"] = outcome.prompt - outcome.read
    if reply.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
    return usage


def _calls(reply: Reply) -> list[tuple[str | None, str, str]]:
    return [(c.id, c.name, c.arguments) for c in reply.tool_calls]


def message_of(reply: Reply, *, reasoning: bool) -> dict[str, Any]:
    """The assistant message: the non-streamed answer and what a client sends back."""
    return openai_reply_message(
        reply.text, reply.reasoning, _calls(reply), with_reasoning=reasoning
    )


def reply_sources(reply: Reply) -> list[SegmentSource]:
    """The reply as a client would send it back (see ``openai_reply_sources``)."""
    return openai_reply_sources(reply.text, reply.reasoning, _calls(reply))


@dataclass(frozen=True, slots=True)
class _Envelope:
    id: str
    created: int
    model: str
    include_usage: bool

    def chunk(self, choices: list[Any], usage: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            # With include_usage every chunk carries "usage", null until the last one.
            out["usage"] = usage
        return out

    def delta(self, delta: dict[str, Any], finish: str | None = None, index: int = 0) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return data_frame(self.chunk([choice]))


def alternative(reply: Reply, index: int) -> Reply:
    """Choice ``index`` of an ``n`` > 1 answer: choice 0 is the reply itself,
    each other one the same reply with `` (choice k)`` after its text, so a
    client (and a test) can tell which one it kept."""
    if index == 0:
        return reply
    return replace(reply, text=f"{reply.text} (choice {index + 1})".lstrip())


def stream_frames(
    reply: Reply,
    usage: dict[str, Any],
    *,
    id: str,
    created: int,
    model: str,
    include_usage: bool,
    deepseek: bool,
    choices: int = 1,
    diagnostics: Mapping[str, Any] | None = None,
) -> Stream:
    """The frames of a streamed answer: each choice's deltas in turn (choice 0
    first), then the usage frame and ``[DONE]``."""
    env = _Envelope(id, created, model, include_usage)
    opening = [comment_frame("keep-alive")] if deepseek else []
    body: list[bytes] = []
    for number in range(choices):
        body.extend(_choice_frames(env, alternative(reply, number), number, deepseek))
    last = env.chunk([], usage)
    if diagnostics is not None:
        last["prompt_cache_diagnostics"] = diagnostics
    closing = [data_frame(last)] if include_usage else []
    closing.append(data_frame("[DONE]"))
    return Stream(opening, body, closing, opening=1)


def _choice_frames(env: _Envelope, reply: Reply, number: int, deepseek: bool) -> list[bytes]:
    body = [env.delta({"role": "assistant", "content": ""}, index=number)]
    if deepseek:
        body.extend(
            env.delta({"reasoning_content": p}, index=number) for p in split_every(reply.reasoning)
        )
    body.extend(env.delta({"content": p}, index=number) for p in split_every(reply.text))
    for index, call in enumerate(reply.tool_calls):
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        body.append(env.delta({"tool_calls": [first]}, index=number))
        for piece in split_even(call.arguments):
            fragment = {"index": index, "function": {"arguments": piece}}
            body.append(env.delta({"tool_calls": [fragment]}, index=number))
    body.append(env.delta({}, reply.finish_reason, index=number))
    return body


def completion_body(
    reply: Reply,
    usage: dict[str, Any],
    *,
    id: str,
    created: int,
    model: str,
    deepseek: bool,
    choices: int = 1,
    diagnostics: Mapping[str, Any] | None = None,
) -> bytes:
    shaped = [
        {
            "index": number,
            "message": message_of(alternative(reply, number), reasoning=deepseek),
            "logprobs": None,
            "finish_reason": reply.finish_reason,
        }
        for number in range(choices)
    ]
    out = {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": shaped,
        "usage": usage,
    }
    if diagnostics is not None:
        out["prompt_cache_diagnostics"] = diagnostics
    return encode(out)


def diagnose(
    previous: Mapping[str, Any] | None, body: Mapping[str, Any], outcome: CacheOutcome
) -> dict[str, Any]:
    """The emulator's ``prompt_cache_diagnostics``: this request compared with
    the previous one of its cache rule, as a provider compares a request with
    the response it names (docs/emulator.md): the first of model, tools,
    messages that diverged (a system or developer message is ``system``), and
    the prompt tokens the cache did not serve."""
    if previous is None:
        return {"type": "comparison_response_not_found"}
    reason = None
    if previous.get("model") != body.get("model"):
        reason = "model_changed"
    elif encode(previous.get("tools") or []) != encode(body.get("tools") or []):
        reason = "tools_changed"
    else:
        before, after = previous.get("messages") or [], body.get("messages") or []
        for old, new in zip(before, after, strict=False):
            if encode(old) != encode(new):
                roles = (old.get("role"), new.get("role"))
                system = any(r in ("system", "developer") for r in roles)
                reason = "system_changed" if system else "messages_changed"
                break
        else:
            if len(after) < len(before):
                reason = "messages_changed"
    if reason is None:
        return {"type": "cache_hit"}
    missed = outcome.prompt - outcome.read
    return {"type": "cache_miss", "reason": reason, "cache_missed_tokens": missed}
