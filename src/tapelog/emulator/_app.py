"""The emulator: a Starlette app that answers like DeepSeek, OpenAI and Anthropic.

The route picks both the wire protocol and the cache rule, so a client only sets
its base URL (docs/emulator.md lists them). Each request is validated like the
real API would, rendered into cache segments, checked against the context
window, answered from the script (or the default policy), and recorded in
:attr:`Emulator.received` with the exact body bytes and the usage it reported.

Memory is bounded: a body larger than ``max_body_bytes`` is refused with a 413
before it is read whole, and :attr:`Emulator.received` keeps only the most
recent requests (at most ``keep_requests`` of them, and at most
``keep_bytes`` of body bytes between them; the latest is always kept).

In-process use needs no socket: ``httpx.AsyncClient(transport=emu.transport())``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tapelog.cache._api import (
    CacheOutcome,
    PrefixStore,
    Rule,
    Segment,
    account,
    chain_segments,
    prefix_root,
)
from tapelog.emulator import _openai_wire as openai
from tapelog.emulator._dialects import (
    ANTHROPIC,
    DEEPSEEK,
    OPENAI,
    Dialect,
    Meta,
    Rejection,
    parse_body,
)
from tapelog.emulator._openai_wire import diagnose
from tapelog.emulator._options import forced_tool
from tapelog.emulator._responses_dialect import ResponsesDialect
from tapelog.emulator._responses_input import ResponseMemory
from tapelog.emulator._script import Entry, Fault, Reply, default_reply, parse_entry, with_output
from tapelog.log import decode, encode

__all__ = [
    "DEFAULT_KEEP_BYTES",
    "DEFAULT_KEEP_REQUESTS",
    "DEFAULT_MAX_BODY_BYTES",
    "RESPONSES_PATHS",
    "ROUTES",
    "Emulator",
    "ReceivedRequest",
    "Rule",
]

DEFAULT_MAX_BODY_BYTES: Final = 32 * 1024 * 1024
"""The largest request body the emulator reads (32 MiB); a larger one is a 413."""

DEFAULT_KEEP_REQUESTS: Final = 10_000
"""How many of the latest requests :attr:`Emulator.received` keeps."""

DEFAULT_KEEP_BYTES: Final = 256 * 1024 * 1024
"""How many body bytes (256 MiB) :attr:`Emulator.received` keeps, summed."""

ROUTES: dict[str, Rule] = {
    "/v1/chat/completions": "deepseek",
    "/chat/completions": "deepseek",
    "/deepseek/chat/completions": "deepseek",
    "/deepseek/v1/chat/completions": "deepseek",
    "/openai/v1/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/anthropic/v1/messages": "anthropic",
    "/v1/responses": "openai",
    "/openai/v1/responses": "openai",
}
"""POST paths: the route picks the wire protocol and the cache rule."""
RESPONSES_PATHS: Final = frozenset({"/v1/responses", "/openai/v1/responses"})
"""The routes of the Responses API wire (the others are chat wires)."""
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})


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


class _TooLarge(Exception):
    """Internal: the request body is larger than the emulator accepts."""

    def __init__(self, size: int | None) -> None:
        self.size = size


async def _read_body(request: Request, limit: int) -> bytes:
    """The whole body, unless it is over ``limit`` bytes: then :class:`_TooLarge`,
    raised from the declared length before reading, or as soon as the bytes read
    pass the limit (a chunked body declares none)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge(int(declared))
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise _TooLarge(None)
        parts.append(part)
    return b"".join(parts)


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
    ``anthropic_minimum`` are the dated provider numbers of docs/providers.md ("Prompt caches").
    ``max_body_bytes`` is the largest request body it reads (a larger one is
    answered 413 in the provider's error shape); :attr:`received` keeps the
    latest requests, at most ``keep_requests`` and ``keep_bytes`` of bodies
    (older ones are dropped and counted in :attr:`dropped`).
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
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        keep_requests: int = DEFAULT_KEEP_REQUESTS,
        keep_bytes: int = DEFAULT_KEEP_BYTES,
        cache_diagnostics: bool = False,
    ) -> None:
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("keep_requests", keep_requests),
            ("keep_bytes", keep_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}.")
        self.max_body_bytes = max_body_bytes
        self.keep_requests = keep_requests
        self.keep_bytes = keep_bytes
        self.dropped = 0
        """How many of the oldest requests :attr:`received` no longer holds."""
        self._kept_bytes = 0
        self.context_window = context_window
        self.cache_diagnostics = cache_diagnostics
        """Answer chat completions with ``prompt_cache_diagnostics`` (docs/emulator.md)."""
        self._compared: dict[Rule, Mapping[str, Any]] = {}  # the last body, per rule
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
        self.responses = ResponseMemory(keep_requests)
        """Responses stored for ``previous_response_id`` (the latest ``keep_requests``)."""
        responses = ResponsesDialect(self.responses)
        routes = [Route("/health", self._health, methods=["GET"])]
        for path, rule in ROUTES.items():
            dialect = responses if path in RESPONSES_PATHS else _DIALECTS[rule]
            routes.append(Route(path, self._endpoint(rule, dialect), methods=["POST"]))
        self.app = Starlette(routes=routes)

    def push(self, *replies: Mapping[str, Any]) -> None:
        """Queue script entries (validated now, so a typo fails here, not mid-test)."""
        start = len(self._queue)
        parsed = [parse_entry(r, where=f"script entry {start + i}") for i, r in enumerate(replies)]
        self._queue.extend(parsed)

    def discard_script(self) -> int:
        """Drop the script entries not consumed yet; how many there were."""
        count = len(self._queue)
        self._queue.clear()
        return count

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
        self._trim_received(len(body))

    def _trim_received(self, added: int) -> None:
        """Drop the oldest requests past ``keep_requests`` or ``keep_bytes`` (never the latest)."""
        received = self.received
        self._kept_bytes += added
        drop = max(len(received) - self.keep_requests, 0)
        if drop == 0 and self._kept_bytes <= self.keep_bytes:
            return
        # Recount: a caller may have cleared or edited the list meanwhile.
        kept = sum(len(r.body) for r in received[drop:])
        while kept > self.keep_bytes and drop < len(received) - 1:
            kept -= len(received[drop].body)
            drop += 1
        del received[:drop]
        self.dropped += drop
        self._kept_bytes = kept

    # --- the one request flow ---------------------------------------------------

    def _endpoint(self, rule: Rule, dialect: Dialect) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            return await self._handle(request, rule, dialect)

        return endpoint

    async def _handle(self, request: Request, rule: Rule, dialect: Dialect) -> Response:
        self._count += 1
        number = self._count
        request_id = f"req_emu_{number:06d}"
        head = {dialect.request_id_header: request_id}
        try:
            raw = await _read_body(request, self.max_body_bytes)
        except _TooLarge as big:
            # Recorded without the body (its bytes are what must not be kept).
            self._record(request, b"", rule, 413)
            size = f"{big.size} bytes" if big.size is not None else "larger than that"
            message = (
                f"Request body too large: this emulator reads at most {self.max_body_bytes} "
                f"bytes (max_body_bytes) and the body is {size}."
            )
            return _json(413, dialect.error(413, message, None, request_id, None), head)

        def fail(status: int, error: bytes, entry: Entry | None = None) -> Response:
            self._record(request, raw, rule, status, None, entry)
            extra = {"retry-after": "0"} if status == 429 else {}
            if isinstance(entry, Fault):  # scripted headers (a retry-after) win
                extra.update(entry.headers)
            return _json(status, error, {**head, **extra})

        body, problem = parse_body(raw)
        checked = problem or dialect.check(body)
        if isinstance(checked, Rejection):
            return fail(checked.status, checked.body)
        if checked is not None:
            return fail(400, dialect.error(400, checked, None, request_id, None))
        root = prefix_root(rule, body["model"], body.get("prompt_cache_key"))
        prompt = chain_segments(root, dialect.sources(body))
        total = sum(s.tokens for s in prompt)
        if self.context_window is not None and total > self.context_window:
            return fail(400, dialect.overflow(total, self.context_window, request_id))
        entry = self._queue.popleft() if self._queue else default_reply(dialect.summarize(body))
        stream = body.get("stream") is True
        if isinstance(entry, Fault):
            if entry.kind == "overflow":
                # No window configured: report one a token short of the prompt.
                return fail(400, dialect.overflow(total, max(total - 1, 0), request_id), entry)
            if not (entry.in_stream and stream):
                error = dialect.error(
                    entry.status, entry.message, entry.type, request_id, entry.code
                )
                return fail(entry.status, error, entry)
        reply = entry if isinstance(entry, Reply) else Reply()
        reply = _with_ids(with_output(reply, forced_tool(body)), dialect.tool_id_prefix, number)
        outcome = self._account(rule, prompt, reply)
        usage = dialect.usage(outcome, reply, body)
        n = body.get("n")
        choices = n if type(n) is int and 1 <= n <= 128 else 1
        diagnostics = None
        if self.cache_diagnostics and rule != "anthropic":
            diagnostics = diagnose(self._compared.get(rule), body, outcome)
            self._compared[rule] = body
        meta = Meta(number, int(self._clock()), body["model"], choices, diagnostics)
        if not stream:
            self._record(request, raw, rule, 200, usage, reply)
            dialect.settle(body, reply, meta)
            return _json(200, dialect.answer(body, reply, usage, meta), head)
        frames, reported = dialect.stream(body, reply, outcome, usage, meta)
        if isinstance(entry, Fault):
            self._record(request, raw, rule, 200, None, entry)
            error = dialect.stream_error(entry.status, entry.message, entry.type, body, meta)
            return _sse(frames.failing(error), head)
        if reply.cut_after is not None:
            self._record(request, raw, rule, 200, None, reply)
            return _sse(frames.cut(reply.cut_after), head)
        self._record(request, raw, rule, 200, reported, reply)
        dialect.settle(body, reply, meta)
        return _sse(frames.complete(), head)

    def _account(self, rule: Rule, prompt: list[Segment], reply: Reply) -> CacheOutcome:
        """Apply the route's cache rule and update its store (shared with the audit)."""
        return account(
            rule,
            prompt,
            self._stores[rule],
            reply=openai.reply_sources(reply) if rule == "deepseek" else (),
            deepseek_unit=self.deepseek_unit,
            anthropic_minimum=self.anthropic_minimum,
        )


def _with_ids(reply: Reply, prefix: str, number: int) -> Reply:
    """Give unscripted tool calls deterministic ids."""
    calls = tuple(
        c if c.id else replace(c, id=f"{prefix}{number:06d}_{i}")
        for i, c in enumerate(reply.tool_calls)
    )
    return replace(reply, tool_calls=calls)


_DIALECTS: dict[Rule, Dialect] = {"deepseek": DEEPSEEK, "openai": OPENAI, "anthropic": ANTHROPIC}
