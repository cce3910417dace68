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
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import pydantic

from tapelog._errors import JsonValueError, ToolError
from tapelog.log import FrozenDict, decode, encode_str, freeze

__all__ = ["Tool", "ToolOutcome", "Toolset", "tool"]

_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ARGS_HEADER_RE = re.compile(r"(Args|Arguments):\s*")
_ARG_LINE_RE = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")

# JSON-schema keywords whose value maps names to subschemas, holds one subschema,
# or holds a list of subschemas; everything else (enum, const, default, examples,
# ...) is data, where a "title" key is content, not pydantic's noise.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_ONE = frozenset(
    {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
)
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})


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

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        name = name if name is not None else getattr(function, "__name__", "")
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ToolError(
                f"tool name {name!r} is not valid: use 1 to 64 letters, digits, '_' or '-' "
                "(pass name=... to @tool)"
            )
        self.function = function
        self.name = name
        summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
        self.description = description if description is not None else summary
        self._is_async = inspect.iscoroutinefunction(_hinted(function))
        self._params, self._model = _arguments_model(function, name, arg_docs)
        self.parameters: FrozenDict = _json_schema(self._model, name)
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
            return ToolOutcome(
                content=f"invalid arguments for {self.name}: {bad.message}",
                is_error=True,
                error={"kind": "invalid_arguments", "type": bad.type, "message": bad.message},
            )
        try:
            if self._is_async:
                result = await self.function(*args, **kwargs)
            else:
                result = await asyncio.to_thread(self.function, *args, **kwargs)
                if inspect.isawaitable(result):  # e.g. an object with an async __call__
                    result = await result
        except Exception as exc:
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
        return self._outcome(result)

    def _bind(self, arguments: str) -> tuple[list[Any], dict[str, Any]]:
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


