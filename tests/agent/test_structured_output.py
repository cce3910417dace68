"""Structured output end to end: ``Agent.run(prompt, output_type=...)`` on the emulator.

Each wire asks for the schema its own way (OpenAI ``response_format`` JSON
schema, DeepSeek ``json_object`` plus a logged instruction, an Anthropic forced
tool), validates the answer, logs a model-visible retry when it does not
validate, and every request the emulator received is the rebuild from the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tapelog import OutputError, Session
from tapelog.agent import CompactionPolicy, Hooks, OutputSpec, TurnEnd
from tapelog.agent._output import OUTPUT_TOOL, _insert
from tapelog.agent._output_schema import output_schema, strict_default, unfenced
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.llm import encode_request
from tapelog.log import decode
from tapelog.log._api import EpochHeader, LlmCallConfig, apply_header_delta, diff_header
from tapelog.request._api import rebuild_requests
from tapelog.store import JsonlStore

from ._harness import add, agent_on, assert_bytes_rebuild

WIRES = ["openai", "deepseek", "anthropic"]


class Weather(pydantic.BaseModel):
    """The weather in one city."""

    city: str
    temp_c: int


PERSON_SCHEMA: dict[str, Any] = {
    "title": "Person",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}

GOOD = '{"city": "Paris", "temp_c": 21}'


def _answer(provider: str, arguments: str) -> dict[str, Any]:
    """A structured answer when the agent has other tools too: Anthropic then
    forces "any" tool, so the emulator cannot tell the output tool; script its call."""
    if provider == "anthropic":
        return {"tool_calls": [{"name": OUTPUT_TOOL, "arguments": arguments}]}
    return {"output": arguments}


def _bodies(emulator: Emulator) -> list[dict[str, Any]]:
    return [decode(r.body) for r in emulator.received]


def _of(session: Session, kind: str) -> list[Any]:
    return [e for e in session.events if e.type == kind]


def _context_kinds(session: Session) -> list[str]:
    return [e.data["source"]["kind"] for e in _of(session, "context/message")]


def _assert_asks_for_schema(
    provider: str, body: dict[str, Any], name: str, *, others: bool = False
) -> None:
    """The request body carries the provider's structured-output fields (``others``:
    the agent has tools of its own, so Anthropic forces "any" tool, not the output tool)."""
    if provider == "openai":
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["name"] == name
        assert fmt["json_schema"]["schema"]["type"] == "object"
        assert "tool_choice" not in body
    elif provider == "deepseek":
        assert body["response_format"] == {"type": "json_object"}
    else:
        forced = {"type": "any"} if others else {"type": "tool", "name": OUTPUT_TOOL}
        assert body["tool_choice"] == forced
        tools = {t["name"]: t for t in body["tools"]}
        assert tools[OUTPUT_TOOL]["input_schema"]["type"] == "object"
        assert "response_format" not in body


# --- a valid answer is returned -------------------------------------------------------------


@pytest.mark.parametrize("provider", WIRES)
async def test_a_pydantic_model_output_validates_and_is_returned(provider: str) -> None:
    emulator = Emulator(script=[{"output": GOOD}])
    async with agent_on(emulator, provider=provider) as agent:
        result = await agent.run("Weather in Paris?", output_type=Weather)
    assert result.ok, result.reason
    assert result.output == Weather(city="Paris", temp_c=21)
    assert result.steps == 1
    (body,) = _bodies(emulator)
    _assert_asks_for_schema(provider, body, "Weather")
    session = agent.session
    if provider == "anthropic":
        # The forced call is answered, so every later request stays valid.
        (call,) = _of(session, "tool/call")
        (answer,) = _of(session, "tool/result")
        assert call.data["name"] == OUTPUT_TOOL
        assert answer.data["call_id"] == call.data["call_id"]
        assert answer.data["is_error"] is False
    else:
        assert not _of(session, "tool/call")
    # DeepSeek's JSON mode needs the schema (and the word "json") in the prompt: logged.
    expected = ["output-instructions"] if provider == "deepseek" else []
    assert _context_kinds(session) == expected
    assert_bytes_rebuild(session, emulator)


@pytest.mark.parametrize("provider", WIRES)
async def test_a_json_schema_dict_output_is_the_validated_json_value(provider: str) -> None:
    emulator = Emulator(script=[{"output": '{"name": "Ada", "age": 36}'}])
    async with agent_on(emulator, provider=provider) as agent:
        result = await agent.run("Who wrote the first program?", output_type=PERSON_SCHEMA)
    assert result.ok, result.reason
    assert result.output == {"name": "Ada", "age": 36}
    (body,) = _bodies(emulator)
    _assert_asks_for_schema(provider, body, "Person")
    if provider == "openai":
        # Closed objects with every property required: OpenAI's strict mode applies.
        assert body["response_format"]["json_schema"]["strict"] is True
    assert_bytes_rebuild(agent.session, emulator)


# --- a bad answer gets one logged retry ----------------------------------------------------


@pytest.mark.parametrize("provider", WIRES)
async def test_an_invalid_answer_gets_one_logged_retry_then_validates(provider: str) -> None:
    emulator = Emulator(script=[{"output": '{"city": "Paris"}'}, {"output": GOOD}])
    async with agent_on(emulator, provider=provider) as agent:
        result = await agent.run("Weather in Paris?", output_type=Weather)
    assert result.ok, result.reason
    assert result.output == Weather(city="Paris", temp_c=21)
    assert result.steps == 2
    session = agent.session
    bodies = _bodies(emulator)
    assert len(bodies) == 2
    if provider == "anthropic":
        # The retry is the forced call's error result, which the model reads.
        results = _of(session, "tool/result")
        assert [r.data["is_error"] for r in results] == [True, False]
        assert results[0].data["error"]["kind"] == "invalid_output"
        assert "temp_c" in results[0].data["content"]
        assert "output-validation" not in _context_kinds(session)
    else:
        (retry,) = [
            e
            for e in _of(session, "context/message")
            if e.data["source"]["kind"] == "output-validation"
        ]
        text = retry.data["content"][0]["text"]
        assert "temp_c: field required" in text
        # The retry is model-visible: the second request ends with it.
        last = bodies[1]["messages"][-1]
        assert last["role"] == "user"
        assert "temp_c" in str(last["content"])
    for body in bodies:
        _assert_asks_for_schema(provider, body, "Weather")
    assert_bytes_rebuild(session, emulator)


@pytest.mark.parametrize("provider", WIRES)
async def test_exhausted_retries_end_the_turn_with_an_error_reason(provider: str) -> None:
    # Anthropic tool inputs are always JSON objects: there the answer breaks the schema.
    bad = {"output": '{"city": 5}' if provider == "anthropic" else "not json at all"}
    emulator = Emulator(script=[bad, bad, {"text": "plain"}])
    async with agent_on(emulator, provider=provider) as agent:
        result = await agent.run("Weather?", output_type=OutputSpec(Weather, retries=1))
        assert not result.ok
        assert result.output is None
        assert result.reason["kind"] == "error"
        error = result.reason["error"]
        assert error["type"] == "OutputValidationError"
        assert "output schema Weather (2 answers, 1 retries)" in error["message"]
        assert result.steps == 2
        # The history stays valid on the wire: a plain turn after it is answered.
        after = await agent.run("Never mind.")
    assert after.ok
    assert after.text == "plain"
    assert all(r.status == 200 for r in emulator.received)
    assert_bytes_rebuild(agent.session, emulator)


# --- the header goes back after the turn ---------------------------------------------------


@pytest.mark.parametrize("provider", WIRES)
async def test_the_next_plain_turn_goes_back_to_the_normal_config(provider: str) -> None:
    script = [{"text": "hi"}, _answer(provider, GOOD), {"text": "bye"}, {"text": "ok"}]
    emulator = Emulator(script=script)
    async with agent_on(emulator, provider=provider, tools=[add]) as agent:
        await agent.run("Hello.")
        structured = await agent.run("Weather?", output_type=Weather)
        await agent.run("Thanks.")
        await agent.run("Again.")
    assert structured.output == Weather(city="Paris", temp_c=21)
    plain, asked, back, again = _bodies(emulator)
    _assert_asks_for_schema(provider, asked, "Weather", others=True)
    # Anthropic keeps the output tool for the session (its wire profile's
    # sticky_output_tool): the tool list stays, so the cached prefix does.
    kept = provider == "anthropic"
    for body in (back, again):
        assert "response_format" not in body
        assert "tool_choice" not in body
        names = [t.get("name", t.get("function", {}).get("name")) for t in body["tools"]]
        assert names == (["add", OUTPUT_TOOL] if kept else ["add"])
    assert back["tools"] == (asked if kept else plain)["tools"]
    # One header delta into the structured turn, one out of it (Anthropic: the
    # tool_choice only), none after.
    headers = [e.type for e in agent.session.events if e.type.startswith("request/header")]
    assert headers == ["request/header", "request/header-delta", "request/header-delta"]
    assert "response_format" not in agent.config.extras
    assert_bytes_rebuild(agent.session, emulator)


async def test_without_tools_anthropic_keeps_the_output_tool_uncallable() -> None:
    """Anthropic refuses a history with tool blocks and no tools: the output
    tool stays, with ``tool_choice: none``, and that does not change again."""
    emulator = Emulator(script=[{"output": GOOD}, {"text": "bye"}, {"text": "ok"}])
    async with agent_on(emulator, provider="anthropic") as agent:
        await agent.run("Weather?", output_type=Weather)
        await agent.run("Thanks.")
        await agent.run("Again.")
    asked, back, again = _bodies(emulator)
    assert all(r.status == 200 for r in emulator.received)
    for body in (back, again):
        assert body["tool_choice"] == {"type": "none"}
        assert [t["name"] for t in body["tools"]] == [OUTPUT_TOOL]
        assert body["tools"] == asked["tools"]  # the same bytes: the cached prefix holds
    headers = [e.type for e in agent.session.events if e.type.startswith("request/header")]
    assert headers == ["request/header", "request/header-delta"]
    assert_bytes_rebuild(agent.session, emulator)


# --- with the agent's own tools --------------------------------------------------------------


@pytest.mark.parametrize("provider", WIRES)
async def test_the_model_may_use_tools_before_it_answers(provider: str) -> None:
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": 20, "b": 1}'}]},
            _answer(provider, GOOD),
        ]
    )
    async with agent_on(emulator, provider=provider, tools=[add]) as agent:
        result = await agent.run("Weather in Paris, computed?", output_type=Weather)
    assert result.ok, result.reason
    assert result.output == Weather(city="Paris", temp_c=21)
    assert result.steps == 2
    first, _ = _bodies(emulator)
    if provider == "anthropic":
        # Other tools are offered too: "any" tool, and the answer ends the turn.
        assert first["tool_choice"] == {"type": "any"}
        assert sorted(t["name"] for t in first["tools"]) == ["add", OUTPUT_TOOL]
    assert _of(agent.session, "tool/result")[0].data["content"] == "21"
    assert_bytes_rebuild(agent.session, emulator)


# --- the stored log rebuilds with the audit commands ---------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_tapelog_requests_rebuilds_every_structured_request(
    provider: str, tmp_path: Path
) -> None:
    store = JsonlStore(tmp_path / "store")
    session = Session()
    writer = store.create(session)
    emulator = Emulator(script=[{"output": '{"city": 1}'}, {"output": GOOD}, {"text": "ok"}])
    async with agent_on(emulator, provider=provider, session=session, writer=writer) as agent:
        await agent.run("Weather?", output_type=Weather)
        await agent.run("Thanks.")
    writer.close()
    runner = CliRunner()
    root = str(tmp_path / "store")
    verified = runner.invoke(cli, ["verify", session.id, "--store", root], obj={})
    assert verified.exit_code == 0, verified.output
    listed = runner.invoke(cli, ["requests", session.id, "--json", "--store", root], obj={})
    assert listed.exit_code == 0, listed.output
    rebuilt = decode(listed.stdout)
    assert len(rebuilt) == len(emulator.received) == 3
    loaded = store.load(session.id).session
    assert_bytes_rebuild(loaded, emulator)


# --- refused before anything is logged ------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "output_type", "config", "says"),
    [
        ("deepseek", OutputSpec(Weather, mode="json_schema"), {}, "unavailable now"),
        ("anthropic", OutputSpec(Weather, mode="json_object"), {}, "no response_format"),
        ("openai", Weather, {"extras": {"response_format": {"type": "text"}}}, "response_format"),
        ("openai", {"type": "nope"}, {}, "not a valid JSON schema"),
        ("anthropic", {"type": "array"}, {}, "object schema"),
        ("openai", int, {}, "pydantic model class"),
    ],
)
async def test_an_unusable_output_type_is_refused_before_anything_is_logged(
    provider: str, output_type: Any, config: dict[str, Any], says: str
) -> None:
    emulator = Emulator()
    async with agent_on(emulator, provider=provider, config=config) as agent:
        with pytest.raises(OutputError, match=says):
            await agent.run("Weather?", output_type=output_type)
    assert len(agent.session.events) == 0
    assert not emulator.received


async def test_a_request_hook_sees_the_config_without_the_output_fields() -> None:
    seen: list[LlmCallConfig] = []

    def hook(config: LlmCallConfig) -> LlmCallConfig:
        seen.append(config)
        return config.replace(temperature=0.5)

    emulator = Emulator(script=[{"output": "{}"}, {"output": GOOD}])
    async with agent_on(emulator, provider="openai", hooks=Hooks(request=hook)) as agent:
        result = await agent.run("Weather?", output_type=Weather)
    assert result.ok
    assert all("response_format" not in c.extras for c in seen)
    assert all(b["temperature"] == 0.5 and "response_format" in b for b in _bodies(emulator))
    assert_bytes_rebuild(agent.session, emulator)


# --- the pure parts ---------------------------------------------------------------------------


def test_strict_is_on_only_for_closed_object_schemas() -> None:
    assert strict_default(PERSON_SCHEMA)
    assert not strict_default({**PERSON_SCHEMA, "additionalProperties": True})
    assert not strict_default({**PERSON_SCHEMA, "required": ["name"]})
    nested = {
        **PERSON_SCHEMA,
        "properties": {"pet": {"type": "object", "properties": {"n": {"type": "string"}}}},
        "required": ["pet"],
    }
    assert not strict_default(nested)
    assert not strict_default({"type": "array", "items": {"type": "string"}})


def test_the_errors_a_retry_shows_are_bounded() -> None:
    """At most 8 errors of at most 200 characters: a huge bad answer stays small."""
    names = [f"field{i}" for i in range(20)]
    schema = output_schema(
        {
            "type": "object",
            "properties": {n: {"type": "integer"} for n in names},
            "required": names,
        }
    )
    value, errors = schema.check('{"field0": "' + "x" * 5000 + '"}')
    assert value is None
    assert len(errors) == 9
    assert errors[-1] == "(and 12 more)"
    assert "'field1' is a required property" in errors
    # An error quoting a huge value is cut to 200 characters.
    _, (long,) = output_schema({"type": "integer"}).check('"' + "x" * 5000 + '"')
    assert len(long) == 200
    assert long.endswith("...")
    _, (bad,) = schema.check("[1,")
    assert bad.startswith("the answer is not valid JSON")


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
        max_leaves=10,
    ),
    fence=st.sampled_from(["", "json", "JSON"]),
    pad=st.sampled_from(["", " ", "\n\n"]),
)
def test_unfenced_gives_back_the_json_inside_one_code_fence(
    value: Any, fence: str, pad: str
) -> None:
    from tapelog.log._api import encode_str

    text = encode_str(value)
    assert unfenced(pad + text + pad) == text
    assert decode(unfenced(f"{pad}```{fence}\n{text}\n```{pad}")) == value


_NAMES = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)


@given(names=st.lists(_NAMES, unique=True, max_size=6), ordered=st.booleans())
def test_adding_the_output_tool_is_always_a_header_delta(names: list[str], ordered: bool) -> None:
    """Placed where a delta's ``add`` puts it, so the recorder never needs a snapshot."""
    names = [n for n in names if n != OUTPUT_TOOL]
    if ordered:
        names.sort()
    config = LlmCallConfig(provider="openai", model="m")
    tools = [{"name": n, "parameters": {"type": "object"}} for n in names]
    before = EpochHeader(config=config, tools=tools)
    output = {"name": OUTPUT_TOOL, "parameters": {"type": "object"}}
    after = EpochHeader(config=config, tools=_insert(tools, output))
    delta = diff_header(before, after)
    assert delta is not None
    assert apply_header_delta(before, delta) == after
    assert [t["name"] for t in after.tools].count(OUTPUT_TOOL) == 1


