"""``RunContext[Deps]``: what the agent hands a tool besides the model's arguments.

A tool that declares a parameter annotated ``RunContext`` (or
``RunContext[SomeDeps]``) gets the agent's ``deps`` and where the call is:
the session, turn, step and call id. It is the agent's side of a call, not
the model's: the parameter is left out of the tool's schema (so out of every
request) and nothing of it is logged.

The loop sets the context in a context variable for each call's task, so it
reaches the tool through any toolset that wraps another (structured output's,
say) without being part of their ``run`` signatures, and a sync tool's worker
thread (which runs in a copy of the caller's context) sees it too.
"""

from __future__ import annotations

import contextvars
import typing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["RunContext", "current_run_context", "is_run_context", "run_context_scope"]

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """What a tool declaring ``ctx: RunContext[Deps]`` gets: the agent's ``deps``
    and where the call is (never in the tool's schema, never logged)."""

    deps: DepsT
    session_id: str
    turn: int
    step: int
    call_id: str
    tool_name: str


_CURRENT: contextvars.ContextVar[RunContext[Any] | None] = contextvars.ContextVar(
    "tapelog_run_context", default=None
)


def current_run_context() -> RunContext[Any] | None:
    """The context of the tool call running in this task (``None`` outside the loop)."""
    return _CURRENT.get()


def run_context_scope(context: RunContext[Any]) -> contextvars.Context:
    """A copy of the current context in which :func:`current_run_context` is ``context``:
    give it to the call's task (``asyncio.ensure_future(..., context=...)``)."""
    scope = contextvars.copy_context()
    scope.run(_CURRENT.set, context)
    return scope


def is_run_context(hint: Any) -> bool:
    """Whether a parameter's type hint asks for the :class:`RunContext`."""
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint is RunContext or typing.get_origin(hint) is RunContext
