"""The Agents SDK's default model and pydantic-ai's ``OpenAIResponsesModel``
against the emulator's Responses API: multi-turn tool use, streamed and not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapelog.emulator import Emulator

from ._helpers import assert_rebuilds, sessions_in
from ._responses_frameworks import PROMPTS, RESPONSES_FRAMEWORKS, SCRIPT
from ._responses_helpers import assert_carried, audit_commands, recorded_proxy


def _types(body: dict[str, object]) -> list[object]:
    items = body["input"]
    assert isinstance(items, list)
    return [item.get("type", "message") for item in items]


@pytest.mark.parametrize("name", sorted(RESPONSES_FRAMEWORKS))
async def test_two_turns_with_tool_use(name: str, loopback_emulator: tuple[Emulator, int]) -> None:
    emulator, port = loopback_emulator
    emulator.push(*SCRIPT)
    turn = RESPONSES_FRAMEWORKS[name]
    base = f"http://127.0.0.1:{port}/v1"
    first = await turn(base, PROMPTS[0], None, False)
    second = await turn(base, PROMPTS[1], first.history, True)
    assert (first.output, second.output) == ("1 + 2 = 3", "3 + 4 = 7")
    assert [r.status for r in emulator.received] == [200] * 4
    assert [r.path for r in emulator.received] == ["/v1/responses"] * 4
    bodies = [r.json() for r in emulator.received]
    assert [b.get("stream", False) for b in bodies] == [False, False, True, True]
    # The last request holds the whole conversation: each turn's reasoning and
    # call, the tool's result, the first answer, the follow-up question.
    assert _types(bodies[3]) == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    outputs = [i["output"] for i in bodies[3]["input"] if i.get("type") == "function_call_output"]
    assert outputs == ["3", "7"]


@pytest.mark.parametrize("name", sorted(RESPONSES_FRAMEWORKS))
async def test_two_turns_through_the_proxy(
    name: str, loopback_emulator: tuple[Emulator, int], tmp_path: Path
) -> None:
    emulator, port = loopback_emulator
    emulator.push(*SCRIPT)
    turn = RESPONSES_FRAMEWORKS[name]
    store = tmp_path / "sessions"
    lines: list[str] = []
    with recorded_proxy(store, port, lines) as (proxy_port, recording):
        base = f"http://127.0.0.1:{proxy_port}/v1"
        first = await turn(base, PROMPTS[0], None, False)
        second = await turn(base, PROMPTS[1], first.history, True)
    assert (first.output, second.output) == ("1 + 2 = 3", "3 + 4 = 7")
    assert [r.status for r in emulator.received] == [200] * 4
    assert_carried(recording.bodies, emulator)
    sessions = sessions_in(store)  # each passes verify first
    assert_rebuilds(sessions, emulator)
    assert len(sessions) == 1
    ((session_id, _),) = sessions.items()
    audit = audit_commands(store, session_id, tmp_path)
    assert [row["index"] for row in audit["requests"]] == [1, 2, 3, 4]
