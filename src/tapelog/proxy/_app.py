"""The proxy server: an ASGI app between clients and one upstream (its model
routes found by ``_asgi.ModelRoutes``, the rest routed by Starlette).

Routes: ``POST /v1/chat/completions`` and ``/chat/completions`` (OpenAI chat
completions), ``POST /v1/messages`` (Anthropic Messages), ``POST /v1/responses``
and ``/responses`` (the OpenAI Responses API, to an OpenAI-family upstream;
``_responses_in``), each also under
``/s/<session-id>/`` to name the session explicitly, and ``GET /health``.
Per request, with the client's credentials as the request's own secrets
(``_upstream.client_secrets``, ``tapelog.log.secret_scope``: redacted from
all it logs, never from another client's): refuse what a web page could send
(``_guard``: a non-loopback ``Host``, an ``Origin`` not allowed, a body not
declared JSON), read and decode the body, translate and check it
(``_translate``; a 400 before anything is logged), find its session (``_index``: explicit, or
extend / edit / fork / new) and take that session's lock, plan how its
messages meet the log (``_exchange.plan_messages``), log the request and its
header, rebuild and check the bytes, make the log durable, send, then relay
and log the answer (``_relay``). The session's lock is released when the
turn's end is logged and durable (``_turn_end``: written before the answer's
end reaches the client, synced after it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from typing import Any, Final

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from tapelog._errors import (
    InvalidSessionIdError,
    JsonValueError,
    ProxyError,
    SessionLockedError,
    TapelogError,
)
from tapelog.checker._api import check_enabled
from tapelog.llm._api import logged_target, sized_content, wire_for
from tapelog.log import secret_scope
from tapelog.log._api import EpochHeader, encode_trusted, paused_gc
from tapelog.proxy._answers import AnthropicAnswer, OpenAIAnswer, error_body
from tapelog.proxy._asgi import ModelRoutes
from tapelog.proxy._body_prefix import FamilyPrefixes
from tapelog.proxy._exchange import Compared, Exchange, Plan, plan_messages, unanswered_calls
from tapelog.proxy._guard import MAX_BODY_DEPTH, RequestGuard, nested_too_deeply
from tapelog.proxy._identity import Agent, Who, client_signal
from tapelog.proxy._index import SessionIndex
from tapelog.proxy._relay import ClosingResponse, Relay, RelayResponse, error_of, passed_headers
from tapelog.proxy._responses_in import continuing
from tapelog.proxy._responses_out import ResponsesAnswer, previous_response
from tapelog.proxy._routing import DEFAULT_LOCK_WAIT, Assigned, Router
from tapelog.proxy._sessions import Sessions
from tapelog.proxy._summary import RequestSummary
from tapelog.proxy._translate import Messages, Translator
from tapelog.proxy._turn_end import TurnEnd
from tapelog.proxy._types import ClientRequest, Family
from tapelog.proxy._unknown import unknown_endpoint
from tapelog.proxy._upstream import Upstream, client_secrets, upstream_headers
from tapelog.store import SessionStore
from tapelog.store._api import validate_session_id

__all__ = ["DEFAULT_MAX_BODY_BYTES", "SESSION_ANSWER_HEADER", "SESSION_HEADER", "Proxy"]

DEFAULT_MAX_BODY_BYTES: Final = 64 * 1024 * 1024
"""The largest client body the proxy reads (64 MiB); a larger one is a 413."""

SESSION_HEADER: Final = "x-tapelog-session"
"""The request header that names the session explicitly (never forwarded)."""

SESSION_ANSWER_HEADER: Final = "X-Tapelog-Session"
"""The answer header naming the session a request was logged in: on every
answer (streamed or not, upstream errors and the proxy's own too) once the
request has a session, so a client can find its log."""

_ROUTES: Final[dict[str, Family]] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/v1/responses": "responses",
    "/responses": "responses",
}

_METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE"]


class Proxy:
    """The audit proxy for one upstream; serve :attr:`app` with any ASGI server.

    ``store`` keeps the sessions; ``http_client`` sends to the upstream (give
    one with an ASGI transport to run the upstream in-process); ``check`` runs
    the invariant checker on every request (default: on, unless
    ``TAPELOG_CHECK`` is off); ``on_request`` gets a :class:`RequestSummary`
    per request; ``scan_limit`` is how many stored proxy sessions are indexed
    at start (:meth:`start`); ``check_host`` and ``allowed_origins`` are the
    ``_guard`` rules (off with ``--allow-remote``; ``--allow-origin``);
    ``watch_cache`` runs the cache audit as each turn ends and puts its line
    in the summary of a request whose cacheable prefix broke
    (:attr:`RequestSummary.cache_break`).
    """

    def __init__(
        self,
        upstream: Upstream,
        store: SessionStore,
        *,
        http_client: httpx.AsyncClient | None = None,
        check: bool | None = None,
        on_request: Callable[[RequestSummary], None] | None = None,
        on_unknown: Callable[[str], None] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        scan_limit: int = 100,
        max_open: int = 64,
        lock_wait: float = DEFAULT_LOCK_WAIT,
        check_host: bool = True,
        allowed_origins: Iterable[str] = (),
        watch_cache: bool = False,
    ) -> None:
        self.upstream = upstream
        self.store = store
        self._own_http = http_client is None
        # Long reads: a reasoning model can think for minutes before the next event.
        self.http = http_client or httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=600.0))
        self.translator = Translator(upstream)
        self.prefixes = FamilyPrefixes()
        self.index = SessionIndex()
        self.sessions = Sessions(store, self.index, check=check_enabled(check), max_open=max_open)
        self.router = Router(self.sessions, lock_wait=lock_wait)
        self.on_request = on_request
        self.on_unknown = on_unknown
        self.max_body_bytes = max_body_bytes
        self.scan_limit = scan_limit
        self._started: asyncio.Task[int] | None = None
        self.guard = RequestGuard(check_host=check_host, allowed_origins=allowed_origins)
        self.watch_cache = watch_cache
        self.turn_end = TurnEnd(
            self.sessions, self._report, watch_cache=watch_cache, max_watches=2 * max_open
        )
        routes = [Route("/health", self._health, methods=["GET"])]
        for path, family in _ROUTES.items():
            routes.append(Route(path, self._endpoint(family), methods=["POST"]))
            routes.append(Route("/s/{session}" + path, self._endpoint(family), methods=["POST"]))
        routes.append(Route("/{path:path}", self._unknown, methods=_METHODS))
        # Browsers ask before a cross-site JSON POST; only allowed origins get a yes.
        cors = Middleware(
            CORSMiddleware,
            allow_origins=self.guard.allowed_origins,
            allow_methods=["POST"],
            allow_headers=["*"],
        )
        middleware = [cors] if self.guard.allowed_origins else []
        routed = Starlette(routes=routes, middleware=middleware, lifespan=self._lifespan)
        self.app: ASGIApp = routed
        if not middleware:  # the model routes without Starlette's routing (``_asgi``)
            self.app = ModelRoutes(_ROUTES, self._endpoint_call, routed)

    async def start(self) -> int:
        """Read the store's conversation index (once; later calls wait for the
        first), rebuilding it from the newest ``scan_limit`` stored proxy
        sessions when the store has none; how many sessions it knows."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._read_index())
        return await self._started

    async def _read_index(self) -> int:
        if not await self.sessions.refresh() and self.scan_limit:
            await asyncio.to_thread(self.sessions.rebuild, self.scan_limit)
            await self.sessions.refresh()
        return len(self.index)

    async def aclose(self) -> None:
        """Close every open session's writer and the HTTP client the proxy made
        (idempotent), once the turn ends under way are done."""
        await self.sessions.settled()
        self.sessions.close()
        if self._own_http and not self.http.is_closed:
            await self.http.aclose()

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Under a server that runs the ASGI lifespan: index at start, close at the end."""
        await self.start()
        try:
            yield
        finally:
            await self.aclose()

    async def _unknown(self, request: Request) -> Response:
        """Any other path: a 404 in the client API's shape saying what to do, and a console line."""
        problem = self.guard.host_problem(request.headers)
        if problem is not None:
            return self._fail(self.upstream.family, problem.status, str(problem))
        path = request.url.path
        if any(path == p or (path.startswith("/s/") and path.endswith(p)) for p in _ROUTES):
            # A served path with another method (a WebSocket upgrade of /v1/responses):
            # 405, which clients such as Codex take as "use POST".
            response = self._fail(
                self.upstream.family, 405, f"{path} accepts POST only, not {request.method}"
            )
            response.headers["allow"] = "POST"
            return response
        served = [p for p, family in _ROUTES.items() if self.upstream.serves(family)]
        message = unknown_endpoint(request.method, path, self.upstream, served)
        if self.on_unknown is not None:
            self.on_unknown(message)
        return self._fail(self.upstream.family, 404, message)

    async def _health(self, request: Request) -> Response:
        problem = self.guard.host_problem(request.headers)
        if problem is not None:
            return self._fail(self.upstream.family, problem.status, str(problem))
        return Response(encode_trusted({"ok": True}), media_type="application/json")

    def _endpoint(self, family: Family) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            return await self._endpoint_call(request, family)

        return endpoint

    async def _endpoint_call(self, request: Request, family: Family) -> Response:
        # The client's key is its request's secret before anything of it is logged.
        with secret_scope(client_secrets(request.headers)):
            return await self._handle(request, family)

    def _report(self, summary: RequestSummary) -> None:
        if self.on_request is not None:
            self.on_request(summary)

    def _refuse(
        self, family: Family, exc: ProxyError, session: str | None = None, *, named: bool = False
    ) -> Response:
        """The error answer to a request refused before it was sent; ``named``:
        ``session`` is the request's session, named in the answer's header."""
        self._report(
            RequestSummary(session_id=session, turn=None, status=exc.status, error=str(exc))
        )
        body = error_body(family, exc.status, str(exc), exc.kind)
        return Response(
            body,
            status_code=exc.status,
            media_type="application/json",
            headers=_named(session if named else None),
        )

    async def _read(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise ProxyError(self._too_large(), status=413)
        parts: list[bytes] = []
        size = 0
        async for part in request.stream():
            size += len(part)
            if size > self.max_body_bytes:
                raise ProxyError(self._too_large(), status=413)
            parts.append(part)
        return b"".join(parts)

    def _understand(
        self, family: Family, raw: bytes, request: Request | None = None
    ) -> tuple[ClientRequest, Messages, EpochHeader]:
        """Decode, translate and check a body (one pass over its new messages,
        the garbage collector paused: this allocates an object per JSON value);
        the request, its messages and the header checked against the body
        (made with no session: ``Translator.for_session``). A body that extends
        a recent one is parsed from where that one's messages end
        (``_body_prefix``)."""
        with paused_gc():
            try:
                decoded = self.prefixes.of(family).decode(raw)  # only what is new, if it extends
            except JsonValueError as exc:
                raise ProxyError(f"the request body is {exc.problem}") from None
            body = decoded.body
            if not isinstance(body, dict):
                raise ProxyError("the request body must be a JSON object")
            if nested_too_deeply(decoded.fresh):  # what was not checked before
                raise ProxyError(
                    f"the request body is nested more than {MAX_BODY_DEPTH} levels deep; "
                    "the log does not hold values that deep"
                )
            headers, query = (
                (request.headers, request.url.query) if request is not None else ({}, "")
            )
            parsed = self.translator.parse(family, body, headers, query, decoded.extends)
            messages = self.translator.messages(parsed, extends=decoded.extends)
            problem = unanswered_calls(
                messages.neutral,
                lambda i: messages.where(i, parsed.offset),
                start=messages.known,
            )
            if problem is not None:
                raise ProxyError(problem)
            self.translator.remember(messages)
            self.prefixes.of(family).remember(raw, decoded, messages)
            header = self.translator.header(parsed, messages.rules, None)
            self.translator.check_header(parsed, header)
            return parsed, messages, header

    def _too_large(self) -> str:
        return f"the request body is larger than the proxy reads ({self.max_body_bytes} bytes)"

    async def _handle(self, request: Request, family: Family) -> Response:
        explicit = request.path_params.get("session") or request.headers.get(SESSION_HEADER)
        try:
            self.guard.check(request.headers)
            await self.start()
            if family == "responses" and not self.upstream.serves(family):
                raise ProxyError(
                    f"this proxy forwards to {self.upstream.provider}, which has no Responses "
                    "API (/v1/responses); use its chat completions API, or start a proxy for "
                    "an upstream that has it (openai)",
                    status=404,
                )
            if not self.upstream.serves(family):
                api = (
                    "Anthropic Messages"
                    if self.upstream.family == "anthropic"
                    else ("OpenAI chat completions")
                )
                raise ProxyError(
                    f"this proxy forwards to {self.upstream.provider}, which speaks the {api} "
                    f"API; send {api} requests, or start a proxy for an upstream of this API"
                )
            if explicit is not None:
                validate_session_id(explicit)
            raw = await self._read(request)
            parsed, messages, checked = self._understand(family, raw, request)
            who = Who(
                Agent.of(parsed.system, parsed.tools, parsed.model),
                client_signal(parsed.body, request.headers),
            )
            previous = parsed.extras.get("previous_response_id")
            assigned = await self.router.assign(
                explicit,
                messages.keys,
                messages.chain,
                who,
                previous if family == "responses" else None,
            )
        except InvalidSessionIdError as exc:
            return self._refuse(family, ProxyError(str(exc)), explicit)
        except SessionLockedError as exc:
            return self._refuse(family, ProxyError(str(exc), status=409), explicit, named=True)
        except ProxyError as exc:
            return self._refuse(family, exc, explicit)
        except TapelogError as exc:  # the store: a damaged or unreadable session, ...
            return self._refuse(family, ProxyError(str(exc), status=500), explicit)
        try:
            state = assigned.state
            history = state.session.history()
            current = state.session.header
            if assigned.how == "continue":  # the provider holds the history
                parsed = continuing(parsed, history.messages)
                own = self.translator.messages(parsed)
                messages = replace(own, neutral=[*history.messages, *own.neutral])
                header = self.translator.header(parsed, messages.rules, current)
            else:
                header = self.translator.for_session(parsed, messages.rules, current, checked)
            generation = state.session.replace_generation
            same = self.translator.same(header)
            plan = plan_messages(history, messages.neutral, same, state.compared, generation)
            state.compared = Compared(messages.neutral, plan.equal, generation)
        except TapelogError as exc:
            self.sessions.let_go(assigned.state)
            error = exc if isinstance(exc, ProxyError) else ProxyError(str(exc), status=500)
            return self._refuse(family, error, assigned.state.id, named=True)
        except BaseException:
            self.sessions.let_go(assigned.state)
            raise
        return await self._send(request, parsed, messages, assigned, header, plan)

    async def _send(
        self,
        request: Request,
        parsed: ClientRequest,
        messages: Messages,
        assigned: Assigned,
        header: EpochHeader,
        plan: Plan,
    ) -> Response:
        state = assigned.state
        exchange = Exchange(state, header)
        changed = None if plan.changed is None else messages.where(plan.changed, parsed.offset)
        exchange.changes = assigned.changes(changed)
        if assigned.how == "explicit" and "previous_response_id" in parsed.extras:
            await self.sessions.refresh()  # a named session skips the router's refresh
        previous = previous_response(parsed.extras, self.index)
        if previous is not None:
            exchange.notes["previous_response"] = previous[0]
            exchange.changes.append(previous[1])
        try:
            exchange.log_request(plan, messages.neutral)
            store = self.sessions.store
            aside = store.quick_io and store.syncs_later
            body = await exchange.durable_body(wire_for(header.config), sync_aside=aside)
        except Exception as exc:
            if exchange.boundary is not None:
                exchange.finish(error=error_of(exc, self.upstream.provider), sent=False)
            else:
                exchange.abandon(error_of(exc, self.upstream.provider))
            await self.turn_end.done(exchange, True, status=500)
            message = error_of(exc, self.upstream.provider)["message"]
            said = f"the proxy could not log the request: {message}"
            return self._fail(parsed.family, 500, said, state.id)
        url, headers = logged_target(
            header.config,
            self.upstream.endpoint(parsed.family),
            upstream_headers(request.headers, self.upstream.family),
        )
        try:
            content, sized = sized_content(body, headers)  # the parts, as sized chunks
            response = await self.http.send(
                self.http.build_request("POST", url, content=content, headers=sized),
                stream=True,
            )
        except httpx.HTTPError as exc:
            exchange.finish(error=error_of(exc, self.upstream.provider))
            await self.turn_end.done(exchange, False, status=502)
            message = error_of(exc, self.upstream.provider)["message"]
            return self._fail(parsed.family, 502, message, state.id)
        if not 200 <= response.status_code < 300:
            text = await response.aread()
            await response.aclose()
            error = {
                "type": "UpstreamError",
                "status": response.status_code,
                "message": _excerpt(text),
            }
            exchange.finish(error=error)
            await self.turn_end.done(exchange, False, status=response.status_code)
            head = {**passed_headers(response.headers), **_named(state.id)}
            return Response(text, status_code=response.status_code, headers=head)
        answer = None
        if not parsed.stream:
            answer = _answer(parsed.family)
        relay = Relay(
            response=response,
            exchange=exchange,
            family=parsed.family,
            provider=self.upstream.provider,
            answer=answer,
            done=self.turn_end.done,
        )
        if parsed.stream:
            head = {**passed_headers(response.headers), **_named(state.id)}
            return RelayResponse(relay, status_code=response.status_code, headers=head)
        try:
            async for _ in relay.pieces():
                pass
        except BaseException:
            await relay.close()
            raise
        named = _named(state.id)  # the turn's end goes on once the answer is sent:
        if relay.error is not None or answer is None:
            message = relay.error["message"] if relay.error else "no answer"
            failed = error_body(parsed.family, 502, f"{self.upstream.provider}: {message}")
            return ClosingResponse(
                relay, failed, status_code=502, media_type="application/json", headers=named
            )
        head = {
            k: v for k, v in passed_headers(response.headers).items() if k.lower() != "content-type"
        }
        head.update(named)
        return ClosingResponse(relay, answer.body(), media_type="application/json", headers=head)

    def _fail(
        self, family: Family, status: int, message: str, session: str | None = None
    ) -> Response:
        body = error_body(family, status, message)
        return Response(
            body, status_code=status, media_type="application/json", headers=_named(session)
        )


def _answer(family: Family) -> AnthropicAnswer | OpenAIAnswer | ResponsesAnswer:
    """What assembles a non-streaming client's answer from the stream."""
    if family == "responses":
        return ResponsesAnswer()
    return AnthropicAnswer() if family == "anthropic" else OpenAIAnswer()


def _named(session: str | None) -> dict[str, str]:
    """The answer header that names the request's session (none before it has one)."""
    return {SESSION_ANSWER_HEADER: session} if session is not None else {}


def _excerpt(data: bytes) -> str:
    text = " ".join(data.decode("utf-8", "replace").split())
    return text if len(text) <= 300 else text[:299] + "…"
