"""The Responses API endpoint, read by the real ``openai`` SDK (its own event
parser and types) and by httpx-sse for the exact event sequence."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from httpx_sse import aconnect_sse

from tapelog.emulator import Emulator
from tapelog.emulator._responses_input import ResponseMemory
from tapelog.log import decode, encode

from ._helpers import BASE

TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a command.",
        "strict": False,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
    {"type": "web_search"},
]
CALL_REPLY = {
    "reasoning": "I should list the files first.",
    "tool_calls": [{"name": "exec_command", "arguments": '{"cmd": "ls"}'}],
}


def _clock() -> float:
    return 1_700_000_000.0


def _sdk(emu: Emulator, prefix: str = "/v1") -> openai.AsyncOpenAI:
    http = httpx.AsyncClient(transport=emu.transport())
    return openai.AsyncOpenAI(api_key="k", base_url=BASE + prefix, http_client=http)


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "list files"}]}],
        "tools": TOOLS,
        "include": ["reasoning.encrypted_content"],
        "store": False,
        **extra,
    }


async def _events(emu: Emulator, body: dict[str, Any]) -> list[tuple[str, Any]]:
    async with (
        httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client,
        aconnect_sse(client, "POST", "/v1/responses", json=body) as source,
    ):
        return [(e.event, decode(e.data)) async for e in source.aiter_sse()]


async def test_stream_is_the_real_event_sequence() -> None:
    emu = Emulator(script=[{**CALL_REPLY, "text": "Listing."}], clock=_clock)
    events = await _events(emu, _body(stream=True))
    names = [name for name, _ in events]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["type"] for _, data in events] == names
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    final = events[-1][1]["response"]
    assert final["status"] == "completed"
    assert final["id"] == "resp_emu_000001"
    kinds = [item["type"] for item in final["output"]]
    assert kinds == ["reasoning", "message", "function_call"]
    call = final["output"][2]
    assert (call["name"], call["arguments"], call["call_id"]) == (
        "exec_command",
        '{"cmd": "ls"}',
        "call_emu_000001_0",
    )
    assert isinstance(final["output"][0]["encrypted_content"], str)
    assert final["tools"] == TOOLS
    assert final["store"] is False
    assert emu.received[0].usage == final["usage"]


async def test_sdk_streams_and_rebuilds_the_answer() -> None:
    emu = Emulator(script=[CALL_REPLY, {"text": "Two files."}])
    client = _sdk(emu)
    async with client.responses.stream(**_body()) as stream:
        deltas = [
            e.delta async for e in stream if e.type == "response.function_call_arguments.delta"
        ]
        first = await stream.get_final_response()
    assert "".join(deltas) == '{"cmd": "ls"}'
    reasoning, call = first.output
    assert reasoning.type == "reasoning"
    assert call.type == "function_call"
    # The next turn sends the output back with the tool's result (store false).
    history = [
        *_body()["input"],
        reasoning.model_dump(exclude_none=True),
        call.model_dump(exclude_none=True),
    ]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "a\nb"})
    second = await client.responses.create(**_body(input=history))
    assert second.output_text == "Two files."
    assert second.usage is not None
    assert second.usage.input_tokens > 0


async def test_non_streaming_default_reply_and_string_input() -> None:
    emu = Emulator()
    client = _sdk(emu, "/openai/v1")
    answer = await client.responses.create(model="gpt-5", input="hello there")
    assert answer.output_text == "ok: hello there"
    assert answer.status == "completed"
    assert answer.store is True
    assert emu.received[0].path == "/openai/v1/responses"


async def test_altered_encrypted_content_is_the_real_400() -> None:
    emu = Emulator(script=[CALL_REPLY])
    client = _sdk(emu)
    first = await client.responses.create(**_body())
    reasoning = first.output[0].model_dump(exclude_none=True)
    reasoning["encrypted_content"] = reasoning["encrypted_content"][:-1] + "0"
    call = first.output[1]
    history = [
        *_body()["input"],
        reasoning,
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "x"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(**_body(input=history))
    assert caught.value.code == "invalid_encrypted_content"
    assert "could not be verified" in caught.value.message
    assert emu.pending == 0  # a refused request uses no script entry


async def test_reasoning_by_id_without_store_is_the_real_404() -> None:
    emu = Emulator(script=[CALL_REPLY])
    client = _sdk(emu)
    first = await client.responses.create(**_body())
    reasoning = {"type": "reasoning", "id": first.output[0].id, "summary": []}
    call = first.output[1]
    history = [
        reasoning,
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "x"},
    ]
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.create(**_body(input=history))
    assert "Items are not persisted when `store` is set to false" in caught.value.message


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            [{"type": "function_call_output", "call_id": "call_x", "output": "1"}],
            "No tool call found for function call output with call_id call_x.",
        ),
        (
            [{"type": "function_call", "call_id": "call_y", "name": "f", "arguments": "{}"}],
            "No tool output found for function call call_y.",
        ),
    ],
)
async def test_unpaired_tool_items_are_refused(items: list[Any], message: str) -> None:
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        response = await client.post("/v1/responses", json={"model": "m", "input": items})
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }


async def test_previous_response_id_continues_a_stored_response() -> None:
    emu = Emulator(script=[CALL_REPLY])
    client = _sdk(emu)
    first = await client.responses.create(model="gpt-5", input="list files", tools=TOOLS)
    call = first.output[1]
    second = await client.responses.create(
        model="gpt-5",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "a b"}],
        tools=TOOLS,
    )
    assert second.output_text == "done: 1 tool result (3 chars)"
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="gpt-5", previous_response_id="resp_nope", input="hi")
    assert caught.value.code == "previous_response_not_found"
    assert caught.value.param == "previous_response_id"
    # Not stored: a later request cannot continue it.
    unstored = await client.responses.create(model="gpt-5", input="hi", store=False)
    with pytest.raises(openai.BadRequestError):
        await client.responses.create(model="gpt-5", previous_response_id=unstored.id, input="x")


def _padded(size: int) -> dict[str, Any]:
    """A user message item whose canonical JSON is ``size`` bytes."""
    overhead = len(encode({"role": "user", "content": ""}))
    return {"role": "user", "content": "x" * (size - overhead)}


async def test_openai_cache_rule_keyed_by_prompt_cache_key() -> None:
    emu = Emulator()
    client = _sdk(emu)
    long = [_padded(4 * 1100)]  # 1100 tokens: above the 1024 minimum
    base = {"model": "gpt-5", "store": False, "prompt_cache_key": "s1"}
    await client.responses.create(**base, input=long)
    again = await client.responses.create(**base, input=[*long, _padded(40)])
    assert again.usage is not None
    assert again.usage.input_tokens_details.cached_tokens == 1024  # 128-token steps
    other = await client.responses.create(**{**base, "prompt_cache_key": "s2"}, input=long)
    assert other.usage is not None
    assert other.usage.input_tokens_details.cached_tokens == 0


async def test_structured_output_format_needs_a_name() -> None:
    emu = Emulator(script=[{"output": '{"n": 1}'}])
    client = _sdk(emu)
    fmt = {"type": "json_schema", "schema": {"type": "object"}}
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="m", input="n?", text={"format": fmt})  # type: ignore[typeddict-item]
    assert caught.value.param == "text.format.name"
    answer = await client.responses.create(
        model="m", input="n?", text={"format": {**fmt, "name": "n"}}
    )  # type: ignore[typeddict-item]
    assert answer.output_text == '{"n": 1}'


async def test_forced_function_and_faults() -> None:
    emu = Emulator(
        script=[
            {"output": '{"cmd": "pwd"}'},
            {"error": {"status": 503, "message": "busy"}, "in_stream": True},
            {"text": "long answer", "finish": "length"},
        ]
    )
    client = _sdk(emu)
    forced = await client.responses.create(
        model="m",
        input="go",
        tools=TOOLS[:1],
        tool_choice={"type": "function", "name": "exec_command"},  # type: ignore[list-item]
    )
    assert [(o.type, getattr(o, "arguments", None)) for o in forced.output] == [
        ("function_call", '{"cmd": "pwd"}')
    ]
    events = await _events(emu, {"model": "m", "input": "go", "stream": True})
    names = [name for name, _ in events]
    assert names == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1][1]
    assert failed["sequence_number"] == 2
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["id"] == events[0][1]["response"]["id"]
    assert failed["response"]["error"] == {"code": "server_error", "message": "busy"}
    cut = await client.responses.create(model="m", input="go")
    assert cut.status == "incomplete"
    assert cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"


def test_stored_responses_are_bounded_and_forget_their_items() -> None:
    memory = ResponseMemory(limit=2)
    memory.keep("r1", [{"type": "reasoning", "id": "rs_1"}, {"role": "user", "content": "x"}])
    memory.keep("r2", [{"type": "reasoning", "id": "rs_1"}, {"type": "reasoning", "id": "rs_2"}])
    assert memory.holds_item("rs_1")
    memory.keep("r3", [{"type": "reasoning", "id": "rs_3"}])  # r1 is dropped
    assert memory.context("r1") is None
    assert memory.holds_item("rs_1")  # r2 still holds it
    memory.keep("r4", [])  # r2 is dropped
    assert not memory.holds_item("rs_1")
    assert not memory.holds_item("rs_2")
    assert memory.holds_item("rs_3")
