"""OpenAI-compatible stream events -> neutral chunks (pure, one parser per stream).

Frames are ``data: {json}`` ending with ``data: [DONE]``; the usage arrives in
a last frame whose ``choices`` is empty. Tool calls stream as deltas joined by
``index``; the first fragment carries ``id`` and ``function.name``. A fragment
that brings a *different* ``id`` to an index already taken starts a new call
(Ollama sends every call of a parallel reply whole, each with ``index: 0``).
Unknown fields (OpenAI's ``obfuscation``, provider extensions) are ignored.

A request with ``n`` > 1 streams several choices, told apart by their
``index``. Choice 0 is the answer (its chunks are the ones every reader
assembles); the pieces of every other choice are chunks that name it
(``"choice": k``, tool-call pieces joined by their own wire index, and a
``finish`` chunk of their own), which ``assemble_alternatives`` joins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from httpx_sse import ServerSentEvent

from tapelog._errors import ProviderError
from tapelog.llm._http import event_frame
from tapelog.llm._types import normalise_usage, usage_count
from tapelog.log import redact
from tapelog.log._api import FrozenDict, freeze

__all__ = ["OpenAIStreamParser", "openai_usage"]

_FINISH: Final[Mapping[str, str]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
}


def openai_usage(
    usage: Mapping[str, Any], diagnostics: Mapping[str, Any] | None = None
) -> FrozenDict:
    """Normalise an OpenAI-family usage object to disjoint counts.

    OpenAI, vLLM and SGLang report ``prompt_tokens_details.cached_tokens``
    (newer OpenAI models also ``cache_write_tokens``); DeepSeek reports
    ``prompt_cache_hit_tokens`` + ``prompt_cache_miss_tokens`` = ``prompt_tokens``.
    ``reasoning`` is the part of ``output`` spent on reasoning.
    ``diagnostics``: the answer's ``prompt_cache_diagnostics``, kept as given.
    """
    prompt = usage_count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    completion = usage.get("completion_tokens_details")
    completion = completion if isinstance(completion, Mapping) else {}
    if "prompt_cache_hit_tokens" in usage:
        cached = usage_count(usage.get("prompt_cache_hit_tokens"))
        write = 0
        uncached = (
            usage_count(usage.get("prompt_cache_miss_tokens"))
            if "prompt_cache_miss_tokens" in usage
            else max(prompt - cached, 0)
        )
    else:
        cached = usage_count(details.get("cached_tokens"))
        write = usage_count(details.get("cache_write_tokens"))
        write = write or usage_count(usage.get("cache_write_tokens"))
        uncached = max(prompt - cached - write, 0)
    return normalise_usage(
        input=uncached,
        cache_read=cached,
        cache_write=write,
        output=usage_count(usage.get("completion_tokens")),
        reasoning=usage_count(completion.get("reasoning_tokens")),
        raw=usage,
        cache_diagnostics=diagnostics,
    )


class OpenAIStreamParser:
    """Feed it server-sent events; it returns the neutral chunks each one makes."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.done = False
        self._finish: str | None = None
        self._calls: dict[Any, tuple[str, int]] = {}  # wire index -> (call id, our index)
        self._next_call = 0

    def _call_index(self, wire_index: Any, call_id: str) -> int:
        """Our index for a tool-call fragment: the wire's, unless that one is taken.

        OpenAI numbers parallel calls 0, 1, 2... and only the first fragment
        of each has an ``id``. Ollama's OpenAI-compatible API sends each call
        complete in one fragment, all with ``index: 0`` (ollama/ollama#15457,
        #15497; older versions sent no index at all, #7881): joined by index,
        their arguments would run together into one call that is not JSON.
        A new ``id`` at a taken index is therefore a new call.
        """
        known = self._calls.get(wire_index)
        if known is not None and not (call_id and known[0] and call_id != known[0]):
            if call_id and not known[0]:
                self._calls[wire_index] = (call_id, known[1])
            return known[1]
        taken = {ours for _, ours in self._calls.values()}
        if known is None and isinstance(wire_index, int) and wire_index not in taken:
            ours = wire_index
        else:
            ours = self._next_call
        self._next_call = max(self._next_call, ours + 1)
        self._calls[wire_index] = (call_id, ours)
        return ours

    def feed(self, event: ServerSentEvent) -> list[FrozenDict]:
        data = event.data
        if data.strip() == "[DONE]":
            self.done = True
            return []
        frame = event_frame(self.provider, data)
        if frame is None:
            return []
        if frame.get("error"):
            raise self._stream_error(frame["error"])
        out: list[dict[str, Any]] = []
        for choice in frame.get("choices") or ():
            if not isinstance(choice, Mapping):
                continue
            number = choice.get("index", 0)
            if number == 0 or not isinstance(number, int):
                self._choice(choice, out)
            else:
                _alternative(choice, number, out)
        usage = frame.get("usage")
        if isinstance(usage, dict):
            # The provider's own cache verdict, on the frame that carries usage
            # (OpenAI's prompt_cache_diagnostics shape; docs/providers.md).
            found = frame.get("prompt_cache_diagnostics")
            diagnostics = found if isinstance(found, Mapping) else None
            out.append({"kind": "usage", "usage": openai_usage(usage, diagnostics)})
        return [freeze(chunk) for chunk in out]

    def _choice(self, choice: Mapping[str, Any], out: list[dict[str, Any]]) -> None:
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")  # vLLM and Ollama spell it so
        if isinstance(reasoning, str) and reasoning:
            out.append({"kind": "reasoning", "text": reasoning})
        text = delta.get("content")
        if isinstance(text, str) and text:
            out.append({"kind": "text", "text": text})
        # OpenAI streams a safety refusal in delta.refusal with content null
        # (chat completion chunk object); it is the reply the user must see.
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            out.append({"kind": "text", "text": refusal})
        for position, call in enumerate(delta.get("tool_calls") or ()):
            call_id = call.get("id") if isinstance(call.get("id"), str) else ""
            index = self._call_index(call.get("index", position), call_id)
            piece: dict[str, Any] = {"kind": "tool_call", "index": index}
            if call_id:
                piece["id"] = call_id
            function = call.get("function") or {}
            if function.get("name"):
                piece["name"] = function["name"]
            arguments = function.get("arguments")
            piece["arguments"] = arguments if isinstance(arguments, str) else ""
            out.append(piece)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self._finish = reason

    def _stream_error(self, error: Any) -> ProviderError:
        # A provider may echo the request's API key here (registered by the
        # client): redacted before the text reaches the error, and so the log.
        message = redact(str(error.get("message") if isinstance(error, dict) else error))
        return ProviderError(
            f"{self.provider} reported an error in the middle of the stream: {message}. "
            "Retrying may help.",
            body=message[:300],
            retryable=True,
        )

    def end(self) -> list[FrozenDict]:
        """The closing ``finish`` chunk; raises if the stream was cut before one."""
        if self._finish is None:
            raise ProviderError(
                f"The {self.provider} stream ended before the model finished (no finish "
                "reason arrived); the partial answer is logged and the request can be retried.",
                retryable=True,
            )
        reason = _FINISH.get(self._finish, "error")
        return [freeze({"kind": "finish", "reason": reason, "raw": self._finish})]


def _alternative(choice: Mapping[str, Any], number: int, out: list[dict[str, Any]]) -> None:
    """The pieces of choice ``number`` (> 0) of an ``n`` > 1 request, each naming it."""
    delta = choice.get("delta") or {}
    for key, kind in (("reasoning_content", "reasoning"), ("content", "text"), ("refusal", "text")):
        text = delta.get(key)
        if isinstance(text, str) and text:
            out.append({"kind": kind, "choice": number, "text": text})
    for position, call in enumerate(delta.get("tool_calls") or ()):
        if not isinstance(call, Mapping):
            continue
        piece: dict[str, Any] = {"kind": "tool_call", "choice": number}
        piece["index"] = call.get("index", position)
        if isinstance(call.get("id"), str) and call["id"]:
            piece["id"] = call["id"]
        function = call.get("function") or {}
        if function.get("name"):
            piece["name"] = function["name"]
        arguments = function.get("arguments")
        piece["arguments"] = arguments if isinstance(arguments, str) else ""
        out.append(piece)
    reason = choice.get("finish_reason")
    if isinstance(reason, str) and reason:
        finish = {"kind": "finish", "choice": number, "reason": _FINISH.get(reason, "error")}
        out.append({**finish, "raw": reason})
