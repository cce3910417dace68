"""The wire bytes: SSE frames parsed by httpx-sse, non-streamed bodies, validation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from tapelog.emulator import Emulator
from tapelog.log import decode

from ._helpers import BASE

TOOL_REPLY = {
    "reasoning": "Let me think about which files to read first, carefully.",
    "text": "Reading both files now.",
    "tool_calls": [
        {"name": "read", "arguments": '{"path": "a.txt",  "n": 1}'},
        {"id": "call_given", "name": "read", "arguments": '{"path":"b.txt"}'},
    ],
}
USER = {"role": "user", "content": "Read a.txt and b.txt please."}


async def _sse(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[Any]:
    async with aconnect_sse(client, "POST", path, json=body) as source:
        return [sse async for sse in source.aiter_sse()]


def _clock() -> float:
    return 1_700_000_000.0


async def test_deepseek_stream_frames_as_deepseek_sends_them() -> None:
    emu = Emulator(script=[TOOL_REPLY], clock=_clock)
    body = {
        "model": "deepseek-chat",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [USER],
    }
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        async with client.stream("POST", "/chat/completions", json=body) as response:
            raw = b"".join([part async for part in response.aiter_bytes()])
        assert raw.startswith(b": keep-alive\n\n")
        assert raw.endswith(b"data: [DONE]\n\n")
        emu.push(TOOL_REPLY)
        events = await _sse(client, "/chat/completions", body)
    assert all(e.event == "message" for e in events)
    assert events[-1].data == "[DONE]"
    chunks = [decode(e.data) for e in events[:-1]]
    assert {(c["id"], c["object"], c["created"], c["model"]) for c in chunks} == {
        ("chatcmpl-emu-000002", "chat.completion.chunk", 1_700_000_000, "deepseek-chat")
    }
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    kinds = [next(iter(d)) for d in deltas[1:-1]]
    # Reasoning streams before content, content before the tool calls.
    assert kinds == sorted(kinds, key=["reasoning_content", "content", "tool_calls"].index)
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    assert reasoning == TOOL_REPLY["reasoning"]
    assert "".join(d.get("content") or "" for d in deltas) == TOOL_REPLY["text"]
    fragments = [f for d in deltas for f in d.get("tool_calls", [])]
    firsts = [f for f in fragments if "id" in f]
    assert firsts == [
        {
            "index": 0,
            "id": "call_emu_000002_0",
            "type": "function",
            "function": {"name": "read", "arguments": ""},
        },
        {
            "index": 1,
            "id": "call_given",
            "type": "function",
            "function": {"name": "read", "arguments": ""},
        },
    ]
    later = [f for f in fragments if "id" not in f]
    assert all(
        set(f) == {"index", "function"} and set(f["function"]) == {"arguments"} for f in later
    )
    assert len([f for f in later if f["index"] == 0]) > 1  # split into pieces
    for index, call in enumerate(TOOL_REPLY["tool_calls"]):
        joined = "".join(f["function"]["arguments"] for f in later if f["index"] == index)
        assert joined == call["arguments"]  # verbatim, never re-encoded
    assert chunks[-2]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    assert chunks[-1]["choices"] == []
    usage = chunks[-1]["usage"]
    assert (
        usage["prompt_cache_hit_tokens"] + usage["prompt_cache_miss_tokens"]
        == usage["prompt_tokens"]
    )
    assert (
        usage["completion_tokens_details"]["reasoning_tokens"] == 14
    )  # 56 characters: ceil(56 / 4)
    assert all(c["usage"] is None for c in chunks[:-1])


async def test_openai_stream_has_no_keepalive_no_reasoning_and_usage_only_on_request() -> None:
    emu = Emulator(script=[TOOL_REPLY])
    body = {"model": "gpt-4o", "stream": True, "messages": [USER]}
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        response = await client.post("/openai/v1/chat/completions", json=body)
    raw = response.content
    assert raw.startswith(b"data: {")
    frames = raw.split(b"\n\n")
    assert frames[-2:] == [b"data: [DONE]", b""]
    chunks = [decode(f.removeprefix(b"data: ")) for f in frames[:-2]]
    assert all("usage" not in c and c["choices"] for c in chunks)
    assert not any("reasoning_content" in c["choices"][0]["delta"] for c in chunks)


async def test_non_streamed_completion_is_one_chat_completion_object() -> None:
    emu = Emulator(script=[TOOL_REPLY, {"text": "long", "finish": "length"}], clock=_clock)
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        body = {"model": "deepseek-chat", "messages": [USER]}
        first = (await client.post("/deepseek/v1/chat/completions", json=body)).json()
        second = (await client.post("/openai/v1/chat/completions", json=body)).json()
    assert first["object"] == "chat.completion"
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert first["choices"][0]["message"] == {
        "role": "assistant",
        "content": TOOL_REPLY["text"],
        "reasoning_content": TOOL_REPLY["reasoning"],
        "tool_calls": [
            {
                "id": "call_emu_000001_0",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "a.txt",  "n": 1}'},
            },
            {
                "id": "call_given",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path":"b.txt"}'},
            },
        ],
    }
    assert set(first["usage"]) >= {"prompt_cache_hit_tokens", "prompt_cache_miss_tokens"}
    assert second["choices"][0]["message"] == {"role": "assistant", "content": "long"}
    assert second["choices"][0]["finish_reason"] == "length"
    assert "prompt_cache_hit_tokens" not in second["usage"]


async def test_anthropic_stream_events_in_order_with_thinking_text_and_tool_use() -> None:
    emu = Emulator(script=[{**TOOL_REPLY, "signature": "sig-123"}])
    body = {"model": "claude-x", "max_tokens": 1000, "stream": True, "messages": [USER]}
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        events = await _sse(client, "/anthropic/v1/messages", body)
    names = [e.event for e in events]
    assert names[:2] == ["message_start", "ping"]
    assert names.count("ping") == 1
    assert names[-2:] == ["message_delta", "message_stop"]
    data = [decode(e.data) for e in events]
    assert all(d["type"] == e.event for d, e in zip(data, events, strict=True))
    start = data[0]["message"]
    assert (start["content"], start["stop_reason"], start["role"]) == ([], None, "assistant")
    blocks: dict[int, dict[str, Any]] = {}
    for d in data:
        if d["type"] == "content_block_start":
            assert d["index"] == len(blocks)
            blocks[d["index"]] = {**d["content_block"], "deltas": []}
        elif d["type"] == "content_block_delta":
            blocks[d["index"]]["deltas"].append(d["delta"])
    assert [b["type"] for b in blocks.values()] == ["thinking", "text", "tool_use", "tool_use"]
    thinking = blocks[0]["deltas"]
    assert "".join(x["thinking"] for x in thinking[:-1]) == TOOL_REPLY["reasoning"]
    assert thinking[-1] == {"type": "signature_delta", "signature": "sig-123"}
    assert "".join(x["text"] for x in blocks[1]["deltas"]) == TOOL_REPLY["text"]
    assert (blocks[2]["id"], blocks[2]["name"], blocks[2]["input"]) == (
        "toolu_emu_000001_0",
        "read",
        {},
    )
    pieces = [x["partial_json"] for x in blocks[2]["deltas"]]
    assert len(pieces) > 1
    assert "".join(pieces) == TOOL_REPLY["tool_calls"][0]["arguments"]
    assert blocks[3]["id"] == "call_given"
    delta = data[-2]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    usage = delta["usage"]
    assert usage == emu.received[0].usage
    assert usage["input_tokens"] == start["usage"]["input_tokens"]


async def test_anthropic_non_streamed_message_parses_tool_input() -> None:
    emu = Emulator(script=[TOOL_REPLY, {"text": "cut", "finish": "length"}])
    body = {"model": "claude-x", "max_tokens": 10, "messages": [USER]}
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        first = (await client.post("/v1/messages", json=body)).json()
        second = (await client.post("/v1/messages", json=body)).json()
    assert [b["type"] for b in first["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert first["content"][0]["signature"].startswith("emu-")
    assert first["content"][2]["input"] == {"path": "a.txt", "n": 1}
    assert first["stop_reason"] == "tool_use"
    assert second["stop_reason"] == "max_tokens"
    assert set(second["usage"]) == {
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_creation",
        "output_tokens",
    }


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/messages", {"model": "m", "messages": [USER]}, "max_tokens: Field required"),
        ("/v1/chat/completions", {"messages": [USER]}, "model: Field required"),
        (
            "/v1/chat/completions",
            {"model": "m", "messages": []},
            "messages: Field required (a non-empty list of message objects).",
        ),
    ],
)
async def test_invalid_requests_are_400_with_the_reason(
    path: str, body: dict[str, Any], message: str
) -> None:
    emu = Emulator(script=[{"text": "unused"}])
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        response = await client.post(path, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(message)
    assert emu.pending == 1  # a rejected request consumes no script entry


async def test_more_than_four_breakpoints_is_refused_like_the_api() -> None:
    cc = {"cache_control": {"type": "ephemeral"}}
    content = [{"type": "text", "text": str(i), **cc} for i in range(4)]
    body = {
        "model": "m",
        "max_tokens": 5,
        "system": [{"type": "text", "text": "s", **cc}],
        "messages": [{"role": "user", "content": content}],
    }
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        response = await client.post("/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


async def test_bad_json_body_is_400() -> None:
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        response = await client.post("/chat/completions", content=b"{nope")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("The request body is not valid JSON")


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


async def test_default_policy_echoes_the_user_or_sizes_the_tool_results() -> None:
    long_text = "Tell me everything about the emulator and its cache rules, please, in detail."
    tool_turn = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("1"), _call("2")]},
        {"role": "tool", "tool_call_id": "1", "content": "ab"},
        {"role": "tool", "tool_call_id": "2", "content": "hello"},
    ]
    tool = {"name": "f", "input_schema": {"type": "object"}}
    anthropic_turn = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": "12345678"}],
        },
    ]
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        chat = "/v1/chat/completions"
        echo = await client.post(
            chat, json={"model": "m", "messages": [{"role": "user", "content": long_text}]}
        )
        after_tools = await client.post(chat, json={"model": "m", "messages": tool_turn})
        claude = await client.post(
            "/v1/messages",
            json={"model": "m", "max_tokens": 9, "messages": anthropic_turn, "tools": [tool]},
        )
    assert echo.json()["choices"][0]["message"]["content"] == "ok: " + long_text[:60]
    assert (
        after_tools.json()["choices"][0]["message"]["content"]
        == "done: 2 tool results (2, 5 chars)"
    )
    assert claude.json()["content"] == [{"type": "text", "text": "done: 1 tool result (8 chars)"}]


async def test_received_keeps_exact_bytes_and_redacts_auth_values() -> None:
    emu = Emulator()
    raw = b'{"model": "m",   "messages": [{"role": "user", "content": "hi"}]}'
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        await client.post(
            "/chat/completions",
            content=raw,
            headers={"authorization": "Bearer sk-secret", "x-api-key": "sk-ant", "x-trace": "7"},
        )
        health = await client.get("/health")
    assert health.json() == {"ok": True}
    got = emu.received[0]
    assert got.body == raw
    assert got.json()["messages"][0]["content"] == "hi"
    assert (got.path, got.rule, got.status) == ("/chat/completions", "deepseek", 200)
    assert got.headers["authorization"] == "[redacted]"
    assert got.headers["x-api-key"] == "[redacted]"
    assert got.headers["x-trace"] == "7"
    assert "sk-" not in repr(got)


async def test_same_script_and_clock_give_identical_bytes() -> None:
    body = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [USER],
    }

    async def run() -> bytes:
        emu = Emulator(script=[TOOL_REPLY], clock=_clock)
        async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
            response = await client.post("/chat/completions", json=body)
            return response.content

    assert await run() == await run()
