"""One kept-alive connection per provider for a whole session.

The emulator runs under uvicorn on a real loopback socket and counts the TCP
connections it accepts (each accepted socket has its own peer address). A
client that reads every answer to the end of its HTTP message hands the
connection back to its pool, and the next request reuses it; one that stops
reading at the stream's end marker (``[DONE]``, ``message_stop``) leaves the
message unfinished, and the connection is dropped and a new one opened per
call. Every path that calls a model is counted: the loop on both wire
families, a compaction's one-shot summary call, and the proxy's upstream side.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tapelog.agent import Agent, RetryPolicy
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log._api import LlmCallConfig, Session

from ._helpers import proxy_on, serve, upstream_for

STEPS = 10
_WIRES = {
    "deepseek": ("deepseek-chat", "deepseek", "DEEPSEEK_API_KEY"),
    "anthropic": ("claude-sonnet-4-5", "anthropic", "ANTHROPIC_API_KEY"),
}


class CountedConnections:
    """An ASGI wrapper that notes the peer address of each request: one per
    accepted TCP connection, however many requests it carries."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.peers: list[tuple[str, int]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            peer = (scope["client"][0], scope["client"][1])
            if peer not in self.peers:
                self.peers.append(peer)
        await self.app(scope, receive, send)


@pytest.fixture
def counted() -> Iterator[tuple[Emulator, CountedConnections, int]]:
    emulator = Emulator()
    wrapper = CountedConnections(emulator.app)
    with serve(wrapper) as port:
        yield emulator, wrapper, port


@pytest.mark.parametrize("provider", ["deepseek", "anthropic"])
async def test_a_session_of_ten_steps_opens_one_connection(
    provider: str, counted: tuple[Emulator, CountedConnections, int]
) -> None:
    emulator, connections, port = counted
    model, path, key_env = _WIRES[provider]
    config = LlmCallConfig(provider=provider, model=model)
    # The default HTTP client, as a user gets it: no client injected.
    client = make_client(
        config, base_url=f"http://127.0.0.1:{port}/{path}", env={key_env: "sk-test"}
    )
    agent = Agent(Session(), client, config=config, retry=RetryPolicy(base_delay=0.0))
    try:
        for i in range(STEPS // 2):
            result = await agent.run(f"question {i}")
            assert result.reason["kind"] == "completed"
        compaction = await agent.compact()  # the one-shot summary call
        assert compaction.ok, compaction.error
        for i in range(STEPS // 2, STEPS):
            result = await agent.run(f"question {i}")
            assert result.reason["kind"] == "completed"
    finally:
        await client.aclose()
    assert len(emulator.received) == STEPS + 1
    assert len(connections.peers) == 1, connections.peers


@pytest.mark.parametrize("stream", [True, False])
async def test_the_proxy_upstream_keeps_one_connection(
    tmp_path: Path, stream: bool, counted: tuple[Emulator, CountedConnections, int]
) -> None:
    emulator, connections, port = counted
    messages: list[dict[str, Any]] = []
    with proxy_on(tmp_path, upstream_for("deepseek", port)) as proxy_port:
        url = f"http://127.0.0.1:{proxy_port}/v1/chat/completions"
        async with httpx.AsyncClient(timeout=30) as http:
            for i in range(STEPS):
                messages.append({"role": "user", "content": f"question {i}"})
                body = {"model": "deepseek-chat", "messages": messages, "stream": stream}
                response = await http.post(url, json=body, headers={"authorization": "Bearer k"})
                assert response.status_code == 200, response.text
                messages.append({"role": "assistant", "content": _answer(response, stream)})
    assert len(emulator.received) == STEPS
    assert len(connections.peers) == 1, connections.peers


def _answer(response: httpx.Response, stream: bool) -> str:
    if not stream:
        return str(response.json()["choices"][0]["message"]["content"])
    text = []
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            for choice in httpx.Response(200, content=line[6:]).json()["choices"]:
                text.append(choice["delta"].get("content") or "")
    return "".join(text)
