"""What the client gets back when it did not ask for a stream, and error bodies.

The upstream always streams: the log's wires ask for a stream, and the proxy
forwards those bytes and no others. A client that asked for one JSON answer
(``"stream": false`` or no ``stream``) gets the answer assembled from the
stream's events as the provider's own non-streamed answer is shaped: a
``chat.completion`` object (the id, model and usage of the stream, the text,
reasoning, refusal and tool calls joined) or an Anthropic ``message`` (the
``message_start`` object with each content block completed and the
``message_delta`` stop reason and usage applied). Fields a provider sends only
in non-streamed answers (``logprobs`` of a non-streamed request, which the
proxy refuses; annotations) are not invented.

Errors the proxy itself answers are in the client API's error shape, so an
SDK raises its usual error class with the proxy's sentence as the message.
"""

from __future__ import annotations

from typing import Any

from httpx_sse import ServerSentEvent

from tapelog._errors import JsonValueError
from tapelog.log import decode
from tapelog.log._api import encode_trusted
from tapelog.proxy._types import Family

__all__ = ["AnthropicAnswer", "OpenAIAnswer", "error_body"]

_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "request_too_large",
    502: "api_error",
}


def error_body(family: Family, status: int, message: str, kind: str | None = None) -> bytes:
    """An error answer in the shape of the client's API."""
    if family == "anthropic":
        shaped = {"type": kind or _ANTHROPIC_ERRORS.get(status, "api_error"), "message": message}
        return encode_trusted({"type": "error", "error": shaped})
    kind = kind or ("invalid_request_error" if status < 500 else "server_error")
    error: dict[str, Any] = {
        "message": message,
        "type": kind,
        "param": None,
        "code": "tapelog_proxy",
    }
    return encode_trusted({"error": error})


def _frame(event: ServerSentEvent) -> Any:
    data = event.data
    if not data.strip() or data.strip() == "[DONE]":
        return None
    try:
        frame = decode(data)
    except JsonValueError:
        return None
    return frame if isinstance(frame, dict) else None


class OpenAIAnswer:
    """A ``chat.completion`` assembled from ``chat.completion.chunk`` events."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._text: list[str] = []
        self._reasoning: list[str] | None = None
        self._refusal: list[str] = []
        self._calls: dict[Any, dict[str, Any]] = {}
        self._finish: Any = None
        self._usage: Any = None

    def feed(self, event: ServerSentEvent) -> None:
        frame = _frame(event)
        if frame is None:
            return
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if frame.get(key) is not None:
                self._head.setdefault(key, frame[key])
        if frame.get("usage") is not None:
            self._usage = frame["usage"]
        for choice in frame.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self._text.append(delta["content"])
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str):
            self._reasoning = (self._reasoning or []) + [reasoning]
        if isinstance(delta.get("refusal"), str):
            self._refusal.append(delta["refusal"])
        for position, piece in enumerate(delta.get("tool_calls") or ()):
            if not isinstance(piece, dict):
                continue
            call = self._calls.setdefault(
                piece.get("index", position),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            if piece.get("id"):
                call["id"] = piece["id"]
            function = piece.get("function") or {}
            if function.get("name"):
                call["function"]["name"] = function["name"]
            if isinstance(function.get("arguments"), str):
                call["function"]["arguments"] += function["arguments"]
        if choice.get("finish_reason") is not None:
            self._finish = choice["finish_reason"]

    def body(self) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._reasoning is not None:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if self._calls:
            message["tool_calls"] = list(self._calls.values())
        head = self._head
        out: dict[str, Any] = {
            "id": head.get("id"),
            "object": "chat.completion",
            "created": head.get("created"),
            "model": head.get("model"),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": self._finish}
            ],
        }
        for key in ("system_fingerprint", "service_tier"):
            if key in head:
                out[key] = head[key]
        if self._usage is not None:
            out["usage"] = self._usage
        return encode_trusted(out)


class AnthropicAnswer:
    """A Messages ``message`` assembled from its stream events."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"type": "message", "role": "assistant"}
        self._blocks: dict[Any, dict[str, Any]] = {}
        self._inputs: dict[Any, str] = {}

    def feed(self, event: ServerSentEvent) -> None:
        frame = _frame(event)
        if frame is None:
            return
        kind = frame.get("type")
        index = frame.get("index")
        if kind == "message_start" and isinstance(frame.get("message"), dict):
            self._message = dict(frame["message"])
            self._message["usage"] = dict(self._message.get("usage") or {})
        elif kind == "content_block_start" and isinstance(frame.get("content_block"), dict):
            self._blocks[index] = dict(frame["content_block"])
            if self._blocks[index].get("type") in ("tool_use", "server_tool_use"):
                self._inputs[index] = ""
        elif kind == "content_block_delta" and index in self._blocks:
            self._delta(self._blocks[index], index, frame.get("delta") or {})
        elif kind == "content_block_stop" and index in self._inputs:
            text = self._inputs.pop(index)
            try:
                self._blocks[index]["input"] = decode(text) if text else {}
            except JsonValueError:
                self._blocks[index]["input"] = {}
        elif kind == "message_delta":
            delta = frame.get("delta") or {}
            self._message.update((k, v) for k, v in delta.items())
            usage = frame.get("usage") or {}
            self._message.setdefault("usage", {}).update(
                (k, v) for k, v in usage.items() if v is not None
            )

    def _delta(self, block: dict[str, Any], index: Any, delta: dict[str, Any]) -> None:
        dtype = delta.get("type")
        if dtype == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif dtype == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif dtype == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif dtype == "input_json_delta" and index in self._inputs:
            self._inputs[index] += str(delta.get("partial_json", ""))
        elif dtype == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))

    def body(self) -> bytes:
        message = dict(self._message)
        message["content"] = list(self._blocks.values())
        return encode_trusted(message)
