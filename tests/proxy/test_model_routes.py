"""The model routes found without Starlette's router are the ones it finds.

``_asgi.model_route`` stands in for Starlette's routing on the proxy's hot
path; for any path it must pick the route (and the ``/s/<session>/`` id)
that the Starlette routes the proxy declares would, and nothing else. Served,
a model route answers through it, and the rest (``/health``, unknown paths,
other methods) still reaches the Starlette app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.routing import Match, Route

from proxy._helpers import in_process, post
from tapelog.proxy._app import _ROUTES
from tapelog.proxy._asgi import model_route


async def _endpoint(request: Any) -> Any:
    raise AssertionError("never called")


_DECLARED = [
    (Route(prefix + path, _endpoint, methods=["POST"]), family)
    for path, family in _ROUTES.items()
    for prefix in ("", "/s/{session}")
]


def _starlette(path: str) -> tuple[str, str | None] | None:
    scope = {"type": "http", "method": "POST", "path": path, "root_path": ""}
    for route, family in _DECLARED:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return family, child["path_params"].get("session")
    return None


_SEGMENTS = st.sampled_from(["", "s", "v1", "chat", "completions", "messages", "responses", "x"])
_PIECES = st.one_of(
    st.sampled_from([*_ROUTES, "/s/", "/", "//", "/health", "/s/a/b"]),
    st.text(st.sampled_from("ab-_%./s"), max_size=6),
    _SEGMENTS.map(lambda s: "/" + s),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=4))
def test_a_path_routes_as_starlette_routes_it(pieces: list[str]) -> None:
    path = "".join(pieces)
    assert model_route(path, _ROUTES) == _starlette(path)


def test_every_declared_route_is_found() -> None:
    for path, family in _ROUTES.items():
        assert model_route(path, _ROUTES) == (family, None)
        assert model_route(f"/s/proxy-1{path}", _ROUTES) == (family, "proxy-1")
        assert _starlette(f"/s/proxy-1{path}") == (family, "proxy-1")


async def test_the_model_routes_and_the_rest_are_served(tmp_path: Path) -> None:
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}
    async with in_process(tmp_path) as (proxy, _, http):
        answer = await post(http, "/v1/chat/completions", body)
        assert answer.status_code == 200, answer.text
        named = answer.headers["x-tapelog-session"]
        await proxy.sessions.settled()
        again = await post(http, f"/s/{named}/v1/chat/completions", body)
        assert again.status_code == 200, again.text
        assert again.headers["x-tapelog-session"] == named
        assert (await http.get("/health")).json() == {"ok": True}
        assert (await http.get("/v1/chat/completions")).status_code == 405
        assert (await post(http, "/v1/nothing", body)).status_code == 404
