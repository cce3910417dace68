"""Serving the proxy and the emulator on loopback, and checking what the proxy logged.

Nothing of tapelog is faked: the emulator is the upstream (over a real socket,
or in process through an ASGI transport), the proxy is the real app, and the
clients are the official SDKs.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from _loopback import serve_loopback
from tapelog.emulator import Emulator
from tapelog.llm import encode_request
from tapelog.log import encode
from tapelog.log._api import Session
from tapelog.proxy import Proxy, Upstream
from tapelog.proxy._api import RequestSummary
from tapelog.request._api import rebuild_requests
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

SECRET = "sk-proxy-test-SECRET-do-not-log-7311"

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]

TOOLS_ANTHROPIC = [
    {
        "name": "add",
        "description": "Add two integers.",
        "input_schema": {
            "type": "object",
            "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
            "required": ["a", "b"],
        },
    }
]

# A two-turn tool conversation: a call, the answer, a follow-up call, the answer.
SCRIPT = [
    {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
    {"text": "1 + 2 = 3"},
    {"tool_calls": [{"name": "add", "arguments": '{"a": 3, "b": 4}'}]},
    {"text": "3 + 4 = 7"},
]


def serve(app: Any) -> AbstractContextManager[int]:
    """Serve an ASGI app on a free loopback port in a thread (lifespan on); the port."""
    return serve_loopback(app, lifespan="on")


@contextmanager
def proxy_on(
    store: Path, upstream: Upstream, lines: list[str] | None = None, **options: Any
) -> Iterator[int]:
    """A proxy to ``upstream`` served on loopback, writing to ``store``; its port.
    Each request's summary line is appended to ``lines``."""

    def report(summary: RequestSummary) -> None:
        if lines is not None:
            lines.append(summary.line())

    proxy = Proxy(upstream, JsonlStore(store), on_request=report, **options)
    with serve(proxy.app) as port:
        yield port


@dataclass
class DirectAndProxied:
    """One client conversation played twice: straight to an emulator, and
    through a proxy (on the store at ``tmp_path``) to another emulator."""

    expected: Any
    got: Any
    direct: Emulator
    upstream: Emulator
    lines: list[str] = field(default_factory=list)


def direct_and_proxied(
    tmp_path: Path,
    script: list[dict[str, Any]],
    provider: str,
    urls: tuple[str, str],
    client: Callable[[str], AbstractContextManager[Any]],
    play: Callable[[Any], Any],
) -> DirectAndProxied:
    """``play`` a ``client`` made for ``urls[0]`` on the emulator's port, then
    for ``urls[1]`` on the proxy's (each a path after ``http://127.0.0.1:PORT``)."""
    direct = Emulator(script=script)
    with serve(direct.app) as port, client(f"http://127.0.0.1:{port}{urls[0]}") as sdk:
        expected = play(sdk)
    upstream = Emulator(script=script)
    run = DirectAndProxied(expected, None, direct, upstream)
    with (
        serve(upstream.app) as port,
        proxy_on(tmp_path, upstream_for(provider, port), run.lines) as proxy_port,
        client(f"http://127.0.0.1:{proxy_port}{urls[1]}") as sdk,
    ):
        run.got = play(sdk)
    return run


def upstream_for(provider: str, emulator_port: int) -> Upstream:
    """The emulator on ``emulator_port`` as the upstream ``provider``."""
    root = f"http://127.0.0.1:{emulator_port}"
    base = {
        "deepseek": f"{root}/deepseek",
        "openai": f"{root}/openai/v1",
        "anthropic": f"{root}/anthropic",
    }[provider]
    return Upstream.resolve(provider, base_url=base)


def sessions_in(store: Path) -> dict[str, Session]:
    """Every session of the store, each checked with ``verify`` first."""
    out: dict[str, Session] = {}
    for path in sorted(store.glob("*.jsonl")):
        report = verify_jsonl(path.read_bytes(), expected_id=path.stem)
        assert report.ok, [str(p.error) for p in report.problems]
        out[path.stem] = JsonlStore(store).load(path.stem).session
    return out


def assert_rebuilds(sessions: dict[str, Session], emulator: Emulator) -> None:
    """Every body the emulator received is, in order, a request rebuilt from the
    stored logs (``tapelog requests``), and every rebuilt request was received."""
    own = {sid: own_requests(s) for sid, s in sessions.items()}
    rebuilt = [body for bodies in own.values() for body in bodies]
    received = [r.body for r in emulator.received]
    assert sorted(rebuilt) == sorted(received)
    for bodies in own.values():
        arrived = iter(received)  # in send order: a subsequence of what arrived
        assert all(any(body == got for got in arrived) for body in bodies), "out of order"


def own_requests(session: Session) -> list[bytes]:
    """The rebuilt bodies of a session's own requests (a fork's seed holds its parent's)."""
    seed = session.info.seed_length or 0
    return [
        encode_request(r.request)
        for r in rebuild_requests(session.events)
        if r.boundary_seq >= seed
    ]


def assert_no_secret(store: Path, *texts: str, secret: str = SECRET) -> None:
    """The key is in no stored byte (any file of the store) and no text."""
    for path in store.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    for text in texts:
        assert secret not in text


def types_of(session: Session) -> list[str]:
    return [e.type for e in session.events if e.type not in ("assistant/chunk", "log/digest")]


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


@asynccontextmanager
async def in_process(
    store: Path,
    *,
    provider: str = "deepseek",
    script: list[Any] | None = None,
    lines: list[str] | None = None,
    emulator: Emulator | None = None,
    **options: Any,
) -> AsyncIterator[tuple[Proxy, Emulator, httpx.AsyncClient]]:
    """The proxy and the emulator in this event loop (ASGI transports, no socket):
    the proxy, the emulator, and an HTTP client whose base URL is the proxy."""
    emu = emulator if emulator is not None else Emulator(script=script)
    base = {
        "deepseek": "http://emulator/deepseek",
        "openai": "http://emulator/openai/v1",
        "anthropic": "http://emulator/anthropic",
    }[provider]

    def report(summary: RequestSummary) -> None:
        if lines is not None:
            lines.append(summary.line())

    upstream = httpx.AsyncClient(transport=emu.transport(), timeout=30)
    proxy = Proxy(
        Upstream.resolve(provider, base_url=base),
        JsonlStore(store),
        http_client=upstream,
        on_request=report,
        **options,
    )
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app), base_url="http://127.0.0.1", timeout=30
    )
    try:
        yield proxy, emu, client
    finally:
        await client.aclose()
        await proxy.aclose()
        await upstream.aclose()


async def post(client: httpx.AsyncClient, path: str, body: Any, **headers: str) -> httpx.Response:
    """POST a JSON body (tapelog's encoder) with the test key."""
    head = {"authorization": f"Bearer {SECRET}", "content-type": "application/json", **headers}
    return await client.post(path, content=encode(body), headers=head)