# --- explicit modes and resume -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "fields", "kinds"),
    [
        ("tool", {"tool_choice": {"type": "function", "function": {"name": OUTPUT_TOOL}}}, []),
        ("prompted", {}, ["output-instructions"]),
        ("json_object", {"response_format": {"type": "json_object"}}, ["output-instructions"]),
    ],
)
async def test_an_explicit_mode_on_the_openai_wire(
    mode: str, fields: dict[str, Any], kinds: list[str]
) -> None:
    emulator = Emulator(script=[{"output": GOOD}])
    async with agent_on(emulator, provider="openai") as agent:
        result = await agent.run("Weather?", output_type=OutputSpec(Weather, mode=mode))
    assert result.output == Weather(city="Paris", temp_c=21)
    (body,) = _bodies(emulator)
    for key in ("response_format", "tool_choice"):
        assert body.get(key) == fields.get(key)
    assert _context_kinds(agent.session) == kinds
    if mode == "tool":
        assert [t["function"]["name"] for t in body["tools"]] == [OUTPUT_TOOL]
    else:
        assert "tools" not in body
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_resumed_agent_keeps_the_log_valid_after_a_structured_turn(
    tmp_path: Path,
) -> None:
    """A new loop instance over the stored log shapes the same way: Anthropic's
    output tool stays (no tools of its own), so the resumed request is accepted."""
    store = JsonlStore(tmp_path / "store")
    session = Session()
    writer = store.create(session)
    emulator = Emulator(script=[{"output": GOOD}, {"text": "resumed"}])
    async with agent_on(emulator, provider="anthropic", session=session, writer=writer) as agent:
        await agent.run("Weather?", output_type=Weather)
    writer.close()
    loaded, writer = store.open(session.id)
    async with agent_on(emulator, provider="anthropic", session=loaded, writer=writer) as again:
        result = await again.run("Thanks.")
    writer.close()
    assert result.text == "resumed"
    assert [r.status for r in emulator.received] == [200, 200]
    assert _bodies(emulator)[1]["tool_choice"] == {"type": "none"}
    assert_bytes_rebuild(store.load(session.id).session, emulator)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_summary_after_a_structured_turn_is_free_text(provider: str) -> None:
    """The compaction summary replays the header in force, minus the fields that
    force JSON or a tool call, and rebuilds as a one-shot request."""
    summary = "They talked about the weather in Paris."
    script = [{"text": "one"}, {"text": "two"}, {"output": GOOD}, {"text": summary}]
    emulator = Emulator(script=script)
    policy = CompactionPolicy(keep_messages=2)
    async with agent_on(emulator, provider=provider, compaction=policy) as agent:
        await agent.run("first?")
        await agent.run("second?")
        await agent.run("Weather?", output_type=Weather)
        result = await agent.compact()
    assert result.ok, result.error
    asked, summarised = _bodies(emulator)[2:]
    _assert_asks_for_schema(provider, asked, "Weather")
    assert "response_format" not in summarised
    assert "tool_choice" not in summarised
    assert summarised.get("tools") == asked.get("tools")  # the header in force, tools and all
    rebuilt = rebuild_requests(agent.session, one_shots=True)
    assert [encode_request(r.request) for r in rebuilt] == [r.body for r in emulator.received]


async def test_a_streamed_turn_takes_an_output_type_too() -> None:
    emulator = Emulator(script=[{"output": GOOD}])
    async with agent_on(emulator, provider="anthropic") as agent:
        events = [e async for e in agent.stream("Weather?", output_type=Weather)]
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.result.output == Weather(city="Paris", temp_c=21)
    assert_bytes_rebuild(agent.session, emulator)
