"""The @tool decorator, ToolOutcome and Toolset: schemas, validation, outcomes, order."""

import asyncio
import enum
import functools
import threading
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from tapelog import FrozenError, ToolError
from tapelog.agent import Tool, ToolOutcome, Toolset, tool
from tapelog.log._api import encode_str


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    """A point on the plane."""

    x: int
    title: str = "origin"


def _search(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "deep"] = "fast",
    tags: list[str] | None = None,
    color: Color = Color.RED,
    where: Point | None = None,
    extra: dict[str, int] | None = None,
    ratio: float = 0.5,
    exact: bool = False,
) -> dict[str, Any]:
    """Search the notes
    for a query.

    Longer explanation that stays out of the description.

    Args:
        query: What to look for,
            over two lines.
        limit (int): At most this many results.
        mode: How hard to look.

    Returns:
        The hits.
    """
    return {
        "query": query,
        "limit": limit,
        "mode": mode,
        "tags": tags,
        "color": color.value,
        "where": None if where is None else [type(where).__name__, where.x, where.title],
        "extra": extra,
        "ratio": ratio,
        "exact": exact,
    }


search = tool(name="search")(_search)

SEARCH_SCHEMA = (
    '{"name":"search","description":"Search the notes for a query.","parameters":{'
    '"$defs":{"Color":{"enum":["red","blue"],"type":"string"},'
    '"Point":{"description":"A point on the plane.","properties":{"x":{"type":"integer"},'
    '"title":{"default":"origin","type":"string"}},"required":["x"],"type":"object"}},'
    '"additionalProperties":false,"properties":{'
    '"query":{"description":"What to look for, over two lines.","type":"string"},'
    '"limit":{"default":10,"description":"At most this many results.","type":"integer"},'
    '"mode":{"default":"fast","description":"How hard to look.","enum":["fast","deep"],'
    '"type":"string"},'
    '"tags":{"anyOf":[{"items":{"type":"string"},"type":"array"},{"type":"null"}],"default":null},'
    '"color":{"$ref":"#/$defs/Color","default":"red"},'
    '"where":{"anyOf":[{"$ref":"#/$defs/Point"},{"type":"null"}],"default":null},'
    '"extra":{"anyOf":[{"additionalProperties":{"type":"integer"},"type":"object"},'
    '{"type":"null"}],"default":null},'
    '"ratio":{"default":0.5,"type":"number"},'
    '"exact":{"default":false,"type":"boolean"}},'
    '"required":["query"],"type":"object"}}'
)


# --- schemas -------------------------------------------------------------------------


def test_schema_bytes_are_exact_and_follow_parameter_order() -> None:
    assert encode_str(search.schema()) == SEARCH_SCHEMA
    assert list(search.schema()) == ["name", "description", "parameters"]
    assert list(search.parameters["properties"]) == [
        "query",
        "limit",
        "mode",
        "tags",
        "color",
        "where",
        "extra",
        "ratio",
        "exact",
    ]


def test_schema_is_identical_when_generated_again() -> None:
    again = tool(name="search")(_search)
    assert encode_str(again.schema()) == encode_str(search.schema()) == SEARCH_SCHEMA
    assert encode_str(search.schema()) == encode_str(search.schema())


def test_parameter_order_is_kept_not_sorted() -> None:
    @tool
    def pick(zeta: int, alpha: str) -> str:
        """Pick."""
        return alpha * zeta

    assert encode_str(pick.schema()) == (
        '{"name":"pick","description":"Pick.","parameters":{"additionalProperties":false,'
        '"properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},'
        '"required":["zeta","alpha"],"type":"object"}}'
    )


def test_schema_is_frozen() -> None:
    with pytest.raises(FrozenError, match="frozen"):
        search.schema()["name"] = "other"
    with pytest.raises(FrozenError, match="frozen"):
        search.parameters["properties"]["query"]["type"] = "integer"


def test_tool_without_parameters_or_docstring() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert encode_str(ping.schema()) == (
        '{"name":"ping","description":"","parameters":'
        '{"additionalProperties":false,"properties":{},"type":"object"}}'
    )


def test_parameter_named_like_pydantic_internals_and_title() -> None:
    @tool
    def odd(title: str, model_config: int, _hidden: bool = False) -> str:
        """Odd names are just names.

        Args:
            title: A parameter called title keeps its schema.
        """
        return f"{title}/{model_config}/{_hidden}"

    props = odd.parameters["properties"]
    assert list(props) == ["title", "model_config", "_hidden"]
    assert props["title"] == {
        "description": "A parameter called title keeps its schema.",
        "type": "string",
    }
    out = asyncio.run(odd.run('{"title": "t", "model_config": 2, "_hidden": true}'))
    assert out == ToolOutcome(content="t/2/True")


