"""Tools: typed Python functions the model can call, and the set a loop offers.

A tool's schema is model-visible and lands in the request header, so it must be
the same bytes every time it is generated: :meth:`Tool.schema` is computed once,
deep-frozen, and keeps the key order pydantic generates from the signature
(parameters in signature order). Providers cache rendered tokens, and key order
is part of them.

Running a tool never raises for things the model got wrong or the function
failed at: bad JSON, invalid arguments and exceptions all become an error
:class:`ToolOutcome` the model can read and act on, so the loop keeps going.
Only cancellation (a :class:`BaseException`) passes through.

A :class:`ToolSource` offers tools that come and go while a loop runs (an MCP
server's): a :class:`Toolset` asks its sources for their current tools at
every step, so a change reaches the model as a logged header delta.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload, runtime_checkable

import pydantic

from tapelog._errors import JsonValueError, ToolError
from tapelog.agent._docstring import parse_docstring
from tapelog.agent._tool_context import current_run_context
from tapelog.agent._tool_schema import arguments_model, hinted, json_schema
from tapelog.log import decode
from tapelog.log._api import FrozenDict, encode_str, freeze

__all__ = ["Tool", "ToolOutcome", "ToolSource", "Toolset", "tool"]

_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced, as the model will see it.

    ``error`` is the machine-readable side of an error result (``kind``,
    ``type``, ``message``) and is logged with it. ``additional_context`` is
    model-visible text the loop logs as a ``context/message`` after the result,
    so a tool can add context only through a logged channel.
    """

    content: str
    is_error: bool = False
    error: dict[str, Any] | None = None
    additional_context: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise ToolError(
                f"ToolOutcome.content must be a str, not {type(self.content).__name__}; "
                "encode structured results as JSON text"
            )
        if self.error is not None:
            object.__setattr__(self, "error", freeze(self.error, path="ToolOutcome.error"))


