"""Structured output and the prompt cache on the Anthropic wire.

The output tool is sticky there (the wire profile's ``sticky_output_tool``):
once a structured turn has added ``final_result`` to the header it stays, and
only ``tool_choice`` changes between plain and structured turns, so the cache
audit finds one break (the first add) in a session of plain / structured /
plain / structured turns, where a tool list that toggled had one per turn.
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from tapelog.agent._output import OUTPUT_TOOL
from tapelog.audit import cache_report
from tapelog.emulator import Emulator
from tapelog.log import decode

from ._harness import LONG_SYSTEM, add, agent_on, assert_bytes_rebuild

GOOD = '{"city": "Paris", "temp_c": 21}'


class Weather(pydantic.BaseModel):
    city: str
    temp_c: int


def _structured(own_tools: bool) -> dict[str, Any]:
    # With tools of its own the agent forces "any" tool: script the output tool's call.
    if own_tools:
        return {"tool_calls": [{"name": OUTPUT_TOOL, "arguments": GOOD}]}
    return {"output": GOOD}


@pytest.mark.parametrize("own_tools", [False, True])
async def test_alternating_turns_break_the_cache_once(own_tools: bool) -> None:
    structured = _structured(own_tools)
    emulator = Emulator(script=[{"text": "one"}, structured, {"text": "three"}, structured])
    tools = [add] if own_tools else []
    async with agent_on(emulator, provider="anthropic", system=LONG_SYSTEM, tools=tools) as agent:
        await agent.run("plain 1")
        first = await agent.run("structured 2", output_type=Weather)
        await agent.run("plain 3")
        second = await agent.run("structured 4", output_type=Weather)
    assert first.output == second.output == Weather(city="Paris", temp_c=21)
    assert [r.status for r in emulator.received] == [200] * 4
    report = cache_report(agent.session)
    breaks = [r for r in report.requests if r.drop]
    assert len(breaks) == 1  # the tool list toggling made it 3 with tools of its own
    (cause,) = breaks[0].causes
    assert cause.kind == "header-delta"
    assert cause.detail["tools"]["added"] == [OUTPUT_TOOL]
    assert not cause.detail["tools"]["removed"]
    assert report.totals.efficiency == 1.0
    bodies = [decode(r.body) for r in emulator.received]
    names = [[t["name"] for t in b.get("tools", [])] for b in bodies]
    expected = sorted(["add", OUTPUT_TOOL]) if own_tools else [OUTPUT_TOOL]
    assert names[1:] == [expected] * 3  # the same tool list from the first structured turn on
    plain_choice = bodies[2].get("tool_choice")
    assert plain_choice == (None if own_tools else {"type": "none"})
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_plain_turns_call_of_the_kept_output_tool_gets_an_error_it_can_act_on() -> None:
    call = {"tool_calls": [{"name": OUTPUT_TOOL, "arguments": GOOD}]}
    script = [call, call, {"text": "Sunny."}]
    emulator = Emulator(script=script)
    async with agent_on(emulator, provider="anthropic", tools=[add]) as agent:
        await agent.run("structured", output_type=Weather)
        result = await agent.run("And tomorrow?")
    assert result.text == "Sunny."
    results = [e for e in agent.session.events if e.type == "tool/result"]
    assert results[-1].data["is_error"] is True
    assert "no structured answer is asked for" in str(results[-1].data["content"])
    assert_bytes_rebuild(agent.session, emulator)