def test_annotated_field_constraints_reach_schema_and_validation() -> None:
    @tool
    def take(count: Annotated[int, Field(ge=1, le=5)]) -> int:
        """Take some."""
        return count

    assert take.parameters["properties"]["count"] == {
        "maximum": 5,
        "minimum": 1,
        "type": "integer",
    }
    out = asyncio.run(take.run('{"count": 9}'))
    assert (
        out.content == "invalid arguments for take: count: input should be less than or equal to 5"
    )


def test_name_and_description_overrides() -> None:
    @tool(name="find-notes", description="Find notes, fast.")
    def find(query: str) -> str:
        """Docstring summary that the override replaces.

        Args:
            query: The words.
        """
        return query

    assert isinstance(find, Tool)
    assert find.name == "find-notes"
    assert find.description == "Find notes, fast."
    assert find.parameters["properties"]["query"]["description"] == "The words."


def test_docstring_args_section_stops_at_next_section_and_keeps_args_only() -> None:
    @tool
    def summarise(text: str, words: int = 50) -> str:
        """Summarise text.

        Args:
            text: The text.
            words: Target length in words.
        Raises:
            ValueError: never really.
        """
        return text

    assert summarise.description == "Summarise text."
    props = summarise.parameters["properties"]
    assert props["text"]["description"] == "The text."
    assert props["words"]["description"] == "Target length in words."


# --- decoration-time refusals ------------------------------------------------------------


def test_refuses_var_positional() -> None:
    def many(*items: str) -> str:
        return ""

    with pytest.raises(ToolError) as info:
        tool(many)
    assert str(info.value) == (
        "tool many cannot take *items: the model passes named arguments, "
        "so give each one a name and a type"
    )


def test_refuses_var_keyword() -> None:
    def loose(a: int, **options: str) -> str:
        return ""

    with pytest.raises(ToolError) as info:
        tool(loose)
    assert str(info.value) == (
        "tool loose cannot take **options: the model passes named arguments, "
        "so give each one a name and a type"
    )


def test_refuses_parameter_without_type_hint() -> None:
    def vague(a: int, b) -> str:  # type: ignore[no-untyped-def]
        return ""

    with pytest.raises(ToolError) as info:
        tool(vague)
    assert str(info.value) == (
        "parameter 'b' of tool vague has no type hint; annotate it so the model knows what to send"
    )


@pytest.mark.parametrize("name", ["has space", "", "x" * 65, "dotted.name", "<lambda>"])
def test_refuses_bad_names(name: str) -> None:
    def fine() -> str:
        return ""

    with pytest.raises(ToolError) as info:
        tool(name=name)(fine)
    assert str(info.value) == (
        f"tool name {name!r} is not valid: use 1 to 64 letters, digits, '_' or '-' "
        "(pass name=... to @tool)"
    )


def test_lambda_needs_a_name() -> None:
    with pytest.raises(ToolError, match=r"tool name '<lambda>' is not valid"):
        tool(lambda: "x")
    assert tool(name="x" * 64)(lambda: "x").name == "x" * 64


def test_refuses_docstring_naming_a_missing_parameter() -> None:
    def drift(path: str) -> str:
        """Drifted docs.

        Args:
            pth: The path.
        """
        return path

    with pytest.raises(ToolError) as info:
        tool(drift)
    assert str(info.value) == (
        "the docstring of tool drift describes 'pth', which is not a parameter; "
        "fix the Args: section"
    )


def test_refuses_types_without_json_schema() -> None:
    class Opaque:
        pass

    def uses(thing: Opaque) -> str:
        return ""

    with pytest.raises(ToolError, match=r"^the parameter types of tool uses are not supported \("):
        tool(uses)


def test_refuses_default_that_is_not_json() -> None:
    def defaults(level: float = float("nan")) -> str:
        return ""

    with pytest.raises(ToolError) as info:
        tool(defaults)
    assert str(info.value).startswith(
        "the parameter schema of tool defaults is not lossless JSON: "
    )
    assert "NaN and infinities are refused" in str(info.value)


# --- running -------------------------------------------------------------------------------


async def test_valid_call_converts_types_and_uses_function_defaults() -> None:
    out = await search.run('{"query": "cats", "color": "blue", "where": {"x": 3}}')
    assert out == ToolOutcome(
        content='{"query":"cats","limit":10,"mode":"fast","tags":null,"color":"blue",'
        '"where":["Point",3,"origin"],"extra":null,"ratio":0.5,"exact":false}'
    )


