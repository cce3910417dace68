"""The proxy never logs a client's key, and one client's key never touches another's log.

Issue 15 found two faults. An upstream that echoed the client's key split
across stream frames had it logged in pieces (the relay logged each frame's
chunk as it came, without the hold-back ``tapelog run`` has), and the first
request's body was logged before the key was known. And every
``Authorization`` value was registered process-wide, so ``Bearer assistant``
made every later ``assistant`` in every client's log ``***``: event types and
roles included, which broke the next request and the session's loading.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from _sse_frames import openai_frame, split_inside
from tapelog.log._redact import forget_secrets
from tapelog.proxy import Proxy, Upstream
from tapelog.store import JsonlStore

from ._helpers import SECRET, own_requests, sessions_in

SSE = {"content-type": "text/event-stream"}


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def _text_answer(pieces: list[str]) -> bytes:
    frames = [openai_frame({"role": "assistant", "content": ""})]
    frames += [openai_frame({"content": p}) for p in pieces]
    frames.append(openai_frame({}, "stop"))
    return b"".join(frames) + b"data: [DONE]\n\n"


def _tool_answer(pieces: list[str]) -> bytes:
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read"}}
    frames = [
        openai_frame(
            {
                "role": "assistant",
                "tool_calls": [{**first, "function": {"name": "read", "arguments": ""}}],
            }
        )
    ]
    frames += [
        openai_frame({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces
    ]
    frames.append(openai_frame({}, "tool_calls"))
    return b"".join(frames) + b"data: [DONE]\n\n"


class _Echo:
    """A raw upstream that answers every request with ``answer(key)``, the key
    being the bearer token the request came with; it keeps what it sent."""

    def __init__(self, answer: Callable[[str], bytes]) -> None:
        self.answer = answer
        self.sent: list[bytes] = []
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.content)
        key = request.headers["authorization"].removeprefix("Bearer ")
        body = self.answer(key)
        self.sent.append(body)
        return httpx.Response(200, headers=SSE, content=body)


async def _ask(
    store: Path, echo: _Echo, keys: list[str], text: str = "What is my key?"
) -> list[httpx.Response]:
    """One request per key, each a new conversation; what each client got."""
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(echo))
    proxy = Proxy(
        Upstream.resolve("deepseek", base_url="http://upstream"),
        JsonlStore(store),
        http_client=upstream,
    )
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app), base_url="http://127.0.0.1"
    )
    got: list[httpx.Response] = []
    try:
        for i, key in enumerate(keys):
            body = {
                "model": "deepseek-chat",
                "stream": True,
                "messages": [{"role": "user", "content": f"{text} (client {i})"}],
            }
            response = await client.post(
                "/v1/chat/completions",
                content=orjson.dumps(body),
                headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
            )
            got.append(response)
    finally:
        await client.aclose()
        await proxy.aclose()
        await upstream.aclose()
    return got


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _pieces(form: str) -> set[str]:
    return {form[i : i + 8] for i in range(len(form) - 7)}


def _unicode_escaped(key: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in key)


FORMS: dict[str, Callable[[str], str]] = {
    "raw": lambda key: key,
    "base64": lambda key: base64.b64encode(key.encode()).decode(),
    "url": lambda key: "".join(f"%{b:02X}" for b in key.encode()),  # every byte %XX
    "unicode": _unicode_escaped,
}


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("where", ["text", "tool-call"])
async def test_a_key_echoed_in_pieces_is_in_no_stored_byte_and_no_rebuilt_request(
    tmp_path: Path, parts: int, form: str, where: str
) -> None:
    encoded = FORMS[form](SECRET)

    def answer(key: str) -> bytes:
        shown = FORMS[form](key)
        if where == "text":
            return _text_answer(split_inside(f"Your key is {shown}, keep it.", shown, parts))
        return _tool_answer(split_inside('{"path":"' + shown + '"}', shown, parts))

    echo = _Echo(answer)
    [got] = await _ask(tmp_path, echo, [SECRET])
    assert got.status_code == 200
    # The client gets the upstream's bytes as they were; only the log is redacted.
    assert got.content == echo.sent[0]
    sessions = sessions_in(tmp_path)
    [session] = sessions.values()
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()).decode()
    logged = [s for e in session.events for s in _strings(e.data)]
    rebuilt = [b.decode() for b in own_requests(session)]
    for text in (stored, *logged, *rebuilt):
        for piece in _pieces(SECRET) | _pieces(encoded):
            assert piece not in text
    assert any("***" in s for s in logged)
    # the request sent upstream is the one rebuilt from the log
    assert rebuilt == [b.decode() for b in echo.bodies]


def _stored(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file())


async def test_a_clients_key_in_its_first_request_is_never_logged(tmp_path: Path) -> None:
    echo = _Echo(lambda _key: _text_answer(["fine"]))
    [got] = await _ask(tmp_path, echo, [SECRET], text=f"my key is {SECRET}")
    # The log cannot hold the key, so it could not send what the client sent:
    # refused before anything is logged (it used to be logged in clear).
    assert got.status_code == 400
    assert "my key is ***" in got.text
    assert SECRET.encode() not in _stored(tmp_path)
    assert echo.bodies == []


async def test_a_word_as_a_key_does_not_corrupt_the_next_client(tmp_path: Path) -> None:
    echo = _Echo(lambda _key: _text_answer(["I am the assistant."]))
    got = await _ask(tmp_path, echo, ["assistant", SECRET])
    assert [r.status_code for r in got] == [200, 200]
    sessions = sessions_in(tmp_path)  # each loads and verifies
    assert len(sessions) == 2
    for session in sessions.values():
        types = [e.type for e in session.events]
        assert "assistant/message" in types
        assert "assistant/chunk" in types
        assert "***" not in "".join(_strings([e.data for e in session.events]))
    assert _stored(tmp_path).count(b"I am the assistant.") == 4  # a chunk and a message each


async def test_one_clients_key_is_not_redacted_from_another_clients_log(tmp_path: Path) -> None:
    other = "sk-other-client-Key-0042-zz"
    echo = _Echo(lambda key: _text_answer([f"your key {key} and the other {other}"]))
    got = await _ask(tmp_path, echo, [other, SECRET])
    assert [r.status_code for r in got] == [200, 200]
    sessions = sessions_in(tmp_path)
    logs = [(tmp_path / f"{sid}.jsonl").read_bytes() for sid in sorted(sessions)]
    first, second = sorted(logs, key=lambda data: SECRET.encode() in data or b"client 1" in data)
    assert other.encode() not in first  # the first client's own key
    assert b"your key *** and the other ***" in first
    # the second client's log keeps the first client's key (not its secret), not its own
    assert b"your key *** and the other " + other.encode() in second
    assert SECRET.encode() not in second


def _anthropic_frame(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"


def _anthropic_answer(pieces: list[str]) -> bytes:
    message = {"id": "msg_1", "role": "assistant", "content": [], "usage": {"input_tokens": 3}}
    frames = [
        _anthropic_frame("message_start", {"message": message}),
        _anthropic_frame(
            "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
        ),
        *(
            _anthropic_frame(
                "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}}
            )
            for p in pieces
        ),
        _anthropic_frame("content_block_stop", {"index": 0}),
        _anthropic_frame(
            "message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}
        ),
        _anthropic_frame("message_stop", {}),
    ]
    return b"".join(frames)


@pytest.mark.parametrize("form", sorted(FORMS))
async def test_an_anthropic_clients_x_api_key_echoed_in_pieces_is_never_logged(
    tmp_path: Path, form: str
) -> None:
    sent: list[bytes] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        shown = FORMS[form](request.headers["x-api-key"])
        body = _anthropic_answer(split_inside(f"Your key is {shown}, keep it.", shown, 3))
        sent.append(body)
        return httpx.Response(200, headers=SSE, content=body)

    http = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    proxy = Proxy(
        Upstream.resolve("anthropic", base_url="http://upstream"),
        JsonlStore(tmp_path),
        http_client=http,
    )
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy.app), base_url="http://127.0.0.1"
    )
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "What is my key?"}],
    }
    try:
        got = await client.post(
            "/v1/messages",
            content=orjson.dumps(body),
            headers={"x-api-key": SECRET, "content-type": "application/json"},
        )
    finally:
        await client.aclose()
        await proxy.aclose()
        await http.aclose()
    assert got.status_code == 200
    assert got.content == sent[0]
    [session] = sessions_in(tmp_path).values()
    logged = [s for e in session.events for s in _strings(e.data)]
    eights = _pieces(SECRET) | _pieces(FORMS[form](SECRET))
    for text in (_stored(tmp_path).decode(), *logged):
        assert not any(piece in text for piece in eights)
    assert any("***" in s for s in logged)
