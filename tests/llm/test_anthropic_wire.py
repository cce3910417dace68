"""Anthropic Messages body bytes: golden body, message merging and the breakpoint policy."""

from __future__ import annotations

from typing import Any

import pytest

from tapelog import EventError, HeaderError
from tapelog.llm._api import AnthropicWire
from tapelog.log import decode, encode

from ._requests import TOOL_LOOP, call, make_request, text, tool_result

ANTHROPIC_GOLDEN = (
    rb'{"model":"claude-x","max_tokens":4096,'
    rb'"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],'
    rb'"tools":[{"name":"read","description":"Read a file.","input_schema":{"type":"object",'
    rb'"required":["path"],"properties":{"path":{"type":"string"}}},'
    rb'"cache_control":{"type":"ephemeral"}}],'
    rb'"messages":[{"role":"user","content":[{"type":"text","text":"Show a.txt",'
    rb'"cache_control":{"type":"ephemeral"}}]},'
    rb'{"role":"assistant","content":[{"type":"thinking","thinking":"Need the file.",'
    rb'"signature":"sig-1"},{"type":"text","text":"Reading."},'
    rb'{"type":"tool_use","id":"c1","name":"read","input":{"path":"a.txt"}}]},'
    rb'{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"hello",'
    rb'"cache_control":{"type":"ephemeral"}}]}],'
    rb'"temperature":0.2,"stop_sequences":["END"],"stream":true,'
    rb'"thinking":{"type":"enabled","budget_tokens":1024}}'
)


def _body(messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    return decode(
        AnthropicWire().encode_body(make_request(messages, provider="anthropic", **kwargs))
    )


def _marked(body: Any) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, message in enumerate(body["messages"])
        for j, block in enumerate(message["content"])
        if "cache_control" in block
    ]


def test_anthropic_golden_body() -> None:
    request = make_request(
        TOOL_LOOP,
        provider="anthropic",
        model="claude-x",
        temperature=0.2,
        stop=("END",),
        extras={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    assert AnthropicWire().encode_body(request) == ANTHROPIC_GOLDEN


def test_tool_results_merge_into_one_user_message_before_text() -> None:
    messages = [
        text("user", "q"),
        {"role": "assistant", "content": [call("c1"), call("c2")]},
        tool_result("c1", "one"),
        text("user", "note from a hook"),
        tool_result("c2", [{"type": "text", "text": "two"}], is_error=True),
    ]
    body = _body(messages)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    blocks = body["messages"][2]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "tool_result", "text"]
    assert "is_error" not in blocks[0]
    assert blocks[1]["is_error"] is True
    assert blocks[1]["content"] == [{"type": "text", "text": "two"}]


def test_breakpoints_read_where_the_previous_request_wrote() -> None:
    first = [text("user", "q"), {"role": "assistant", "content": [call("c1")]}]
    first.append(tool_result("c1", "r1"))
    second = [*first, {"role": "assistant", "content": [call("c2")]}, tool_result("c2", "r2")]
    body1, body2 = _body(first), _body(second)
    # Request 1 writes at its last block; request 2 marks that same block again
    # (a read) and writes at its own last block: two message breakpoints + tools + system.
    assert _marked(body1)[-1] == (2, 0)
    assert _marked(body2) == [(2, 0), (4, 0)]
    assert body1["messages"][2] == body2["messages"][2]
    raw = AnthropicWire().encode_body(make_request(second, provider="anthropic"))
    assert raw.count(b"cache_control") == 4


def test_no_breakpoint_on_thinking_blocks() -> None:
    messages = [
        text("user", "q"),
        {"role": "assistant", "content": [{"type": "reasoning", "text": "", "data": "opaque"}]},
    ]
    body = _body(messages, system=None, tools=())
    assert body["messages"][1]["content"] == [{"type": "redacted_thinking", "data": "opaque"}]
    assert _marked(body) == [(0, 0)]
    assert "system" not in body
    assert "tools" not in body


def test_reasoning_without_signature_is_not_sent() -> None:
    messages = [
        text("user", "q"),
        {"role": "assistant", "content": [{"type": "reasoning", "text": "from deepseek"}]},
        text("user", "again"),
    ]
    body = _body(messages)
    # The assistant message had nothing Anthropic can take, so the users merge.
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert [b["text"] for b in body["messages"][0]["content"]] == ["q", "again"]


def test_tool_input_keeps_key_order_and_tool_without_parameters_gets_empty_schema() -> None:
    messages = [
        text("user", "q"),
        {"role": "assistant", "content": [call("c1", '{"z": 1, "a": {"y": 2, "b": 3}}')]},
    ]
    raw = AnthropicWire().encode_body(
        make_request(messages, provider="anthropic", tools=({"name": "ping"},))
    )
    assert b'"input":{"z":1,"a":{"y":2,"b":3}}' in raw
    assert b'"tools":[{"name":"ping","input_schema":{"type":"object","properties":{}},' in raw


def test_max_tokens_from_config_wins_over_default() -> None:
    assert _body([text("user", "q")], max_tokens=99)["max_tokens"] == 99


def test_seed_is_refused_with_a_fix() -> None:
    with pytest.raises(HeaderError) as info:
        _body([text("user", "q")], seed=3)
    assert str(info.value) == (
        "config.seed has no Anthropic Messages field: leave it unset for the anthropic provider."
    )


def test_top_level_cache_control_extra_is_refused() -> None:
    with pytest.raises(HeaderError) as info:
        _body([text("user", "q")], extras={"cache_control": {"type": "ephemeral"}})
    assert "config.extras sets 'cache_control', which the anthropic wire writes itself" in str(
        info.value
    )


def test_arguments_that_are_not_a_json_object_cannot_go_to_anthropic() -> None:
    messages = [text("user", "q"), {"role": "assistant", "content": [call("c1", "[1, 2]")]}]
    with pytest.raises(EventError) as info:
        _body(messages)
    assert str(info.value) == (
        "messages[1].content[0].arguments is JSON but not an object; the anthropic wire sends "
        "tool inputs as JSON objects, so this call cannot be replayed to Anthropic."
    )


def test_build_body_is_the_same_object_as_the_bytes() -> None:
    request = make_request(TOOL_LOOP, provider="anthropic")
    wire = AnthropicWire()
    assert encode(wire.build_body(request)) == wire.encode_body(request)
