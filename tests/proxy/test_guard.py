"""What the proxy refuses before reading a body: web pages, other names, bodies not
declared JSON, and bodies nested too deeply for the log.

Each refusal is in the client API's error shape, and leaves nothing behind: no
session in the store, no request at the upstream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapelog.log import encode
from tapelog.proxy._guard import MAX_BODY_DEPTH, nested_too_deeply

from ._helpers import SECRET, in_process, post, proxy_on, serve, upstream_for

MODEL = "deepseek-chat"
HELLO = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
PATH = "/s/victim/v1/chat/completions"


def _nothing_left(store: Path, emu: Any) -> None:
    assert list(store.glob("*.jsonl")) == [], "a refused request left a session behind"
    assert emu.received == [], "a refused request reached the upstream"


@pytest.mark.parametrize(
    "host",
    ["attacker.example", "attacker.example:8790", "127.0.0.1.attacker.example", "[::2]:1", ""],
)
async def test_a_host_that_is_not_a_loopback_name_is_a_421(tmp_path: Path, host: str) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        refused = await post(http, PATH, HELLO, host=host)
        health = await http.get("/health", headers={"host": host})
    assert refused.status_code == 421
    assert "loopback names only" in refused.json()["error"]["message"]
    assert health.status_code == 421
    _nothing_left(tmp_path, emu)


@pytest.mark.parametrize("host", ["127.0.0.1:8790", "localhost", "LOCALHOST:1", "[::1]:8790"])
async def test_loopback_names_are_answered(tmp_path: Path, host: str) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        answered = await post(http, PATH, HELLO, host=host)
    assert answered.status_code == 200
    assert len(emu.received) == 1


async def test_without_the_host_check_other_names_are_answered(tmp_path: Path) -> None:
    """``--allow-remote``: clients on other machines name the proxy by its own name."""
    async with in_process(tmp_path, check_host=False) as (_, emu, http):
        answered = await post(http, PATH, HELLO, host="proxy.lan:8790")
    assert answered.status_code == 200
    assert len(emu.received) == 1


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:8790"])
async def test_a_request_with_an_origin_is_a_403_in_the_apis_shape(
    tmp_path: Path, origin: str
) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        refused = await post(http, PATH, HELLO, origin=origin)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert "--allow-origin" in error["message"]
    assert error["code"] == "tapelog_proxy"
    _nothing_left(tmp_path, emu)


async def test_an_anthropic_client_is_refused_in_the_anthropic_shape(tmp_path: Path) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": HELLO["messages"]}
    async with in_process(tmp_path, provider="anthropic") as (_, emu, http):
        refused = await post(http, "/v1/messages", body, origin="http://evil.example")
    assert refused.status_code == 403
    assert refused.json()["type"] == "error"
    assert refused.json()["error"]["type"] == "permission_error"
    _nothing_left(tmp_path, emu)


async def test_an_allowed_origin_is_answered_with_cors_headers(tmp_path: Path) -> None:
    page = "http://localhost:3000"
    async with in_process(tmp_path, allowed_origins=[page + "/"]) as (_, emu, http):
        preflight = await http.options(
            PATH,
            headers={
                "origin": page,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, authorization",
            },
        )
        answered = await post(http, PATH, HELLO, origin=page)
        other = await post(http, PATH, HELLO, origin="http://localhost:3001")
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == page
    assert answered.status_code == 200
    assert answered.headers["access-control-allow-origin"] == page
    assert other.status_code == 403
    assert len(emu.received) == 1


async def test_without_allowed_origins_a_preflight_gets_no_yes(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        preflight = await http.options(
            PATH, headers={"origin": "http://evil.example", "access-control-request-method": "POST"}
        )
    assert preflight.status_code == 405
    assert "access-control-allow-origin" not in preflight.headers
    _nothing_left(tmp_path, emu)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
    ],
)
async def test_a_body_not_declared_json_is_a_415(tmp_path: Path, content_type: str | None) -> None:
    headers = {"authorization": f"Bearer {SECRET}"}
    if content_type is not None:
        headers["content-type"] = content_type
    async with in_process(tmp_path) as (_, emu, http):
        refused = await http.post(PATH, content=encode(HELLO), headers=headers)
    assert refused.status_code == 415
    assert "application/json" in refused.json()["error"]["message"]
    _nothing_left(tmp_path, emu)


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
async def test_json_with_parameters_or_in_capitals_is_answered(
    tmp_path: Path, content_type: str
) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        answered = await post(http, PATH, HELLO, **{"content-type": content_type})
    assert answered.status_code == 200
    assert len(emu.received) == 1


def _nested(depth: int) -> bytes:
    """A body whose ``metadata`` makes it ``depth`` levels deep (the body is one)."""
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    head = encode(HELLO)[:-1]
    return head + b',"metadata":' + inner.encode() + b"}"


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH + 1, 500, 1000, 100_000])
async def test_a_deeply_nested_body_is_a_400_and_nothing_is_logged(
    tmp_path: Path, depth: int
) -> None:
    lines: list[str] = []
    async with in_process(tmp_path, lines=lines) as (_, emu, http):
        head = {"content-type": "application/json", "authorization": f"Bearer {SECRET}"}
        refused = await http.post(PATH, content=_nested(depth), headers=head)
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert "nested more than 128 levels" in message or "depth limit exceeded" in message
    assert len(lines) == 1
    assert "HTTP 400" in lines[0]
    _nothing_left(tmp_path, emu)


def _levels(count: int) -> Any:
    """An object ``count`` levels deep."""
    value: Any = {}
    for _ in range(count - 1):
        value = {"x": value}
    return value


@pytest.mark.parametrize("where", ["metadata", "tool schema"])
async def test_a_body_at_the_depth_limit_is_logged_and_sent(tmp_path: Path, where: str) -> None:
    body: dict[str, Any] = dict(HELLO)
    if where == "metadata":  # body: 1 level above it
        body["metadata"] = _levels(MAX_BODY_DEPTH - 1)
    else:  # body, tools, tool, function, parameters, properties: 6
        parameters = {"type": "object", "properties": {"a": _levels(MAX_BODY_DEPTH - 6)}}
        body["tools"] = [{"type": "function", "function": {"name": "f", "parameters": parameters}}]
    assert _depth(body) == MAX_BODY_DEPTH
    async with in_process(tmp_path) as (_, emu, http):
        answered = await post(http, PATH, body)
    assert answered.status_code == 200, answered.text
    assert len(emu.received) == 1


def test_a_deep_body_over_a_socket_writes_at_most_one_line_to_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The campaign saw a traceback on the proxy's stderr: now nothing at all."""
    import httpx

    from tapelog.emulator import Emulator

    emu = Emulator(script=[])
    with serve(emu.app) as port, proxy_on(tmp_path, upstream_for("deepseek", port)) as proxy:
        for depth in (500, 1000, 100_000):
            response = httpx.post(
                f"http://127.0.0.1:{proxy}{PATH}",
                content=_nested(depth),
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 400
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert len(err.splitlines()) <= 1
    _nothing_left(tmp_path, emu)


def _depth(value: Any) -> int:
    """The reference: levels of objects and arrays, by plain recursion."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=20,
)


@given(_JSON, st.integers(min_value=0, max_value=MAX_BODY_DEPTH + 3))
def test_nested_too_deeply_agrees_with_counting_the_levels(value: Any, wraps: int) -> None:
    for i in range(wraps):
        value = [value] if i % 2 else {"k": value}
    assert nested_too_deeply(value) == (_depth(value) > MAX_BODY_DEPTH)
