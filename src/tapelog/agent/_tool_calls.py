"""Running a step's tool calls: logged before, run concurrently, results in order.

``tool/call`` events are appended (and flushed, off the event loop) before
any tool runs, so a crash mid-tool leaves a call that repair closes with an
"outcome unknown" result. Independent calls run concurrently; their
``tool/result`` events are committed in the model's order whatever order they
finish in. An abort cancels what is still running and closes those calls with
``aborted`` error results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tapelog.agent._approval import ApprovalGate, denied_outcome
from tapelog.agent._hooks import Hooks, ToolCallInfo, call_hook
from tapelog.agent._tool_context import RunContext, run_context_scope
from tapelog.agent._tools import ToolOutcome, Toolset
from tapelog.llm._api import AbortHandle
from tapelog.log._api import Event, Session

__all__ = ["run_tool_calls"]


def _context_of(session: Session, info: ToolCallInfo, deps: Any) -> RunContext[Any]:
    return RunContext(
        deps=deps,
        session_id=session.id,
        turn=info.turn,
        step=info.step,
        call_id=info.call_id,
        tool_name=info.name,
    )


async def _decisions(
    session: Session,
    gate: ApprovalGate,
    handle: AbortHandle,
    infos: Sequence[tuple[ToolCallInfo, Event]],
    flush: Callable[[], Awaitable[None]],
) -> dict[int, ToolOutcome]:
    """Ask about each call that needs approval, in order; the denied calls' results
    by position. The decisions are durable before any approved tool runs."""
    denied: dict[int, ToolOutcome] = {}
    asked = False
    for i, (info, _) in enumerate(infos):
        if handle.aborted:
            break
        if not gate.needs(info.name):
            continue
        decision = await gate.decide(session, info, handle)
        asked = True
        if decision is not None and not decision.approved:
            denied[i] = denied_outcome(info, decision)
    if asked and not handle.aborted:
        await flush()
    return denied


def _aborted_outcome(info: ToolCallInfo) -> ToolOutcome:
    return ToolOutcome(
        content=f"aborted: the tool call {info.name} was cancelled before it finished",
        is_error=True,
        error={"kind": "aborted"},
    )


async def _wait_all_or_abort(tasks: Sequence[asyncio.Future[Any]], handle: AbortHandle) -> None:
    waiter = asyncio.ensure_future(handle.wait())
    try:
        while not handle.aborted and not all(t.done() for t in tasks):
            await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


async def run_tool_calls(
    session: Session,
    tools: Toolset,
    hooks: Hooks,
    handle: AbortHandle,
    *,
    turn: int,
    step: int,
    calls: Sequence[Mapping[str, Any]],
    flush: Callable[[], Awaitable[None]],
    deps: Any = None,
    gate: ApprovalGate | None = None,
) -> tuple[list[str], bool]:
    """Run ``calls`` (tool_call blocks); return the additional context texts to
    log after the results, and whether the step was aborted. Each call's task
    runs with its :class:`RunContext` (``deps`` and where the call is) set;
    calls the ``gate`` says need approval run only once approved (logged)."""
    infos: list[tuple[ToolCallInfo, Event]] = []
    for block in calls:
        info = ToolCallInfo(
            turn=turn,
            step=step,
            call_id=block["id"],
            name=block["name"],
            arguments=block["arguments"],
        )
        event = session.append(
            "tool/call",
            {
                "turn": turn,
                "step": step,
                "call_id": info.call_id,
                "name": info.name,
                "arguments": info.arguments,
            },
        )
        infos.append((info, event))
    await flush()
    denied = await _decisions(session, gate, handle, infos, flush) if gate is not None else {}
    tasks: list[asyncio.Task[ToolOutcome] | None] = [
        None
        if handle.aborted or i in denied
        else asyncio.get_running_loop().create_task(
            tools.run(info.name, info.arguments),
            context=run_context_scope(_context_of(session, info, deps)),
        )
        for i, (info, _) in enumerate(infos)
    ]
    await _wait_all_or_abort([t for t in tasks if t is not None], handle)
    aborted = handle.aborted
    contexts: list[str] = []
    for i, ((info, call_event), task) in enumerate(zip(infos, tasks, strict=True)):
        if i in denied:
            outcome = denied[i]
        elif task is not None and task.done() and not task.cancelled():
            outcome = task.result()
        else:
            if task is not None:
                task.cancel()
            outcome = _aborted_outcome(info)
        result: dict[str, Any] = {
            "turn": turn,
            "step": step,
            "call_id": info.call_id,
            "content": outcome.content,
            "is_error": outcome.is_error,
        }
        if outcome.error is not None:
            result["error"] = outcome.error
        session.append("tool/result", result, surface_op="append", source_seqs=[call_event.seq])
        if outcome.additional_context:
            contexts.append(outcome.additional_context)
        if not aborted:
            extra = await call_hook(hooks.tool_post_execute, info, outcome)
            if extra:
                contexts.append(extra)
    return contexts, aborted
