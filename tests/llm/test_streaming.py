# ruff: noqa: E501  (the SSE fixtures are real one-line frames; wrapping them would change them)
"""Streaming clients against httpx.MockTransport speaking the providers' real SSE.

The event streams follow the providers' documented examples: OpenAI tool-call
deltas with a trailing usage frame, DeepSeek's keep-alive comment, reasoning
and cache hit/miss counts, Anthropic's named events with thinking, signature,
input_json_delta and cumulative message_delta usage.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent

from tapelog import ContextOverflowError, ProviderError
from tapelog.llm._api import (
    AbortHandle,
    AnthropicStreamParser,
    AnthropicWire,
    OpenAIStreamParser,
    OpenAIWire,
    assemble_message,
)
from tapelog.llm._clients import AnthropicClient, OpenAIClient
from tapelog.llm._types import normalise_usage
from tapelog.log._api import encode_str

from ._requests import TOOL_LOOP, make_request

KEY = "sk-test-secret-123"

OPENAI_TOOL_STREAM = b"""\
data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"read","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"q1"}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"pa"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\\": \\"a.txt\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":20,"total_tokens":2020,"prompt_tokens_details":{"cached_tokens":1920},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

"""

DEEPSEEK_STREAM = b"""\
: keep-alive

: keep-alive

data: {"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Greet "},"logprobs":null,"finish_reason":null}]}

data: {"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"back."},"logprobs":null,"finish_reason":null}]}

data: {"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hello","reasoning_content":null},"logprobs":null,"finish_reason":null}]}

