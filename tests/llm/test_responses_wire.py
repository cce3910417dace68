"""The Responses wire: golden bytes, the mapping rules, the config choice and the parser's edges."""

from __future__ import annotations

from typing import Any

import pytest
from httpx_sse import ServerSentEvent

from tapelog import EventError, HeaderError, ProviderError
from tapelog.cache._api import chain_segments, responses_sources
from tapelog.llm import make_client
from tapelog.llm._api import (
    OpenAIWire,
    ResponsesWire,
    assemble_message,
    wire_for,
    wire_named,
)
from tapelog.llm._clients import ResponsesClient
from tapelog.llm._responses_stream import ResponsesStreamParser, responses_usage
from tapelog.log import decode
from tapelog.log._api import LlmCallConfig, encode_str

from ._requests import call, make_request, text, tool_result
from ._responses_events import response_events

REASONING = {
    "type": "reasoning",
    "text": "Need it.",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Need it."}],
    "encrypted_content": "gAAA1",
}

HISTORY = [
    {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
    text("user", "Show a.txt"),
    {"role": "assistant", "content": [REASONING, call("call_1")]},
    tool_result("call_1", "hello"),
]

GOLDEN = (
    rb'{"model":"m1","instructions":"Be brief.","input":['
    rb'{"type":"message","role":"developer","content":[{"type":"input_text","text":"Use tools."}]},'
    rb'{"type":"message","role":"user","content":[{"type":"input_text","text":"Show a.txt"}]},'
    rb'{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Need it."}],'
    rb'"encrypted_content":"gAAA1"},'
    rb'{"type":"function_call","call_id":"call_1","name":"read",'
    rb'"arguments":"{\"path\": \"a.txt\"}"},'
    rb'{"type":"function_call_output","call_id":"call_1","output":"hello"}],'
    rb'"tools":[{"type":"function","name":"read","description":"Read a file.",'
    rb'"parameters":{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}}],'
    rb'"max_output_tokens":100,"reasoning":{"effort":"low"},'
    rb'"include":["reasoning.encrypted_content"],"store":false,"stream":true,'
    rb'"prompt_cache_key":"s1","parallel_tool_calls":false}'
)


def _request(messages: Any = HISTORY, **config: Any) -> Any:
    config.setdefault("max_tokens", 100)
    config.setdefault("reasoning_effort", "low")
    config.setdefault("extras", {"prompt_cache_key": "s1", "parallel_tool_calls": False})
    return make_request(messages, wire={"api": "responses"}, **config)


def test_golden_body() -> None:
    assert ResponsesWire().encode_body(_request()) == GOLDEN


def test_client_fields_are_sent_in_their_order_and_store_can_be_given() -> None:
    extras = {
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "high", "summary": "auto"},
        "store": True,
        "include": [],
        "prompt_cache_key": "k",
        "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}},
        "client_metadata": {"turn": "t1"},
    }
    body = decode(ResponsesWire().encode_body(_request(reasoning_effort=None, extras=extras)))
    assert list(body)[-len(extras) :] == list(extras)
    assert body["store"] is True
    assert body["include"] == []
    assert body["reasoning"] == extras["reasoning"]
    assert list(body)[: -len(extras)] == [
        "model",
        "instructions",
        "input",
        "tools",
        "max_output_tokens",
        "stream",
    ]


def test_built_in_and_typed_tools_are_sent_as_given() -> None:
    tools = [
        {"name": "read", "parameters": {"type": "object"}, "strict": True},
        {"name": "web_search", "builtin": {"type": "web_search"}},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
    ]
    body = decode(ResponsesWire().encode_body(_request(tools=tools)))
    assert body["tools"] == [
        {"type": "function", "name": "read", "parameters": {"type": "object"}, "strict": True},
        {"type": "web_search"},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
    ]


def test_reasoning_from_another_wire_is_not_sent() -> None:
    other = {"role": "assistant", "content": [{"type": "reasoning", "text": "x", "signature": "s"}]}
    body = decode(ResponsesWire().encode_body(_request([text("user", "hi"), other])))
    assert [i["type"] for i in body["input"]] == ["message"]


