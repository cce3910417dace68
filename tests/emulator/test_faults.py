"""Scripted faults (HTTP errors, overflow, cut and failing streams) and script validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from tapelog.emulator import Emulator, load_script
from tapelog.log import decode

from ._helpers import BASE, message

CHAT = "/v1/chat/completions"
USER = {"role": "user", "content": "hello"}
STREAM = {"stream": True, "stream_options": {"include_usage": True}}


async def test_scripted_500_and_429_use_each_provider_error_shape() -> None:
    emu = Emulator(
        script=[
            {"error": {"status": 500, "message": "Upstream exploded."}},
            {"error": {"status": 429, "message": "Slow down.", "code": "rate_limit_exceeded"}},
            {"error": {"status": 529, "message": "Overloaded.", "type": "overloaded_error"}},
            {"text": "recovered"},
        ]
    )
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        server = await client.post(CHAT, json={"model": "m", "messages": [USER], **STREAM})
        limited = await client.post(CHAT, json={"model": "m", "messages": [USER]})
        overloaded = await client.post(
            "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": [USER]}
        )
        ok = await client.post(CHAT, json={"model": "m", "messages": [USER]})
    assert server.status_code == 500
    assert server.json() == {
        "error": {
            "message": "Upstream exploded.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    assert server.headers["x-request-id"] == "req_emu_000001"
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "0"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert overloaded.status_code == 529
    assert overloaded.json() == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded."},
        "request_id": "req_emu_000003",
    }
    assert overloaded.headers["request-id"] == "req_emu_000003"
    assert ok.json()["choices"][0]["message"]["content"] == "recovered"
    assert [r.status for r in emu.received] == [500, 429, 529, 200]
    assert [r.usage is None for r in emu.received] == [True, True, True, False]


async def test_scripted_overflow_is_each_provider_context_length_error() -> None:
    emu = Emulator(script=[{"overflow": True}, {"overflow": True}])
    user = message("user", 400)  # 100 tokens
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        openai = await client.post(
            "/openai/v1/chat/completions", json={"model": "m", "messages": [user]}
        )
        claude = await client.post(
            "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": [user]}
        )
    assert openai.status_code == 400
    assert openai.json()["error"] == {
        "message": "This model's maximum context length is 99 tokens. However, your messages "
        "resulted in 100 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    assert claude.status_code == 400
    # Anthropic counts the content as one text block: {"type":"text","text":<372 x>} = 397 bytes.
    assert claude.json()["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 100 tokens > 99 maximum",
    }


async def test_context_window_rejects_long_prompts_without_consuming_the_script() -> None:
    emu = Emulator(script=[{"text": "short one answered"}], context_window=100)
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        long = await client.post(CHAT, json={"model": "m", "messages": [message("user", 404)]})
        short = await client.post(CHAT, json={"model": "m", "messages": [message("user", 400)]})
    assert long.status_code == 400
    assert long.json()["error"]["message"].startswith(
        "This model's maximum context length is 100 tokens. However, your messages resulted in 101"
    )
    assert short.json()["choices"][0]["message"]["content"] == "short one answered"


async def test_cut_stream_ends_without_usage_or_done() -> None:
    emu = Emulator(
        script=[
            {"text": "a fairly long answer that spans several frames", "cut_after": 2},
            {"text": "a fairly long answer that spans several frames", "cut_after": 3},
        ]
    )
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        async with aconnect_sse(
            client, "POST", CHAT, json={"model": "m", "messages": [USER], **STREAM}
        ) as source:
            openai = [sse.data async for sse in source.aiter_sse()]
        async with aconnect_sse(
            client,
            "POST",
            "/v1/messages",
            json={"model": "m", "max_tokens": 9, "messages": [USER], "stream": True},
        ) as source:
            claude = [sse.event async for sse in source.aiter_sse()]
    assert len(openai) == 2
    assert "[DONE]" not in openai
    assert all(decode(d)["choices"] for d in openai)
    assert claude == ["message_start", "ping", "content_block_start"]
    assert [r.usage for r in emu.received] == [None, None]


async def test_in_stream_error_arrives_after_the_message_opens() -> None:
    fault = {"error": {"status": 529, "message": "Overloaded"}, "in_stream": True}
    emu = Emulator(script=[fault, fault, fault])
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        async with aconnect_sse(
            client,
            "POST",
            "/v1/messages",
            json={"model": "m", "max_tokens": 9, "messages": [USER], "stream": True},
        ) as source:
            claude = [sse async for sse in source.aiter_sse()]
        async with aconnect_sse(
            client, "POST", CHAT, json={"model": "m", "messages": [USER], **STREAM}
        ) as source:
            openai = [sse async for sse in source.aiter_sse()]
        not_streamed = await client.post(CHAT, json={"model": "m", "messages": [USER]})
    assert [e.event for e in claude] == ["message_start", "ping", "error"]
    assert decode(claude[-1].data) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert decode(openai[0].data)["choices"][0]["delta"]["role"] == "assistant"
    assert decode(openai[-1].data) == {
        "error": {"message": "Overloaded", "type": "server_error", "param": None, "code": None}
    }
    assert not_streamed.status_code == 529


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"txt": "hi"}, "script entry 0: unknown keys ['txt']; allowed keys are: "),
        ({"text": 3}, 'script entry 0: "text" must be a string, not int.'),
        ({"finish": "done"}, 'script entry 0: "finish" must be "stop", "length" or "tool_calls"'),
        (
            {"tool_calls": [{"name": "f", "arguments": {"x": 1}}]},
            'script entry 0, tool_calls[0]: "arguments" must be the raw JSON text as a string',
        ),
        (
            {"error": {"status": 200}},
            'script entry 0: "error.status" must be an HTTP error status (400-599), not 200.',
        ),
        (
            {"error": {"status": 401, "msg": "x"}},
            """script entry 0: "error" takes status, message, type, code and headers, """
            """not ['msg'].""",
        ),
        (
            {"error": {"status": 429, "headers": {"retry-after": "1\r\nx-injected: 1"}}},
            "script entry 0: error header 'retry-after': a name is letters, digits",
        ),
        (
            {"error": {"status": 429, "headers": {"Content-Length": "0"}}},
            "script entry 0: error header 'Content-Length' is set by the emulator itself.",
        ),
        ({"cut_after": -1}, 'script entry 0: "cut_after" must be a non-negative integer, not -1.'),
        ("hello", "script entry 0: an entry must be a JSON object, not str."),
    ],
)
def test_bad_script_entries_are_refused_with_the_fix(entry: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^script entry 0") as info:
        Emulator(script=[entry])
    assert str(info.value).startswith(problem)


def test_load_script_reads_json_arrays_and_jsonl(tmp_path: Path) -> None:
    array = tmp_path / "script.json"
    array.write_text('[{"text": "one"}, {"error": {"status": 500, "message": "x"}}]')
    lines = tmp_path / "script.jsonl"
    lines.write_text('{"text": "one"}\n\n{"overflow": true}\n')
    assert load_script(array) == [{"text": "one"}, {"error": {"status": 500, "message": "x"}}]
    assert load_script(lines) == [{"text": "one"}, {"overflow": True}]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "one"}\n{"text": \n')
    with pytest.raises(ValueError, match="line 2: not valid JSON") as info:
        load_script(broken)
    assert "write a JSON array of entries or one JSON object per line" in str(info.value)
    typo = tmp_path / "typo.jsonl"
    typo.write_text('{"text": "one"}\n{"txet": "two"}\n')
    with pytest.raises(ValueError, match=r"typo\.jsonl, line 2: unknown keys \['txet'\]"):
        load_script(typo)
