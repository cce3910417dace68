"""Tool parameters as JSON schema: from a signature, its type hints and its docstring.

The schema is model-visible and logged in the request header, so it is built
once per tool and must be the same bytes every time: pydantic generates it (its
key order, parameters in signature order, is kept as is), and only pydantic's
generated ``title`` keywords are left out (:mod:`tapelog.agent._untitled_schema`)
to keep it compact. The descriptions come from the docstring
(:mod:`tapelog.agent._docstring`).
"""

from __future__ import annotations

import functools
import inspect
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import pydantic

from tapelog._errors import JsonValueError, ToolError
from tapelog.agent._tool_context import is_run_context
from tapelog.agent._untitled_schema import UntitledSchema
from tapelog.log._api import FrozenDict, freeze

__all__ = ["arguments_model", "hinted", "json_schema"]


def arguments_model(
    function: Callable[..., Any], name: str, arg_docs: Mapping[str, str]
) -> tuple[list[tuple[str, inspect.Parameter]], type[pydantic.BaseModel], str | None]:
    """The model of the arguments the model sends, with the parameters they fill,
    and the name of the parameter that takes the :class:`RunContext` (if any):
    that one is the agent's, so it is not part of the schema."""
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
    context: str | None = None
    for i, param in enumerate(signature.parameters.values()):
        if is_run_context(hints.get(param.name)):
            context = _context_param(name, param, context)
            continue
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
    unknown = [a for a in arg_docs if a not in signature.parameters or a == context]
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
    return params, typing.cast(type[pydantic.BaseModel], model), context


def _context_param(name: str, param: inspect.Parameter, seen: str | None) -> str:
    if seen is not None:
        raise ToolError(
            f"tool {name} declares two RunContext parameters ({seen!r} and {param.name!r}); "
            "one receives the context"
        )
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise ToolError(
            f"the RunContext parameter {param.name!r} of tool {name} is positional-only; "
            "the agent passes it by name, so drop the '/' before it"
        )
    return param.name


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
            schema = model.model_json_schema(
                by_alias=True, mode="validation", schema_generator=UntitledSchema
            )
        except Exception as exc:
            raise ToolError(
                f"the parameters of tool {name} cannot be described as JSON schema ({exc})"
            ) from None
    if caught:
        raise ToolError(f"the parameters of tool {name} lose information: {caught[0].message}")
    try:
        frozen: FrozenDict = freeze(schema, path=f"tool {name} parameters")
    except JsonValueError as exc:
        raise ToolError(
            f"the parameter schema of tool {name} is not lossless JSON: {exc}"
        ) from None
    return frozen
