"""A Responses API event stream for given output items, as the real API orders it.

``response.created``, then per output item ``response.output_item.added``,
its deltas (text by content part, reasoning summary by summary part, function
arguments) and ``response.output_item.done``, then ``response.completed`` (or
``response.incomplete``) with the usage. Shapes follow the ``openai`` SDK's
``openai/types/responses`` (docs/providers.md, "The Responses wire"). Deltas
are cut at ``cuts`` (character counts, reused in turn) so tests can vary them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

__all__ = ["response_events", "sse_bytes"]


def _pieces(text: str, cuts: Sequence[int]) -> list[str]:
    out, at, k = [], 0, 0
    while at < len(text):
        size = max(1, cuts[k % len(cuts)]) if cuts else len(text)
        out.append(text[at : at + size])
        at += size
        k += 1
    return out


def _added(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item as ``output_item.added`` shows it: in progress, nothing generated yet."""
    itype = item.get("type")
    if itype == "message":
        return {**item, "status": "in_progress", "content": []}
    if itype == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    if itype == "reasoning":
        return {k: v for k, v in item.items() if k != "encrypted_content"} | {"summary": []}
    return dict(item)


def response_events(
    items: Sequence[Mapping[str, Any]],
    *,
    usage: Mapping[str, Any] | None = None,
    cuts: Sequence[int] = (3,),
    incomplete: str | None = None,
    response_id: str = "resp_1",
) -> Iterator[dict[str, Any]]:
    """The events of a response whose output is ``items``."""
    base = {"id": response_id, "object": "response", "model": "m1", "output": []}
    yield {"type": "response.created", "response": {**base, "status": "in_progress"}}
    for index, item in enumerate(items):
        common = {"output_index": index, "item_id": item.get("id", "")}
        yield {"type": "response.output_item.added", "output_index": index, "item": _added(item)}
        itype = item.get("type")
        if itype == "message":
            for c, part in enumerate(item.get("content", ())):
                refusal = part["type"] == "refusal"
                field = "refusal" if refusal else "text"
                yield {
                    "type": "response.content_part.added",
                    **common,
                    "content_index": c,
                    "part": {**part, field: ""},
                }
                etype = "response.refusal.delta" if refusal else "response.output_text.delta"
                for piece in _pieces(part[field], cuts):
                    yield {
                        "type": etype,
                        **common,
                        "content_index": c,
                        "delta": piece,
                        "logprobs": [],
                    }
                yield {
                    "type": "response.content_part.done",
                    **common,
                    "content_index": c,
                    "part": part,
                }
        elif itype == "function_call":
            for piece in _pieces(item["arguments"], cuts):
                yield {"type": "response.function_call_arguments.delta", **common, "delta": piece}
            yield {
                "type": "response.function_call_arguments.done",
                **common,
                "arguments": item["arguments"],
            }
        elif itype == "reasoning":
            for s, part in enumerate(item.get("summary", ())):
                yield {
                    "type": "response.reasoning_summary_part.added",
                    **common,
                    "summary_index": s,
                    "part": {"type": "summary_text", "text": ""},
                }
                for piece in _pieces(part["text"], cuts):
                    yield {
                        "type": "response.reasoning_summary_text.delta",
                        **common,
                        "summary_index": s,
                        "delta": piece,
                    }
                yield {
                    "type": "response.reasoning_summary_part.done",
                    **common,
                    "summary_index": s,
                    "part": part,
                }
        yield {"type": "response.output_item.done", "output_index": index, "item": dict(item)}
    final = {**base, "output": list(items), "usage": usage}
    if incomplete is None:
        yield {"type": "response.completed", "response": {**final, "status": "completed"}}
    else:
        yield {
            "type": "response.incomplete",
            "response": {
                **final,
                "status": "incomplete",
                "incomplete_details": {"reason": incomplete},
            },
        }


def sse_bytes(events: Sequence[Mapping[str, Any]]) -> bytes:
    """The events as the HTTP body of a stream: ``event:`` and ``data:`` lines,
    with the ``sequence_number`` the API numbers them by."""
    out = bytearray()
    for n, event in enumerate(events):
        data = {**event, "sequence_number": n}
        out += b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
    return bytes(out)