def test_images_and_opaque_items_in_user_content() -> None:
    said = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "media_type": "image/png", "data": "AAA"},
            {"type": "item", "item": {"type": "item_reference", "id": "x"}},
            {"type": "text", "text": "and"},
        ],
        "fields": {"id": "m1"},
    }
    body = decode(ResponsesWire().encode_body(_request([said])))
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAA"},
            ],
            "id": "m1",
        },
        {"type": "item_reference", "id": "x"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "and"}],
            "id": "m1",
        },
    ]


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"seed": 3}, "seed"),
        ({"stop": ("END",)}, "stop"),
        ({"extras": {"input": []}}, "input"),
        ({"extras": {"conversation": "conv_1"}}, "conversation"),
        ({"extras": {"reasoning": {"effort": "low"}}}, "reasoning"),
    ],
)
def test_config_the_wire_cannot_send_is_refused(config: dict[str, Any], problem: str) -> None:
    with pytest.raises(HeaderError, match=problem):
        ResponsesWire().encode_body(_request(**config))


def test_a_proxied_clients_previous_response_id_is_sent_as_given() -> None:
    """The loop never sets it; a proxied client's request carries it as sent."""
    request = make_request(
        HISTORY,
        extras={"previous_response_id": "resp_1"},
        wire={"api": "responses", "store_false": False},
    )
    body = decode(wire_for(request.header.config).encode_body(request))
    assert body["previous_response_id"] == "resp_1"
    assert "store" not in body


def test_a_block_the_wire_cannot_send_is_refused() -> None:
    odd = {"role": "assistant", "content": [{"type": "image", "media_type": "a", "data": "b"}]}
    with pytest.raises(EventError, match="responses wire cannot send"):
        ResponsesWire().encode_body(_request([odd]))


def test_the_logged_config_alone_chooses_the_wire() -> None:
    plain = LlmCallConfig(provider="openai", model="m1")
    assert isinstance(wire_for(plain), OpenAIWire)  # a log without the option: as before
    responses = plain.replace(wire={"api": "responses"})
    assert wire_for(responses) == ResponsesWire(dialect="openai")
    assert isinstance(wire_for(plain.replace(wire={"api": "chat"})), OpenAIWire)
    assert wire_named("responses", plain) == ResponsesWire()
    assert wire_named("responses", plain.replace(provider="deepseek")) == ResponsesWire(
        dialect="deepseek"
    )
    assert isinstance(wire_named("openai", responses), OpenAIWire)  # chat, same dialect
    with pytest.raises(HeaderError, match=r"config\.wire\.api"):
        wire_for(plain.replace(wire={"api": "realtime"}))
    carried = wire_for(plain.replace(wire={"api": "responses", "store_false": False}))
    assert "store" not in decode(carried.encode_body(_request()))
    with pytest.raises(HeaderError, match="store_false"):
        wire_for(plain.replace(wire={"store_false": False}))
    assert wire_for(plain.replace(wire={"api": "responses", "held": 2})).held == 2
    for held in (-1, True, "2"):
        with pytest.raises(HeaderError, match=r"config\.wire\.held"):
            wire_for(plain.replace(wire={"api": "responses", "held": held}))
    with pytest.raises(HeaderError, match="held"):
        wire_for(plain.replace(wire={"held": 1}))
    with pytest.raises(HeaderError, match="reasoning_send_back"):
        wire_for(plain.replace(wire={"api": "responses", "reasoning_send_back": "never"}))
    with pytest.raises(HeaderError, match="does not read"):
        wire_for(LlmCallConfig(provider="anthropic", model="m", wire={"api": "responses"}))


def test_make_client_posts_to_the_responses_endpoint() -> None:
    config = LlmCallConfig(provider="openai", model="m1", wire={"api": "responses"})
    client = make_client(config, base_url="http://h/v1", env={"OPENAI_API_KEY": "k"})
    assert isinstance(client, ResponsesClient)
    assert client.wire == ResponsesWire()
    assert client._url() == "http://h/v1/responses"


