"""Tool parameters as JSON schema: from a signature, its type hints and its docstring.

The schema is model-visible and logged in the request header, so it is built
once per tool and must be the same bytes every time: pydantic generates it (its
key order, parameters in signature order, is kept as is), and only pydantic's
generated ``title`` keywords are dropped to keep it compact.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import pydantic

from tapelog._errors import JsonValueError, ToolError
from tapelog.log._api import FrozenDict, freeze

__all__ = ["arguments_model", "hinted", "json_schema", "parse_docstring"]

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


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
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


def arguments_model(
    function: Callable[..., Any], name: str, arg_docs: Mapping[str, str]
) -> tuple[list[tuple[str, inspect.Parameter]], type[pydantic.BaseModel]]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"tool {name} has no readable signature ({exc})") from None
    try:
        hints = typing.get_type_hints(hinted(function), include_extras=True)
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


def hinted(function: Callable[..., Any]) -> Callable[..., Any]:
    """What carries the annotations: the wrapped function of a partial, or ``__call__``."""
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.isroutine(function) or inspect.isclass(function):
        return function
    call: Callable[..., Any] = type(function).__call__
    return call


def json_schema(model: type[pydantic.BaseModel], name: str) -> FrozenDict:
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
