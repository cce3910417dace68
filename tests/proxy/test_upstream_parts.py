"""The proxy sends its upstream body as the loop does: the wire's parts.

The body is encoded with the session's body cache into a ``WireBody``, checked
by the incremental checker (which compares only the parts it has not seen
before and adopts those it found equal), and streamed to the upstream as
sized chunks (``Content-Length``, never chunked framing, never joined). What
arrives must still be the rebuild from the log, byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tapelog.emulator import Emulator
from tapelog.proxy._app import SESSION_ANSWER_HEADER

from ._helpers import SECRET, assert_rebuilds, in_process, post, sessions_in

MODEL = "deepseek-chat"


class _Arrival(httpx.AsyncBaseTransport):
    """Records how each upstream request's body arrived (its chunks and
    framing headers), then hands the joined body to the emulator."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.chunks: list[list[bytes]] = []
        self.headers: list[httpx.Headers] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        chunks = [chunk async for chunk in request.stream]
        self.chunks.append(chunks)
        self.headers.append(request.headers)
        again = httpx.Request(
            request.method, request.url, headers=request.headers, content=b"".join(chunks)
        )
        return await self.inner.handle_async_request(again)


def _history(n: int) -> list[dict[str, Any]]:
    return [
        {"role": ("user", "assistant")[i % 2], "content": f"message {i} " + "x" * 300}
        for i in range(n)
    ]


async def test_a_long_body_goes_upstream_as_sized_chunks_equal_to_the_rebuild(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    arrival = _Arrival(emulator.transport())
    async with in_process(tmp_path, emulator=emulator) as (proxy, _, client):
        proxy.http = httpx.AsyncClient(transport=arrival, timeout=30)
        messages = _history(401)  # ~130 KB: more than one 64 KB chunk
        for _ in range(3):
            answer = await post(
                client, "/v1/chat/completions", {"model": MODEL, "messages": messages}
            )
            assert answer.status_code == 200, answer.text
            messages = [*messages, answer.json()["choices"][0]["message"], *_history(1)]
        await proxy.http.aclose()
    assert len(arrival.chunks) == 3
    for chunks, headers, received in zip(
        arrival.chunks, arrival.headers, emulator.received, strict=False
    ):
        body = b"".join(chunks)
        assert len(chunks) > 1  # streamed, not one joined bytes
        assert headers["content-length"] == str(len(body))
        assert "transfer-encoding" not in headers
        assert body == received.body
    assert_rebuilds(sessions_in(tmp_path), emulator)
    assert SECRET not in "".join(r.body.decode() for r in emulator.received)


async def test_the_checker_compares_only_what_is_new_after_the_first_request(
    tmp_path: Path,
) -> None:
    async with in_process(tmp_path) as (proxy, emulator, client):
        messages = _history(1001)  # ~330 KB
        compared: list[tuple[int, int]] = []
        for _ in range(3):
            answer = await post(
                client, "/v1/chat/completions", {"model": MODEL, "messages": messages}
            )
            assert answer.status_code == 200, answer.text
            state = proxy.sessions.get(answer.headers[SESSION_ANSWER_HEADER])
            assert state is not None
            assert state.checker is not None
            compared.append((state.checker.compared_bytes, len(emulator.received[-1].body)))
            messages = [*messages, answer.json()["choices"][0]["message"], *_history(1)]
    first, *later = compared
    assert first[0] > first[1] * 9 // 10  # the first check reads (about) the whole body
    for done, size in later:  # then what is new: a small share of the body
        assert done < size // 10, (done, size)
    assert_rebuilds(sessions_in(tmp_path), emulator)
