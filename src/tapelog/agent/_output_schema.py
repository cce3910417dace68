"""Output schemas: compiling a pydantic model or a JSON schema dict, checking answers.

The pure half of structured output (:mod:`tapelog.agent._output` is the
turn): the schema the requests carry (pydantic's, without its generated
``title`` keywords, frozen so every request has the same bytes), the check of
an answer against it (a pydantic model validates JSON; a dict schema goes
through the ``jsonschema`` package, its draft taken from ``$schema``), and the
errors the model reads in a retry: a path and a message each, at most
``_MAX_ERRORS`` of them, each at most ``_MAX_ERROR_CHARS`` characters, never
the answer itself (it is already in the history).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pydantic

from tapelog._errors import JsonValueError, OutputError
from tapelog.agent._tool_schema import _SCHEMA_LISTS, _SCHEMA_MAPS, _SCHEMA_ONE, _drop_titles
from tapelog.log import decode
from tapelog.log._api import FrozenDict, freeze

__all__ = ["OutputSchema", "output_schema", "strict_default", "unfenced"]

_MAX_ERRORS: Final = 8
_MAX_ERROR_CHARS: Final = 200
_NAME_RE: Final = re.compile(r"[^a-zA-Z0-9_-]+")
_FENCE_RE: Final = re.compile(r"```[a-zA-Z]*[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


def _label(text: str) -> str:
    """A schema name the providers accept: 1-64 of ``[a-zA-Z0-9_-]``."""
    return (_NAME_RE.sub("_", text).strip("_") or "output")[:64]


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """A compiled output schema: its provider-facing name and description, the
    frozen JSON schema the requests carry, and how an answer is checked."""

    name: str
    description: str | None
    schema: FrozenDict
    model: type[pydantic.BaseModel] | None
    validator: Any  # a jsonschema validator for a dict schema

    def check(self, text: str) -> tuple[Any, list[str]]:
        """The validated value of the JSON ``text``, or the errors (bounded)."""
        try:
            value = decode(text, path="answer")
        except JsonValueError as exc:
            return None, [_clip(f"the answer is {exc.problem}")]
        if self.model is not None:
            try:
                return self.model.model_validate_json(text), []
            except pydantic.ValidationError as exc:
                return None, _pydantic_errors(exc)
        errors = sorted(self.validator.iter_errors(value), key=lambda e: [str(p) for p in e.path])
        if errors:
            return None, _bounded([f"{_where(e.absolute_path)}{e.message}" for e in errors])
        return value, []


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _bounded(errors: list[str]) -> list[str]:
    shown = [_clip(e) for e in errors[:_MAX_ERRORS]]
    if len(errors) > _MAX_ERRORS:
        shown.append(f"(and {len(errors) - _MAX_ERRORS} more)")
    return shown


def _where(path: Sequence[Any]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return f"{text}: " if text else ""


def _pydantic_errors(exc: pydantic.ValidationError) -> list[str]:
    # Only the location and the message: the offending input (model output) is
    # already in the history and is not repeated.
    return _bounded(
        [f"{_where(err['loc'])}{err['msg'][:1].lower()}{err['msg'][1:]}" for err in exc.errors()]
    )


def output_schema(
    target: Any, *, name: str | None = None, description: str | None = None
) -> OutputSchema:
    """Compile a pydantic model class or a JSON schema dict; an :class:`OutputError`
    says why one cannot be used."""
    if isinstance(target, type) and issubclass(target, pydantic.BaseModel):
        try:
            raw = target.model_json_schema(mode="validation")
            schema: FrozenDict = freeze(_drop_titles(raw), path="output schema")
        except Exception as exc:
            raise OutputError(
                f"the output type {target.__name__} cannot be described as JSON schema ({exc})."
            ) from None
        description = description or raw.get("description")
        return OutputSchema(_label(name or target.__name__), description, schema, target, None)
    if isinstance(target, Mapping):
        from jsonschema import exceptions, validators  # only dict schemas need it

        try:
            schema = freeze(dict(target), path="output schema")
            cls = validators.validator_for(schema)
            cls.check_schema(schema)
        except (JsonValueError, exceptions.SchemaError) as exc:
            message = exc.message if isinstance(exc, exceptions.SchemaError) else str(exc)
            raise OutputError(f"the output schema is not a valid JSON schema: {message}") from None
        title = schema.get("title")
        name = name or (title if isinstance(title, str) else "output")
        description = description or schema.get("description")
        return OutputSchema(_label(name), description, schema, None, cls(schema))
    raise OutputError(
        "output_type must be a pydantic model class, a JSON schema dict or an OutputSpec, "
        f"not {type(target).__name__}."
    )


def _closed(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts ``schema``: every object lists all its
    properties as required and sets ``additionalProperties: false``."""
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or not isinstance(props, Mapping):
            return False
        if sorted(schema.get("required", [])) != sorted(props):
            return False
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            inner: list[Any] = list(value.values())
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            inner = value
        elif key in _SCHEMA_ONE:
            inner = [value]
        else:
            continue
        if not all(_closed(v) for v in inner):
            return False
    return True


def strict_default(schema: Mapping[str, Any]) -> bool:
    """The automatic ``strict`` flag: an object root whose objects are all closed."""
    return bool(schema.get("type") == "object") and _closed(schema)


def unfenced(text: str) -> str:
    """The answer without surrounding whitespace or one markdown code fence around it."""
    text = text.strip()
    match = _FENCE_RE.fullmatch(text)
    return match.group(1).strip() if match else text
