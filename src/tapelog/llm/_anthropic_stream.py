"""Anthropic Messages stream events -> neutral chunks (pure, one parser per stream).

Named events: ``message_start`` (usage so far), per content block
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta`` (stop
reason, *cumulative* usage: the last value wins), ``message_stop``; any number
of ``ping``; ``error``. Chunks carry the content block ``index`` so blocks
stay separate when assembled. Unknown events and block types are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from httpx_sse import ServerSentEvent

from tapelog._errors import ContextOverflowError, ProviderError
from tapelog.llm._http import event_frame
from tapelog.llm._types import normalise_usage, usage_count
from tapelog.log import redact
from tapelog.log._api import FrozenDict, freeze

__all__ = ["AnthropicStreamParser", "anthropic_usage"]

_FINISH: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    # The reply was cut because the context window filled up (Claude Sonnet
    # 4.5 and later, docs.anthropic.com "Handling stop reasons"): cut like
    # max_tokens, so a tool_use it stopped inside must not run.
    "model_context_window_exceeded": "max_tokens",
}

_RETRYABLE_ERRORS: Final = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)


def anthropic_usage(
    usage: Mapping[str, Any], diagnostics: Mapping[str, Any] | None = None
) -> FrozenDict:
    """Normalise Anthropic usage: the three input counts are already disjoint.
    ``diagnostics``: the message's cache ``diagnostics`` object, kept as given."""
    return normalise_usage(
        input=usage_count(usage.get("input_tokens")),
        cache_read=usage_count(usage.get("cache_read_input_tokens")),
        cache_write=usage_count(usage.get("cache_creation_input_tokens")),
        output=usage_count(usage.get("output_tokens")),
        raw=usage,
        cache_diagnostics=diagnostics,
    )


class AnthropicStreamParser:
    """Feed it server-sent events; it returns the neutral chunks each one makes."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.done = False
        self._diagnostics: Mapping[str, Any] | None = None
        self._usage: dict[str, Any] = {}
        self._stop: str | None = None
        self._tools: dict[Any, bool] = {}  # tool_use block index -> got input pieces

    def feed(self, event: ServerSentEvent) -> list[FrozenDict]:
        frame = event_frame(self.provider, event.data)
        if frame is None:
            return []
        # httpx-sse names an event without an ``event:`` line "message".
        kind = event.event if event.event and event.event != "message" else frame.get("type")
        handler = {
            "message_start": self._on_message_start,
            "content_block_start": self._on_content_block_start,
            "content_block_delta": self._on_content_block_delta,
            "content_block_stop": self._on_content_block_stop,
            "message_delta": self._on_message_delta,
            "message_stop": self._on_message_stop,
            "error": self._on_error,
        }.get(str(kind))
        out = handler(frame) if handler is not None else []
        return [freeze(chunk) for chunk in out]

    def _on_message_start(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        message = frame.get("message") or {}
        self._merge_usage(message.get("usage"))
        if isinstance(message.get("diagnostics"), Mapping):  # the cache-diagnosis beta
            self._diagnostics = message["diagnostics"]
        return []

    def _merge_usage(self, usage: Any) -> None:
        """Take each count that is there; a ``null`` keeps the earlier value.

        ``message_delta`` usage is cumulative, but its input-side counts are
        nullable (``MessageDeltaUsage.input_tokens: Optional[int]`` and the
        cache counts, in Anthropic's SDKs, whose stream accumulator keeps the
        ``message_start`` value when they are ``None``).
        """
        if isinstance(usage, dict):
            self._usage.update((k, v) for k, v in usage.items() if v is not None)

    def _on_content_block_start(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        index = frame.get("index")
        block = frame.get("content_block") or {}
        btype = block.get("type")
        out: list[dict[str, Any]] = []
        if btype == "text" and block.get("text"):
            out.append({"kind": "text", "index": index, "text": block["text"]})
        elif btype == "thinking":
            if block.get("thinking"):
                out.append({"kind": "reasoning", "index": index, "text": block["thinking"]})
            if block.get("signature"):
                out.append(
                    {"kind": "reasoning_signature", "index": index, "signature": block["signature"]}
                )
        elif btype == "redacted_thinking":
            out.append({"kind": "reasoning_redacted", "index": index, "data": block["data"]})
        elif btype == "tool_use":
            self._tools[index] = False
            out.append(
                {
                    "kind": "tool_call",
                    "index": index,
                    "id": block.get("id", ""),
                    "name": block.get("name", ""),
                    "arguments": "",
                }
            )
        return out

    def _on_content_block_delta(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        index = frame.get("index")
        delta = frame.get("delta") or {}
        dtype = delta.get("type")
        if dtype == "text_delta" and delta.get("text"):
            return [{"kind": "text", "index": index, "text": delta["text"]}]
        if dtype == "thinking_delta" and delta.get("thinking"):
            return [{"kind": "reasoning", "index": index, "text": delta["thinking"]}]
        if dtype == "signature_delta" and delta.get("signature"):
            return [
                {"kind": "reasoning_signature", "index": index, "signature": delta["signature"]}
            ]
        if dtype == "input_json_delta" and delta.get("partial_json"):
            self._tools[index] = True
            return [{"kind": "tool_call", "index": index, "arguments": delta["partial_json"]}]
        return []

    def _on_content_block_stop(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        index = frame.get("index")
        if self._tools.get(index) is False:
            # A tool called without input streams no JSON at all; its input is {}.
            self._tools[index] = True
            return [{"kind": "tool_call", "index": index, "arguments": "{}"}]
        return []

    def _on_message_delta(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        delta = frame.get("delta") or {}
        if isinstance(delta.get("stop_reason"), str):
            self._stop = delta["stop_reason"]
        self._merge_usage(frame.get("usage"))  # cumulative: the last value of each count wins
        return []

    def _on_message_stop(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.done = True
        return []

    def _on_error(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        error = frame.get("error") or {}
        # A provider may echo the request's API key here (registered by the
        # client): redacted before the text reaches the error, and so the log.
        etype = redact(str(error.get("type", "error")))
        message = redact(str(error.get("message", "")))
        text = f"{self.provider} sent an error event in the stream: {etype}: {message}"
        if "prompt is too long" in message.lower():
            raise ContextOverflowError(
                text + ". Compact the session or use a model with a larger context.",
                body=message[:300],
            )
        retryable = etype in _RETRYABLE_ERRORS
        advice = "Retrying may help." if retryable else "The request needs fixing before a retry."
        raise ProviderError(f"{text}. {advice}", body=message[:300], retryable=retryable)

    def end(self) -> list[FrozenDict]:
        """Usage and the closing ``finish`` chunk; raises if the stream was cut."""
        if not self.done or self._stop is None:
            raise ProviderError(
                f"The {self.provider} stream ended before message_stop; the partial answer "
                "is logged and the request can be retried.",
                retryable=True,
            )
        out: list[FrozenDict] = []
        if self._usage:
            usage = anthropic_usage(self._usage, self._diagnostics)
            out.append(freeze({"kind": "usage", "usage": usage}))
        reason = _FINISH.get(self._stop, "error")
        out.append(freeze({"kind": "finish", "reason": reason, "raw": self._stop}))
        return out