async def test_sync_function_runs_in_a_worker_thread() -> None:
    seen: list[int] = []

    @tool
    def where_am_i() -> str:
        """Report the thread."""
        seen.append(threading.get_ident())
        return "ok"

    assert await where_am_i.run("{}") == ToolOutcome(content="ok")
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


async def test_async_function_is_awaited_on_the_loop() -> None:
    @tool
    async def later(n: int) -> str:
        """Wait a tick."""
        await asyncio.sleep(0)
        return f"thread={threading.get_ident()} n={n}"

    out = await later.run('{"n": 4}')
    assert out == ToolOutcome(content=f"thread={threading.get_ident()} n=4")


async def test_return_values() -> None:
    @tool
    def as_list() -> list[Any]:
        return ["é", 1, {"b": 2, "a": None}]

    @tool
    def as_none() -> None:
        return None

    @tool
    def as_model() -> Point:
        return Point(x=1)

    @tool
    def as_outcome() -> ToolOutcome:
        return ToolOutcome(content="done", additional_context="note: the cache was warm")

    @tool
    def as_set() -> Any:
        return {1, 2}

    assert await as_list.run("{}") == ToolOutcome(content='["é",1,{"b":2,"a":null}]')
    assert await as_none.run("{}") == ToolOutcome(content="null")
    assert await as_model.run("{}") == ToolOutcome(content='{"x":1,"title":"origin"}')
    assert await as_outcome.run("{}") == ToolOutcome(
        content="done", additional_context="note: the cache was warm"
    )
    bad = await as_set.run("{}")
    message = "as_set returned a value that is not JSON (result: set is not a JSON type)"
    assert bad == ToolOutcome(
        content=message,
        is_error=True,
        error={"kind": "exception", "type": "JsonValueError", "message": message},
    )


async def test_empty_arguments_mean_no_arguments() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert await ping.run("") == ToolOutcome(content="pong")
    assert await ping.run("  ") == ToolOutcome(content="pong")


async def test_missing_argument_is_an_error_outcome() -> None:
    @tool
    def read_file(path: str) -> str:
        return path

    out = await read_file.run("{}")
    assert out == ToolOutcome(
        content="invalid arguments for read_file: path: field required",
        is_error=True,
        error={
            "kind": "invalid_arguments",
            "type": "ValidationError",
            "message": "path: field required",
        },
    )


async def test_invalid_arguments_name_every_problem_with_its_location() -> None:
    out = await search.run('{"query": "a", "limit": "many", "where": {"x": "y"}, "zz": 1}')
    detail = (
        "limit: input should be a valid integer, unable to parse string as an integer; "
        "where.x: input should be a valid integer, unable to parse string as an integer; "
        "zz: extra inputs are not permitted"
    )
    assert out.content == f"invalid arguments for search: {detail}"
    assert out.is_error
    assert out.error == {"kind": "invalid_arguments", "type": "ValidationError", "message": detail}


async def test_list_index_in_error_location() -> None:
    out = await search.run('{"query": "a", "tags": ["ok", 5]}')
    assert out.content == "invalid arguments for search: tags[1]: input should be a valid string"


async def test_bad_json_is_an_error_outcome() -> None:
    out = await search.run('{"query": "a", ')
    detail = "not valid JSON (unexpected end of data: line 1 column 16 (char 15))"
    assert out == ToolOutcome(
        content=f"invalid arguments for search: {detail}",
        is_error=True,
        error={"kind": "invalid_arguments", "type": "JsonValueError", "message": detail},
    )


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [("[1]", "an array"), ('"q"', "a string"), ("3", "a number"), ("null", "null")],
)
async def test_arguments_must_be_an_object(arguments: str, kind: str) -> None:
    out = await search.run(arguments)
    assert (
        out.content == f"invalid arguments for search: arguments must be a JSON object, not {kind}"
    )
    assert out.is_error


async def test_exception_in_function_is_an_error_outcome() -> None:
    @tool
    def divide(a: int, b: int) -> float:
        """Divide."""
        return a / b

    out = await divide.run('{"a": 1, "b": 0}')
    assert out == ToolOutcome(
        content="divide failed with ZeroDivisionError: division by zero",
        is_error=True,
        error={"kind": "exception", "type": "ZeroDivisionError", "message": "division by zero"},
    )


async def test_tool_error_message_reaches_the_model_verbatim() -> None:
    @tool
    async def guarded(path: str) -> str:
        raise ToolError(f"path {path!r} is outside the workspace")

    out = await guarded.run('{"path": "../x"}')
    assert out == ToolOutcome(
        content="path '../x' is outside the workspace",
        is_error=True,
        error={
            "kind": "exception",
            "type": "ToolError",
            "message": "path '../x' is outside the workspace",
        },
    )


