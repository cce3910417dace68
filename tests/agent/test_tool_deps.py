"""Tool dependencies: ``Agent(deps=...)`` reaches the tools that declare a ``RunContext``.

The context is the agent's, never the model's: it is not in the tool's schema
(so not in any request) and never in the log.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tapelog import ToolError
from tapelog.agent import RunContext, tool
from tapelog.emulator import Emulator
from tapelog.log import encode

from ._harness import agent_on, assert_bytes_rebuild


@dataclass
class Db:
    dsn: str
    rows: dict[str, int]


@tool
def lookup(ctx: RunContext[Db], key: str) -> int:
    """Look a key up in the database.

    Args:
        key: The key.
    """
    assert ctx.tool_name == "lookup"
    assert ctx.session_id
    assert ctx.turn == 1
    assert ctx.step == 1
    return ctx.deps.rows[key]


@tool
async def where(key: str, ctx: RunContext[Db]) -> str:
    """Say which call this is (async, context last)."""
    return f"{key}@{ctx.call_id}@{ctx.deps.dsn}"


def test_the_context_is_not_in_the_schema() -> None:
    assert list(lookup.parameters["properties"]) == ["key"]
    assert lookup.parameters["required"] == ["key"]
    assert list(where.parameters["properties"]) == ["key"]


async def test_tools_get_the_agents_deps_and_the_log_never_holds_them() -> None:
    db = Db(dsn="postgresql://db.internal/SECRET-DSN", rows={"apples": 7})
    emulator = Emulator(
        script=[
            {
                "tool_calls": [
                    {"name": "lookup", "arguments": '{"key": "apples"}'},
                    {"name": "where", "arguments": '{"key": "k"}'},
                ]
            },
            {"text": "7 apples"},
        ]
    )
    async with agent_on(emulator, tools=[lookup, where], deps=db) as agent:
        result = await agent.run("how many apples?")
    assert result.ok
    results = [e.data for e in agent.session.events if e.type == "tool/result"]
    assert [r["is_error"] for r in results] == [False, False]
    assert results[0]["content"] == "7"
    call_id = next(
        e.data["call_id"]
        for e in agent.session.events
        if e.type == "tool/call" and e.data["name"] == "where"
    )
    assert results[1]["content"] == f"k@{call_id}@postgresql://db.internal/SECRET-DSN"
    # The deps reached the tool; the log holds only what the tool returned.
    logged = b"".join(encode(e.to_json()) for e in agent.session.events if e.type != "tool/result")
    assert b"SECRET-DSN" not in logged
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_context_tool_outside_an_agent_is_an_error_result() -> None:
    outcome = await lookup.run('{"key": "apples"}')
    assert outcome.is_error
    assert "RunContext" in outcome.content


async def test_an_agent_without_deps_gives_none() -> None:
    @tool
    def peek(ctx: RunContext[None]) -> str:
        """Report the deps."""
        return repr(ctx.deps)

    assert peek.parameters["properties"] == {}
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "peek", "arguments": "{}"}]}, {"text": "ok"}]
    )
    async with agent_on(emulator, tools=[peek]) as agent:
        assert (await agent.run("peek")).ok
    (result,) = [e.data for e in agent.session.events if e.type == "tool/result"]
    assert result["content"] == "None"


def test_a_tool_takes_one_context_by_name() -> None:
    with pytest.raises(ToolError, match="two RunContext"):

        @tool
        def twice(a: RunContext[None], b: RunContext[None]) -> str:
            """Two."""
            return ""

    with pytest.raises(ToolError, match="positional-only"):

        @tool
        def positional(ctx: RunContext[None], /) -> str:
            """Positional."""
            return ""
