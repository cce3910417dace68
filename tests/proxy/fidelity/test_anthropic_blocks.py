"""Every block type a client sends, every field of it, carried as given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tapelog.log import decode

from .._helpers import assert_rebuilds, in_process, post, sessions_in
from ._anthropic import TOOL, body, carry

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg=="
MARK = {"type": "ephemeral", "ttl": "1h"}
USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}

USER_BLOCKS: dict[str, dict[str, Any]] = {
    "text with cache_control and citations": {
        "type": "text",
        "text": "hello",
        "citations": None,
        "cache_control": MARK,
    },
    "image base64": {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
        "cache_control": {"type": "ephemeral"},
    },
    "image url": {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
    "image file": {"type": "image", "source": {"type": "file", "file_id": "file_011"}},
    "document": {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "A doc."},
        "title": "Doc",
        "citations": {"enabled": True},
    },
    "search_result": {
        "type": "search_result",
        "source": "https://x.test",
        "title": "Result",
        "content": [{"type": "text", "text": "Found."}],
        "citations": {"enabled": True},
    },
    "a block type from the future": {"type": "hologram", "frames": [1, 2]},
}


@pytest.mark.parametrize("name", list(USER_BLOCKS))
async def test_a_user_block_is_carried(tmp_path: Path, name: str) -> None:
    content = [{"type": "text", "text": "Look:"}, USER_BLOCKS[name]]
    await carry(tmp_path, body([{"role": "user", "content": content}]))


async def test_a_block_the_api_refuses_is_carried_and_its_answer_passed_on(tmp_path: Path) -> None:
    blank = {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": " "}],
    }
    async with in_process(tmp_path, provider="anthropic") as (_, emu, http):
        answered = await post(http, "/v1/messages", body([blank]))
    assert answered.status_code == 400
    assert "must contain non-whitespace text" in answered.json()["error"]["message"]
    (received,) = emu.received
    assert decode(received.body)["messages"] == [blank]
    assert_rebuilds(sessions_in(tmp_path), emu)


ASSISTANT_BLOCKS: dict[str, list[dict[str, Any]]] = {
    "thinking with signature": [
        {"type": "thinking", "thinking": "Let me add.", "signature": "EqQBCkYIBxgCKkD+sig=="},
        USE,
    ],
    "redacted_thinking": [{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}],
    "thinking without a signature": [{"type": "thinking", "thinking": "hm"}],
    "server tool use and result": [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "weather"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://x.test", "title": "W"}],
        },
        {"type": "text", "text": "Sunny.", "citations": [{"type": "web_search_result_location"}]},
    ],
    "tool_use with caller and cache_control": [
        {**USE, "caller": {"type": "direct"}, "cache_control": {"type": "ephemeral"}}
    ],
}


@pytest.mark.parametrize("name", list(ASSISTANT_BLOCKS))
async def test_an_assistant_block_in_history_is_carried(tmp_path: Path, name: str) -> None:
    blocks = ASSISTANT_BLOCKS[name]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": blocks},
    ]
    if any(b["type"] == "tool_use" for b in blocks):
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}
        messages.append({"role": "user", "content": [result]})
    else:
        messages.append({"role": "user", "content": "go on"})
    carried = await carry(tmp_path, body(messages, tools=[TOOL]))
    logged = carried.session.history()
    assert any(m.get("role") == "assistant" for m in (n for _, n in logged))


RESULTS: dict[str, dict[str, Any]] = {
    "is_error false and a marker": {"is_error": False, "cache_control": MARK, "content": "1"},
    "is_error true": {"is_error": True, "content": "boom"},
    "no content": {},
    "content blocks of every kind": {
        "content": [
            {"type": "text", "text": "see", "cache_control": {"type": "ephemeral"}},
            USER_BLOCKS["image base64"],
            USER_BLOCKS["document"],
            USER_BLOCKS["search_result"],
        ]
    },
}


@pytest.mark.parametrize("name", list(RESULTS))
async def test_a_tool_result_is_carried(tmp_path: Path, name: str) -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_1", **RESULTS[name]}
    messages = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": [USE]},
        {"role": "user", "content": [result, {"type": "text", "text": "and?"}]},
    ]
    await carry(tmp_path, body(messages, tools=[TOOL]))


async def test_messages_keep_their_own_fields_and_string_content(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "plain string"},
        {"role": "system", "content": [{"type": "text", "text": "Env."}], "output_config": {}},
        {"role": "assistant", "content": "a string answer"},
        {"role": "user", "content": [{"type": "text", "text": "blocks"}]},
    ]
    carried = await carry(tmp_path, body(messages))
    roles = [n["role"] for _, n in carried.session.history()]
    assert roles == ["user", "system", "assistant", "user", "assistant"]


async def test_two_messages_of_one_role_in_a_row_stay_two(tmp_path: Path) -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}
    messages = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [USE]},
        {"role": "user", "content": [result]},
        {"role": "user", "content": "and a note"},
    ]
    carried = await carry(tmp_path, body(messages, tools=[TOOL]))
    assert len(decode(carried.emulator.received[0].body)["messages"]) == 5
