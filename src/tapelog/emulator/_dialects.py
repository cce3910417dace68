"""What differs between the two wires, behind one small interface.

The request flow in ``_app`` is the same for every route (parse, validate,
render, check the window, pick the entry, account, answer); a dialect supplies
the wire-specific parts: validation, segment rendering, the default-policy
summary, and the bytes of answers and errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tapelog._errors import JsonValueError
from tapelog.cache._api import (
    CacheOutcome,
    SegmentSource,
    anthropic_marker_ttls,
    anthropic_sources,
    count_cache_controls,
    openai_sources,
    wire_profile_named,
)
from tapelog.emulator import _anthropic_wire as anthropic
from tapelog.emulator import _openai_wire as openai
from tapelog.emulator._options import (
    check_forced_tool,
    check_response_format,
    check_tool_history,
)
from tapelog.emulator._render import Conversation, summarize_anthropic, summarize_openai
from tapelog.emulator._script import Reply
from tapelog.emulator._sse import Stream
from tapelog.emulator._turns import (
    check_anthropic_turns,
    check_deepseek_reasoning,
    check_openai_turns,
)
from tapelog.log import decode

__all__ = ["ANTHROPIC", "DEEPSEEK", "OPENAI", "Dialect", "Meta", "Rejection", "parse_body"]

_MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True)
class Meta:
    """Per-request facts every answer carries."""

    number: int
    created: int
    model: str
    choices: int = 1
    """How many choices the request asked for (chat completions ``n``)."""
    diagnostics: Mapping[str, Any] | None = None
    """The answer's ``prompt_cache_diagnostics`` (chat completions, when asked for)."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refused request with its whole error body, when a plain message is not
    enough (the Responses API's errors also name a ``param`` and a ``code``)."""

    status: int
    body: bytes


class Dialect(Protocol):
    @property
    def request_id_header(self) -> str: ...
    @property
    def tool_id_prefix(self) -> str: ...

    def check(self, body: Mapping[str, Any]) -> str | Rejection | None: ...
    def sources(self, body: Mapping[str, Any]) -> list[SegmentSource]: ...
    def summarize(self, body: Mapping[str, Any]) -> Conversation: ...
    def usage(
        self, outcome: CacheOutcome, reply: Reply, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...
    def error(
        self, status: int, message: str, kind: str | None, request_id: str, code: str | None
    ) -> bytes:
        """An error body; ``code`` is OpenAI's machine-readable code (Anthropic has none)."""
        ...

    def overflow(self, prompt: int, window: int, request_id: str) -> bytes: ...
    def stream_error(
        self, status: int, message: str, kind: str | None, body: Mapping[str, Any], meta: Meta
    ) -> bytes:
        """The event a stream that fails after its opening ends with."""
        ...

    def answer(
        self, body: Mapping[str, Any], reply: Reply, usage: dict[str, Any], meta: Meta
    ) -> bytes: ...

    def stream(
        self,
        body: Mapping[str, Any],
        reply: Reply,
        outcome: CacheOutcome,
        usage: dict[str, Any],
        meta: Meta,
    ) -> tuple[Stream, dict[str, Any] | None]:
        """The frames, and the usage a complete stream reports (None if it reports none)."""
        ...

    def settle(self, body: Mapping[str, Any], reply: Reply, meta: Meta) -> None:
        """After a complete answer: keep what a later request may refer to."""
        ...


def parse_body(raw: bytes) -> tuple[dict[str, Any], str | None]:
    """The JSON object body, or a sentence saying why there is none."""
    try:
        body = decode(raw)
    except JsonValueError as exc:
        return {}, f"The request body is not valid JSON ({exc.problem})."
    if not isinstance(body, dict):
        return {}, "The request body must be a JSON object."
    return body, None


def _check_common(body: Mapping[str, Any]) -> str | None:
    if not isinstance(body.get("model"), str):
        return "model: Field required (a string naming the model)."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: Field required (a non-empty list of message objects)."
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return "messages: each message must be an object with a string role."
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return "tools: must be a list of tool definitions."
    return None


class _Stateless:
    """What the chat wires share: nothing is kept between requests."""

    def settle(self, body: Mapping[str, Any], reply: Reply, meta: Meta) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _OpenAi(_Stateless):
    """OpenAI-compatible chat completions; ``deepseek`` selects DeepSeek's flavour."""

    deepseek: bool
    request_id_header: str = "x-request-id"
    tool_id_prefix: str = "call_emu_"

    def check(self, body: Mapping[str, Any]) -> str | None:
        problem = _check_common(body)
        if problem is None and self.deepseek:
            problem = check_deepseek_reasoning(body)
        if problem is None:
            problem = check_openai_turns(body["messages"], deepseek=self.deepseek)
        profile = wire_profile_named("deepseek" if self.deepseek else "openai")
        return problem or check_tool_history(body, profile) or check_response_format(body, profile)

    def sources(self, body: Mapping[str, Any]) -> list[SegmentSource]:
        return openai_sources(body)

    def summarize(self, body: Mapping[str, Any]) -> Conversation:
        return summarize_openai(body["messages"])

    def usage(self, outcome: CacheOutcome, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        return openai.usage_of(outcome, reply, deepseek=self.deepseek)

    def error(
        self, status: int, message: str, kind: str | None, request_id: str, code: str | None
    ) -> bytes:
        return openai.error_body(status, message, kind, code)

    def overflow(self, prompt: int, window: int, request_id: str) -> bytes:
        return openai.overflow_body(prompt, window)

    def stream_error(
        self, status: int, message: str, kind: str | None, body: Mapping[str, Any], meta: Meta
    ) -> bytes:
        return openai.error_frame(status, message, kind)

    def answer(
        self, body: Mapping[str, Any], reply: Reply, usage: dict[str, Any], meta: Meta
    ) -> bytes:
        return openai.completion_body(
            reply,
            usage,
            deepseek=self.deepseek,
            choices=meta.choices,
            diagnostics=meta.diagnostics,
            **self._ids(meta),
        )

    def stream(
        self,
        body: Mapping[str, Any],
        reply: Reply,
        outcome: CacheOutcome,
        usage: dict[str, Any],
        meta: Meta,
    ) -> tuple[Stream, dict[str, Any] | None]:
        options = body.get("stream_options")
        include = isinstance(options, Mapping) and options.get("include_usage") is True
        frames = openai.stream_frames(
            reply,
            usage,
            include_usage=include,
            deepseek=self.deepseek,
            choices=meta.choices,
            diagnostics=meta.diagnostics,
            **self._ids(meta),
        )
        return frames, usage if include else None

    @staticmethod
    def _ids(meta: Meta) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-emu-{meta.number:06d}",
            "created": meta.created,
            "model": meta.model,
        }


@dataclass(frozen=True, slots=True)
class _Anthropic(_Stateless):
    """Anthropic Messages: ``max_tokens`` required, at most 4 breakpoints, paired tool turns."""

    request_id_header: str = "request-id"
    tool_id_prefix: str = "toolu_emu_"

    def check(self, body: Mapping[str, Any]) -> str | None:
        problem = _check_common(body)
        if problem is not None:
            return problem
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            return "max_tokens: Field required"
        count = count_cache_controls(body)
        if count > _MAX_BREAKPOINTS:
            limit = _MAX_BREAKPOINTS
            return f"A maximum of {limit} blocks with cache_control may be provided. Found {count}."
        profile = wire_profile_named("anthropic")
        return (
            check_anthropic_turns(body["messages"])
            or anthropic.check_signatures(body["messages"])
            or check_tool_history(body, profile)
            or check_forced_tool(body, profile)
            or check_response_format(body, profile)
        )

    def sources(self, body: Mapping[str, Any]) -> list[SegmentSource]:
        return anthropic_sources(body)

    def summarize(self, body: Mapping[str, Any]) -> Conversation:
        return summarize_anthropic(body["messages"])

    def usage(self, outcome: CacheOutcome, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        return anthropic.usage_of(outcome, reply, creation=_creation(outcome, body))

    def error(
        self, status: int, message: str, kind: str | None, request_id: str, code: str | None
    ) -> bytes:
        return anthropic.error_body(status, message, kind, request_id=request_id)

    def overflow(self, prompt: int, window: int, request_id: str) -> bytes:
        return anthropic.overflow_body(prompt, window, request_id=request_id)

    def stream_error(
        self, status: int, message: str, kind: str | None, body: Mapping[str, Any], meta: Meta
    ) -> bytes:
        return anthropic.error_event(status, message, kind)

    def answer(
        self, body: Mapping[str, Any], reply: Reply, usage: dict[str, Any], meta: Meta
    ) -> bytes:
        return anthropic.message_body(reply, usage, id=_message_id(meta), model=meta.model)

    def stream(
        self,
        body: Mapping[str, Any],
        reply: Reply,
        outcome: CacheOutcome,
        usage: dict[str, Any],
        meta: Meta,
    ) -> tuple[Stream, dict[str, Any] | None]:
        frames = anthropic.stream_frames(
            reply,
            outcome,
            id=_message_id(meta),
            model=meta.model,
            creation=_creation(outcome, body),
        )
        return frames, usage


def _creation(outcome: CacheOutcome, body: Mapping[str, Any]) -> dict[str, int]:
    """The written tokens by the TTL of the breakpoints that wrote them."""
    tokens = [s.tokens for s in anthropic_sources(body)]
    return anthropic.cache_creation(outcome, tokens, anthropic_marker_ttls(body))


def _message_id(meta: Meta) -> str:
    return f"msg_emu_{meta.number:06d}"


DEEPSEEK: Dialect = _OpenAi(deepseek=True)
OPENAI: Dialect = _OpenAi(deepseek=False)
ANTHROPIC: Dialect = _Anthropic()
