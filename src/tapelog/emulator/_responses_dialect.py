"""The OpenAI Responses API as an emulator dialect (``/v1/responses``).

Unlike the two chat wires it has state: a response stored with ``store`` true
(the API's default) can be continued with ``previous_response_id``, so one
dialect object per emulator holds a :class:`ResponseMemory`. The cache rule is
OpenAI's, on the cache audit's segments (``tapelog.cache.responses_sources``:
scoped also by ``prompt_cache_key``); the prompt it sees is the named
response's context followed by the request's own input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tapelog.cache._api import CacheOutcome, SegmentSource, responses_sources
from tapelog.emulator import _responses_wire as wire
from tapelog.emulator._dialects import Meta, Rejection
from tapelog.emulator._render import Conversation
from tapelog.emulator._responses_input import (
    Refused,
    ResponseMemory,
    check_input,
    earlier_items,
    input_items,
    seal_reasoning,
    summarize_items,
)
from tapelog.emulator._script import Reply
from tapelog.emulator._sse import Stream

__all__ = ["ResponsesDialect"]

_ENCRYPTED = "reasoning.encrypted_content"


def _ids(meta: Meta) -> wire.Ids:
    return wire.Ids(meta.number, meta.created, meta.model)


def _includes_encrypted(body: Mapping[str, Any]) -> bool:
    include = body.get("include")
    return isinstance(include, list) and _ENCRYPTED in include


@dataclass(frozen=True, slots=True)
class ResponsesDialect:
    """``/v1/responses``: validation, segments and answers, with stored responses."""

    memory: ResponseMemory
    request_id_header: str = "x-request-id"
    tool_id_prefix: str = "call_emu_"

    def _earlier(self, body: Mapping[str, Any]) -> tuple[Any, ...]:
        found = earlier_items(body, self.memory)
        return () if isinstance(found, Refused) else found

    def check(self, body: Mapping[str, Any]) -> str | Rejection | None:
        earlier = earlier_items(body, self.memory)
        problem = (
            earlier if isinstance(earlier, Refused) else check_input(body, earlier, self.memory)
        )
        if problem is None:
            return None
        error = wire.error_body(
            problem.status, problem.message, code=problem.code, param=problem.param
        )
        return Rejection(problem.status, error)

    def sources(self, body: Mapping[str, Any]) -> list[SegmentSource]:
        """The audit's segments (``tapelog.cache``) of the whole prompt: the
        context ``previous_response_id`` names, then the request's own input."""
        items = [*self._earlier(body), *input_items(body.get("input"))]
        return responses_sources({**body, "input": items})

    def summarize(self, body: Mapping[str, Any]) -> Conversation:
        return summarize_items([*self._earlier(body), *input_items(body.get("input"))])

    def usage(self, outcome: CacheOutcome, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        return wire.usage_of(outcome, reply)

    def error(
        self, status: int, message: str, kind: str | None, request_id: str, code: str | None
    ) -> bytes:
        return wire.error_body(status, message, kind, code)

    def overflow(self, prompt: int, window: int, request_id: str) -> bytes:
        return wire.overflow_body()

    def stream_error(
        self, status: int, message: str, kind: str | None, body: Mapping[str, Any], meta: Meta
    ) -> bytes:
        return wire.failed_event(body, _ids(meta), status, message, kind)

    def _output(self, body: Mapping[str, Any], reply: Reply, meta: Meta) -> list[dict[str, Any]]:
        seal = seal_reasoning if _includes_encrypted(body) else None
        return wire.output_items(reply, _ids(meta), seal)

    def answer(
        self, body: Mapping[str, Any], reply: Reply, usage: dict[str, Any], meta: Meta
    ) -> bytes:
        output = self._output(body, reply, meta)
        return wire.response_body(body, output, usage, _ids(meta), reply=reply)

    def stream(
        self,
        body: Mapping[str, Any],
        reply: Reply,
        outcome: CacheOutcome,
        usage: dict[str, Any],
        meta: Meta,
    ) -> tuple[Stream, dict[str, Any] | None]:
        output = self._output(body, reply, meta)
        return wire.stream_frames(body, output, usage, _ids(meta), reply=reply), usage

    def settle(self, body: Mapping[str, Any], reply: Reply, meta: Meta) -> None:
        """Keep a completed response's context when the request stores it."""
        if body.get("store", True) is False:
            return
        context = [
            *self._earlier(body),
            *input_items(body.get("input")),
            *self._output(body, reply, meta),
        ]
        self.memory.keep(_ids(meta).response, context)
