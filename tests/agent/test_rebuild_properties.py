"""Property: whatever happens to a session, the bytes the provider received are the rebuild.

Hypothesis draws random interleavings of turns (with and without tool calls),
injections (between turns and from inside a running tool), request-hook and
listener failures, aborts before the send, config / system prompt / tool
changes, compactions and loop restarts over the stored log. After each run the
session is loaded back from its JSONL file and every request the emulator
received -- loop requests and compaction summaries -- must equal, byte for
byte, the request rebuilt from the stored log alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapelog.agent import Agent, CompactionPolicy, Hooks, RetryPolicy, tool
from tapelog.emulator import Emulator
from tapelog.llm import encode_request, make_client
from tapelog.log._api import Event, LlmCallConfig, Session
from tapelog.request._api import rebuild_requests
from tapelog.store import JsonlStore

from ._harness import SECRET, add, shout

_OPS = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 2)),
    st.tuples(st.just("inject"), st.text("abc xyz", min_size=1, max_size=8)),
    st.tuples(st.just("inject_in_tool"), st.just(0)),
    st.tuples(st.just("hook_fails"), st.just(0)),
    st.tuples(st.just("listener_fails"), st.just(0)),
    st.tuples(st.just("abort_first"), st.just(0)),
    st.tuples(st.just("temperature"), st.sampled_from([0.0, 0.3, 1.0])),
    st.tuples(st.just("system"), st.sampled_from(["Be terse.", "Be terse.\nCite tools.", ""])),
    st.tuples(st.just("tool"), st.sampled_from(["add", "shout", "note"])),
    st.tuples(st.just("compact"), st.integers(1, 3)),
    st.tuples(st.just("restart"), st.just(0)),
)


class _Armed(Exception):
    pass


@dataclass
class _World:
    emulator: Emulator
    store: JsonlStore
    session: Session
    writer: Any
    http: httpx.AsyncClient
    agent: Agent | None = None
    arm: dict[str, bool] = field(default_factory=dict)


def _note_tool(world: _World) -> Any:
    @tool
    def note(text: str) -> str:
        """Note a text; tells the agent something on the side while it runs."""
        assert world.agent is not None
        world.agent.inject(f"noted {text}")
        return "noted"

    return note


def _make_agent(world: _World, tools: list[Any], system: str | None) -> Agent:
    config = LlmCallConfig(provider="deepseek", model="deepseek-chat")
    client = make_client(
        config,
        base_url="http://emulator/deepseek",
        http_client=world.http,
        env={"DEEPSEEK_API_KEY": SECRET},
    )

    def request_hook(seed: LlmCallConfig) -> None:
        if world.arm.pop("hook", False):
            raise _Armed("request hook")
        if world.arm.pop("abort", False):
            assert world.agent is not None
            world.agent.abort("test")

    def listener(event: Event) -> None:
        if event.type == "step/start" and world.arm.pop("listener", False):
            raise _Armed("listener")

    world.session.subscribe(listener)
    return Agent(
        world.session,
        client,
        config=config,
        system=system,
        tools=tools,
        hooks=Hooks(request=request_hook),
        writer=world.writer,
        retry=RetryPolicy(base_delay=0.0),
        compaction=CompactionPolicy(keep_messages=2, max_tokens=64),
        check=True,
    )


def _turn_script(calls: int, tools: list[str]) -> list[dict[str, Any]]:
    if not calls or not tools:
        return [{"text": "plain answer"}]
    arguments = {"add": '{"a": 1, "b": 2}', "shout": '{"text": "hi"}', "note": '{"text": "x"}'}
    chosen = [tools[i % len(tools)] for i in range(calls)]
    first = {"tool_calls": [{"name": n, "arguments": arguments[n]} for n in chosen]}
    return [first, {"text": "after tools"}]


async def _apply(world: _World, op: tuple[str, Any], prompt: int) -> None:
    agent = world.agent
    assert agent is not None
    kind, value = op
    if kind == "turn":
        world.emulator.push(*_turn_script(value, [t.name for t in agent.tools]))
        try:
            result = await agent.run(f"prompt {prompt}")
        except _Armed:
            pass
        else:
            # Failures are only the ones the test armed: never a provider 400.
            assert result.reason["kind"] in ("completed", "aborted"), result.reason
        world.emulator.discard_script()  # what an aborted or failed turn did not use
    elif kind == "inject":
        agent.inject(value)
    elif kind == "inject_in_tool":
        if "note" not in agent.tools:
            agent.add_tool(_note_tool(world))
    elif kind == "hook_fails":
        world.arm["hook"] = True
    elif kind == "listener_fails":
        world.arm["listener"] = True
    elif kind == "abort_first":
        world.arm["abort"] = True
    elif kind == "temperature":
        agent.config = agent.config.replace(temperature=value)
    elif kind == "system":
        agent.system = value or None
    elif kind == "tool":
        if value in agent.tools:
            agent.remove_tool(value)
        else:
            agent.add_tool({"add": add, "shout": shout, "note": _note_tool(world)}[value])
    elif kind == "compact":
        world.emulator.push({"text": "s" * value})
        await agent.compact()
        world.emulator.discard_script()
    elif kind == "restart":
        world.writer.close()
        world.session, world.writer = world.store.open(world.session.id)
        world.agent = _make_agent(world, list(agent.tools), agent.system)


async def _run(ops: list[tuple[str, Any]], root: Path) -> tuple[list[bytes], list[bytes]]:
    emulator = Emulator()
    store = JsonlStore(root)
    session = Session()
    writer = store.create(session)
    async with httpx.AsyncClient(transport=emulator.transport(), timeout=30) as http:
        world = _World(emulator, store, session, writer, http)
        world.agent = _make_agent(world, [add], "Be terse.")
        for i, op in enumerate(ops):
            await _apply(world, op, i)
        world.arm.clear()
        world.writer.close()
    loaded = store.load(world.session.id).session
    rebuilt = [encode_request(r.request) for r in rebuild_requests(loaded, one_shots=True)]
    return [r.body for r in emulator.received], rebuilt


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(_OPS, min_size=1, max_size=12))
def test_the_provider_received_exactly_what_the_stored_log_rebuilds(
    ops: list[tuple[str, Any]],
) -> None:
    with TemporaryDirectory() as tmp:
        received, rebuilt = asyncio.run(_run(ops, Path(tmp)))
    assert received == rebuilt


def test_the_property_sees_every_kind_of_request(tmp_path: Path) -> None:
    """A fixed interleaving that reaches each path (so the property is not vacuous)."""
    ops: list[tuple[str, Any]] = [
        ("inject_in_tool", 0),
        ("turn", 2),
        ("hook_fails", 0),
        ("turn", 1),
        ("listener_fails", 0),
        ("turn", 0),
        ("abort_first", 0),
        ("turn", 1),
        ("temperature", 0.3),
        ("system", "Be terse.\nCite tools."),
        ("tool", "shout"),
        ("turn", 2),
        ("compact", 1),
        ("restart", 0),
        ("turn", 1),
    ]
    received, rebuilt = asyncio.run(_run(ops, tmp_path))
    assert received == rebuilt
    assert len(received) >= 7
