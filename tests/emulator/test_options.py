"""Structured-output options on the emulator: the providers' 400s for a wrong
``response_format`` or a tool history without tools, and a scripted ``output``
answered the way the request asks (a forced tool's call, or text)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tapelog.emulator import Emulator, load_script

from ._helpers import BASE

USER = {"role": "user", "content": "weather?"}
F_TOOL = {"name": "f", "input_schema": {"type": "object"}}
OUT_TOOL = {"name": "out", "input_schema": {"type": "object"}}
FUNCTION = {"type": "function", "function": {"name": "out", "parameters": {"type": "object"}}}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}
ANSWER = '{"city": "Paris"}'


async def _post(path: str, body: dict[str, Any]) -> tuple[httpx.Response, Emulator]:
    emu = Emulator(script=[{"output": ANSWER}])
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        response = await client.post(path, json=body)
    return response, emu


async def _refused(path: str, body: dict[str, Any]) -> str:
    response, emu = await _post(path, body)
    assert response.status_code == 400, response.text
    assert emu.pending == 1  # no script entry used
    payload = response.json()
    error = payload["error"]
    assert error["type"] == "invalid_request_error"
    message: str = error["message"]
    return message


# --- response_format ---------------------------------------------------------------------


async def test_deepseek_refuses_a_json_schema_response_format() -> None:
    body = {"model": "deepseek-chat", "messages": [USER], "response_format": SCHEMA}
    message = await _refused("/deepseek/chat/completions", body)
    assert message == "This response_format type is unavailable now"


async def test_deepseek_json_mode_needs_the_word_json_in_the_prompt() -> None:
    body = {
        "model": "deepseek-chat",
        "messages": [USER],
        "response_format": {"type": "json_object"},
    }
    message = await _refused("/deepseek/chat/completions", body)
    assert "must contain the word 'json'" in message
    system = {"role": "system", "content": "Answer in JSON."}
    response, _ = await _post("/deepseek/chat/completions", {**body, "messages": [system, USER]})
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == ANSWER


async def test_openai_refuses_a_json_schema_format_without_its_schema() -> None:
    body = {"model": "gpt-x", "messages": [USER], "response_format": {"type": "json_schema"}}
    message = await _refused("/openai/v1/chat/completions", body)
    assert message == "Missing required parameter: 'response_format.json_schema'."
    response, _ = await _post("/openai/v1/chat/completions", {**body, "response_format": SCHEMA})
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == ANSWER


# --- Anthropic: tool blocks need tools ------------------------------------------------------


def _tool_history() -> list[Any]:
    return [
        USER,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]},
    ]


async def test_anthropic_refuses_tool_blocks_without_tools() -> None:
    body = {"model": "m", "max_tokens": 9, "messages": _tool_history()}
    message = await _refused("/v1/messages", body)
    assert message == "Requests which include `tool_use` or `tool_result` blocks must define tools."
    response, _ = await _post("/v1/messages", {**body, "tools": [F_TOOL]})
    assert response.status_code == 200, response.text


# --- a scripted output answers as the request asks ------------------------------------------


@pytest.mark.parametrize(
    ("extra", "called"),
    [
        ({"tools": [F_TOOL, OUT_TOOL], "tool_choice": {"type": "tool", "name": "out"}}, "out"),
        ({"tools": [OUT_TOOL], "tool_choice": {"type": "any"}}, "out"),
        ({"tools": [F_TOOL, OUT_TOOL], "tool_choice": {"type": "any"}}, None),
        ({"tools": [OUT_TOOL]}, None),
    ],
    ids=["forced-tool", "any-of-one", "any-of-two", "auto"],
)
async def test_an_anthropic_output_is_the_forced_tool_call_or_text(
    extra: dict[str, Any], called: str | None
) -> None:
    body = {"model": "m", "max_tokens": 99, "messages": [USER], **extra}
    response, _ = await _post("/v1/messages", body)
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    if called is None:
        assert content == [{"type": "text", "text": ANSWER}]
    else:
        (use,) = content
        assert (use["type"], use["name"], use["input"]) == ("tool_use", called, {"city": "Paris"})
        assert response.json()["stop_reason"] == "tool_use"


@pytest.mark.parametrize(
    "choice",
    [{"type": "function", "function": {"name": "out"}}, "required"],
    ids=["forced-function", "required-of-one"],
)
async def test_an_openai_output_is_the_forced_function_call(choice: Any) -> None:
    body = {"model": "gpt-x", "messages": [USER], "tools": [FUNCTION], "tool_choice": choice}
    response, _ = await _post("/openai/v1/chat/completions", body)
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    (call,) = message["tool_calls"]
    assert call["function"] == {"name": "out", "arguments": ANSWER}


def test_a_scripted_output_must_be_json_text(tmp_path: Any) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"output": {"city": "Paris"}}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"s\.jsonl, line 1: \"output\" must be the raw JSON text"):
        load_script(script)
    with pytest.raises(ValueError, match="output"):
        Emulator(script=[{"output": 3}])
