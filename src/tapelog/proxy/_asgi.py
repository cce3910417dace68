"""The proxy's model routes as a plain ASGI app in front of its Starlette app.

Every request a client sends through the proxy is a POST to one of a few
fixed paths (``/v1/chat/completions``, ``/v1/messages``, ...), optionally
under ``/s/<session-id>/``. Starlette's router tries each route's pattern in
turn and wraps the endpoint in its exception middleware, a fixed cost on
every request that a dictionary lookup does without. :class:`ModelRoutes`
finds those paths itself and hands the request straight to the proxy's
handler; everything else (``/health``, unknown paths, other methods, the
lifespan) goes to the Starlette app as before. A proxy that answers browsers
(``--allow-origin``) serves the Starlette app alone, whose CORS middleware
adds its headers to every answer. While a model route's request is in
flight, until its answer has been sent, the garbage collector's passes wait
(``_gc_window``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tapelog.proxy._gc_window import GcWindow
from tapelog.proxy._types import Family

__all__ = ["ModelRoutes", "model_route"]


def model_route(path: str, routes: Mapping[str, Family]) -> tuple[Family, str | None] | None:
    """The API family of a model route and the session it names (``/s/<id>/``
    before the route; ``None``: none named), or ``None`` for any other path.
    A session id is what Starlette's ``{session}`` matches: one path segment."""
    family = routes.get(path)
    if family is not None:
        return family, None
    if path.startswith("/s/"):
        end = path.find("/", 3)
        if end > 3:
            family = routes.get(path[end:])
            if family is not None:
                return family, path[3:end]
    return None


class ModelRoutes:
    """POSTs to a model route go to ``handle`` (with the request, its family
    and the session its path names), as a Starlette route would pass them;
    anything else to ``fallback``."""

    def __init__(
        self,
        routes: Mapping[str, Family],
        handle: Callable[[Request, Family], Awaitable[Response]],
        fallback: ASGIApp,
    ) -> None:
        self.routes = routes
        self.handle = handle
        self.fallback = fallback
        self.gc_window = GcWindow()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            found = model_route(scope["path"], self.routes)
            if found is not None:
                family, session = found
                scope["path_params"] = {} if session is None else {"session": session}
                self.gc_window.enter()  # until the answer has been sent (_gc_window)
                try:
                    response = await self.handle(Request(scope, receive), family)
                    await response(scope, receive, send)
                finally:
                    self.gc_window.leave()
                return
        await self.fallback(scope, receive, send)
