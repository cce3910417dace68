"""``tapelog run`` holds back an encoded secret split across stream frames too.

The loop's clients held back a raw key split across frames; a key echoed
base64-, URL- or ``\\uXXXX``-encoded and split was logged in pieces no form
of the key matched (issue 15, item 8). The same ``SecretGuard`` serves the
proxy (tests/proxy/test_proxy_secrets.py).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from _sse_frames import openai_frame, split_inside
from tapelog.agent import Agent
from tapelog.llm import encode_request
from tapelog.llm._api import OpenAIWire
from tapelog.llm._clients import OpenAIClient
from tapelog.log._api import LlmCallConfig, Session
from tapelog.log._redact import forget_secrets
from tapelog.request._api import rebuild_requests

KEY = "sk-run-forms-Key-4c1d9e8f7a6b"
SSE = {"content-type": "text/event-stream"}

FORMS: dict[str, Callable[[str], str]] = {
    "raw": lambda key: key,
    "base64": lambda key: base64.b64encode(b"k=" + key.encode()).decode(),
    "url": lambda key: "".join(f"%{b:02X}" for b in key.encode()),  # every byte %XX
    "unicode": lambda key: "".join(f"\\u{ord(c):04X}" for c in key),
}


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def _stream(pieces: list[str], where: str) -> bytes:
    if where == "text":
        frames = [openai_frame({"content": p}) for p in pieces]
        return b"".join([*frames, openai_frame({}, "stop"), b"data: [DONE]\n\n"])
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read"}}
    frames = [
        openai_frame({"tool_calls": [{**head, "function": {"name": "read", "arguments": ""}}]})
    ]
    frames += [
        openai_frame({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces
    ]
    return b"".join([*frames, openai_frame({}, "tool_calls"), b"data: [DONE]\n\n"])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("where", ["text", "tool-call"])
async def test_an_encoded_key_split_across_frames_is_never_logged(
    parts: int, form: str, where: str
) -> None:
    shown = FORMS[form](KEY)
    text = f"Your key is {shown}, keep it." if where == "text" else '{"path":"' + shown + '"}'
    answers = iter([_stream(split_inside(text, shown, parts), where), _stream(["done"], "text")])
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda _: httpx.Response(200, headers=SSE, content=next(answers))
        )
    )
    client = OpenAIClient(
        http_client=http,
        base_url="https://api.example.com/v1",
        wire=OpenAIWire(dialect="openai"),
        env={"OPENAI_API_KEY": KEY},
    )
    session = Session()
    agent = Agent(session, client, config=LlmCallConfig(provider="openai", model="gpt-4.1-mini"))
    await agent.run("What is my key?")
    logged = [s for e in session.events for s in _strings(e.data)]
    rebuilt = [encode_request(r.request).decode() for r in rebuild_requests(session.events)]
    eights = {f[i : i + 8] for f in (KEY, shown) for i in range(len(f) - 7)}
    for piece in eights:
        for one in (*logged, "".join(logged), *rebuilt):
            assert piece not in one
    assert any("***" in s for s in logged)
