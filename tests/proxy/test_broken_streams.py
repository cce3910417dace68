"""A stream the upstream breaks is an error for the client's SDK, not a short answer.

Two ways a stream breaks: the connection drops in the middle of the body (a
raw upstream below sends part of a chunked body and closes the socket), or the
body ends cleanly without the stream's end marker (the emulator's ``cut_after``
fault, or a raw upstream that sends a finish reason and no ``[DONE]``). Either
way the official SDKs, streaming, must raise; the turn's end must be logged as
an error naming the cause; the log must verify and every body the upstream
received must be the rebuilt one.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tapelog.emulator import Emulator
from tapelog.log._api import Session
from tapelog.proxy import Upstream

from ._helpers import (
    SECRET,
    assert_no_secret,
    assert_rebuilds,
    in_process,
    own_requests,
    post,
    proxy_on,
    serve,
    sessions_in,
    upstream_for,
)

HELLO = [{"role": "user", "content": "Tell me a story."}]

OPENAI_FRAMES = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Once upon"},'
    b'"finish_reason":null}]}\n\n'
)
OPENAI_FINISHED = OPENAI_FRAMES + (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}\n\n'
)
ANTHROPIC_FRAMES = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,'
    b'"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    b"\n\n"
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Once upon"}}\n\n'
)


class RawUpstream:
    """An HTTP/1.1 upstream on a loopback socket that answers every request with a
    200 event stream of ``frames`` in one chunk, then either closes the socket in
    the middle of the chunked body (``drop``) or ends the body properly. It keeps
    the bodies it received."""

    def __init__(self, frames: bytes, *, drop: bool) -> None:
        self.frames, self.drop = frames, drop
        self.received: list[bytes] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.port: int = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += conn.recv(65536)
        self.received.append(body)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            + f"{len(self.frames):x}\r\n".encode()
            + self.frames
            + b"\r\n"
        )
        if not self.drop:
            conn.sendall(b"0\r\n\r\n")

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
        self._thread.join(timeout=5)


@contextmanager
def _raw(provider: str, frames: bytes, *, drop: bool) -> Iterator[tuple[Upstream, RawUpstream]]:
    with RawUpstream(frames, drop=drop) as raw:
        base = f"http://127.0.0.1:{raw.port}" + ("/deepseek" if provider == "deepseek" else "")
        yield Upstream.resolve(provider, base_url=base), raw


def _stream_openai(port: int) -> str:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET, max_retries=0)
    text = []
    for chunk in client.chat.completions.create(
        model="deepseek-chat",
        messages=HELLO,  # type: ignore[arg-type]
        stream=True,
    ):
        text.extend(choice.delta.content or "" for choice in chunk.choices)
    return "".join(text)


def _stream_anthropic(port: int) -> str:
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key=SECRET, max_retries=0)
    text = []
    for event in client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=HELLO,  # type: ignore[arg-type]
        stream=True,
    ):
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text.append(event.delta.text)
    return "".join(text)


CLIENTS: dict[str, tuple[Callable[[int], str], type[Exception]]] = {
    "deepseek": (_stream_openai, openai.APIError),
    "anthropic": (_stream_anthropic, anthropic.APIStatusError),
}


def _the_turn_ended_in_error(store: Path, cause: str) -> Session:
    """The one session verifies; its one turn ended as an error naming ``cause``,
    its answer is empty and interrupted, and the text that arrived is in its chunks."""
    (session,) = sessions_in(store).values()
    (end,) = [e for e in session.events if e.type == "turn/end"]
    assert end.data["reason"]["kind"] == "error"
    assert cause in end.data["reason"]["error"]["message"]
    (message,) = [e for e in session.events if e.type == "assistant/message"]
    assert message.data["content"] == []
    assert message.data["interrupted"] is True
    chunks = [e.data["chunk"] for e in session.events if e.type == "assistant/chunk"]
    assert "Once upon" in "".join(c.get("text", "") for c in chunks)
    return session


@pytest.mark.parametrize("provider", ["deepseek", "anthropic"])
def test_a_connection_dropped_mid_stream_makes_the_sdk_raise(tmp_path: Path, provider: str) -> None:
    frames = ANTHROPIC_FRAMES if provider == "anthropic" else OPENAI_FRAMES
    stream, error = CLIENTS[provider]
    lines: list[str] = []
    with (
        _raw(provider, frames, drop=True) as (upstream, raw),
        proxy_on(tmp_path, upstream, lines) as port,
        pytest.raises(error, match="broke before the answer ended") as raised,
    ):
        stream(port)
    assert "tapelog proxy" in str(raised.value)
    session = _the_turn_ended_in_error(tmp_path, "broke before the answer ended")
    assert raw.received == own_requests(session)
    assert "broke before the answer ended" in lines[0]
    assert_no_secret(tmp_path, *lines)


@pytest.mark.parametrize("provider", ["deepseek", "anthropic"])
def test_a_stream_cut_without_its_end_marker_makes_the_sdk_raise(
    tmp_path: Path, provider: str
) -> None:
    """The emulator's ``cut_after``: the body ends cleanly, the answer does not."""
    stream, error = CLIENTS[provider]
    upstream = Emulator(script=[{"text": "Once upon a time there was a log.", "cut_after": 4}])
    with (
        serve(upstream.app) as emu_port,
        proxy_on(tmp_path, upstream_for(provider, emu_port)) as port,
        pytest.raises(error, match="stream ended"),
    ):
        stream(port)
    session = _the_turn_ended_in_error(tmp_path, "stream ended")
    assert_rebuilds({session.id: session}, upstream)


def test_an_openai_stream_with_a_finish_but_no_done_is_truncated_too(tmp_path: Path) -> None:
    stream, error = CLIENTS["deepseek"]
    with (
        _raw("deepseek", OPENAI_FINISHED, drop=False) as (upstream, raw),
        proxy_on(tmp_path, upstream) as port,
        pytest.raises(error, match=r"ended without \[DONE\]"),
    ):
        stream(port)
    session = _the_turn_ended_in_error(tmp_path, "ended without [DONE]")
    assert raw.received == own_requests(session)


@pytest.mark.parametrize("provider", ["deepseek", "anthropic"])
async def test_an_error_event_from_the_upstream_is_passed_on_alone(
    tmp_path: Path, provider: str
) -> None:
    """The upstream's own error event already makes the SDK raise: the proxy adds none."""
    script: list[Any] = [{"error": {"status": 529, "message": "overloaded now"}, "in_stream": True}]
    if provider == "anthropic":
        path = "/v1/messages"
        body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64}
    else:
        path, body = "/v1/chat/completions", {"model": "deepseek-chat"}
    body |= {"messages": HELLO, "stream": True}
    async with in_process(tmp_path, provider=provider, script=script) as (_, emu, http):
        response = await post(http, path, body)
    assert response.text.count("overloaded now") == 1
    assert "tapelog proxy" not in response.text
    (session,) = sessions_in(tmp_path).values()
    (end,) = [e for e in session.events if e.type == "turn/end"]
    assert end.data["reason"]["kind"] == "error"
    assert "overloaded now" in end.data["reason"]["error"]["message"]
    assert_rebuilds({session.id: session}, emu)
