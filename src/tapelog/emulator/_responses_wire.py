"""The OpenAI Responses wire: output items, response objects, named SSE events.

Pure functions from a resolved reply to response bytes. Output items come in
the order a model produces them — a ``reasoning`` item (summary and, when the
request includes ``reasoning.encrypted_content``, the sealed content), a
``message`` with one ``output_text`` part, then ``function_call`` items — and
the stream is the real event sequence (``response.created``,
``response.in_progress``, per item ``response.output_item.added`` … ``done``,
then ``response.completed`` or ``response.incomplete``), every event with its
``sequence_number`` (docs/emulator.md, "Responses API").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from tapelog.cache._api import CacheOutcome
from tapelog.emulator._openai_wire import error_object
from tapelog.emulator._script import Reply
from tapelog.emulator._sse import Stream, event_frame, split_even, split_every
from tapelog.log import encode

__all__ = [
    "OPENING_EVENTS",
    "Ids",
    "error_body",
    "failed_event",
    "output_items",
    "overflow_body",
    "response_body",
    "stream_frames",
    "usage_of",
]

OPENING_EVENTS: Final = 2
"""``response.created`` and ``response.in_progress``: what a failing stream sends first."""

# The Responses API's context error (param "input", code context_length_exceeded),
# as quoted in openai/openai-agents-python#1483 and BerriAI/litellm#13447.
_OVERFLOW = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
# Request fields a response object echoes, with the value it reports when absent.
_ECHOED: Final[tuple[tuple[str, Any], ...]] = (
    ("instructions", None),
    ("max_output_tokens", None),
    ("parallel_tool_calls", True),
    ("previous_response_id", None),
    ("prompt_cache_key", None),
    ("reasoning", {"effort": None, "summary": None}),
    ("service_tier", "default"),
    ("store", True),
    ("temperature", 1.0),
    ("text", {"format": {"type": "text"}}),
    ("tool_choice", "auto"),
    ("tools", []),
    ("top_p", 1.0),
    ("truncation", "disabled"),
    ("user", None),
    ("metadata", {}),
)


@dataclass(frozen=True, slots=True)
class Ids:
    """Per-request facts every answer carries: ids are numbered by request."""

    number: int
    created: int
    model: str

    @property
    def response(self) -> str:
        return f"resp_emu_{self.number:06d}"

    def item(self, prefix: str, index: int) -> str:
        return f"{prefix}_emu_{self.number:06d}_{index}"


def error_body(
    status: int,
    message: str,
    kind: str | None = None,
    code: str | None = None,
    *,
    param: str | None = None,
) -> bytes:
    """``{"error": {"message", "type", "param", "code"}}``, as the chat wire, with ``param``."""
    error = error_object(status, message, kind, code)
    error["param"] = param
    return encode({"error": error})


def overflow_body() -> bytes:
    return error_body(400, _OVERFLOW, code="context_length_exceeded", param="input")


def failed_event(
    body: Mapping[str, Any], ids: Ids, status: int, message: str, kind: str | None = None
) -> bytes:
    """The ``response.failed`` event a failing stream ends with (after the
    opening events): the response, ``status: "failed"``, its ``error``."""
    response = _response(body, ids, status="failed", output=[], usage=None)
    response["error"] = {"code": error_object(status, message, kind)["type"], "message": message}
    payload = {"type": "response.failed", "sequence_number": OPENING_EVENTS, "response": response}
    return event_frame("response.failed", payload)


def usage_of(outcome: CacheOutcome, reply: Reply) -> dict[str, Any]:
    output = reply.output_tokens
    return {
        "input_tokens": outcome.prompt,
        "input_tokens_details": {"cached_tokens": outcome.read},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        "total_tokens": outcome.prompt + output,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def output_items(
    reply: Reply, ids: Ids, seal: Callable[[str, str], str] | None
) -> list[dict[str, Any]]:
    """The completed output items; ``seal(item_id, reasoning)`` gives the
    ``encrypted_content`` when the request includes it (else None: left out)."""
    items: list[dict[str, Any]] = []
    if reply.reasoning:
        rid = ids.item("rs", len(items))
        reasoning: dict[str, Any] = {
            "id": rid,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": reply.reasoning}],
        }
        if seal is not None:
            reasoning["encrypted_content"] = seal(rid, reply.reasoning)
        items.append(reasoning)
    if reply.text:
        items.append(
            {
                "id": ids.item("msg", len(items)),
                "type": "message",
                "status": "completed",
                "content": [_text_part(reply.text)],
                "role": "assistant",
            }
        )
    for call in reply.tool_calls:
        items.append(
            {
                "id": ids.item("fc", len(items)),
                "type": "function_call",
                "status": "completed",
                "arguments": call.arguments,
                "call_id": call.id,
                "name": call.name,
            }
        )
    return items


def _status(reply: Reply) -> str:
    return "incomplete" if reply.finish_reason == "length" else "completed"


def _response(
    body: Mapping[str, Any],
    ids: Ids,
    *,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    out: dict[str, Any] = {
        "id": ids.response,
        "object": "response",
        "created_at": ids.created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "model": ids.model,
        "output": output,
    }
    for name, default in _ECHOED:
        out[name] = body.get(name, default)
    out["usage"] = usage
    return out


def response_body(
    body: Mapping[str, Any],
    output: list[dict[str, Any]],
    usage: dict[str, Any],
    ids: Ids,
    *,
    reply: Reply,
) -> bytes:
    """The non-streamed answer: the whole response object."""
    return encode(_response(body, ids, status=_status(reply), output=output, usage=usage))


class _Events:
    """Numbers events in order (``sequence_number`` starts at 0)."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, "sequence_number": len(self.frames), **fields}
        self.frames.append(event_frame(kind, payload))


