"""The emulator refuses badly paired turns with the real providers' 400 messages.

Each rule has a valid request that is answered and an invalid one refused with
the provider's exact message, in its error shape, without using a script entry.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tapelog.emulator import Emulator

from ._helpers import BASE

DEEPSEEK = "/deepseek/chat/completions"
OPENAI = "/openai/v1/chat/completions"
ANTHROPIC = "/v1/messages"


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _asks(*ids: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [_call(i) for i in ids], **extra}


def _answer(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


USER = {"role": "user", "content": "go"}


async def _post(path: str, body: dict[str, Any]) -> tuple[httpx.Response, Emulator]:
    emu = Emulator(script=[{"text": "scripted"}])
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        response = await client.post(path, json=body)
    return response, emu


async def _openai_error(path: str, messages: list[Any], **extra: Any) -> dict[str, Any]:
    response, emu = await _post(path, {"model": "m", "messages": messages, **extra})
    assert response.status_code == 400, response.text
    assert emu.pending == 1
    assert emu.received[0].status == 400
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error


async def _answered(path: str, body: dict[str, Any]) -> None:
    response, emu = await _post(path, body)
    assert response.status_code == 200, response.text
    assert emu.pending == 0


# --- OpenAI-compatible: tool messages answer every call of the assistant before them


@pytest.mark.parametrize("path", [DEEPSEEK, OPENAI])
@pytest.mark.parametrize(
    "messages",
    [
        [USER, _asks("a", "b"), _answer("b"), _answer("a")],
        [USER, _asks("a"), _answer("a"), {"role": "assistant", "content": "ok"}, USER],
        [USER, {"role": "assistant", "content": "hi", "tool_calls": []}, USER],
    ],
    ids=["both-answered-any-order", "answered-then-chat", "empty-tool-calls"],
)
async def test_paired_tool_messages_are_answered(path: str, messages: list[Any]) -> None:
    await _answered(path, {"model": "m", "messages": messages})


UNANSWERED_PREFIX = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding"
    " to each 'tool_call_id'."
)


@pytest.mark.parametrize(
    "messages",
    [
        [USER, _asks("a", "b"), _answer("a"), USER],
        [USER, _asks("a", "b"), _answer("a")],
        [USER, _asks("a", "b"), USER, _answer("a"), _answer("b")],
    ],
    ids=["user-before-answer", "request-ends-unanswered", "answers-after-user"],
)
async def test_an_unanswered_call_is_refused(messages: list[Any]) -> None:
    openai = await _openai_error(OPENAI, messages)
    assert openai["message"] == (
        UNANSWERED_PREFIX + " The following tool_call_ids did not have response messages: b"
        if messages[2]["role"] == "tool"
        else UNANSWERED_PREFIX + " The following tool_call_ids did not have response messages: a, b"
    )
    deepseek = await _openai_error(DEEPSEEK, messages)
    assert deepseek["message"] == (
        UNANSWERED_PREFIX + " (insufficient tool messages following tool_calls message)"
    )


@pytest.mark.parametrize(
    "messages",
    [
        [USER, _answer("a")],
        [USER, _asks("a"), _answer("a"), {"role": "assistant", "content": "ok"}, _answer("a")],
    ],
    ids=["no-assistant", "after-plain-assistant"],
)
async def test_a_tool_message_that_answers_no_call_is_refused(messages: list[Any]) -> None:
    openai = await _openai_error(OPENAI, messages)
    assert openai["message"] == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding"
        " message with 'tool_calls'."
    )
    deepseek = await _openai_error(DEEPSEEK, messages)
    assert deepseek["message"] == (
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
    )


async def test_a_tool_message_with_an_unknown_id_is_refused() -> None:
    messages = [USER, _asks("a"), _answer("a"), _answer("zz")]
    openai = await _openai_error(OPENAI, messages)
    assert openai["message"] == (
        "Invalid parameter: 'tool_call_id' of 'zz' not found in 'tool_calls' of previous message."
    )
    deepseek = await _openai_error(DEEPSEEK, messages)
    assert deepseek["message"].startswith("Messages with role 'tool' must be a response")


# --- DeepSeek thinking mode: tool turns carry reasoning_content

THINKING = {"thinking": {"type": "enabled"}}
SYSTEM = {"role": "system", "content": "s"}
MISSING = (
    "Missing `reasoning_content` field in the assistant message at message index {}."
    " For more information, please refer to"
    " https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
)


@pytest.mark.parametrize(
    ("model", "extra"),
    [("deepseek-chat", THINKING), ("deepseek-reasoner", {})],
    ids=["thinking-enabled", "reasoner-model"],
)
async def test_thinking_mode_needs_reasoning_content_on_tool_turns(
    model: str, extra: dict[str, Any]
) -> None:
    missing = [SYSTEM, USER, _asks("a"), _answer("a")]
    error = await _openai_error(DEEPSEEK, missing, model=model, **extra)
    assert error["message"] == MISSING.format(2)
    sent = [SYSTEM, USER, _asks("a", reasoning_content=""), _answer("a")]
    plain_turn = {"role": "assistant", "content": "no tools, no reasoning"}
    await _answered(DEEPSEEK, {"model": model, "messages": [*sent, plain_turn, USER], **extra})


@pytest.mark.parametrize(
    ("path", "model", "extra"),
    [
        (DEEPSEEK, "deepseek-chat", {}),
        (DEEPSEEK, "deepseek-reasoner", {"thinking": {"type": "disabled"}}),
        (OPENAI, "deepseek-reasoner", THINKING),
    ],
    ids=["no-thinking", "reasoner-disabled", "openai-route"],
)
async def test_reasoning_content_is_not_required_without_thinking(
    path: str, model: str, extra: dict[str, Any]
) -> None:
    messages = [USER, _asks("a"), _answer("a")]
    await _answered(path, {"model": model, "messages": messages, **extra})


# --- Anthropic: tool_result blocks open the next message and answer only its tool uses


def _use(use_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": "f", "input": {}}


def _result(use_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": "r"}


# A history with tool blocks must define tools (see test_options.py).
F_TOOL = {"name": "f", "input_schema": {"type": "object"}}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _said(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def _user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


async def _anthropic_error(messages: list[Any]) -> str:
    body = {"model": "m", "max_tokens": 9, "messages": messages}
    response, emu = await _post(ANTHROPIC, body)
    assert response.status_code == 400, response.text
    assert emu.pending == 1
    payload = response.json()
    assert payload["type"] == "error"
    assert payload["error"]["type"] == "invalid_request_error"
    assert payload["request_id"] == "req_emu_000001"
    message: str = payload["error"]["message"]
    return message


@pytest.mark.parametrize(
    "messages",
    [
        [USER, _said(_text("t"), _use("a"), _use("b")), _user(_result("b"), _result("a"))],
        [USER, _said(_use("a")), _user(_result("a"), _text("and more")), _said(_text("ok"))],
        [_said(_text("hello")), USER],
    ],
    ids=["both-results", "result-then-text", "assistant-first"],
)
async def test_paired_tool_results_are_answered(messages: list[Any]) -> None:
    body = {"model": "m", "max_tokens": 9, "messages": messages, "tools": [F_TOOL]}
    await _answered(ANTHROPIC, body)


@pytest.mark.parametrize(
    ("messages", "ids"),
    [
        ([USER, _said(_use("a"), _use("b")), _user(_result("a"))], "b"),
        ([USER, _said(_use("a")), _user(_text("first"), _result("a"))], "a"),
        ([USER, _said(_use("a"), _use("b")), USER], "a, b"),
    ],
    ids=["one-missing", "text-before-result", "plain-user-next"],
)
async def test_a_tool_use_without_a_result_right_after_is_refused(
    messages: list[Any], ids: str
) -> None:
    assert await _anthropic_error(messages) == (
        f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately"
        f" after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block"
        " in the next message."
    )


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        ([_user(_result("a"))], "messages.0.content.0"),
        ([USER, _said(_use("a")), _user(_result("a"), _result("zz"))], "messages.2.content.1"),
        (
            [USER, _said(_use("a")), _user(_result("a")), _said(_text("k")), _user(_result("a"))],
            "messages.4.content.0",
        ),
    ],
    ids=["no-tool-use", "unknown-id", "answers-an-older-turn"],
)
async def test_a_result_without_its_tool_use_in_the_previous_message_is_refused(
    messages: list[Any], where: str
) -> None:
    unknown = "zz" if where == "messages.2.content.1" else "a"
    assert await _anthropic_error(messages) == (
        f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {unknown}."
        " Each `tool_result` block must have a corresponding `tool_use` block in the"
        " previous message."
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "messages: text content blocks must be non-empty"),
        (" \n\t", "messages: text content blocks must contain non-whitespace text"),
    ],
    ids=["empty", "whitespace"],
)
@pytest.mark.parametrize("role", ["user", "assistant"])
async def test_blank_text_blocks_are_refused(text: str, message: str, role: str) -> None:
    blank = {"role": role, "content": [_text("fine"), _text(text)]}
    messages = [USER, blank] if role == "assistant" else [blank]
    assert await _anthropic_error(messages) == message
