"""What the client gets back when it did not ask for a stream, and error bodies.

The upstream always streams: the log's wires ask for a stream, and the proxy
forwards those bytes and no others. A client that asked for one JSON answer
(``"stream": false`` or no ``stream``) gets the answer assembled from the
stream's events as the provider's own non-streamed answer is shaped: a
``chat.completion`` object (the id, model and usage of the stream, the text,
reasoning, refusal and tool calls joined) or an Anthropic ``message`` (the
``message_start`` object with each content block completed and the
``message_delta`` stop reason and usage applied). Every choice of an ``n`` > 1
request is answered, and ``logprobs`` streamed per chunk are joined per
choice. Fields a provider sends only in non-streamed answers (annotations)
are not invented.

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


class _Choice:
    """One choice of a ``chat.completion``, joined from its deltas."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] | None = None
        self.refusal: list[str] = []
        self.calls: dict[Any, dict[str, Any]] = {}
        self.finish: Any = None
        self.logprobs: dict[str, list[Any]] = {}

    def feed(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict):  # per-token entries, joined in stream order
            for key, tokens in logprobs.items():
                if isinstance(tokens, list):
                    self.logprobs.setdefault(key, []).extend(tokens)
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str):
            self.reasoning = (self.reasoning or []) + [reasoning]
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for position, piece in enumerate(delta.get("tool_calls") or ()):
            if not isinstance(piece, dict):
                continue
            call = self.calls.setdefault(
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
            self.finish = choice["finish_reason"]

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning is not None:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.calls:
            message["tool_calls"] = list(self.calls.values())
        return message


class OpenAIAnswer:
    """A ``chat.completion`` assembled from ``chat.completion.chunk`` events
    (every choice of an ``n`` > 1 request, in index order)."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._choices: dict[int, _Choice] = {}
        self._usage: Any = None
        self._diagnostics: Any = None

    def feed(self, event: ServerSentEvent) -> None:
        frame = _frame(event)
        if frame is None:
            return
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if frame.get(key) is not None:
                self._head.setdefault(key, frame[key])
        if frame.get("usage") is not None:
            self._usage = frame["usage"]
        if frame.get("prompt_cache_diagnostics") is not None:
            self._diagnostics = frame["prompt_cache_diagnostics"]
        for choice in frame.get("choices") or ():
            if isinstance(choice, dict):
                number = choice.get("index", 0)
                number = number if isinstance(number, int) else 0
                self._choices.setdefault(number, _Choice()).feed(choice)

    def body(self) -> bytes:
        choices = self._choices or {0: _Choice()}
        head = self._head
        out: dict[str, Any] = {
            "id": head.get("id"),
            "object": "chat.completion",
            "created": head.get("created"),
            "model": head.get("model"),
            "choices": [
                {
                    "index": number,
                    "message": choices[number].message(),
                    "logprobs": choices[number].logprobs or None,
                    "finish_reason": choices[number].finish,
                }
                for number in sorted(choices)
            ],
        }
        for key in ("system_fingerprint", "service_tier"):
            if key in head:
                out[key] = head[key]
        if self._usage is not None:
            out["usage"] = self._usage
        if self._diagnostics is not None:
            out["prompt_cache_diagnostics"] = self._diagnostics
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