def _reasoning_events(events: _Events, index: int, item: dict[str, Any]) -> None:
    where = {"item_id": item["id"], "output_index": index}
    opened = {"id": item["id"], "type": "reasoning", "summary": []}
    events.add("response.output_item.added", output_index=index, item=opened)
    text = item["summary"][0]["text"]
    events.add(
        "response.reasoning_summary_part.added",
        **where,
        summary_index=0,
        part={"type": "summary_text", "text": ""},
    )
    for piece in split_every(text):
        events.add("response.reasoning_summary_text.delta", **where, summary_index=0, delta=piece)
    events.add("response.reasoning_summary_text.done", **where, summary_index=0, text=text)
    events.add(
        "response.reasoning_summary_part.done",
        **where,
        summary_index=0,
        part={"type": "summary_text", "text": text},
    )


def _message_events(events: _Events, index: int, item: dict[str, Any]) -> None:
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    opened = {**item, "status": "in_progress", "content": []}
    events.add("response.output_item.added", output_index=index, item=opened)
    events.add("response.content_part.added", **where, part=_text_part(""))
    text = item["content"][0]["text"]
    for piece in split_every(text):
        events.add("response.output_text.delta", **where, delta=piece, logprobs=[])
    events.add("response.output_text.done", **where, text=text, logprobs=[])
    events.add("response.content_part.done", **where, part=_text_part(text))


def _call_events(events: _Events, index: int, item: dict[str, Any]) -> None:
    where = {"item_id": item["id"], "output_index": index}
    opened = {**item, "status": "in_progress", "arguments": ""}
    events.add("response.output_item.added", output_index=index, item=opened)
    for piece in split_even(item["arguments"]):
        events.add("response.function_call_arguments.delta", **where, delta=piece)
    events.add("response.function_call_arguments.done", **where, arguments=item["arguments"])


_ITEM_EVENTS = {
    "reasoning": _reasoning_events,
    "message": _message_events,
    "function_call": _call_events,
}


def stream_frames(
    body: Mapping[str, Any],
    output: list[dict[str, Any]],
    usage: dict[str, Any],
    ids: Ids,
    *,
    reply: Reply,
) -> Stream:
    """The event stream; the last event (``response.completed`` or
    ``response.incomplete``) is what only a complete stream has."""
    events = _Events()
    opened = _response(body, ids, status="in_progress", output=[], usage=None)
    events.add("response.created", response=opened)
    events.add("response.in_progress", response=opened)
    for index, item in enumerate(output):
        _ITEM_EVENTS[item["type"]](events, index, item)
        events.add("response.output_item.done", output_index=index, item=item)
    status = _status(reply)
    final = _response(body, ids, status=status, output=output, usage=usage)
    events.add(f"response.{status}", response=final)
    *frames, closing = events.frames
    return Stream([], frames, [closing], opening=OPENING_EVENTS)
