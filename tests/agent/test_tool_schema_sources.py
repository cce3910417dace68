"""Where tool schemas come from: griffe's docstring parser and the untitled generator.

Both feed request bytes, so these pin what a regression would change: a
description joined differently, a pydantic title coming back, a ``title`` that
is content going missing, griffe's warnings reaching the terminal.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from tapelog.agent import tool
from tapelog.agent._docstring import parse_docstring
from tapelog.agent._output_schema import output_schema
from tapelog.agent._untitled_schema import UntitledSchema

# --- docstrings -------------------------------------------------------------------------

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz,.:()'", min_size=1, max_size=8).filter(
    lambda w: w[0].isalpha()
)
_LINE = st.lists(_WORD, min_size=1, max_size=5).map(" ".join)
_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)


@st.composite
def _google_docstrings(draw: st.DrawFn) -> tuple[str, str, dict[str, str]]:
    """A Google-style docstring and the summary and descriptions it should give:
    the reference is lines joined with one space."""
    summary = draw(st.lists(_LINE, min_size=1, max_size=3))
    names = draw(st.lists(_NAME, min_size=0, max_size=4, unique=True))
    lines = [*summary]
    if draw(st.booleans()):
        lines += ["", *draw(st.lists(_LINE, min_size=1, max_size=2))]  # a longer explanation
    expected: dict[str, str] = {}
    if names:
        lines += ["", "Args:" if draw(st.booleans()) else "Arguments:"]
        for name in names:
            first = draw(_LINE)
            more = draw(st.lists(_LINE, max_size=2))
            typed = f" ({draw(st.sampled_from(['int', 'str | None', 'list[int]']))})"
            lines.append(f"    {name}{typed if draw(st.booleans()) else ''}: {first}")
            lines += [f"        {line}" for line in more]
            expected[name] = " ".join([first, *more])
    if draw(st.booleans()):
        lines += ["", "Returns:", f"    {draw(_LINE)}"]
    return "\n".join(lines), " ".join(summary), expected


@settings(max_examples=150, deadline=None)
@given(_google_docstrings())
def test_docstrings_read_as_the_reference_joins_them(case: tuple[str, str, dict[str, str]]) -> None:
    doc, summary, args = case
    assert parse_docstring(doc) == (summary, args)


def test_continuation_lines_join_with_one_space() -> None:
    doc = (
        "Find.\n\nArgs:\n    query: What to look for,\n        over two lines.\n\n"
        "        And more.\n"
    )
    assert parse_docstring(doc) == (
        "Find.",
        {"query": "What to look for, over two lines. And more."},
    )


def test_args_right_below_the_summary_still_describe_the_parameters() -> None:
    doc = "Two line\nsummary.\nArgs:\n    x: The x."
    assert parse_docstring(doc) == ("Two line summary.", {"x": "The x."})


def test_only_args_and_arguments_sections_describe_parameters() -> None:
    doc = (
        "Do.\n\nParameters:\n    x: Not read.\n\n"
        "Arguments:\n    y: Read.\n\nArgs:\n    z: Not read (only the first section)."
    )
    assert parse_docstring(doc) == ("Do.", {"y": "Read."})


def test_summary_stops_at_a_blank_line_or_an_args_header_on_any_line() -> None:
    assert parse_docstring("Returns:\n    the time.") == ("Returns: the time.", {})
    assert parse_docstring("Args:\n    x: The x.") == ("", {"x": "The x."})
    assert parse_docstring("Args:") == ("", {})
    assert parse_docstring("  \nLater.") == ("", {})  # a whitespace-only first line


def test_an_args_header_in_a_code_block_is_code() -> None:
    doc = "Run it.\n\n```\nArgs:\n    x: Not a parameter.\n```\n"
    assert parse_docstring(doc) == ("Run it.", {})


def test_malformed_sections_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    doc = "Do.\n\nArgs:\n    no pair on this line\n    x:\n    y\nReturns:\n    what\n"
    assert parse_docstring(doc) == ("Do.", {"x": ""})
    assert caplog.records == []


# --- schemas ----------------------------------------------------------------------------


class Shade(enum.Enum):
    LIGHT = "light"
    DARK = "dark"


class Box(pydantic.BaseModel):
    """A box."""

    model_config = pydantic.ConfigDict(title="Crate")
    title: str = "untitled"
    size: int = pydantic.Field(3, title="Size In Cm", json_schema_extra={"x-meta": {"title": "m"}})


@dataclass
class Pair:
    left: int
    right: int


class Entry(TypedDict):
    title: str


_CONTENT_DEFAULT = {"title": "kept", "n": 1}


def _params(fn: Any) -> Any:
    return tool(fn).parameters


def test_no_title_keyword_anywhere_in_a_schema_position() -> None:
    def build(
        box: Box,
        pair: Pair,
        entry: Entry,
        shade: Shade = Shade.DARK,
        boxes: list[Box] | None = None,
        by_name: dict[str, Pair] | None = None,
    ) -> str:
        return ""

    params = _params(build)
    assert _schema_titles(params) == []
    assert set(params["$defs"]) == {"Box", "Pair", "Entry", "Shade"}
    assert list(params["$defs"]["Entry"]["properties"]) == ["title"]  # a property named title


def test_a_title_that_is_content_stays() -> None:
    def pick(
        kind: Literal["a"] = "a",
        meta: Annotated[
            dict[str, Any],
            pydantic.Field(
                examples=[{"title": "example"}], json_schema_extra={"x-note": {"title": "extra"}}
            ),
        ] = _CONTENT_DEFAULT,
        box: Box | None = None,
    ) -> str:
        return ""

    params = _params(pick)
    meta = params["properties"]["meta"]
    assert meta["default"] == {"title": "kept", "n": 1}
    assert meta["examples"] == [{"title": "example"}]
    assert meta["x-note"] == {"title": "extra"}
    assert params["$defs"]["Box"]["properties"]["size"]["x-meta"] == {"title": "m"}
    assert params["$defs"]["Box"]["properties"]["title"] == {
        "default": "untitled",
        "type": "string",
    }


def test_output_schema_of_a_model_has_no_titles_but_keeps_its_description() -> None:
    compiled = output_schema(Box)
    assert "title" not in compiled.schema
    assert compiled.description == "A box."
    assert _schema_titles(compiled.schema) == []


_MAPS = {"properties", "patternProperties", "$defs", "definitions"}
_ONE = {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
_LISTS = {"anyOf", "allOf", "oneOf", "prefixItems"}


def _schema_titles(schema: Any, path: str = "#") -> list[str]:
    """Where a ``title`` keyword (a string at a schema position) occurs."""
    if not isinstance(schema, dict):
        return []
    found = [path] if isinstance(schema.get("title"), str) else []
    for key, value in schema.items():
        if key in _MAPS and isinstance(value, dict):
            for name, sub in value.items():
                found += _schema_titles(sub, f"{path}/{key}/{name}")
        elif key in _ONE:
            found += _schema_titles(value, f"{path}/{key}")
        elif key in _LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                found += _schema_titles(sub, f"{path}/{key}/{i}")
    return found


def _without_titles(schema: Any) -> Any:
    """The reference: pydantic's default schema with every ``title`` keyword
    removed by walking the schema positions (what tapelog once did itself)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _MAPS and isinstance(value, dict):
            out[key] = {name: _without_titles(sub) for name, sub in value.items()}
        elif key in _ONE:
            out[key] = _without_titles(value)
        elif key in _LISTS and isinstance(value, list):
            out[key] = [_without_titles(sub) for sub in value]
        else:
            out[key] = value
    return out


_LEAVES: list[Any] = [int, str, float, bool, Shade, Box, Pair, Entry, Literal["a", "b"], Any]
_TYPES = st.recursive(
    st.sampled_from(_LEAVES),
    lambda inner: st.one_of(
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        inner.map(lambda t: t | None),
        st.tuples(inner, inner).map(lambda ts: tuple[ts[0], ts[1]]),  # type: ignore[valid-type]
        inner.map(lambda t: Annotated[t, pydantic.Field(title="User", description="d")]),
    ),
    max_leaves=4,
)


@settings(max_examples=120, deadline=None)
@given(st.lists(_TYPES, min_size=1, max_size=4))
def test_generated_schemas_equal_the_title_stripped_reference(types: list[Any]) -> None:
    fields: dict[str, Any] = {f"f{i}": (t, ...) for i, t in enumerate(types)}
    model = pydantic.create_model("M", **fields)
    generated = model.model_json_schema(mode="validation", schema_generator=UntitledSchema)
    assert generated == _without_titles(model.model_json_schema(mode="validation"))
    assert _schema_titles(generated) == []
