"""The Anthropic Messages wire: named SSE events, message objects, error bodies.

Pure functions from a resolved reply to response bytes. Blocks come in the
order a model produces them — thinking (with its signature), text, tool uses —
and ``message_delta`` carries the cumulative usage (docs/providers.md, "Anthropic
Messages").
"""

from __future__ import annotations

import hashlib
from typing import Any

from tapelog._errors import JsonValueError
from tapelog.cache._api import CacheOutcome
from tapelog.emulator._script import Reply
from tapelog.emulator._sse import Stream, event_frame, split_even, split_every
from tapelog.log import decode, encode

__all__ = [
    "cache_creation",
    "check_signatures",
    "error_body",
    "error_event",
    "error_type",
    "message_body",
    "overflow_body",
    "sign",
    "stop_reason",
    "stream_frames",
    "usage_of",
]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str, kind: str | None = None, *, request_id: str) -> bytes:
    error = {"type": kind or error_type(status), "message": message}
    return encode({"type": "error", "error": error, "request_id": request_id})


def overflow_body(prompt_tokens: int, window: int, *, request_id: str) -> bytes:
    message = f"prompt is too long: {prompt_tokens} tokens > {window} maximum"
    return error_body(400, message, request_id=request_id)


def stop_reason(reply: Reply) -> str:
    return _STOP[reply.finish_reason]


def usage_of(
    outcome: CacheOutcome,
    reply: Reply,
    *,
    output: int | None = None,
    creation: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``input_tokens`` counts only what follows the cache; the three sum to the
    prompt. ``creation`` splits the written tokens by TTL (``cache_creation``)."""
    usage: dict[str, Any] = {
        "input_tokens": outcome.uncached,
        "cache_creation_input_tokens": outcome.write,
        "cache_read_input_tokens": outcome.read,
    }
    if creation is not None:
        usage["cache_creation"] = creation
    usage["output_tokens"] = reply.output_tokens if output is None else output
    return usage


def cache_creation(
    outcome: CacheOutcome, tokens: list[int], ttls: list[str | None]
) -> dict[str, int]:
    """The written tokens by TTL, as the API reports them: those up to the last
    ``1h`` breakpoint went to the 1-hour cache, the rest to the 5-minute one
    (the API requires every 1h breakpoint before any 5m one)."""
    end, one_hour = 0, 0
    for size, ttl in zip(tokens, ttls, strict=True):
        end += size
        if ttl == "1h":
            one_hour = end
    start = outcome.read
    hour = max(0, min(one_hour, start + outcome.write) - start)
    return {
        "ephemeral_5m_input_tokens": outcome.write - hour,
        "ephemeral_1h_input_tokens": hour,
    }


_SIGNED = "emu-"
"""The prefix of a signature this emulator made (and so can check)."""


def sign(thinking: str) -> str:
    """The emulator's signature of a thinking block's text: a digest of it, so a
    block sent back with its text or signature altered no longer matches."""
    return _SIGNED + hashlib.sha256(thinking.encode("utf-8")).hexdigest()[:32]


def check_signatures(messages: Any) -> str | None:
    """The API's 400 for a thinking block sent back altered (its text or its
    signature): ``messages.N.content.M: Invalid `signature` in `thinking` block``.
    Only signatures this emulator made are checked (a scripted ``signature``
    is the script's own: the emulator cannot know what it signs)."""
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        for number, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, dict) or block.get("type") != "thinking":
                continue
            signature, thinking = block.get("signature"), block.get("thinking")
            if not isinstance(signature, str) or not isinstance(thinking, str):
                continue
            if signature.startswith(_SIGNED) and signature != sign(thinking):
                return f"messages.{index}.content.{number}: Invalid `signature` in `thinking` block"
    return None


def _signature(reply: Reply) -> str:
    if reply.signature is not None:
        return reply.signature
    return sign(reply.reasoning)


def _input_object(arguments: str) -> Any:
    """The parsed tool input for non-streamed answers; unparsable scripted text gives {}."""
    try:
        value = decode(arguments)
    except JsonValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.reasoning:
        blocks.append(
            {"type": "thinking", "thinking": reply.reasoning, "signature": _signature(reply)}
        )
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": _input_object(call.arguments),
            }
        )
    return blocks


def _message(
    reply: Reply, usage: dict[str, Any], *, id: str, model: str, done: bool
) -> dict[str, Any]:
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(reply) if done else [],
        "stop_reason": stop_reason(reply) if done else None,
        "stop_sequence": None,
        "usage": usage,
    }


def message_body(reply: Reply, usage: dict[str, Any], *, id: str, model: str) -> bytes:
    return encode(_message(reply, usage, id=id, model=model, done=True))


def _block_events(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> list[bytes]:
    frames = [
        event_frame(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    frames.extend(
        event_frame(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}
        )
        for d in deltas
    )
    frames.append(event_frame("content_block_stop", {"type": "content_block_stop", "index": index}))
    return frames


def stream_frames(
    reply: Reply,
    outcome: CacheOutcome,
    *,
    id: str,
    model: str,
    creation: dict[str, int] | None = None,
) -> Stream:
    start_usage = usage_of(outcome, reply, output=1, creation=creation)
    start = {
        "type": "message_start",
        "message": _message(reply, start_usage, id=id, model=model, done=False),
    }
    opening = [event_frame("message_start", start), event_frame("ping", {"type": "ping"})]
    body: list[bytes] = []
    index = 0
    if reply.reasoning:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in split_every(reply.reasoning)]
        deltas.append({"type": "signature_delta", "signature": _signature(reply)})
        body += _block_events(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
        index += 1
    if reply.text:
        deltas = [{"type": "text_delta", "text": p} for p in split_every(reply.text)]
        body += _block_events(index, {"type": "text", "text": ""}, deltas)
        index += 1
    for call in reply.tool_calls:
        deltas = [
            {"type": "input_json_delta", "partial_json": p} for p in split_even(call.arguments)
        ]
        begin: dict[str, Any] = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        body += _block_events(index, begin, deltas)
        index += 1
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(reply), "stop_sequence": None},
        "usage": usage_of(outcome, reply, creation=creation),
    }
    closing = [
        event_frame("message_delta", delta),
        event_frame("message_stop", {"type": "message_stop"}),
    ]
    return Stream([], opening + body, closing, opening=len(opening))


def error_event(status: int, message: str, kind: str | None = None) -> bytes:
    """An error inside a stream (e.g. ``overloaded_error``), after which it ends."""
    return event_frame(
        "error",
        {"type": "error", "error": {"type": kind or error_type(status), "message": message}},
    )