class Tool:
    """A typed Python function (sync or async) offered to the model.

    Build one with :func:`tool`. ``parameters`` is the JSON schema of the
    arguments, derived from the type hints; descriptions come from the
    docstring (first paragraph, and a Google-style ``Args:`` section).
    """

    requires_approval: bool = False
    """Ask the agent's approver before each call runs (docs/api.md, "Tool approval")."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
    ) -> None:
        name = _checked_name(name if name is not None else getattr(function, "__name__", ""))
        self.requires_approval = requires_approval
        self.function = function
        self.name = name
        summary, arg_docs = parse_docstring(inspect.getdoc(function) or "")
        self.description = description if description is not None else summary
        self._is_async = inspect.iscoroutinefunction(hinted(function))
        self._params, self._model, self._context = arguments_model(function, name, arg_docs)
        self.parameters: FrozenDict = json_schema(self._model, name)
        self._schema: FrozenDict = freeze(
            {"name": self.name, "description": self.description, "parameters": self.parameters},
            path=f"tool {name} schema",
        )

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    def schema(self) -> dict[str, Any]:
        """The neutral, deep-frozen schema: ``{"name", "description", "parameters"}``."""
        return self._schema

    async def run(self, arguments: str) -> ToolOutcome:
        """Run the tool on the raw JSON ``arguments`` the model produced."""
        try:
            args, kwargs = self._bind(arguments)
        except _BadArguments as bad:
            return self._invalid(bad)
        if self._context is not None:
            context = current_run_context()
            if context is None:
                return self._no_context()
            kwargs[self._context] = context
        try:
            if self._is_async:
                result = await self.function(*args, **kwargs)
            else:
                result = await _in_daemon_thread(self.function, *args, **kwargs)
                if inspect.isawaitable(result):  # e.g. an object with an async __call__
                    result = await result
        except Exception as exc:
            return self._failed(exc)
        return self._outcome(result)

    def _failed(self, exc: Exception) -> ToolOutcome:
        """The error outcome of an exception the tool raised."""
        message = str(exc)
        # A ToolError is a refusal written for the model: pass its sentence on as is.
        if isinstance(exc, ToolError):
            content = message
        else:
            content = f"{self.name} failed with {type(exc).__name__}: {message}"
        return ToolOutcome(
            content=content,
            is_error=True,
            error={"kind": "exception", "type": type(exc).__name__, "message": message},
        )

    def _no_context(self) -> ToolOutcome:
        message = (
            f"{self.name} takes a RunContext, which only an Agent's tool call provides; "
            "run it through an Agent"
        )
        return ToolOutcome(
            content=message,
            is_error=True,
            error={"kind": "exception", "type": "ToolError", "message": message},
        )

    def _invalid(self, bad: _BadArguments) -> ToolOutcome:
        return ToolOutcome(
            content=f"invalid arguments for {self.name}: {bad.message}",
            is_error=True,
            error={"kind": "invalid_arguments", "type": bad.type, "message": bad.message},
        )

    def _bind(self, arguments: str) -> tuple[list[Any], dict[str, Any]]:
        raw = _decode_arguments(arguments)
        try:
            validated = self._model.model_validate(raw)
        except pydantic.ValidationError as exc:
            raise _BadArguments("ValidationError", _describe_errors(exc)) from None
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        given = validated.model_fields_set
        for field, param in self._params:
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(getattr(validated, field))
            elif field in given:  # otherwise the function applies its own default
                kwargs[param.name] = getattr(validated, field)
        return args, kwargs

    def _outcome(self, result: Any) -> ToolOutcome:
        if isinstance(result, ToolOutcome):
            return result
        if isinstance(result, str):
            return ToolOutcome(content=result)
        if isinstance(result, pydantic.BaseModel):
            result = result.model_dump(mode="json")
        try:
            return ToolOutcome(content=encode_str(result, path="result"))
        except JsonValueError as exc:
            message = f"{self.name} returned a value that is not JSON ({exc})"
            return ToolOutcome(
                content=message,
                is_error=True,
                error={"kind": "exception", "type": "JsonValueError", "message": message},
            )


@runtime_checkable
class ToolSource(Protocol):
    """Tools that come and go while a loop runs (e.g. the tools of MCP servers).

    A :class:`Toolset` that includes a source asks it for its current tools
    whenever it builds a request header or runs a call, and awaits
    :meth:`refresh` before every step, so a source can finish updating its
    list (re-listing a server's tools after a change notice) before the
    header is composed. ``tools`` must be cheap and must not block.

    A source may also have ``missing_tool(name) -> ToolOutcome | None``: the
    toolset asks it when the model calls a tool nobody offers any more, so
    the error can say why (an MCP server that went away) instead of only
    that the name is unknown.
    """

    def tools(self) -> Iterable[Tool]: ...

    async def refresh(self) -> None: ...


class _DaemonPool:
    """Worker threads that are daemons: a thread stuck in a tool is left behind
    at exit instead of being joined forever. Idle workers are reused (starting
    a thread per call costs about 0.1 ms); a call finding none idle starts one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = 0
        self._work: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._work.put(job)
        if start:
            threading.Thread(target=self._serve, name="tapelog-tool", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._work.get()()
            with self._lock:
                self._idle += 1


_POOL = _DaemonPool()


async def _in_daemon_thread(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``asyncio.to_thread``, but on a daemon thread (see :class:`_DaemonPool`).

    An abort cancels the await at once, but nothing can stop a thread stuck in
    a blocking call. The default executor's threads are joined when the event
    loop and the interpreter shut down, so one stuck tool would keep the
    process alive for good; a daemon thread is simply left behind.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled: nobody waits for it any more
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(function, *args, **kwargs)
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(settle, result, error)

    _POOL.submit(work)
    return await future


class _BadArguments(Exception):
    def __init__(self, type_name: str, message: str) -> None:
        self.type = type_name
        self.message = message


def _checked_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ToolError(
            f"tool name {name!r} is not valid: use 1 to 64 letters, digits, '_' or '-' "
            "(pass name=... to @tool)"
        )
    return name


def _decode_arguments(arguments: str) -> dict[str, Any]:
    """The model's raw arguments as a JSON object (:class:`_BadArguments` if they are not)."""
    # Some models send an empty string for a tool without arguments.
    if not arguments.strip():
        arguments = "{}"
    try:
        raw = decode(arguments, path="arguments")
    except JsonValueError as exc:
        raise _BadArguments("JsonValueError", exc.problem) from None
    if not isinstance(raw, dict):
        raise _BadArguments(
            "ValidationError", f"arguments must be a JSON object, not {_json_kind(raw)}"
        )
    return raw


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, requires_approval: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a :class:`Tool`.

    Use it bare (``@tool``) or with overrides (``@tool(name=..., description=...,
    requires_approval=True)``).
    """
    if function is not None:
        return Tool(function, name=name, description=description)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description, requires_approval=requires_approval)

    return decorate


class Toolset:
    """Tools keyed by name, in registration order; request order comes from :meth:`schemas`.

    The order sent to the model is deterministic and independent of how the
    tools were loaded: sorted by name unless an explicit order is given.

    Besides its own tools a toolset may include :class:`ToolSource` objects
    (``Toolset([read_file, servers])`` or :meth:`include`), whose tools it asks
    for each time: they change while a loop runs. On a name clash the
    toolset's own tool wins over a source's, and an earlier source's over a
    later one's; the hidden tool is simply not offered.
    """

    def __init__(self, tools: Iterable[Tool | ToolSource] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []
        for t in tools:
            if isinstance(t, Tool):
                self.add(t)
            else:
                self.include(t)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ToolError(
                f"the toolset already has a tool named {tool.name!r}; "
                "remove it first or give the new tool another name"
            )
        self._tools[tool.name] = tool

    def remove(self, name: str) -> Tool:
        try:
            return self._tools.pop(name)
        except KeyError:
            raise ToolError(f"the toolset has no tool named {name!r}") from None

    def include(self, source: ToolSource) -> None:
        """Offer ``source``'s tools too, as they are at each step."""
        if not isinstance(source, ToolSource):
            raise ToolError(
                f"{type(source).__name__} is neither a Tool nor a ToolSource; "
                "decorate a function with @tool to make it one"
            )
        if any(s is source for s in self._sources):
            raise ToolError("the toolset already includes this tool source")
        self._sources.append(source)

    @property
    def sources(self) -> tuple[ToolSource, ...]:
        return tuple(self._sources)

    async def refresh(self) -> None:
        """Let every source settle its list; the loop awaits this before each step."""
        for source in self._sources:
            await source.refresh()

    def _current(self) -> dict[str, Tool]:
        """Every tool offered now, by name: the toolset's own, then the sources'."""
        if not self._sources:
            return self._tools
        current = dict(self._tools)
        for source in self._sources:
            for t in source.tools():
                current.setdefault(t.name, t)
        return current

    def get(self, name: str) -> Tool | None:
        return self._current().get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._current()

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._current().values()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"Toolset({sorted(self._current())!r})"

    def schemas(self, order: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Tool schemas in request order.

        Without ``order``: sorted by name. With it: the named tools first, in
        that order, then any others sorted by name. Naming a tool twice or one
        the set does not have is an error.
        """
        tools = self._current()
        names = sorted(tools)
        if order is not None:
            if isinstance(order, str):
                raise ToolError("the tool order must be a sequence of names, not one string")
            seen: set[str] = set()
            for name in order:
                if name not in tools:
                    raise ToolError(f"the tool order names {name!r}, which the toolset lacks")
                if name in seen:
                    raise ToolError(f"the tool order names {name!r} twice")
                seen.add(name)
            names = [*order, *(n for n in names if n not in seen)]
        return [tools[n].schema() for n in names]

    async def run(self, name: str, arguments: str) -> ToolOutcome:
        """Run the named tool; an unknown name becomes an error outcome the model can fix."""
        tools = self._current()
        found = tools.get(name)
        if found is None:
            for source in self._sources:
                explain = getattr(source, "missing_tool", None)
                outcome = explain(name) if explain is not None else None
                if isinstance(outcome, ToolOutcome):
                    return outcome
            available = ", ".join(sorted(tools)) or "none"
            message = f"there is no tool named {name!r}; available tools: {available}"
            return ToolOutcome(
                content=message,
                is_error=True,
                error={"kind": "unknown_tool", "type": "ToolError", "message": message},
            )
        return await found.run(arguments)


def _describe_errors(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        msg = err["msg"][:1].lower() + err["msg"][1:]
        parts.append(f"{loc.lstrip('.')}: {msg}" if loc else msg)
    return "; ".join(parts)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"