def _feed(events: Any) -> tuple[ResponsesStreamParser, list[Any]]:
    parser = ResponsesStreamParser("openai")
    chunks: list[Any] = []
    for event in events:
        chunks.extend(parser.feed(ServerSentEvent(event=event["type"], data=encode_str(event))))
    return parser, chunks


MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hello there", "annotations": []}],
}


def test_incomplete_at_max_output_tokens_finishes_as_max_tokens() -> None:
    parser, chunks = _feed(response_events([MESSAGE], incomplete="max_output_tokens"))
    assert parser.done
    message = assemble_message([*chunks, *parser.end()])
    assert (message.finish, message.finish_raw) == ("max_tokens", "max_output_tokens")
    assert message.content[0]["text"] == "Hello there"


def test_a_server_that_sends_only_done_items_gives_the_same_message() -> None:
    call_item = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_9",
        "name": "read",
        "arguments": '{"a":1}',
    }
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
    }
    items = [reasoning, MESSAGE, call_item]
    events = [
        e
        for e in response_events(items)
        if e["type"].startswith("response.output_item.") or e["type"] == "response.completed"
    ]
    parser, chunks = _feed(events)
    streamed, more = _feed(response_events(items))
    only_done = assemble_message([*chunks, *parser.end()])
    assert only_done.content == assemble_message([*more, *streamed.end()]).content
    assert [b["type"] for b in only_done.content] == ["reasoning", "text", "tool_call"]
    assert only_done.content[0]["text"] == "a\n\nb"
    assert only_done.content[2]["id"] == "call_9"
    assert only_done.finish == "tool_calls"


@pytest.mark.parametrize(
    ("event", "retryable"),
    [
        ({"type": "error", "code": "server_error", "message": "boom"}, True),
        ({"type": "error", "code": "invalid_prompt", "message": "bad"}, False),
        (
            {
                "type": "response.failed",
                "response": {"status": "failed", "error": {"code": "server_error", "message": "x"}},
            },
            True,
        ),
    ],
)
def test_errors_in_the_stream_raise(event: dict[str, Any], retryable: bool) -> None:
    with pytest.raises(ProviderError) as caught:
        _feed([event])
    assert caught.value.retryable is retryable


def test_a_stream_cut_before_completed_is_retryable() -> None:
    parser, _ = _feed(list(response_events([MESSAGE]))[:-1])
    with pytest.raises(ProviderError, match="before the response completed") as caught:
        parser.end()
    assert caught.value.retryable


def test_usage_is_normalised_with_cache_reads_writes_and_reasoning() -> None:
    usage = responses_usage(
        {
            "input_tokens": 2000,
            "input_tokens_details": {"cached_tokens": 1536, "cache_write_tokens": 64},
            "output_tokens": 50,
            "output_tokens_details": {"reasoning_tokens": 30},
            "total_tokens": 2050,
        }
    )
    assert (usage["input"], usage["cache_read"], usage["cache_write"]) == (400, 1536, 64)
    assert (usage["output"], usage["reasoning"]) == (50, 30)
    assert usage["raw"]["total_tokens"] == 2050


def test_the_prompt_cache_key_scopes_every_cached_segment() -> None:
    """OpenAI routes by prefix and prompt_cache_key: same prefix, other key, no shared entry."""
    bodies = [
        decode(ResponsesWire().encode_body(_request(extras={"prompt_cache_key": key})))
        for key in ("a", "a", "b")
    ]
    keys = [[s.key for s in chain_segments("openai:m1", responses_sources(b))] for b in bodies]
    assert keys[0] == keys[1]
    assert not set(keys[0]) & set(keys[2])
    sources = responses_sources(bodies[0])
    assert sources[0].tokens == 0  # the scope costs nothing
    assert len(sources) == 1 + 1 + 1 + len(bodies[0]["input"])  # scope, tools, instructions