data: {"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}]}

data: {"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":6},"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}}

data: [DONE]

"""

ANTHROPIC_STREAM = b"""\
event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":1000,"cache_read_input_tokens":3000,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the file."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"read","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"path\\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\\"a.txt\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_delta
data: {"type":"message_delta","delta":{},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"""

SSE = {"content-type": "text/event-stream"}


class Recorder:
    """A MockTransport handler that answers with fixed bytes and keeps the requests."""

    def __init__(self, content: bytes, status: int = 200, headers: dict[str, str] | None = None):
        self.content = content
        self.status = status
        self.headers = SSE if headers is None else headers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, headers=self.headers, content=self.content)


def _openai(
    handler: Callable[[httpx.Request], Any], *, dialect: str = "openai", **kw: Any
) -> OpenAIClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    env_var = "DEEPSEEK_API_KEY" if dialect == "deepseek" else "OPENAI_API_KEY"
    return OpenAIClient(
        http_client=http,
        base_url="https://api.example.com/v1/",
        provider=dialect,
        wire=OpenAIWire(dialect=dialect),  # type: ignore[arg-type]
        api_key_env=env_var,
        env=kw.pop("env", {env_var: KEY}),
        **kw,
    )


def _anthropic(handler: Callable[[httpx.Request], Any], **kw: Any) -> AnthropicClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return AnthropicClient(http_client=http, env={"ANTHROPIC_API_KEY": KEY}, **kw)


async def _collect(client: Any, request: Any, abort: AbortHandle | None = None) -> list[Any]:
    return [c async for c in client.stream(request, abort=abort or AbortHandle())]


async def _drain(client: Any, request: Any, seen: list[Any]) -> None:
    """Collect into ``seen`` so a test can check what arrived before an error."""
    async for chunk in client.stream(request, abort=AbortHandle()):
        seen.append(chunk)


async def test_openai_tool_call_deltas_join_by_index() -> None:
    recorder = Recorder(OPENAI_TOOL_STREAM)
    client = _openai(recorder)
    request = make_request(TOOL_LOOP)
    chunks = await _collect(client, request)
    assert chunks[:3] == [
        {"kind": "tool_call", "index": 0, "id": "call_abc", "name": "read", "arguments": ""},
        {"kind": "tool_call", "index": 0, "arguments": '{"pa'},
        {"kind": "tool_call", "index": 0, "arguments": 'th": "a.txt"}'},
    ]
    assert chunks[-1] == {"kind": "finish", "reason": "tool_calls", "raw": "tool_calls"}
    message = assemble_message(chunks)
    assert message.content == [
        {"type": "tool_call", "id": "call_abc", "name": "read", "arguments": '{"path": "a.txt"}'}
    ]
    assert message.usage is not None
    assert {k: message.usage[k] for k in ("input", "cache_read", "cache_write", "output")} == {
        "input": 80,
        "cache_read": 1920,
        "cache_write": 0,
        "output": 20,
    }
    sent = recorder.requests[0]
    assert str(sent.url) == "https://api.example.com/v1/chat/completions"
    assert sent.content == OpenAIWire().encode_body(request)
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["authorization"] == f"Bearer {KEY}"


async def test_deepseek_keep_alive_reasoning_and_cache_counts() -> None:
    client = _openai(Recorder(DEEPSEEK_STREAM), dialect="deepseek")
    chunks = await _collect(client, make_request(TOOL_LOOP, provider="deepseek"))
    assert [c["kind"] for c in chunks] == [
        "reasoning", "reasoning", "text", "text", "usage", "finish"
    ]  # fmt: skip
    assert chunks[-2]["usage"] == normalise_usage(
        input=36, cache_read=64, output=10, reasoning=6, raw=chunks[-2]["usage"]["raw"]
    )
    assert chunks[-2]["usage"]["raw"]["prompt_cache_hit_tokens"] == 64
    message = assemble_message(chunks)
    assert message.content == [
        {"type": "reasoning", "text": "Greet back."},
        {"type": "text", "text": "Hello!"},
    ]
    assert message.finish == "stop"


async def test_anthropic_thinking_signature_tool_use_and_cumulative_usage() -> None:
    recorder = Recorder(ANTHROPIC_STREAM)
    client = _anthropic(recorder)
    request = make_request(TOOL_LOOP, provider="anthropic")
    chunks = await _collect(client, request)
    message = assemble_message(chunks)
    assert message.content == [
        {"type": "reasoning", "text": "Need the file.", "signature": "EqQBCgIYAhIM"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_call", "id": "toolu_01", "name": "read", "arguments": '{"path": "a.txt"}'},
    ]
    assert all("index" in c for c in chunks if c["kind"] not in ("usage", "finish"))
    usage = chunks[-2]["usage"]
    assert (usage["input"], usage["cache_write"], usage["cache_read"], usage["output"]) == (
        25,
        1000,
        3000,
        89,
    )
    assert chunks[-1] == {"kind": "finish", "reason": "tool_calls", "raw": "tool_use"}
    sent = recorder.requests[0]
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.content == AnthropicWire().encode_body(request)
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"


async def test_anthropic_tool_without_input_gets_empty_object() -> None:
    stream = (
        ANTHROPIC_STREAM.split(b"\n\n")[0]
        + b"\n\n"
        + (
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":{"type":"tool_use","id":"t1","name":"now","input":{}}}\n\n'
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
            b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},'
            b'"usage":{"output_tokens":5}}\n\n'
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
        )
    )
    chunks = await _collect(
        _anthropic(Recorder(stream)), make_request(TOOL_LOOP, provider="anthropic")
    )
    assert assemble_message(chunks).content == [
        {"type": "tool_call", "id": "t1", "name": "now", "arguments": "{}"}
    ]


async def test_anthropic_error_event_raises_after_what_arrived() -> None:
    stream = ANTHROPIC_STREAM.split(b"event: content_block_stop")[0] + (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n'
    )
    seen: list[Any] = []
    with pytest.raises(ProviderError) as info:
        await _drain(
            _anthropic(Recorder(stream)), make_request(TOOL_LOOP, provider="anthropic"), seen
        )
    assert info.value.retryable
    assert str(info.value) == (
        "anthropic sent an error event in the stream: overloaded_error: Overloaded. "
        "Retrying may help."
    )
    assert [c["kind"] for c in seen] == ["reasoning", "reasoning", "reasoning_signature"]


async def test_server_error_is_retryable_with_status_excerpt_and_request_id() -> None:
    body = (
        b'{"error":{"message":"Internal failure for key '
        + KEY.encode()
        + b'","type":"server_error"}}'
    )
    recorder = Recorder(body, status=500, headers={"x-request-id": "req_42"})
    with pytest.raises(ProviderError) as info:
        await _collect(_openai(recorder), make_request(TOOL_LOOP))
    error = info.value
    assert error.retryable
    assert (error.status, error.request_id) == (500, "req_42")
    assert str(error) == (
        'openai answered HTTP 500: {"error":{"message":"Internal failure for key ***",'
        '"type":"server_error"}} (request id req_42). '
        "The provider had a server-side problem; retrying may help."
    )
    assert KEY not in str(error)
    assert error.body is not None
    assert KEY not in error.body


async def test_rate_limit_is_retryable() -> None:
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}'
    recorder = Recorder(body, status=429, headers={"request-id": "req_7"})
    with pytest.raises(ProviderError) as info:
        await _collect(_anthropic(recorder), make_request(TOOL_LOOP, provider="anthropic"))
    assert info.value.retryable
    assert info.value.request_id == "req_7"
    assert str(info.value).endswith(
        "(request id req_7). Rate limited; wait and retry, or lower the request rate."
    )


@pytest.mark.parametrize(
    ("make", "body"),
    [
        (
            _openai,
            b'{"error":{"message":"This model\'s maximum context length is 128000 tokens.",'
            b'"type":"invalid_request_error","code":"context_length_exceeded"}}',
        ),
        (
            _anthropic,
            b'{"type":"error","error":{"type":"invalid_request_error",'
            b'"message":"prompt is too long: 208656 tokens > 200000 maximum"}}',
        ),
    ],
)
async def test_context_overflow_is_its_own_error(make: Any, body: bytes) -> None:
    client = make(Recorder(body, status=400, headers={}))
    provider = "anthropic" if isinstance(client, AnthropicClient) else "openai"
    with pytest.raises(ContextOverflowError) as info:
        await _collect(client, make_request(TOOL_LOOP, provider=provider))
    assert not info.value.retryable
    assert str(info.value).startswith(
        f"{provider} rejected the request as too long for the model (HTTP 400): "
    )
    assert str(info.value).endswith("Compact the session or use a model with a larger context.")


async def test_cut_stream_yields_what_arrived_then_raises_retryable() -> None:
    cut = DEEPSEEK_STREAM.split(
        b'data: {"id":"d1","object":"chat.completion.chunk","created":1,'
        b'"model":"deepseek-chat","system_fingerprint":"fp_1","choices":'
        b'[{"index":0,"delta":{"content":"!"}'
    )[0]
    seen: list[Any] = []
    with pytest.raises(ProviderError) as info:
        await _drain(_openai(Recorder(cut), dialect="deepseek"), make_request(TOOL_LOOP), seen)
    assert info.value.retryable
    assert str(info.value) == (
        "The deepseek stream ended before the model finished (no finish reason arrived); "
        "the partial answer is logged and the request can be retried."
    )
    assert [c.get("text") for c in seen] == ["Greet ", "back.", "Hello"]


async def test_missing_key_fails_before_any_network() -> None:
    recorder = Recorder(DEEPSEEK_STREAM)
    client = _openai(recorder, dialect="deepseek", env={})
    with pytest.raises(ProviderError) as info:
        await _collect(client, make_request(TOOL_LOOP))
    assert str(info.value) == (
        "The deepseek provider needs an API key: set DEEPSEEK_API_KEY in the environment "
        "(keys are read from the environment only and never logged)."
    )
    assert recorder.requests == []


async def test_connection_error_is_retryable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ProviderError) as info:
        await _collect(_openai(refuse), make_request(TOOL_LOOP))
    assert info.value.retryable
    assert str(info.value).startswith(
        "The connection to openai failed (ConnectError: connection refused); check the network"
    )


async def test_abort_stops_reading_and_closes_the_response() -> None:
    closed = asyncio.Event()

    class Slow(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
            await asyncio.sleep(3600)
            yield b""

        async def aclose(self) -> None:
            closed.set()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, stream=Slow())

    abort = AbortHandle()
    seen: list[Any] = []

    async def consume() -> None:
        async for chunk in _openai(handler).stream(make_request(TOOL_LOOP), abort=abort):
            seen.append(chunk)
            abort.abort("user")

    await asyncio.wait_for(consume(), timeout=5)
    assert seen == [{"kind": "text", "text": "Hi"}]
    assert closed.is_set()
    assert assemble_message(seen).interrupted


async def test_abort_while_waiting_for_the_next_event() -> None:
    class Slow(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            await asyncio.sleep(3600)
            yield b""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, stream=Slow())

    abort = AbortHandle()
    asyncio.get_running_loop().call_later(0.05, abort.abort)
    chunks = await asyncio.wait_for(_collect(_openai(handler), make_request(TOOL_LOOP), abort), 5)
    assert chunks == []


def test_both_parsers_log_the_providers_cache_diagnostics_as_given() -> None:
    diagnostics = {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 9}}
    start = {
        "type": "message_start",
        "message": {"id": "m", "usage": {"input_tokens": 3}, "diagnostics": diagnostics},
    }
    anthropic = AnthropicStreamParser("anthropic")
    frames = [
        start,
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    for frame in frames:
        anthropic.feed(ServerSentEvent(event=frame["type"], data=encode_str(frame)))
    (usage,) = [c["usage"] for c in anthropic.end() if c["kind"] == "usage"]
    assert usage["cache_diagnostics"] == diagnostics
    openai = OpenAIStreamParser("openai")
    given = {"type": "cache_miss", "reason": "model_changed", "cache_missed_tokens": 5}
    last = {"choices": [], "usage": {"prompt_tokens": 5}, "prompt_cache_diagnostics": given}
    (chunk,) = openai.feed(ServerSentEvent(data=encode_str(last)))
    assert chunk["usage"]["cache_diagnostics"] == given
    (plain,) = openai.feed(ServerSentEvent(data=encode_str({"choices": [], "usage": {}})))
    assert "cache_diagnostics" not in plain["usage"]
