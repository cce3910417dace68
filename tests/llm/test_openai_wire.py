"""OpenAI-compatible body bytes: golden bodies per dialect and the mapping rules."""

from __future__ import annotations

import pytest

from tapelog import EventError, HeaderError
from tapelog.llm._api import OpenAIWire
from tapelog.log import decode, encode

from ._requests import TOOL_LOOP, call, make_request, text, tool_result

OPENAI_GOLDEN = (
    rb'{"model":"m1","messages":[{"role":"system","content":"Be brief."},'
    rb'{"role":"user","content":"Show a.txt"},'
    rb'{"role":"assistant","content":"Reading.","tool_calls":[{"id":"c1","type":"function",'
    rb'"function":{"name":"read","arguments":"{\"path\": \"a.txt\"}"}}]},'
    rb'{"role":"tool","tool_call_id":"c1","content":"hello"}],'
    rb'"tools":[{"type":"function","function":{"name":"read","description":"Read a file.",'
    rb'"parameters":{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}}}],'
    rb'"max_completion_tokens":256,"temperature":0.2,"seed":7,"stop":["END"],'
    rb'"stream":true,"stream_options":{"include_usage":true}}'
)

DEEPSEEK_GOLDEN = (
    rb'{"model":"deepseek-chat","messages":[{"role":"system","content":"Be brief."},'
    rb'{"role":"user","content":"Show a.txt"},'
    rb'{"role":"assistant","content":"Reading.","reasoning_content":"Need the file.",'
    rb'"tool_calls":[{"id":"c1","type":"function",'
    rb'"function":{"name":"read","arguments":"{\"path\": \"a.txt\"}"}}]},'
    rb'{"role":"tool","tool_call_id":"c1","content":"hello"}],'
    rb'"tools":[{"type":"function","function":{"name":"read","description":"Read a file.",'
    rb'"parameters":{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}}}],'
    rb'"max_tokens":256,"reasoning_effort":"high",'
    rb'"stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"enabled"}}'
)


def test_openai_golden_body() -> None:
    request = make_request(TOOL_LOOP, max_tokens=256, temperature=0.2, seed=7, stop=("END",))
    assert OpenAIWire(dialect="openai").encode_body(request) == OPENAI_GOLDEN


def test_deepseek_golden_body_sends_reasoning_back_and_extras_last() -> None:
    request = make_request(
        TOOL_LOOP,
        provider="deepseek",
        model="deepseek-chat",
        max_tokens=256,
        reasoning_effort="high",
        extras={"thinking": {"type": "enabled"}},
    )
    assert OpenAIWire(dialect="deepseek").encode_body(request) == DEEPSEEK_GOLDEN


def test_compatible_dialect_uses_max_tokens_and_keeps_reasoning_out() -> None:
    request = make_request(TOOL_LOOP, provider="compatible", max_tokens=64)
    body = decode(OpenAIWire(dialect="compatible").encode_body(request))
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body
    assert "reasoning_content" not in body["messages"][2]


def test_deepseek_sends_reasoning_content_on_every_tool_turn_even_without_reasoning() -> None:
    # DeepSeek thinking mode: a tool-call turn without the field is a 400
    # ("Missing `reasoning_content` field in the assistant message at message
    # index 2", api-docs.deepseek.com guides/thinking_mode#tool-calls). The
    # model may stream only ``"reasoning_content": ""``, so the log has no
    # reasoning block for that turn; deepseek-reasoner is thinking mode too.
    messages = [
        text("user", "q"),
        {"role": "assistant", "content": [call("c1")]},
        tool_result("c1", "r"),
        {
            "role": "assistant",
            "content": [{"type": "reasoning", "text": "done"}, {"type": "text", "text": "A"}],
        },
        text("user", "more"),
        text("assistant", "plain"),
    ]
    wire = OpenAIWire(dialect="deepseek")
    for model in ("deepseek-reasoner", "deepseek-chat", "deepseek-v4-pro"):
        assert wire.send_back_for(model) == "present_and_tool_turns"
        request = make_request(messages, provider="deepseek", model=model)
        body = decode(wire.encode_body(request))
        assert body["messages"][2] == {
            "role": "assistant",
            "content": None,
            "reasoning_content": "",
            "tool_calls": body["messages"][2]["tool_calls"],
        }
        assert body["messages"][4]["reasoning_content"] == "done"
        assert "reasoning_content" not in body["messages"][6]
        assert wire.build_body(request) == body


def test_tool_turns_rule_sends_empty_reasoning_on_calls_only() -> None:
    wire = OpenAIWire(dialect="deepseek", send_back="tool_turns")
    messages = [
        text("user", "q"),
        {"role": "assistant", "content": [call("c1")]},
        tool_result("c1", "r"),
        {
            "role": "assistant",
            "content": [{"type": "reasoning", "text": "done"}, {"type": "text", "text": "A"}],
        },
    ]
    body = decode(wire.encode_body(make_request(messages, provider="deepseek")))
    assert body["messages"][2]["reasoning_content"] == ""
    assert body["messages"][2]["content"] is None
    assert "reasoning_content" not in body["messages"][4]


def test_user_content_with_image_is_an_array_of_parts() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw=="},
            {"type": "image", "media_type": "image/png", "url": "https://x/y.png"},
        ],
    }
    body = decode(OpenAIWire().encode_body(make_request([message], tools=())))
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    assert "tools" not in body


def test_tool_result_text_blocks_are_joined_and_arguments_stay_verbatim() -> None:
    odd = '{ "path" :"a.txt" ,"n":1.50}'
    messages = [
        text("user", "q"),
        {"role": "assistant", "content": [call("c1", odd)]},
        tool_result("c1", [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]),
    ]
    body = decode(OpenAIWire().encode_body(make_request(messages)))
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == odd
    assert body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "line 1\nline 2",
    }


def test_prefix_messages_come_after_system_and_before_history() -> None:
    prefix = [text("user", "context"), text("assistant", "noted")]
    request = make_request([text("user", "go")], prefix=prefix, tools=())
    body = decode(OpenAIWire().encode_body(request))
    assert [m["content"] for m in body["messages"]] == ["Be brief.", "context", "noted", "go"]


def test_extras_may_not_override_standard_fields() -> None:
    request = make_request([text("user", "q")], extras={"stream": False})
    with pytest.raises(HeaderError) as info:
        OpenAIWire().encode_body(request)
    assert str(info.value) == (
        "config.extras sets 'stream', which the openai wire writes itself; "
        "use the matching config field (or leave it out) instead of an extra."
    )


def test_block_the_role_cannot_carry_is_refused() -> None:
    bad = {"role": "user", "content": [call("c1")]}
    with pytest.raises(EventError) as info:
        OpenAIWire().encode_body(make_request([bad]))
    assert "messages[0].content[0]: the openai wire cannot send a 'tool_call' block" in str(
        info.value
    )


def test_build_body_is_the_same_object_as_the_bytes() -> None:
    request = make_request(TOOL_LOOP, provider="deepseek", model="deepseek-chat")
    wire = OpenAIWire(dialect="deepseek")
    assert encode(wire.build_body(request)) == wire.encode_body(request)
