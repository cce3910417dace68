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
) -> tuple[list[str], bool]:
    """Run ``calls`` (tool_call blocks); return the additional context texts to
    log after the results, and whether the step was aborted. Each call's task
    runs with its :class:`RunContext` (``deps`` and where the call is) set."""
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
    tasks = [
        asyncio.get_running_loop().create_task(
            tools.run(info.name, info.arguments),
            context=run_context_scope(_context_of(session, info, deps)),
        )
        for info, _ in infos
    ]
    await _wait_all_or_abort(tasks, handle)
    aborted = handle.aborted
    contexts: list[str] = []
    for (info, call_event), task in zip(infos, tasks, strict=True):
        if task.done() and not task.cancelled():
            outcome = task.result()
        else:
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
