"""The ``tapelog serve`` web app: read-only pages over one store, on loopback.

Routes (every one ``GET``; any other method is answered 405, and nothing
anywhere writes to the store):

* ``/``: the sessions page (:mod:`._pages`);
* ``/s/ID``: a session's page (:mod:`._session_page`), ``?req=N`` / ``?seq=S``
  to show the window holding request N / event S;
* ``/s/ID/diff?a=N&b=M``: two requests compared (:mod:`._diff_page`);
* ``/s/ID/requests/N.json``: request N's exact body, rebuilt from the log;
* ``/s/ID/events?after=S``: server-sent events with what is stored after seq S
  (:mod:`._live`), for the page's live updates.

Every response carries a Content-Security-Policy that allows only the page's
own inline styles and scripts (by hash) and connections to the server itself,
so a page can load nothing from the network, and log text that slipped past
the escaping still could not run. Requests whose ``Host`` is not a loopback
name are refused (a web page cannot reach the server by rebinding a DNS name
to 127.0.0.1). Ids are checked as the store checks them before they reach a
path or a query.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any, Final

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tapelog._errors import InvalidSessionIdError, LogError, SessionNotFoundError, TapelogError
from tapelog._loopback import is_loopback_host_header
from tapelog.audit import encode_request
from tapelog.audit._api import ReportWindow, Timeline, report_assets
from tapelog.log import encode
from tapelog.serve._diff_page import diff_html
from tapelog.serve._index import SessionIndex
from tapelog.serve._live import LiveSession, LiveSessions
from tapelog.serve._pages import PER_PAGE, ListQuery, page, pct, sessions_html
from tapelog.serve._session_page import LiveLinks, session_html
from tapelog.store import SessionStore
from tapelog.store._api import validate_session_id

__all__ = ["create_app"]

_AUDIT_EVENTS: Final = 20_000
"""Events a sessions page audits at most itself (the rest: the background auditor)."""
_POLL_S: Final = 0.25
_KEEPALIVE_S: Final = 15.0
_BATCH: Final = 500
_NOWHERE: Final = ReportWindow(first=0, last=-1, first_seq=0, end_seq=0)


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@dataclass(frozen=True, slots=True)
class _Assets:
    css: str
    report_js: str
    live_js: str
    csp: str

    @classmethod
    def load(cls) -> _Assets:
        report_css, report_js = report_assets()
        files = resources.files("tapelog.serve")
        css = report_css + files.joinpath("serve.css").read_text("utf-8")
        live_js = files.joinpath("live.js").read_text("utf-8")
        csp = (
            "default-src 'none'; "
            f"script-src {_sha(report_js)} {_sha(live_js)}; style-src {_sha(css)}; "
            "img-src data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
            "frame-ancestors 'none'"
        )
        return cls(css=css, report_js=report_js, live_js=live_js, csp=csp)


class _Guard:
    """Refuse a non-loopback ``Host``; add the security headers to every response."""

    def __init__(self, app: ASGIApp, csp: str) -> None:
        self._app = app
        self._headers = [
            (b"content-security-policy", csp.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"x-frame-options", b"DENY"),
            (b"cross-origin-resource-policy", b"same-origin"),
            (b"cache-control", b"no-store"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if not is_loopback_host_header(host):
            response = Response("tapelog serve answers loopback names only\n", status_code=421)
            await response(scope, receive, self._send(send))
            return
        await self._app(scope, receive, self._send(send))

    def _send(self, send: Send) -> Send:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in message["headers"]}
                message["headers"] = [
                    *message["headers"],
                    *((k, v) for k, v in self._headers if k not in names),
                ]
            await send(message)

        return with_headers


class _Server:
    """The app's state and its pages (each sync handler runs in a worker thread)."""

    def __init__(self, store: SessionStore, index_path: Path | None) -> None:
        self.index = SessionIndex(store, index_path)
        self.lives = LiveSessions(store)
        self.assets = _Assets.load()

    def html(self, title: str, body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(page(title, self.assets.css, body), status_code=status)

    def error(self, status: int, message: str) -> HTMLResponse:
        body = f'<nav class="top"><a href="/">← all sessions</a></nav><h1>{status}</h1>'
        body += f"<p>{escape(message)}</p>"
        return self.html(f"tapelog serve · {status}", body, status)

    def load(self, session_id: str) -> LiveSession:
        """The session an URL names, loaded and up to date (errors: an error page)."""
        try:
            validate_session_id(session_id)
            return self.lives.get(session_id)
        except (InvalidSessionIdError, SessionNotFoundError) as exc:
            raise HTTPException(404, str(exc)) from None
        except (TapelogError, OSError) as exc:
            raise HTTPException(500, f"session {session_id} cannot be shown: {exc}") from None

    @contextlib.contextmanager
    def opened(self, request: Request) -> Iterator[LiveSession]:
        """The session a request names, loaded and locked."""
        live = self.load(request.path_params["session_id"])
        with live.lock:
            yield live

    # --- pages ---------------------------------------------------------------------

    def sessions(self, request: Request) -> Response:
        query = ListQuery.parse(request.query_params)
        rows = self.index.rows()
        matched = query.select(rows)
        start = (min(query.page, max((len(matched) - 1) // PER_PAGE + 1, 1)) - 1) * PER_PAGE
        shown = matched[start : start + PER_PAGE]
        if any(not r.audited for r in shown):
            self.index.audit([r.id for r in shown], events=_AUDIT_EVENTS)
            fresh = {r.id: r for r in self.index.rows(refresh=False)}
            shown = [fresh.get(r.id, r) for r in shown]
            matched = [fresh.get(r.id, r) for r in matched]
        body = sessions_html(matched, shown, query, label=self.index.label, total=len(rows))
        return self.html("tapelog serve · sessions", body)

    def session(self, request: Request) -> Response:
        with self.opened(request) as live:
            html = session_html(
                live,
                request.query_params,
                status=live.status(),
                css=self.assets.css,
                live_script=self.assets.live_js,
                parents=self.index.parents(),
                children=self.index.children(),
            )
        return HTMLResponse(html)

    def diff(self, request: Request) -> Response:
        with self.opened(request) as live:
            count = len(live.walked())
            try:
                a = int(request.query_params.get("a", count - 1))
                b = int(request.query_params.get("b", count))
            except ValueError:
                return self.error(400, "a and b must be request numbers (1, 2, …)")
            try:
                body = diff_html(live, a, b)
            except LogError as exc:
                return self.error(404, str(exc))
        return self.html(f"tapelog serve · {live.id} · diff {a} → {b}", body)

    def body(self, request: Request) -> Response:
        index = request.path_params["index"]
        with self.opened(request) as live:
            walked = live.walked()
            if not 1 <= index <= len(walked):
                raise HTTPException(
                    404, f"session {live.id} has {len(walked)} loop request(s), not {index}"
                )
            data = encode_request(walked[index - 1].request())
        name = f"{live.id}-request-{index}.json"
        return Response(
            data,
            media_type="application/json",
            headers={"content-disposition": f'attachment; filename="{name}"'},
        )

    # --- live updates ------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        live = await run_in_threadpool(self.load, request.path_params["session_id"])
        given = request.headers.get("last-event-id") or request.query_params.get("after", "")
        try:
            after = int(given)
        except ValueError:
            after = len(live.session) - 1
        return StreamingResponse(
            self._stream(request, live, after),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def _stream(
        self, request: Request, live: LiveSession, after: int
    ) -> AsyncIterator[bytes]:
        timeline, after = await run_in_threadpool(_primed, live, after)
        yield b"retry: 1000\n\n"
        quiet_since = time.monotonic()
        state: dict[str, Any] = {"status": None, "stale": False}
        while not await request.is_disconnected():
            try:
                update = await run_in_threadpool(_collect, live, timeline, after, state)
            except (TapelogError, OSError) as exc:
                self.lives.forget(live)
                message = f"Live updates stopped: {exc}. Reload the page."
                yield _sse("gone", {"message": message})
                return
            if update is not None:
                after = update["seq"]
                yield _sse("update", update, after)
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > _KEEPALIVE_S:
                yield b": keepalive\n\n"
                quiet_since = time.monotonic()
            await anyio.sleep(_POLL_S)


def _sse(event: str, data: Mapping[str, Any], seq: int | None = None) -> bytes:
    head = f"event: {event}\n" + (f"id: {seq}\n" if seq is not None else "")
    return head.encode() + b"data: " + encode(data) + b"\n\n"


def _primed(live: LiveSession, after: int) -> tuple[Timeline, int]:
    """A timeline in the state the page's ends in: fed the events of the turn
    (or the stretch outside turns) that holds seq ``after``."""
    with live.lock:
        live.poll()
        events = live.session.events
        after = max(min(after, len(events) - 1), -1)
        start = after
        while start > 0 and events[start].type != "turn/start":
            start -= 1
        timeline = Timeline(live.request_number, LiveLinks(live.id, _NOWHERE, count=0))
        for seq in range(max(start, 0), after + 1):
            timeline.feed(events[seq])
        return timeline, after


def _collect(
    live: LiveSession, timeline: Timeline, after: int, state: dict[str, Any]
) -> dict[str, Any] | None:
    """What was stored after seq ``after`` as one update (``None``: nothing new)."""
    with live.lock:
        live.poll()
        summary = live.summary()
        events = live.events_after(after, _BATCH)
        status = live.status()
        if not events and status == state["status"]:
            return None
        ops = [op for event in events for op in timeline.feed(event)]
        state["status"] = status
        state["stale"] = state["stale"] or any(e.type == "step/start" for e in events)
        return {
            "seq": events[-1].seq if events else after,
            "ops": ops,
            "status": status,
            "stale": state["stale"],
            "totals": {
                "requests": f"{summary.requests:,}",
                "prompt_tokens": f"{summary.prompt_tokens:,}",
                "cached_reported": f"{summary.cached_tokens:,}",
                "hit_ratio": pct(summary.hit_ratio or 0.0),
            },
        }


def create_app(store: SessionStore, *, index_path: Path | None = None) -> Starlette:
    """The read-only web app over ``store`` (see the module docstring).

    ``index_path`` keeps the sessions index between runs (``None``: in memory
    only). The background auditor runs while the app's lifespan does.
    """
    server = _Server(store, index_path)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.index.start()
        try:
            yield
        finally:
            await run_in_threadpool(server.index.close)
            server.lives.close()

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        response = server.error(exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})  # e.g. a 405's Allow
        return response

    async def store_error(request: Request, exc: Exception) -> Response:
        # The store could not be read (a server down, a directory unreadable): one sentence.
        return server.error(503, str(exc))

    routes = [
        Route("/", server.sessions, methods=["GET"]),
        Route("/s/{session_id}", server.session, methods=["GET"]),
        Route("/s/{session_id}/diff", server.diff, methods=["GET"]),
        Route("/s/{session_id}/requests/{index:int}.json", server.body, methods=["GET"]),
        Route("/s/{session_id}/events", server.events, methods=["GET"]),
    ]
    handlers = {HTTPException: http_error, TapelogError: store_error}
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    app.state.server = server
    app.add_middleware(_Guard, csp=server.assets.csp)
    return app
