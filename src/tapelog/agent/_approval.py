"""Tool approval: a human in the loop before a tool marked ``requires_approval`` runs.

After a step's ``tool/call`` events are logged (and durable), each call of a
tool that requires approval is put to the agent's approver, one at a time in
the model's order, before any tool of the step runs. The decision is logged
as ``tool/approval`` (``approved``, ``by`` whom, ``reason``) and made durable
before an approved tool starts. A denied call is not run: its result is an
error the model reads ("not run: ann denied this call of delete_file (...)")
and decides from. With no approver every such call is denied, by
``tapelog``, saying so.

An approver is any callable taking the :class:`ToolCallInfo` and returning a
bool or an :class:`Approval`, or an awaitable of one. A sync approver runs in
a worker thread (it may wait for a person at a terminal) so an abort still
ends the wait at once; an approver that raises ends the turn like a hook
that raises, with the step's calls closed as unanswered.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from tapelog.agent._hooks import ToolCallInfo
from tapelog.agent._tools import ToolOutcome, Toolset, _in_daemon_thread
from tapelog.llm._api import AbortHandle
from tapelog.log._api import Session

__all__ = ["Approval", "ApprovalGate", "Approver", "denied_outcome"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """An approver's decision on one tool call: ``approved``, ``by`` whom (default:
    the approver's name) and why (``reason``, shown to the model on a denial)."""

    approved: bool
    by: str | None = None
    reason: str | None = None


Approver: TypeAlias = Callable[[ToolCallInfo], "bool | Approval | Awaitable[bool | Approval]"]


def _name_of(approver: Approver) -> str:
    name = getattr(approver, "__name__", None)
    return name if isinstance(name, str) and name else type(approver).__name__


class ApprovalGate:
    """Asks the approver about the calls of tools that require approval, and logs it."""

    def __init__(self, approver: Approver | None, tools: Toolset) -> None:
        self.approver = approver
        self._tools = tools

    def needs(self, name: str) -> bool:
        found = self._tools.get(name)
        return found is not None and found.requires_approval

    async def decide(
        self, session: Session, info: ToolCallInfo, handle: AbortHandle
    ) -> Approval | None:
        """The logged decision on ``info`` (``None``: aborted while waiting, nothing logged)."""
        decision = await self._ask(info, handle)
        if decision is None:
            return None
        data: dict[str, Any] = {
            "turn": info.turn,
            "step": info.step,
            "call_id": info.call_id,
            "approved": decision.approved,
            "by": decision.by,
        }
        if decision.reason is not None:
            data["reason"] = decision.reason
        session.append("tool/approval", data)
        return decision

    async def _ask(self, info: ToolCallInfo, handle: AbortHandle) -> Approval | None:
        approver = self.approver
        if approver is None:
            return Approval(
                approved=False,
                by="tapelog",
                reason="no approver is set (Agent(approver=...)), so calls that need one "
                "are not run",
            )
        if inspect.iscoroutinefunction(approver):
            answer = await _unless_aborted(approver(info), handle)
        else:
            answer = await _unless_aborted(_in_daemon_thread(approver, info), handle)
            if inspect.isawaitable(answer):  # e.g. an object with an async __call__
                answer = await _unless_aborted(answer, handle)
        if answer is _ABORTED:
            return None
        return _checked(answer, _name_of(approver))


_ABORTED: Any = object()


async def _unless_aborted(awaitable: Awaitable[Any], handle: AbortHandle) -> Any:
    """What ``awaitable`` gives, or :data:`_ABORTED` (it is cancelled) on an abort first."""
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(handle.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
    if handle.aborted or task.cancelled():
        return _ABORTED
    return task.result()


def _checked(answer: Any, name: str) -> Approval:
    if isinstance(answer, bool):
        return Approval(approved=answer, by=name)
    if isinstance(answer, Approval):
        by = answer.by or name
        return Approval(approved=answer.approved, by=by, reason=answer.reason)
    raise TypeError(
        f"the approver {name} returned {type(answer).__name__}; return True, False or an "
        "Approval(approved=..., by=..., reason=...)"
    )


def denied_outcome(info: ToolCallInfo, decision: Approval) -> ToolOutcome:
    """The error result a denied call gets: the model reads who denied it and why."""
    why = f" ({decision.reason})" if decision.reason else ""
    error: dict[str, Any] = {"kind": "denied", "by": decision.by}
    if decision.reason:
        error["reason"] = decision.reason
    return ToolOutcome(
        content=f"not run: {decision.by} denied this call of {info.name}{why}",
        is_error=True,
        error=error,
    )
