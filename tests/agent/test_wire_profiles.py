"""Wire profiles: the loop's choices and the emulator's refusals follow one set of facts.

For every profile in ``tapelog.cache.WIRE_PROFILES``: the structured-output
mode the loop picks, the modes it refuses, whether it forces the output tool
and whether it keeps the output tool on a plain turn are the profile's; the
emulator route that serves the profile refuses exactly the ``response_format``
types and tool histories the profile says the provider refuses, with the
provider's message. Changing a profile moves the loop and the emulator
together (the last tests change one and watch both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

from tapelog import OutputError
from tapelog.agent import OutputSpec
from tapelog.agent._output import OUTPUT_TOOL, OutputRun, shape_request
from tapelog.agent._tools import Toolset
from tapelog.cache import WireProfile
from tapelog.cache import _profiles as profiles_module
from tapelog.cache._api import OUTPUT_MODES
from tapelog.cache._profiles import WIRE_PROFILES
from tapelog.emulator import Emulator
from tapelog.emulator._app import ROUTES
from tapelog.llm import wire_profile
from tapelog.llm._api import complete_config
from tapelog.log._api import EpochHeader, LlmCallConfig

from ._harness import agent_on

# A provider whose config implies each profile.
PROVIDER_OF: dict[str, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "deepseek": "deepseek",
    "compatible": "compatible",
    "emulator": "emulator",
    "local": "local",
}
# The emulator route serving a profile (its /v1 route is the DeepSeek one).
ROUTE_OF: dict[str, str] = {
    "deepseek": "/deepseek/chat/completions",
    "openai": "/openai/v1/chat/completions",
    "anthropic": "/anthropic/v1/messages",
}
SERVED = sorted(set(ROUTES.values()))
WITH_FORMATS = [n for n in SERVED if WIRE_PROFILES[n].response_format]


class Weather(pydantic.BaseModel):
    city: str
    temp_c: int


def _config(profile: str, **fields: Any) -> LlmCallConfig:
    return complete_config(LlmCallConfig(provider=PROVIDER_OF[profile], model="m", **fields))


def test_every_profile_has_a_provider_and_every_emulator_route_a_profile() -> None:
    assert set(PROVIDER_OF) == set(WIRE_PROFILES)
    assert set(SERVED) == set(ROUTE_OF) <= set(WIRE_PROFILES)
    assert WITH_FORMATS  # the emulator serves wires with response_format
    for name, profile in WIRE_PROFILES.items():
        assert wire_profile(_config(name)) is profile
        assert profile.output_modes()[0] == profile.auto_output


# --- the loop -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WIRE_PROFILES))
@pytest.mark.parametrize("mode", ["auto", *OUTPUT_MODES])
def test_the_loop_picks_and_refuses_modes_as_the_profile_says(name: str, mode: str) -> None:
    profile = WIRE_PROFILES[name]
    spec = OutputSpec(Weather, mode=mode)  # type: ignore[arg-type]
    refusal = None if mode == "auto" else profile.output_refusal(mode)
    if refusal is not None:
        with pytest.raises(OutputError) as raised:
            OutputRun.create(spec, _config(name), Toolset())
        assert refusal in str(raised.value)
        return
    run = OutputRun.create(spec, _config(name), Toolset())
    assert run.mode == (profile.auto_output if mode == "auto" else mode)
    assert mode == "auto" or mode in profile.output_modes()


@pytest.mark.parametrize("name", sorted(WIRE_PROFILES))
@pytest.mark.parametrize("thinking", [None, "enabled", "disabled"])
def test_the_loop_forces_the_output_tool_as_the_profile_says(
    name: str, thinking: str | None
) -> None:
    profile = WIRE_PROFILES[name]
    flag = None if thinking is None else {"type": thinking}
    extras = {} if flag is None else {"thinking": flag}
    run = OutputRun.create(
        OutputSpec(Weather, mode="tool"), _config(name, extras=extras), Toolset()
    )
    assert run.force is profile.forces_output_tool(flag)


@pytest.mark.parametrize("name", sorted(WIRE_PROFILES))
@pytest.mark.parametrize("own_tools", [False, True])
def test_a_plain_turn_keeps_the_output_tool_as_the_profile_says(name: str, own_tools: bool) -> None:
    profile = WIRE_PROFILES[name]
    config = _config(name)
    run = OutputRun.create(OutputSpec(Weather, mode="tool"), config, Toolset())
    own = [{"name": "add", "description": "Add.", "parameters": {"type": "object"}}]
    tools = own if own_tools else []
    structured_config, structured_tools = shape_request(run, config, tools, None)
    folded = EpochHeader(config=structured_config, tools=structured_tools)
    _, plain_tools = shape_request(None, config, tools, folded)
    kept = OUTPUT_TOOL in [t["name"] for t in plain_tools]
    expected = profile.sticky_output_tool or (profile.tool_history_needs_tools and not own_tools)
    assert kept is expected
    if kept:
        assert plain_tools == structured_tools  # the same tool list: no header change


# --- the emulator --------------------------------------------------------------------------


async def _post(path: str, body: dict[str, Any]) -> httpx.Response:
    emulator = Emulator(script=[{"text": "ok"}])
    async with httpx.AsyncClient(transport=emulator.transport(), base_url="http://emu") as c:
        return await c.post(path, json=body)


def _openai_body(fmt: dict[str, Any]) -> dict[str, Any]:
    system = {"role": "system", "content": "Answer in json."}
    return {"model": "m", "messages": [system, {"role": "user", "content": "hi"}], **fmt}


@pytest.mark.parametrize("name", WITH_FORMATS)
@pytest.mark.parametrize("kind", ["json_schema", "json_object"])
async def test_the_emulator_refuses_response_formats_as_the_profile_says(
    name: str, kind: str
) -> None:
    profile = WIRE_PROFILES[name]
    fmt: dict[str, Any] = {"type": kind}
    if kind == "json_schema":
        fmt["json_schema"] = {"name": "w", "schema": {"type": "object"}}
    response = await _post(ROUTE_OF[name], _openai_body({"response_format": fmt}))
    refused = profile.refused_formats.get(kind)
    if refused is None:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 400
        assert response.json()["error"]["message"] == refused


def _tool_history(name: str) -> dict[str, Any]:
    if WIRE_PROFILES[name].family == "anthropic":
        use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
        result = {"type": "tool_result", "tool_use_id": "t1", "content": "1"}
        messages: list[Any] = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
        return {"model": "m", "max_tokens": 64, "messages": messages}
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": ""},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
    ]
    return {"model": "m", "messages": messages}


@pytest.mark.parametrize("name", SERVED)
async def test_the_emulator_refuses_a_tool_history_without_tools_as_the_profile_says(
    name: str,
) -> None:
    response = await _post(ROUTE_OF[name], _tool_history(name))
    needs = WIRE_PROFILES[name].tool_history_needs_tools
    assert response.status_code == (400 if needs else 200), response.text


@pytest.mark.parametrize("name", SERVED)
async def test_the_loops_automatic_choice_is_accepted_by_the_emulator(name: str) -> None:
    emulator = Emulator(script=[{"output": '{"city": "Paris", "temp_c": 21}'}, {"text": "ok"}])
    async with agent_on(emulator, provider=name) as agent:
        result = await agent.run("Weather?", output_type=Weather)
        plain = await agent.run("Thanks.")
    assert result.output == Weather(city="Paris", temp_c=21)
    assert plain.ok, plain.reason
    assert [r.status for r in emulator.received] == [200, 200]


# --- one change moves both -------------------------------------------------------------------


def _replace_profile(monkeypatch: pytest.MonkeyPatch, profile: WireProfile) -> None:
    changed = {**WIRE_PROFILES, profile.name: profile}
    monkeypatch.setattr(profiles_module, "WIRE_PROFILES", changed)


async def test_a_profile_that_stops_refusing_json_schema_moves_loop_and_emulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    _replace_profile(monkeypatch, replace(WIRE_PROFILES["deepseek"], refused_formats={}))
    spec = OutputSpec(Weather, mode="json_schema")
    assert OutputRun.create(spec, _config("deepseek"), Toolset()).mode == "json_schema"
    schema = {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}
    response = await _post(ROUTE_OF["deepseek"], _openai_body({"response_format": schema}))
    assert response.status_code == 200, response.text


async def test_a_profile_that_refuses_json_object_moves_loop_and_emulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    refused = {"json_object": "no JSON mode here"}
    _replace_profile(monkeypatch, replace(WIRE_PROFILES["openai"], refused_formats=refused))
    with pytest.raises(OutputError, match="no JSON mode here"):
        OutputRun.create(OutputSpec(Weather, mode="json_object"), _config("openai"), Toolset())
    response = await _post(
        ROUTE_OF["openai"], _openai_body({"response_format": {"type": "json_object"}})
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "no JSON mode here"


# --- the docs' table ---------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _table() -> str:
    """docs/providers.md's "Wire profiles" table, rendered from the module."""
    lines = [
        "| profile | family | auto mode | other modes | refused `response_format` | "
        '"json" in prompt | thinks by default | thinking refuses a forced tool | '
        "tool history needs tools | sticky output tool | reasoning sent back |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for profile in WIRE_PROFILES.values():
        others = ", ".join(f"`{m}`" for m in profile.output_modes()[1:])
        if not profile.response_format:
            refused = "no such field"
        else:
            refused = "; ".join(f"`{k}`: {v!r}" for k, v in profile.refused_formats.items()) or "—"
        cells = [
            f"`{profile.name}`",
            profile.family,
            f"`{profile.auto_output}`",
            others,
            refused,
            _yes(profile.json_word_required),
            _yes(profile.thinks_by_default),
            _yes(profile.thinking_refuses_forced_tool),
            _yes(profile.tool_history_needs_tools),
            _yes(profile.sticky_output_tool),
            f"`{profile.reasoning_send_back}`" if profile.family == "openai" else "—",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def test_the_docs_table_is_the_profiles() -> None:
    """Regenerate with ``python -c 'from tests.agent.test_wire_profiles import _table;
    print(_table())'`` when a profile changes."""
    assert _table() in DOCS.read_text(encoding="utf-8")


ANTHROPIC_SERVED = [n for n in SERVED if WIRE_PROFILES[n].family == "anthropic"]


@pytest.mark.parametrize("name", ANTHROPIC_SERVED)
@pytest.mark.parametrize("thinking", [None, "enabled", "disabled"])
@pytest.mark.parametrize("choice", ["auto", "any", "tool"])
async def test_the_emulator_refuses_a_forced_tool_with_thinking_as_the_profile_says(
    name: str, thinking: str | None, choice: str
) -> None:
    profile = WIRE_PROFILES[name]
    tool_choice: dict[str, Any] = {"type": choice}
    if choice == "tool":
        tool_choice["name"] = "f"
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 2048,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": tool_choice,
    }
    flag = None if thinking is None else {"type": thinking, "budget_tokens": 1024}
    if flag is not None:
        body["thinking"] = flag
    response = await _post(ROUTE_OF[name], body)
    refused = choice != "auto" and not profile.forces_output_tool(flag)
    assert response.status_code == (400 if refused else 200), response.text


async def test_a_profile_whose_thinking_allows_forcing_moves_loop_and_emulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    profile = replace(WIRE_PROFILES["anthropic"], thinking_refuses_forced_tool=False)
    _replace_profile(monkeypatch, profile)
    config = _config("anthropic", extras={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    assert OutputRun.create(OutputSpec(Weather), config, Toolset()).force is True
    emulator = Emulator(script=[{"output": '{"city": "Paris", "temp_c": 21}'}])
    async with agent_on(emulator, provider="anthropic", config={"extras": config.extras}) as agent:
        result = await agent.run("Weather?", output_type=Weather)
    assert result.output == Weather(city="Paris", temp_c=21)
    assert emulator.received[0].json()["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}


# --- reasoning send-back: the wire and the proxy ----------------------------------------------

OPENAI_DIALECTS = ["openai", "deepseek", "compatible"]


@pytest.mark.parametrize("dialect", OPENAI_DIALECTS)
def test_the_wire_and_the_proxy_send_reasoning_back_as_the_profile_says(dialect: str) -> None:
    from tapelog.llm._api import OpenAIWire
    from tapelog.proxy import Upstream
    from tapelog.proxy._translate import Translator

    profile = WIRE_PROFILES[dialect]
    rule = profile.send_back_for("some-model")
    assert OpenAIWire(dialect=dialect).send_back_for("some-model") == rule  # type: ignore[arg-type]
    upstream = Upstream(provider=dialect, family="openai", dialect=dialect, base_url="http://u")
    translator = Translator(upstream)
    # A client whose messages only the default rule reproduces: nothing to record.
    assert translator._send_back("some-model", frozenset({rule}), None) == {}


async def test_a_changed_send_back_default_moves_the_wire_and_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    from tapelog.llm._api import OpenAIWire
    from tapelog.proxy import Upstream
    from tapelog.proxy._translate import Translator

    _replace_profile(monkeypatch, replace(WIRE_PROFILES["deepseek"], reasoning_send_back="present"))
    assert OpenAIWire(dialect="deepseek").send_back_for("deepseek-chat") == "present"
    upstream = Upstream(
        provider="deepseek", family="openai", dialect="deepseek", base_url="http://u"
    )
    translator = Translator(upstream)
    assert translator._send_back("deepseek-chat", frozenset({"present"}), None) == {}
    recorded = translator._send_back("deepseek-chat", frozenset({"present_and_tool_turns"}), None)
    assert recorded == {"reasoning_send_back": "present_and_tool_turns"}


def test_output_spec_modes_are_auto_and_the_profiles_modes() -> None:
    from typing import get_args

    from tapelog.agent._output import OutputMode

    assert get_args(OutputMode) == ("auto", *OUTPUT_MODES)


@pytest.mark.parametrize(
    "name", [n for n, p in sorted(WIRE_PROFILES.items()) if p.family == "openai"]
)
def test_a_configs_wire_sends_reasoning_back_as_its_profile_says(name: str) -> None:
    """Also for the emulator provider, whose wire is the compatible dialect's."""
    from tapelog.llm._api import OpenAIWire, wire_for

    config = _config(name)
    wire = wire_for(config)
    assert isinstance(wire, OpenAIWire)
    assert wire.send_back_for("m") == wire_profile(config).send_back_for("m")