class _BadArguments(Exception):
    def __init__(self, type_name: str, message: str) -> None:
        self.type = type_name
        self.message = message


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a :class:`Tool`.

    Use it bare (``@tool``) or with overrides (``@tool(name=..., description=...)``).
    """
    if function is not None:
        return Tool(function, name=name, description=description)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description)

    return decorate


class Toolset:
    """Tools keyed by name, in registration order; request order comes from :meth:`schemas`.

    The order sent to the model is deterministic and independent of how the
    tools were loaded: sorted by name unless an explicit order is given.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

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

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolset({sorted(self._tools)!r})"

    def schemas(self, order: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Tool schemas in request order.

        Without ``order``: sorted by name. With it: the named tools first, in
        that order, then any others sorted by name. Naming a tool twice or one
        the set does not have is an error.
        """
        names = sorted(self._tools)
        if order is not None:
            if isinstance(order, str):
                raise ToolError("the tool order must be a sequence of names, not one string")
            seen: set[str] = set()
            for name in order:
                if name not in self._tools:
                    raise ToolError(f"the tool order names {name!r}, which the toolset lacks")
                if name in seen:
                    raise ToolError(f"the tool order names {name!r} twice")
                seen.add(name)
            names = [*order, *(n for n in names if n not in seen)]
        return [self._tools[n].schema() for n in names]

    async def run(self, name: str, arguments: str) -> ToolOutcome:
        """Run the named tool; an unknown name becomes an error outcome the model can fix."""
        found = self._tools.get(name)
        if found is None:
            available = ", ".join(sorted(self._tools)) or "none"
            message = f"there is no tool named {name!r}; available tools: {available}"
            return ToolOutcome(
                content=message,
                is_error=True,
                error={"kind": "unknown_tool", "type": "ToolError", "message": message},
            )
        return await found.run(arguments)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """First paragraph (lines joined) and the Google-style ``Args:`` descriptions."""
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _ARGS_HEADER_RE.fullmatch(line.strip()):
            break
        summary.append(line.strip())
    args: dict[str, str] = {}
    start = next((i for i, ln in enumerate(lines) if _ARGS_HEADER_RE.fullmatch(ln.strip())), None)
    if start is not None:
        header_indent = _indent(lines[start])
        entry_indent: int | None = None
        current: str | None = None
        for line in lines[start + 1 :]:
            if not line.strip():
                continue
            indent = _indent(line)
            if indent <= header_indent:
                break  # the next section (Returns:, Raises:, ...)
            match = _ARG_LINE_RE.fullmatch(line.strip())
            if match and (entry_indent is None or indent == entry_indent):
                entry_indent = indent
                current = match.group(1)
                args[current] = match.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return " ".join(summary), args


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _arguments_model(
    function: Callable[..., Any], name: str, arg_docs: Mapping[str, str]
) -> tuple[list[tuple[str, inspect.Parameter]], type[pydantic.BaseModel]]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"tool {name} has no readable signature ({exc})") from None
    try:
        hints = typing.get_type_hints(_hinted(function), include_extras=True)
    except Exception as exc:
        raise ToolError(
            f"the type hints of tool {name} cannot be resolved ({exc}); "
            "define the types they name at module level"
        ) from None
    params: list[tuple[str, inspect.Parameter]] = []
    fields: dict[str, Any] = {}
    for i, param in enumerate(signature.parameters.values()):
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise ToolError(
                f"tool {name} cannot take *{param.name}: the model passes named arguments, "
                "so give each one a name and a type"
            )
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise ToolError(
                f"tool {name} cannot take **{param.name}: the model passes named arguments, "
                "so give each one a name and a type"
            )
        if param.name not in hints:
            raise ToolError(
                f"parameter {param.name!r} of tool {name} has no type hint; "
                "annotate it so the model knows what to send"
            )
        # Internal field names keep pydantic away from the user's names (underscores,
        # names shadowing BaseModel attributes); the alias is what the model sees.
        field = f"p{i}"
        default = ... if param.default is inspect.Parameter.empty else param.default
        extra: dict[str, Any] = {}
        if arg_docs.get(param.name):
            extra["description"] = arg_docs[param.name]
        fields[field] = (hints[param.name], pydantic.Field(default, alias=param.name, **extra))
        params.append((field, param))
    unknown = [a for a in arg_docs if a not in signature.parameters]
    if unknown:
        raise ToolError(
            f"the docstring of tool {name} describes {unknown[0]!r}, which is not a parameter; "
            "fix the Args: section"
        )
    try:
        model = pydantic.create_model(
            f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
    except Exception as exc:
        raise ToolError(f"the parameter types of tool {name} are not supported ({exc})") from None
    return params, typing.cast(type[pydantic.BaseModel], model)


def _hinted(function: Callable[..., Any]) -> Callable[..., Any]:
    """What carries the annotations: the wrapped function of a partial, or ``__call__``."""
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.isroutine(function) or inspect.isclass(function):
        return function
    call: Callable[..., Any] = type(function).__call__
    return call


def _json_schema(model: type[pydantic.BaseModel], name: str) -> FrozenDict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            schema = model.model_json_schema(by_alias=True, mode="validation")
        except Exception as exc:
            raise ToolError(
                f"the parameters of tool {name} cannot be described as JSON schema ({exc})"
            ) from None
    if caught:
        raise ToolError(f"the parameters of tool {name} lose information: {caught[0].message}")
    try:
        frozen: FrozenDict = freeze(_drop_titles(schema), path=f"tool {name} parameters")
    except JsonValueError as exc:
        raise ToolError(
            f"the parameter schema of tool {name} is not lossless JSON: {exc}"
        ) from None
    return frozen


def _drop_titles(schema: Any) -> Any:
    """Remove pydantic's generated ``title`` keywords, walking only schema positions."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _drop_titles(v) for k, v in value.items()}
        elif key in _SCHEMA_ONE:
            out[key] = _drop_titles(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_drop_titles(v) for v in value]
        else:
            out[key] = value
    return out


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
