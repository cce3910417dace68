# ruff: noqa: E501  (the SSE fixtures are real one-line frames; wrapping them would change them)
"""Streams and bodies from real servers that differ from the happy path.

Each fixture is written from a provider's documented example or a reported
real stream (the source is named at each test), sent through the real client
over ``httpx.MockTransport``.
"""

from __future__ import annotations

from typing import Any

import httpx

from tapelog.llm._api import AbortHandle, AnthropicWire, OpenAIWire, assemble_message
from tapelog.llm._clients import AnthropicClient, OpenAIClient
from tapelog.log import encode

from ._requests import TOOL_LOOP, call, make_request, tool_result


def _stream(content: bytes) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def _openai_chunks(content: bytes, dialect: str = "compatible") -> list[Any]:
    client = OpenAIClient(
        http_client=_stream(content),
        base_url="http://localhost:11434/v1",
        provider=dialect,
        wire=OpenAIWire(dialect=dialect),  # type: ignore[arg-type]
        key_required=False,
        env={},
    )
    request = make_request(TOOL_LOOP, provider=dialect)
    return [c async for c in client.stream(request, abort=AbortHandle())]


# Ollama's OpenAI-compatible API sends each call of a parallel reply whole, in
# its own chunk, all with "index": 0 (ollama/ollama#15457, still so for models
# without a registered parser: #15497).
OLLAMA_PARALLEL_CALLS = b"""\
data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a1","index":0,"type":"function","function":{"name":"read","arguments":"{\\"path\\":\\"hello.py\\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_b2","index":0,"type":"function","function":{"name":"read","arguments":"{\\"path\\":\\"world.py\\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}

data: [DONE]

"""


async def test_ollama_parallel_calls_all_at_index_0_stay_separate_calls() -> None:
    chunks = await _openai_chunks(OLLAMA_PARALLEL_CALLS)
    calls = [c for c in chunks if c["kind"] == "tool_call"]
    assert [(c["index"], c["id"]) for c in calls] == [(0, "call_a1"), (1, "call_b2")]
    message = assemble_message(chunks)
    assert message.content == [
        {"type": "tool_call", "id": "call_a1", "name": "read", "arguments": '{"path":"hello.py"}'},
        {"type": "tool_call", "id": "call_b2", "name": "read", "arguments": '{"path":"world.py"}'},
    ]
    assert message.finish == "tool_calls"


# OpenAI's documented shape: parallel calls numbered 0 and 1, the id only on
# each call's first fragment, later fragments by index alone and interleaved.
OPENAI_INTERLEAVED_CALLS = b"""\
data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"path\\": \\"a\\"}"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"arguments":"{\\"path\\": \\"b\\"}"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""


async def test_openai_parallel_calls_join_by_index_when_ids_repeat_or_are_absent() -> None:
    chunks = await _openai_chunks(OPENAI_INTERLEAVED_CALLS, dialect="openai")
    assert [c["index"] for c in chunks if c["kind"] == "tool_call"] == [0, 1, 0, 1]
    assert assemble_message(chunks).content == [
        {"type": "tool_call", "id": "call_1", "name": "read", "arguments": '{"path": "a"}'},
        {"type": "tool_call", "id": "call_2", "name": "read", "arguments": '{"path": "b"}'},
    ]


# Anthropic's message_delta usage is cumulative and its input-side counts are
# nullable (MessageDeltaUsage in the SDKs: input_tokens, cache_creation_input_tokens
# and cache_read_input_tokens are Optional[int]; the SDK's accumulator keeps the
# message_start value when they are null). Frames as in "Streaming messages".
ANTHROPIC_NULL_DELTA_USAGE = b"""\
event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":1000,"cache_read_input_tokens":3000,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":null,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

"""


async def test_anthropic_null_counts_in_message_delta_keep_the_message_start_counts() -> None:
    client = AnthropicClient(
        http_client=_stream(ANTHROPIC_NULL_DELTA_USAGE), env={"ANTHROPIC_API_KEY": "k"}
    )
    request = make_request(TOOL_LOOP, provider="anthropic")
    chunks = [c async for c in client.stream(request, abort=AbortHandle())]
    message = assemble_message(chunks)
    assert message.content == [{"type": "text", "text": "Hi."}]
    assert message.usage is not None
    counts = {k: message.usage[k] for k in ("input", "cache_read", "cache_write", "output")}
    assert counts == {"input": 25, "cache_read": 3000, "cache_write": 1000, "output": 12}


def test_anthropic_wire_leaves_out_blank_text_blocks() -> None:
    # The Messages API answers 400 "messages: text content blocks must be
    # non-empty" and "... must contain non-whitespace text"
    # (anthropics/claude-code#59812, #23440), and a breakpoint on one is
    # "cache_control cannot be set for empty text blocks" (#62379).
    messages = [
        {"role": "user", "content": [{"type": "text", "text": ""}]},
        {"role": "user", "content": [{"type": "text", "text": "Show a.txt"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": " \n"}, call("c1")],
        },
        tool_result("c1", "hello"),
        {"role": "user", "content": [{"type": "text", "text": "\n\n"}]},
    ]
    request = make_request(messages, provider="anthropic", system=None, tools=())
    body = AnthropicWire().encode_body(request)
    assert body == (
        b'{"model":"m1","max_tokens":4096,"messages":['
        b'{"role":"user","content":[{"type":"text","text":"Show a.txt",'
        b'"cache_control":{"type":"ephemeral"}}]},'
        b'{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"read",'
        b'"input":{"path":"a.txt"}}]},'
        b'{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"hello",'
        b'"cache_control":{"type":"ephemeral"}}]}],"stream":true}'
    )
    assert encode(AnthropicWire().build_body(request)) == body


async def test_anthropic_context_window_stop_is_a_cut_reply_like_max_tokens() -> None:
    # stop_reason "model_context_window_exceeded" (docs.anthropic.com, "Handling
    # stop reasons"): generation stopped because the window filled, possibly
    # inside a tool_use whose JSON is then incomplete. As "error" the loop
    # would run that call and log arguments no later request could encode.
    stream = ANTHROPIC_NULL_DELTA_USAGE.split(b"event: content_block_start")[0] + (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"tool_use","id":"t1","name":"read","input":{}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"input_json_delta","partial_json":"{\\"path\\": \\"a."}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"model_context_window_exceeded","stop_sequence":null},"usage":{"output_tokens":9}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    client = AnthropicClient(http_client=_stream(stream), env={"ANTHROPIC_API_KEY": "k"})
    request = make_request(TOOL_LOOP, provider="anthropic")
    chunks = [c async for c in client.stream(request, abort=AbortHandle())]
    assert chunks[-1] == {
        "kind": "finish",
        "reason": "max_tokens",
        "raw": "model_context_window_exceeded",
    }


# OpenAI chat completion chunk object: delta.refusal carries a refusal while
# delta.content stays null.
OPENAI_REFUSAL = b"""\
data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}],"obfuscation":"x"}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"refusal":"I can't help "},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"refusal":"with that."},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}

data: [DONE]

"""


async def test_openai_refusal_arrives_as_text() -> None:
    message = assemble_message(await _openai_chunks(OPENAI_REFUSAL, dialect="openai"))
    assert message.content == [{"type": "text", "text": "I can't help with that."}]
    assert message.finish == "stop"
