"""What the log cannot represent is refused, readably, before anything is logged;
what providers parse the same is accepted, and costs the same tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from tapelog.log import decode, encode

from ._helpers import (
    SECRET,
    assert_no_secret,
    assert_rebuilds,
    in_process,
    own_requests,
    post,
    sessions_in,
)

MODEL = "deepseek-chat"
HELLO = [{"role": "user", "content": "hello"}]

OPENAI_REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"tools": [{"type": "function", "function": {}}]}, "tools[0] must name the tool"),
    (
        {
            "messages": [
                *HELLO,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "and?"},
            ]
        },
        "messages[1] calls a tool (id 'c1') whose result does not follow it",
    ),
    (
        {"messages": [*HELLO, {"role": "tool", "tool_call_id": "c9", "content": "x"}]},
        "messages[1] is the result of a tool call (id 'c9') that the message before it",
    ),
    ({"max_tokens": 5, "max_completion_tokens": 6}, "max_tokens and max_completion_tokens differ"),
    ({"temperature": "hot"}, "header.config.temperature has the wrong type"),
]


@pytest.mark.parametrize(
    ("change", "said"), OPENAI_REFUSED, ids=[s[:24] for _, s in OPENAI_REFUSED]
)
async def test_openai_requests_the_log_cannot_represent_are_refused(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    lines: list[str] = []
    async with in_process(tmp_path, lines=lines) as (_, emu, http):
        body = {"model": MODEL, "messages": HELLO, **change}
        refused = await post(http, "/v1/chat/completions", body)
        ok = await post(http, "/v1/chat/completions", {"model": MODEL, "messages": HELLO})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert said in error["message"]
    assert "\n" not in error["message"]
    assert ok.status_code == 200
    assert len(emu.received) == 1, "the refused request was not forwarded"
    sessions = sessions_in(tmp_path)  # each one verifies
    assert len(sessions) == 1, "nothing was logged for the refused request"
    (session,) = sessions.values()
    assert sum(e.type == "turn/start" for e in session.events) == 1
    assert_rebuilds(sessions, emu)
    assert said in lines[0]
    assert lines[0].startswith("-: HTTP 400")
    assert_no_secret(tmp_path, *lines)


# Only what cannot be forwarded at all: every field the API has is carried
# (tests/proxy/fidelity/test_anthropic_*.py).
ANTHROPIC_REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"tools": [{"type": "web_search_20250305"}]}, "tools[0] must be an object with a string name"),
    (
        {"messages": [{"role": "user", "content": 5}]},
        "messages[0].content must be a string or a list of blocks",
    ),
    (
        {"messages": [{"role": "user", "content": ["hi"]}]},
        "messages[0].content[0] must be a block",
    ),
    (
        {"messages": [{"role": "robot", "content": "hi"}]},
        "messages[0]: messages with role 'robot' cannot be represented",
    ),
]


@pytest.mark.parametrize(
    ("change", "said"), ANTHROPIC_REFUSED, ids=[s[:24] for _, s in ANTHROPIC_REFUSED]
)
async def test_anthropic_requests_the_log_cannot_represent_are_refused(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    async with in_process(tmp_path, provider="anthropic") as (_, emu, http):
        body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": HELLO, **change}
        refused = await post(http, "/v1/messages", body)
    assert refused.status_code == 400
    assert refused.json()["type"] == "error"
    assert refused.json()["error"]["type"] == "invalid_request_error"
    assert said in refused.json()["error"]["message"]
    assert not emu.received
    assert not sessions_in(tmp_path)


async def test_the_other_api_is_refused_in_its_own_error_shape(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": HELLO}
        refused = await post(http, "/v1/messages", body)
    assert refused.status_code == 400
    assert refused.json()["type"] == "error"
    message = refused.json()["error"]["message"]
    assert "forwards to deepseek, which speaks the OpenAI chat completions API" in message
    assert not emu.received


async def test_the_sdk_raises_its_own_error_with_the_proxys_sentence(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, _emu, http):
        client = AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key=SECRET, http_client=http)
        with pytest.raises(openai.BadRequestError, match="max_tokens and max_completion_tokens"):
            await client.chat.completions.create(
                model=MODEL, messages=HELLO, max_tokens=5, max_completion_tokens=6
            )


async def test_a_body_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    async with in_process(tmp_path, max_body_bytes=1000) as (_, emu, http):
        big = [{"role": "user", "content": "x" * 2000}]
        refused = await post(http, "/v1/chat/completions", {"model": MODEL, "messages": big})
        garbled = await http.post(
            "/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    assert refused.status_code == 413
    assert "larger than the proxy reads" in refused.text
    assert garbled.status_code == 400
    assert "not valid JSON" in garbled.json()["error"]["message"]
    assert not emu.received


# What providers parse the same: whitespace, key order, null versus absent, a
# one-text-part content, a stop string, max_tokens spelled for another dialect.
SPACED = b"""{
  "messages" : [
    { "content" : "You are terse.",   "role" : "system" },
    { "role" : "user",
      "content" : "What is 1 + 2?" },
    { "tool_calls" : [ { "type" : "function", "id" : "call_1",
        "function" : { "arguments" : "{\\"a\\": 1, \\"b\\": 2}", "name" : "add" } } ],
      "content" : null, "role" : "assistant" },
    { "tool_call_id" : "call_1", "role" : "tool", "content" : "3" },
    { "role" : "user", "content" : "Thanks." }
  ],
  "tools" : [ { "function" : { "parameters" : { "type" : "object",
      "properties" : { "b" : { "type" : "integer" }, "a" : { "type" : "integer" } } },
      "name" : "add", "description" : "Add." }, "type" : "function" } ],
  "stream" : true,   "stream_options" : { "include_usage" : true },
  "temperature" : 0,
  "model" : "deepseek-chat"
}"""


async def test_whitespace_and_key_order_change_no_token(tmp_path: Path) -> None:
    """The same request sent with the client's own bytes and through the proxy:
    the emulator reports the same prompt tokens (its estimate counts the bytes
    of each message re-encoded, so layout cannot change it; nor does it for a
    provider's tokenizer, which reads parsed JSON)."""
    async with in_process(tmp_path) as (_, emu, http):
        upstream = emu.transport()
        async with httpx.AsyncClient(transport=upstream, base_url="http://emulator") as direct:
            sent = await direct.post("/deepseek/chat/completions", content=SPACED)
            assert sent.status_code == 200
        proxied = await http.post(
            "/v1/chat/completions",
            content=SPACED,
            headers={"authorization": f"Bearer {SECRET}", "content-type": "application/json"},
        )
        assert proxied.status_code == 200
    direct_usage, proxy_usage = emu.received[0].usage, emu.received[1].usage
    assert direct_usage is not None
    assert proxy_usage is not None
    assert proxy_usage["prompt_tokens"] == direct_usage["prompt_tokens"]
    assert emu.received[1].body != SPACED
    assert decode(emu.received[1].body)["messages"] == decode(encode(decode(SPACED)))["messages"]
    (session,) = sessions_in(tmp_path).values()
    assert own_requests(session) == [emu.received[1].body]
