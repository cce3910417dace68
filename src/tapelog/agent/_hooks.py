"""Agent hooks: the only places user code shapes a request.

Model-visible content reaches a request through logged channels only: the
``session_prefix`` hook (logged in the header's ``prefix``), the
``prompt_submit`` and ``tool_post_execute`` hooks' additional context (logged
as ``context/message``) and ``Agent.inject``. The ``request`` hook may only
replace the call config, which is logged in the header too.

Every hook may be a plain function or a coroutine function.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tapelog._errors import TapelogError
from tapelog.llm._api import complete_config
from tapelog.log._api import FrozenDict, FrozenList, LlmCallConfig

__all__ = ["Hooks", "StepContext", "ToolCallInfo", "call_hook", "request_config"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """What the ``pre_step`` hook sees: where the loop is and the composed prefix."""

    turn: int
    step: int
    prefix: FrozenList


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallInfo:
    """A tool call as the model made it (``arguments`` is the raw JSON text)."""

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """Optional callbacks; see the module docstring for what each may do."""

    session_prefix: Callable[[FrozenList], Sequence[Any] | Awaitable[Sequence[Any]]] | None = None
    """Called once per loop instance with the frozen seed (the runtime context
    message when the agent has ``context`` sources, else empty); returns the
    request-only opening messages (``{"role", "content"}``) that follow the seed."""
    pre_step: Callable[[StepContext], Any] | None = None
    """Called before each step's message snapshot; may ``inject`` context."""
    request: (
        Callable[[LlmCallConfig], LlmCallConfig | Awaitable[LlmCallConfig | None] | None] | None
    ) = None
    """Sees the frozen config seed after ``step/start``; may return a replacement."""
    prompt_submit: Callable[[FrozenList], str | Awaitable[str | None] | None] | None = None
    """Sees the user's prompt blocks; a returned string is logged as context."""
    tool_post_execute: Callable[[ToolCallInfo, Any], str | Awaitable[str | None] | None] | None = (
        None
    )
    """Sees each tool call and its outcome; a returned string is logged as context."""


async def call_hook(hook: Callable[..., Any] | None, *args: Any) -> Any:
    """Call a sync or async hook; ``None`` when there is no hook."""
    if hook is None:
        return None
    result = hook(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def text_blocks(text: str) -> FrozenList:
    """A one-block text content list."""
    return FrozenList([FrozenDict({"type": "text", "text": text})])


async def request_config(hooks: Hooks, seed: LlmCallConfig) -> LlmCallConfig:
    """A step's config: the seed through the ``request`` hook (which sees it
    frozen), completed with the wire identity of a provider outside the
    built-in table (``complete_config``: logged, so the request rebuilds anywhere)."""
    replaced = await call_hook(hooks.request, seed)
    if replaced is None:
        return complete_config(seed)
    if not isinstance(replaced, LlmCallConfig):
        raise TapelogError("the request hook must return an LlmCallConfig or None")
    return complete_config(replaced)