async def test_cancellation_is_not_swallowed() -> None:
    @tool
    async def forever() -> str:
        await asyncio.sleep(60)
        return "never"

    task = asyncio.create_task(forever.run("{}"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_positional_only_parameters_are_bound() -> None:
    @tool
    def join(a: str, /, b: str = "-", *, c: str = "!") -> str:
        return a + b + c

    assert await join.run('{"a": "x", "c": "?"}') == ToolOutcome(content="x-?")


def test_tool_outcome_validation() -> None:
    with pytest.raises(ToolError) as info:
        ToolOutcome(content=3)  # type: ignore[arg-type]
    assert str(info.value) == (
        "ToolOutcome.content must be a str, not int; encode structured results as JSON text"
    )
    outcome = ToolOutcome(content="x", is_error=True, error={"kind": "exception"})
    with pytest.raises(FrozenError):
        outcome.error["kind"] = "other"  # type: ignore[index]


# --- Toolset -------------------------------------------------------------------------------


def _named(name: str) -> Tool:
    def fn() -> str:
        return name

    return tool(name=name, description=f"tool {name}")(fn)


def test_toolset_schemas_are_sorted_regardless_of_registration_order() -> None:
    one = Toolset([_named("write"), _named("alpha"), _named("list")])
    two = Toolset([_named("list"), _named("write"), _named("alpha")])
    assert [s["name"] for s in one.schemas()] == ["alpha", "list", "write"]
    assert encode_str(one.schemas()) == encode_str(two.schemas())
    assert [t.name for t in one] == ["write", "alpha", "list"]  # iteration: registration order


def test_toolset_explicit_order_then_the_rest_sorted() -> None:
    tools = Toolset([_named("c"), _named("a"), _named("d"), _named("b")])
    assert [s["name"] for s in tools.schemas(["d", "b", "c", "a"])] == ["d", "b", "c", "a"]
    assert [s["name"] for s in tools.schemas(["d"])] == ["d", "a", "b", "c"]
    assert [s["name"] for s in tools.schemas([])] == ["a", "b", "c", "d"]


def test_toolset_explicit_order_refusals() -> None:
    tools = Toolset([_named("a"), _named("b")])
    with pytest.raises(ToolError) as info:
        tools.schemas(["b", "zz"])
    assert str(info.value) == "the tool order names 'zz', which the toolset lacks"
    with pytest.raises(ToolError) as info:
        tools.schemas(["b", "b"])
    assert str(info.value) == "the tool order names 'b' twice"
    with pytest.raises(ToolError) as info:
        tools.schemas("ab")
    assert str(info.value) == "the tool order must be a sequence of names, not one string"


def test_toolset_add_remove_get_contains() -> None:
    tools = Toolset()
    a = _named("a")
    tools.add(a)
    assert "a" in tools
    assert "b" not in tools
    assert tools.get("a") is a
    assert tools.get("b") is None
    assert len(tools) == 1
    with pytest.raises(ToolError) as info:
        tools.add(_named("a"))
    assert str(info.value) == (
        "the toolset already has a tool named 'a'; "
        "remove it first or give the new tool another name"
    )
    assert tools.remove("a") is a
    assert "a" not in tools
    with pytest.raises(ToolError) as info:
        tools.remove("a")
    assert str(info.value) == "the toolset has no tool named 'a'"


def test_toolset_rejects_duplicates_at_construction() -> None:
    with pytest.raises(ToolError, match="already has a tool named 'x'"):
        Toolset([_named("x"), _named("x")])


async def test_toolset_run_dispatches_and_reports_unknown_tools() -> None:
    tools = Toolset([_named("b"), _named("a")])
    assert await tools.run("b", "{}") == ToolOutcome(content="b")
    message = "there is no tool named 'zz'; available tools: a, b"
    assert await tools.run("zz", "{}") == ToolOutcome(
        content=message,
        is_error=True,
        error={"kind": "unknown_tool", "type": "ToolError", "message": message},
    )
    empty = await Toolset().run("zz", "{}")
    assert empty.content == "there is no tool named 'zz'; available tools: none"


async def test_callable_object_with_async_call_is_awaited() -> None:
    class Greeter:
        """Greet someone."""

        async def __call__(self, who: str) -> str:
            return f"hello {who}"

    greet = tool(name="greet")(Greeter())
    assert greet.description == "Greet someone."
    assert await greet.run('{"who": "ada"}') == ToolOutcome(content="hello ada")


async def test_partial_keeps_the_remaining_parameters() -> None:
    def scale(factor: int, value: int) -> int:
        return factor * value

    triple = tool(name="triple", description="Triple a value.")(functools.partial(scale, 3))
    assert list(triple.parameters["properties"]) == ["value"]
    assert await triple.run('{"value": 5}') == ToolOutcome(content="15")
