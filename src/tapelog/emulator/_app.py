"""The emulator: a Starlette app that answers like DeepSeek, OpenAI and Anthropic.

The route picks both the wire protocol and the cache rule, so a client only sets
its base URL (docs/emulator.md lists them). Each request is validated like the
real API would, rendered into cache segments, checked against the context
window, answered from the script (or the default policy), and recorded in
:attr:`Emulator.received` with the exact body bytes and the usage it reported.

In-process use needs no socket: ``httpx.AsyncClient(transport=emu.transport())``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tapelog._errors import JsonValueError
from tapelog.emulator import _anthropic_wire as anthropic
from tapelog.emulator import _openai_wire as openai
from tapelog.emulator._cache import (
    CacheOutcome,
    PrefixStore,
    Segment,
    anthropic_rule,
    chain_segments,
    deepseek_rule,
    openai_rule,
)
from tapelog.emulator._render import (
    Conversation,
    anthropic_sources,
    count_cache_controls,
    openai_message_source,
    openai_sources,
    summarize_anthropic,
    summarize_openai,
)
from tapelog.emulator._script import Entry, Fault, Reply, default_reply, parse_entry
from tapelog.emulator._sse import Stream
from tapelog.log import decode, encode

__all__ = ["OPENAI_COMPATIBLE_PATHS", "Emulator", "ReceivedRequest", "Rule"]

Rule = Literal["deepseek", "openai", "anthropic"]

OPENAI_COMPATIBLE_PATHS: dict[str, Rule] = {
    "/v1/chat/completions": "deepseek",
    "/chat/completions": "deepseek",
    "/deepseek/chat/completions": "deepseek",
    "/deepseek/v1/chat/completions": "deepseek",
    "/openai/v1/chat/completions": "openai",
}
ANTHROPIC_PATHS = ("/v1/messages", "/anthropic/v1/messages")
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})
_MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """One request as the emulator saw it (auth header values replaced by ``[redacted]``).

    ``usage`` is the provider-shaped usage object it reported (``None`` for an
    error answer); ``entry`` is the script entry or default reply that answered.
    """

    path: str
    headers: Mapping[str, str]
    body: bytes
    rule: Rule
    status: int
    usage: Mapping[str, Any] | None
    entry: Entry | None

    def json(self) -> Any:
        """The body, decoded."""
        return decode(self.body)


def _json(status: int, body: bytes, headers: Mapping[str, str]) -> Response:
    return Response(body, status_code=status, media_type="application/json", headers=dict(headers))


def _sse(frames: Sequence[bytes], headers: Mapping[str, str]) -> StreamingResponse:
    async def emit() -> AsyncIterator[bytes]:
        for frame in frames:
            yield frame
            await asyncio.sleep(0)  # let a reader see frames one by one

    head = {"cache-control": "no-cache", **headers}
    return StreamingResponse(emit(), media_type="text/event-stream", headers=head)


class Emulator:
    """Local DeepSeek / OpenAI / Anthropic endpoints with deterministic cache accounting.

    ``script`` entries answer requests in order (see :func:`load_script`);
    ``context_window`` makes longer prompts fail like the real API;
    ``ttl_seconds`` expires stored prefixes (default: never, for determinism);
    ``clock`` gives ``created`` timestamps and TTL time. ``deepseek_unit`` and
    ``anthropic_minimum`` are the dated provider numbers from PROVIDERS.md.
    """

    def __init__(
        self,
        *,
        script: Sequence[Mapping[str, Any]] | None = None,
        context_window: int | None = None,
        ttl_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
        deepseek_unit: int = 64,
        anthropic_minimum: int = 1024,
    ) -> None:
        self.context_window = context_window
        self.deepseek_unit = deepseek_unit
        self.anthropic_minimum = anthropic_minimum
        self._clock = clock
        self._queue: deque[Entry] = deque()
        self._count = 0
        self.received: list[ReceivedRequest] = []
        self._stores: dict[Rule, PrefixStore] = {
            rule: PrefixStore(ttl_seconds, clock) for rule in ("deepseek", "openai", "anthropic")
        }
        if script:
            self.push(*script)
        routes = [Route("/health", self._health, methods=["GET"])]
        for path, rule in OPENAI_COMPATIBLE_PATHS.items():
            routes.append(Route(path, self._chat_endpoint(rule), methods=["POST"]))
        routes.extend(Route(p, self._messages, methods=["POST"]) for p in ANTHROPIC_PATHS)
        self.app = Starlette(routes=routes)

    def push(self, *replies: Mapping[str, Any]) -> None:
        """Queue script entries (validated now, so a typo fails here, not mid-test)."""
        start = len(self._queue)
        parsed = [parse_entry(r, where=f"script entry {start + i}") for i, r in enumerate(replies)]
        self._queue.extend(parsed)

    @property
    def pending(self) -> int:
        """Script entries not consumed yet."""
        return len(self._queue)

    def transport(self) -> httpx.ASGITransport:
        """An in-process transport for ``httpx.AsyncClient(transport=..., base_url=...)``."""
        return httpx.ASGITransport(app=self.app)

    def reset_cache(self) -> None:
        """Forget every stored prefix, on all routes."""
        for store in self._stores.values():
            store.clear()

    # --- plumbing ---------------------------------------------------------------

    async def _health(self, request: Request) -> Response:
        return _json(200, encode({"ok": True}), {})

    def _next(self, conversation: Conversation) -> Entry:
        return self._queue.popleft() if self._queue else default_reply(conversation)

    def _record(
        self,
        request: Request,
        body: bytes,
        rule: Rule,
        status: int,
        usage: Mapping[str, Any] | None = None,
        entry: Entry | None = None,
    ) -> None:
        headers = {
            k: "[redacted]" if k in _SECRET_HEADERS else v for k, v in request.headers.items()
        }
        self.received.append(
            ReceivedRequest(request.url.path, headers, body, rule, status, usage, entry)
        )

    def _window(self, prompt: int) -> int | None:
        """The window to report when ``prompt`` overflows it, else None."""
        if self.context_window is not None and prompt > self.context_window:
            return self.context_window
        return None

    @staticmethod
    def _with_ids(reply: Reply, prefix: str, number: int) -> Reply:
        calls = tuple(
            c if c.id else replace(c, id=f"{prefix}{number:06d}_{i}")
            for i, c in enumerate(reply.tool_calls)
        )
        return replace(reply, tool_calls=calls)

    # --- OpenAI-compatible chat completions -------------------------------------

    def _chat_endpoint(self, rule: Rule) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            return await self._chat(request, rule)

        return endpoint

    async def _chat(self, request: Request, rule: Rule) -> Response:
        raw = await request.body()
        self._count += 1
        number = self._count
        head = {"x-request-id": f"req_emu_{number:06d}"}
        deepseek = rule == "deepseek"

        def fail(status: int, body: bytes, entry: Entry | None = None) -> Response:
            self._record(request, raw, rule, status, entry=entry)
            extra = {"retry-after": "0"} if status == 429 else {}
            return _json(status, body, {**head, **extra})

        body, problem = _parse(raw)
        if problem is None:
            problem = _check_chat(body)
        if problem is not None:
            return fail(400, openai.error_body(400, problem))
        prompt = chain_segments(f"{rule}:{body['model']}", openai_sources(body))
        total = sum(s.tokens for s in prompt)
        window = self._window(total)
        if window is not None:
            return fail(400, openai.overflow_body(total, window))
        entry = self._next(summarize_openai(body["messages"]))
        stream = body.get("stream") is True
        if isinstance(entry, Fault):
            if entry.kind == "overflow":
                return fail(400, openai.overflow_body(total, max(total - 1, 0)), entry)
            if not (entry.in_stream and stream):
                error = openai.error_body(entry.status, entry.message, entry.type)
                return fail(entry.status, error, entry)
        reply = self._with_ids(entry if isinstance(entry, Reply) else Reply(), "call_emu_", number)
        outcome = self._account(rule, prompt, reply)
        usage = openai.usage_of(outcome, reply, deepseek=deepseek)
        meta = {
            "id": f"chatcmpl-emu-{number:06d}",
            "created": int(self._clock()),
            "model": body["model"],
        }
        if not stream:
            self._record(request, raw, rule, 200, usage, entry)
            return _json(200, openai.completion_body(reply, usage, deepseek=deepseek, **meta), head)
        options = body.get("stream_options")
        include = isinstance(options, Mapping) and options.get("include_usage") is True
        frames = openai.stream_frames(
            reply, usage, include_usage=include, deepseek=deepseek, **meta
        )
        if isinstance(entry, Fault):
            self._record(request, raw, rule, 200, None, entry)
            return _sse(
                frames.failing(openai.error_frame(entry.status, entry.message, entry.type)), head
            )
        return self._stream(request, raw, rule, reply, frames, usage if include else None, head)

    def _account(self, rule: Rule, prompt: list[Segment], reply: Reply) -> CacheOutcome:
        store = self._stores[rule]
        if rule == "deepseek":
            variants = [openai.message_of(reply, reasoning=True)]
            if reply.reasoning:
                variants.append(openai.message_of(reply, reasoning=False))
            replies = [
                chain_segments("", [openai_message_source(m)], after=prompt) for m in variants
            ]
            outcome = deepseek_rule(prompt, store, replies=replies, unit=self.deepseek_unit)
        elif rule == "openai":
            outcome = openai_rule(prompt, store)
        else:
            outcome = anthropic_rule(prompt, store, minimum=self.anthropic_minimum)
        store.apply(outcome)
        return outcome

    def _stream(
        self,
        request: Request,
        raw: bytes,
        rule: Rule,
        reply: Reply,
        frames: Stream,
        usage: Mapping[str, Any] | None,
        head: Mapping[str, str],
    ) -> Response:
        if reply.cut_after is not None:
            self._record(request, raw, rule, 200, None, reply)
            return _sse(frames.cut(reply.cut_after), head)
        self._record(request, raw, rule, 200, usage, reply)
        return _sse(frames.complete(), head)

    # --- Anthropic Messages -----------------------------------------------------

    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        self._count += 1
        number = self._count
        request_id = f"req_emu_{number:06d}"
        head = {"request-id": request_id}

        def fail(status: int, body: bytes, entry: Entry | None = None) -> Response:
            self._record(request, raw, "anthropic", status, entry=entry)
            extra = {"retry-after": "0"} if status == 429 else {}
            return _json(status, body, {**head, **extra})

        body, problem = _parse(raw)
        if problem is None:
            problem = _check_messages(body)
        if problem is not None:
            return fail(400, anthropic.error_body(400, problem, request_id=request_id))
        prompt = chain_segments(f"anthropic:{body['model']}", anthropic_sources(body))
        total = sum(s.tokens for s in prompt)
        window = self._window(total)
        if window is not None:
            return fail(400, anthropic.overflow_body(total, window, request_id=request_id))
        entry = self._next(summarize_anthropic(body["messages"]))
        stream = body.get("stream") is True
        if isinstance(entry, Fault):
            if entry.kind == "overflow":
                limit = max(total - 1, 0)
                return fail(
                    400, anthropic.overflow_body(total, limit, request_id=request_id), entry
                )
            if not (entry.in_stream and stream):
                error = anthropic.error_body(
                    entry.status, entry.message, entry.type, request_id=request_id
                )
                return fail(entry.status, error, entry)
        reply = self._with_ids(entry if isinstance(entry, Reply) else Reply(), "toolu_emu_", number)
        outcome = self._account("anthropic", prompt, reply)
        usage = anthropic.usage_of(outcome, reply)
        message_id = f"msg_emu_{number:06d}"
        if not stream:
            self._record(request, raw, "anthropic", 200, usage, entry)
            return _json(
                200, anthropic.message_body(reply, usage, id=message_id, model=body["model"]), head
            )
        frames = anthropic.stream_frames(reply, outcome, id=message_id, model=body["model"])
        if isinstance(entry, Fault):
            self._record(request, raw, "anthropic", 200, None, entry)
            error = anthropic.error_event(entry.status, entry.message, entry.type)
            return _sse(frames.failing(error), head)
        return self._stream(request, raw, "anthropic", reply, frames, usage, head)


def _parse(raw: bytes) -> tuple[dict[str, Any], str | None]:
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


def _check_chat(body: Mapping[str, Any]) -> str | None:
    return _check_common(body)


def _check_messages(body: Mapping[str, Any]) -> str | None:
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
    return None
