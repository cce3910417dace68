"""Message content as the GenAI conventions' opt-in attributes, secrets redacted.

Only ``tapelog export otel --content`` calls these: by default no text a
model, a tool, a user or a provider wrote leaves tapelog (docs/otel.md,
"Content"). Each attribute is one JSON text in the conventions' shapes:

* ``gen_ai.input.messages``: ``[{"role", "parts": [...]}]``, the whole
  message list the request sent (its prefix messages first, as the wire got
  them);
* ``gen_ai.output.messages``: the answer, ``[{"role": "assistant", "parts",
  "finish_reason"}]``;
* ``gen_ai.system_instructions``: ``[{"type": "text", "content": system}]``;
* ``gen_ai.tool.definitions``: ``[{"type": "function", "name", ...}]``.

Parts: ``text`` and ``reasoning`` (``content``), ``tool_call`` (``id``,
``name``, ``arguments`` as the raw JSON text the model produced, never
re-encoded), ``tool_call_response`` (``id``, ``response``), images as
``blob`` or ``uri``; any other block keeps its fields. Opaque provider state
(reasoning signatures, redacted reasoning) is left out. Every JSON text goes
through :func:`tapelog.log.redact` last, so a secret registered in this
process (a provider key read from the environment, a store password) is
replaced by ``***`` in every form it may take there, also when the log
predates its registration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tapelog.export import _semconv as sc
from tapelog.log import redact
from tapelog.log._api import encode_str
from tapelog.request import LlmRequest

__all__ = ["input_attributes", "output_messages", "redacted_json", "tool_result_text"]


def redacted_json(value: Any) -> str:
    """``value`` as canonical JSON text with every registered secret redacted."""
    return redact(encode_str(value))


def _part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind == "reasoning":
        return {"type": "reasoning", "content": block.get("text", "")}
    if kind == "tool_call":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("arguments"),
        }
    if kind == "tool_result":
        return {
            "type": "tool_call_response",
            "id": block.get("tool_call_id"),
            "response": block.get("content"),
        }
    if kind == "image":
        if "url" in block:
            return {"type": "uri", "modality": "image", "uri": block["url"]}
        return {
            "type": "blob",
            "modality": "image",
            "mime_type": block.get("media_type"),
            "content": block.get("data"),
        }
    return dict(block)


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = (_part(block) for block in content if isinstance(block, Mapping))
    return [p for p in parts if p is not None]


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": message["role"], "parts": _parts(message["content"])}


def input_attributes(request: LlmRequest) -> dict[str, str]:
    """The opt-in input attributes of a chat span: messages, system prompt, tools."""
    header = request.header
    out = {sc.GEN_AI_INPUT_MESSAGES: redacted_json([_message(m) for m in request.messages])}
    if header.system:
        system = header.system
        parts = (
            [{"type": "text", "content": system}]
            if isinstance(system, str)
            else [{"type": "text", "content": b["text"]} for b in system if "text" in b]
        )
        out[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = redacted_json(parts)
    if header.tools:
        out[sc.GEN_AI_TOOL_DEFINITIONS] = redacted_json(
            [{"type": "function", **tool} for tool in header.tools]
        )
    return out


def output_messages(content: Sequence[Mapping[str, Any]], finish_reason: str | None) -> str:
    """``gen_ai.output.messages`` for one answer (its content blocks)."""
    message: dict[str, Any] = {"role": "assistant", "parts": _parts(content)}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return redacted_json([message])


def tool_result_text(content: Any) -> str:
    """A tool result as ``gen_ai.tool.call.result``: the text, or its blocks as JSON."""
    if isinstance(content, str):
        return redact(content)
    return redacted_json(content)
