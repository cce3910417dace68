"""Tool approval: a tool marked ``requires_approval`` asks the agent's approver first.

The decision is a logged ``tool/approval`` event (approved or denied, by whom,
why) between the call and its result; a denied call is not run and gets an
error result saying so, and the model goes on from there. Every request still
rebuilds byte for byte.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tapelog import EventError, JsonlStore, Session
from tapelog.agent import Approval, ToolCallInfo, tool
from tapelog.emulator import Emulator

from ._harness import add, agent_on, assert_bytes_rebuild

ran: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    ran.append(path)
    return f"deleted {path}"


def _calls(*paths: str) -> dict[str, Any]:
    return {
        "tool_calls": [{"name": "delete_file", "arguments": f'{{"path": "{p}"}}'} for p in paths]
        + [{"name": "add", "arguments": '{"a": 1, "b": 1}'}]
    }


def _of(session: Session, etype: str) -> list[Any]:
    return [e.data for e in session.events if e.type == etype]


async def test_approved_and_denied_calls_are_logged_and_only_approved_ones_run(
    tmp_path: Path,
) -> None:
    ran.clear()
    asked: list[ToolCallInfo] = []

    async def reviewer(call: ToolCallInfo) -> Approval:
        asked.append(call)
        await asyncio.sleep(0)
        if "keep" in call.arguments:
            return Approval(approved=False, by="ann", reason="that file is needed")
        return Approval(approved=True, by="ann")

    emulator = Emulator(script=[_calls("tmp.txt", "keep.txt"), {"text": "done"}])
    async with agent_on(emulator, tools=[add, delete_file], approver=reviewer) as agent:
        result = await agent.run("clean up")
    assert result.ok
    assert ran == ["tmp.txt"]
    assert [c.name for c in asked] == ["delete_file", "delete_file"]  # add needs no approval
    approvals = _of(agent.session, "tool/approval")
    calls = _of(agent.session, "tool/call")
    assert approvals == [
        {"turn": 1, "step": 1, "call_id": calls[0]["call_id"], "approved": True, "by": "ann"},
        {
            "turn": 1,
            "step": 1,
            "call_id": calls[1]["call_id"],
            "approved": False,
            "by": "ann",
            "reason": "that file is needed",
        },
    ]
    results = _of(agent.session, "tool/result")
    assert [r["is_error"] for r in results] == [False, True, False]
    assert results[1]["content"] == (
        "not run: ann denied this call of delete_file (that file is needed)"
    )
    assert dict(results[1]["error"]) == {
        "kind": "denied",
        "by": "ann",
        "reason": "that file is needed",
    }
    # Each decision sits between its call and its result, and all before any result.
    types = [e.type for e in agent.session.events if e.type.startswith("tool/")]
    assert types == ["tool/call"] * 3 + ["tool/approval"] * 2 + ["tool/result"] * 3
    assert_bytes_rebuild(agent.session, emulator)
    # The stored log loads (its structural rules accept the new event) and rebuilds.
    store = JsonlStore(tmp_path)
    with store.create(agent.session):
        pass
    assert_bytes_rebuild(store.load(agent.session.id).session, emulator)
    # What the model saw on the second request: the denial, as a tool result.
    assert b"not run: ann denied" in emulator.received[1].body


async def test_a_sync_approver_returning_a_bool_is_named_by_its_function() -> None:
    ran.clear()

    def ask_the_user(call: ToolCallInfo) -> bool:
        return False

    emulator = Emulator(script=[_calls("a"), {"text": "ok"}])
    async with agent_on(emulator, tools=[add, delete_file], approver=ask_the_user) as agent:
        assert (await agent.run("go")).ok
    assert ran == []
    (approval,) = _of(agent.session, "tool/approval")
    assert (approval["approved"], approval["by"]) == (False, "ask_the_user")
    assert "reason" not in approval
    assert_bytes_rebuild(agent.session, emulator)


async def test_without_an_approver_a_call_needing_one_is_denied() -> None:
    ran.clear()
    emulator = Emulator(script=[_calls("a"), {"text": "ok"}])
    async with agent_on(emulator, tools=[add, delete_file]) as agent:
        assert (await agent.run("go")).ok
    assert ran == []
    (approval,) = _of(agent.session, "tool/approval")
    assert approval["approved"] is False
    assert approval["by"] == "tapelog"
    assert "approver" in approval["reason"]


async def test_an_abort_while_waiting_for_approval_aborts_the_calls() -> None:
    ran.clear()
    waiting = asyncio.Event()

    async def slow(call: ToolCallInfo) -> bool:
        waiting.set()
        await asyncio.sleep(60)
        return True

    emulator = Emulator(script=[_calls("a")])
    async with agent_on(emulator, tools=[add, delete_file], approver=slow) as agent:
        task = asyncio.create_task(agent.run("go"))
        await waiting.wait()
        agent.abort("user")
        result = await task
    assert result.reason["kind"] == "aborted"
    assert ran == []
    assert _of(agent.session, "tool/approval") == []
    assert [r["error"]["kind"] for r in _of(agent.session, "tool/result")] == [
        "aborted",
        "aborted",
    ]
    assert_bytes_rebuild(agent.session, emulator)


async def test_an_approver_that_raises_ends_the_turn_and_closes_its_calls() -> None:
    def broken(call: ToolCallInfo) -> bool:
        raise RuntimeError("the review service is down")

    emulator = Emulator(script=[_calls("a"), {"text": "later"}])
    async with agent_on(emulator, tools=[add, delete_file], approver=broken) as agent:
        with pytest.raises(RuntimeError, match="review service"):
            await agent.run("go")
        assert (await agent.run("again")).ok  # the log stayed valid
    assert ran == []
    assert_bytes_rebuild(agent.session, emulator)


def test_the_log_checks_an_approval() -> None:
    session = Session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append(
        "tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "x", "arguments": "{}"}
    )
    with pytest.raises(EventError, match="approved"):
        session.append("tool/approval", {"turn": 1, "step": 1, "call_id": "c1", "by": "me"})
    with pytest.raises(EventError, match="no tool call"):
        session.append(
            "tool/approval",
            {"turn": 1, "step": 1, "call_id": "c2", "approved": True, "by": "me"},
        )
    with pytest.raises(EventError, match="step 2"):
        session.append(
            "tool/approval",
            {"turn": 1, "step": 2, "call_id": "c1", "approved": True, "by": "me"},
        )
    session.append(
        "tool/approval", {"turn": 1, "step": 1, "call_id": "c1", "approved": True, "by": "me"}
    )
