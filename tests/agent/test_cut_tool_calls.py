"""A reply cut at max_tokens commits no tool calls: they never run.

Before, the tool call stayed in the ``assistant/message`` without a
``tool/result``: every later OpenAI request carried an assistant ``tool_calls``
message with no tool message after it (a 400 on api.openai.com), and the
Anthropic serializer refused the cut arguments, so the session could not take
another turn.
"""

from __future__ import annotations

import httpx
import pytest

from tapelog.agent import Agent, tool
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log import decode
from tapelog.log._api import LlmCallConfig, Session


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize(
    ("provider", "model", "base_url", "variable"),
    [
        ("openai", "gpt-4.1-mini", "http://emulator/openai/v1", "OPENAI_API_KEY"),
        ("anthropic", "claude-sonnet-4-5", "http://emulator/anthropic", "ANTHROPIC_API_KEY"),
    ],
)
async def test_tool_calls_of_a_max_tokens_reply_are_not_committed(
    provider: str, model: str, base_url: str, variable: str
) -> None:
    cut = {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b"'}], "finish": "length"}
    emulator = Emulator(script=[cut, {"text": "done"}])
    config = LlmCallConfig(provider=provider, model=model)
    session = Session()
    async with httpx.AsyncClient(transport=emulator.transport()) as http:
        client = make_client(config, base_url=base_url, http_client=http, env={variable: "k"})
        agent = Agent(session, client, config=config, tools=[add])
        first = await agent.run("add 1 and 2")
        second = await agent.run("never mind")
    assert first.reason["kind"] == "max_tokens"
    assert second.reason["kind"] == "completed"
    assert second.text == "done"
    message = next(e for e in session.events if e.type == "assistant/message")
    assert message.data["content"] == []
    chunks = [e.data["chunk"] for e in session.events if e.type == "assistant/chunk"]
    assert any(c["kind"] == "tool_call" and c.get("name") == "add" for c in chunks)
    assert not any(e.type in ("tool/call", "tool/result") for e in session.events)
    body = emulator.received[-1].body
    assert b"tool_calls" not in body
    assert b"tool_use" not in body
    assert [m["role"] for m in decode(body)["messages"]][-1] == "user"
