"""A streaming client that leaves mid-answer: the turn ends as aborted.

The proxy runs under uvicorn on a real loopback socket, in front of an
upstream that streams one piece of its answer and then waits (a stalled
model). The client reads that piece and closes its connection. The proxy must
notice the client is gone, stop relaying, log the turn's end as
``aborted`` by ``client-disconnected`` (the piece that arrived kept as its
chunk), close its upstream request and hand the session back, so the
conversation's next request continues it.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from tapelog.emulator import Emulator
from tapelog.log import encode
from tapelog.proxy import Upstream
from tapelog.proxy._relay import ClosingResponse

from ._helpers import SECRET, proxy_on, serve, sessions_in, wait_for

_FIRST = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"deepseek-chat",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"he"},"finish_reason":null}]}'
    b"\n\n"
)


class Stalled:
    """An upstream that answers the first request with one streamed piece and
    then waits until its client leaves (noted in :attr:`left`); every later
    request goes to the emulator, which answers it whole."""

    def __init__(self) -> None:
        self.emulator = Emulator(script=[{"text": "again"}])
        self.requests = 0
        self.left = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.requests:
            await self.emulator.app(scope, receive, send)
            return
        self.requests += 1
        while (await receive()).get("more_body"):
            pass
        head = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": _FIRST, "more_body": True})
        message = await asyncio.wait_for(receive(), timeout=20)
        self.left = message["type"] == "http.disconnect"


def _request(port: int, body: bytes) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n"
        b"content-type: application/json\r\nauthorization: Bearer %s\r\n"
        b"content-length: %d\r\n\r\n" % (port, SECRET.encode(), len(body))
    ) + body


def test_a_client_that_leaves_mid_stream_aborts_the_turn(tmp_path: Path) -> None:
    upstream = Stalled()
    messages = [{"role": "user", "content": "hi"}]
    body = encode({"model": "deepseek-chat", "messages": messages, "stream": True})
    with serve(upstream) as up_port:
        target = Upstream.resolve("deepseek", base_url=f"http://127.0.0.1:{up_port}")
        with proxy_on(tmp_path, target) as port:
            with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
                client.sendall(_request(port, body))
                got = b""
                while b'"he"' not in got:
                    data = client.recv(65536)
                    assert data, "the proxy closed before the first piece"
                    got += data
            wait_for(lambda: upstream.left)  # the upstream request was closed

            def ended() -> bool:
                sessions = sessions_in(tmp_path)
                return any(e.type == "turn/end" for s in sessions.values() for e in s.events)

            wait_for(ended)
            (session,) = sessions_in(tmp_path).values()
            (end,) = [e for e in session.events if e.type == "turn/end"]
            assert end.data["reason"] == {"kind": "aborted", "by": "client-disconnected"}
            chunks = [e.data["chunk"] for e in session.events if e.type == "assistant/chunk"]
            assert [c.get("text") for c in chunks] == ["he"]

            # The session was handed back: the next request of the conversation continues it.
            follow = encode({"model": "deepseek-chat", "messages": messages, "stream": False})
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                content=follow,
                headers={"authorization": f"Bearer {SECRET}", "content-type": "application/json"},
                timeout=20,
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-tapelog-session"] == session.id


class _Relay:
    """What :class:`ClosingResponse` needs of a relay: its close, counted."""

    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("broken", [False, True])
async def test_a_whole_answer_closes_its_relay_once_sent_however_sending_ends(
    broken: bool,
) -> None:
    relay = _Relay()
    sent: list[str] = []

    async def send(message: Any) -> None:
        if broken and message["type"] == "http.response.body":
            raise OSError("the client is gone")
        sent.append(message["type"])
        assert not relay.closed, "the relay is closed only after the answer is sent"

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    response = ClosingResponse(relay, b"{}", media_type="application/json")  # type: ignore[arg-type]
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions"}
    if broken:
        with pytest.raises(OSError, match="gone"):
            await response(scope, receive, send)
    else:
        await response(scope, receive, send)
        assert sent == ["http.response.start", "http.response.body"]
    assert relay.closed == 1
