"""Every request any code path sends rebuilds from the log, also when something fails halfway.

Each scenario runs against the emulator (the network edge) and ends with the same
proof: the provider received N requests, ``rebuild_requests`` returns N (one-shot
compaction calls included with the flag), each rebuilt body equals the bytes
received, and ``requests``, ``cache``, ``diff``, ``report`` and ``verify`` all
succeed on the stored log.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tapelog import ClientMismatchError, LlmCallConfig, Session
from tapelog.agent import Agent, CompactionPolicy, Hooks, tool
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.llm import encode_request
from tapelog.llm._api import OpenAIWire
from tapelog.log import decode
from tapelog.log._api import Event
from tapelog.request._api import rebuild_requests
from tapelog.store import JsonlStore

from ._harness import SECRET, add, agent_on, shout


def _received(emulator: Emulator) -> list[bytes]:
    return [r.body for r in emulator.received]


def assert_log_explains(
    session: Session, emulator: Emulator, tmp_path: Path, *, one_shots: bool = False
) -> None:
    """The bytes received are the rebuild, and every audit command reads the stored log."""
    rebuilt = rebuild_requests(session, one_shots=one_shots)
    received = _received(emulator)
    if not one_shots:
        loop = {r.request.boundary_seq for r in rebuilt}
        assert all(r.kind == "loop" for r in rebuilt)
        assert len(loop) == len(rebuilt)
    assert [encode_request(r.request) for r in rebuilt] == received
    root = tmp_path / "store"
    with JsonlStore(root).create(session):
        pass
    runner = CliRunner()
    commands: list[list[str]] = [
        ["verify", session.id],
        ["requests", session.id, "--json"],
        ["requests", session.id, "--one-shot", "--json"],
        ["cache", session.id, "--json"],
        ["report", session.id, "-o", str(tmp_path / "report.html")],
    ]
    if len([r for r in rebuilt if r.kind == "loop"]) >= 2:
        commands.append(["diff", session.id, "1", "2", "--json"])
    for command in commands:
        result = runner.invoke(cli, [*command, "--store", str(root)], obj={"debug": False})
        assert result.exit_code == 0, (command, result.output)
    verified = runner.invoke(cli, ["verify", session.id, "--store", str(root)], obj={})
    loop_count = sum(1 for r in rebuild_requests(session) if r.kind == "loop")
    noun = "request" if loop_count == 1 else "requests"
    assert f"{loop_count} {noun}" in verified.stdout
    listed = decode(
        runner.invoke(
            cli, ["requests", session.id, "--one-shot", "--json", "--store", str(root)], obj={}
        ).stdout
    )
    assert len(listed) == len(rebuild_requests(session, one_shots=True))


def _unsent_steps(session: Session) -> list[Event]:
    return [e for e in session.events if e.type == "step/end" and e.data.get("sent") is False]


# --- hole 1: a step that fails between step/start and the send ------------------


class _Boom(Exception):
    pass


def _raise_once(counter: list[int], at: int) -> Callable[[Any], Any]:
    def hook(value: Any) -> Any:
        counter.append(1)
        if len(counter) == at:
            raise _Boom("the plugin failed")
        return None

    return hook


async def test_a_request_hook_that_raises_leaves_a_log_every_audit_reads(tmp_path: Path) -> None:
    calls: list[int] = []
    emulator = Emulator()
    async with agent_on(emulator, hooks=Hooks(request=_raise_once(calls, 2))) as agent:
        await agent.run("first")
        with pytest.raises(_Boom):
            await agent.run("second")
        await agent.run("third")
    session = agent.session
    assert len(emulator.received) == 2
    (unsent,) = _unsent_steps(session)
    assert unsent.data["error"] == {"type": "_Boom", "message": "the plugin failed"}
    assert_log_explains(session, emulator, tmp_path)


async def test_an_unknown_tool_order_and_a_bad_extra_end_their_steps_unsent(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    async with agent_on(emulator, tools=[add]) as agent:
        await agent.run("one")
        agent.tool_order = ["add", "missing"]
        result = None
        with pytest.raises(Exception, match="missing"):
            result = await agent.run("two")
        agent.tool_order = None
        # A reserved body key in extras fails while encoding, after step/start.
        agent.config = agent.config.replace(extras={"messages": []})
        with pytest.raises(Exception, match="messages"):
            result = await agent.run("three")
        agent.config = agent.config.replace(extras={})
        result = await agent.run("four")
    assert result is not None
    assert result.ok
    assert len(_unsent_steps(agent.session)) == 2
    assert len(emulator.received) == 2
    assert_log_explains(agent.session, emulator, tmp_path)


async def test_a_listener_that_raises_on_step_start_sends_nothing(tmp_path: Path) -> None:
    emulator = Emulator()
    failed: list[int] = []
    async with agent_on(emulator) as agent:

        def listener(event: Event) -> None:
            if event.type == "step/start" and not failed:
                failed.append(event.seq)
                raise _Boom("the store listener failed")

        agent.session.subscribe(listener)
        with pytest.raises(_Boom):
            await agent.run("one")
        await agent.run("two")
    assert len(emulator.received) == 1
    assert len(_unsent_steps(agent.session)) == 1
    assert_log_explains(agent.session, emulator, tmp_path)


async def test_a_listener_that_raises_on_a_tool_calling_answer_leaves_no_call_unanswered(
    tmp_path: Path,
) -> None:
    """The answer is logged, its tool/call events never are: the step's early end
    must still answer the calls, or every later request of the session is refused."""
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
            {"text": "fine"},
        ]
    )
    failed: list[int] = []
    async with agent_on(emulator, tools=[add]) as agent:

        def listener(event: Event) -> None:
            if event.type == "assistant/message" and not failed:
                failed.append(event.seq)
                raise _Boom("the store listener failed")

        agent.session.subscribe(listener)
        with pytest.raises(_Boom):
            await agent.run("add")
        result = await agent.run("again")
    assert result.reason["kind"] == "completed"
    assert [r.status for r in emulator.received] == [200, 200]
    (call,) = [e for e in agent.session.events if e.type == "tool/call"]
    (answer,) = [e for e in agent.session.events if e.type == "tool/result"]
    assert answer.source_seqs == [call.seq]
    assert answer.data["error"] == {"kind": "unanswered"}
    assert_log_explains(agent.session, emulator, tmp_path)


async def test_an_abort_before_the_send_is_not_a_request(tmp_path: Path) -> None:
    holder: dict[str, Agent] = {}
    emulator = Emulator()

    seen: list[LlmCallConfig] = []

    def abort_first(config: LlmCallConfig) -> None:
        seen.append(config)
        if len(seen) == 1:
            holder["agent"].abort("early")

    async with agent_on(emulator, hooks=Hooks(request=abort_first)) as agent:
        holder["agent"] = agent
        first = await agent.run("one")
        second = await agent.run("two")
    assert first.reason["kind"] == "aborted"
    assert second.ok
    assert len(emulator.received) == 1
    assert_log_explains(agent.session, emulator, tmp_path)


# --- hole 2: the log names the provider and the wire that were used -------------


async def test_a_request_hook_cannot_switch_the_provider_under_the_client(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    switch = Hooks(request=lambda c: c.replace(provider="anthropic", model="claude-sonnet-4-5"))
    async with agent_on(emulator) as agent:
        await agent.run("one")
        agent.hooks = switch
        with pytest.raises(ClientMismatchError, match="names provider 'anthropic'"):
            await agent.run("two")
    assert len(emulator.received) == 1
    assert_log_explains(agent.session, emulator, tmp_path)


async def test_a_config_naming_another_provider_than_the_client_is_refused(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    async with agent_on(emulator) as agent:  # a DeepSeek client
        agent.config = LlmCallConfig(provider="openai", model="gpt-4.1-mini")
        with pytest.raises(ClientMismatchError):
            await agent.run("one")
    assert emulator.received == []
    assert rebuild_requests(agent.session) == []


_THINKING = [
    {"reasoning": "think first", "tool_calls": [{"name": "add", "arguments": '{"a":1,"b":2}'}]},
    {"text": "3"},
]


async def test_a_wire_option_the_config_does_not_log_is_refused(tmp_path: Path) -> None:
    emulator = Emulator(script=_THINKING)
    async with agent_on(emulator, tools=[add], check=False) as agent:
        agent.client.wire = OpenAIWire(dialect="deepseek", send_back="never")  # type: ignore[misc]
        with pytest.raises(ClientMismatchError, match=r"config\.wire"):
            await agent.run("add")
    assert emulator.received == []


async def test_a_wire_option_in_the_config_is_logged_and_rebuilds(tmp_path: Path) -> None:
    emulator = Emulator(script=_THINKING)
    config = {"wire": {"reasoning_send_back": "never"}}
    async with agent_on(emulator, tools=[add], config=config) as agent:
        await agent.run("add")
    second = decode(emulator.received[1].body)
    assert all("reasoning_content" not in m for m in second["messages"])
    header = next(e for e in agent.session.events if e.type == "request/header")
    assert header.data["header"]["config"]["wire"] == {"reasoning_send_back": "never"}
    assert_log_explains(agent.session, emulator, tmp_path)


# --- hole 3: context injected while tools run waits for their results -----------


async def test_inject_while_tools_run_keeps_openai_sessions_valid(tmp_path: Path) -> None:
    holder: dict[str, Agent] = {}

    @tool
    def note(text: str) -> str:
        """Take a note (and tell the agent something on the side)."""
        assert holder["agent"].inject(f"side note: {text}") is None
        return "noted"

    emulator = Emulator(
        script=[
            {
                "tool_calls": [
                    {"name": "note", "arguments": '{"text": "a"}'},
                    {"name": "note", "arguments": '{"text": "b"}'},
                ]
            },
            {"text": "done"},
            {"text": "and again"},
        ]
    )
    async with agent_on(emulator, tools=[note]) as agent:
        holder["agent"] = agent
        first = await agent.run("take notes")
        second = await agent.run("more")
    assert first.ok, first.reason
    assert second.ok, second.reason
    types = [e.type for e in agent.session.events if e.type != "assistant/chunk"]
    last_result = max(i for i, t in enumerate(types) if t == "tool/result")
    contexts = [i for i, t in enumerate(types) if t == "context/message"]
    assert len(contexts) == 2
    assert min(contexts) > last_result
    assert "side note: a" in emulator.received[1].body.decode()
    assert_log_explains(agent.session, emulator, tmp_path)


# --- hole 4: the compaction summary call rebuilds from the log ------------------


async def test_a_compaction_summary_is_a_logged_request_that_rebuilds(tmp_path: Path) -> None:
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
            {"text": "three " * 40},
            {"text": "fine " * 40},
            {"text": "summary: added 1 and 2"},
            {"text": "after"},
        ]
    )
    policy = CompactionPolicy(keep_messages=1, instruction="Summarise in one line, please.")
    async with agent_on(emulator, tools=[add], compaction=policy) as agent:
        await agent.run("add 1 and 2")
        await agent.run("and then?")
        agent.add_tool(shout)  # live, not yet logged: the summary must not carry it
        agent.system = "A new system prompt nobody has sent yet."
        result = await agent.compact()
        assert result.ok, result.error
        await agent.run("go on")
    summary_body = decode(emulator.received[3].body)
    assert [t["function"]["name"] for t in summary_body["tools"]] == ["add"]
    assert summary_body["messages"][0]["content"] == "You are terse."
    assert summary_body["messages"][-1]["content"] == "Summarise in one line, please."
    start = next(e for e in agent.session.events if e.type == "compact/start")
    assert start.data["instruction"] == "Summarise in one line, please."
    rebuilt = rebuild_requests(agent.session, one_shots=True)
    assert [r.kind for r in rebuilt] == ["loop", "loop", "loop", "compaction", "loop"]
    assert_log_explains(agent.session, emulator, tmp_path, one_shots=True)


async def test_an_overflowing_summary_retries_as_a_new_logged_compaction(
    tmp_path: Path,
) -> None:
    emulator = Emulator(
        script=[
            {"text": "a " * 60},
            {"text": "b " * 60},
            {"text": "c " * 60},
            {"overflow": True},
            {"text": "short summary"},
        ]
    )
    async with agent_on(emulator, compaction=CompactionPolicy(keep_messages=1)) as agent:
        for prompt in ("one", "two", "three"):
            await agent.run(prompt)
        result = await agent.compact()
    assert result.ok
    assert result.id == "c2"
    ends = [e.data for e in agent.session.events if e.type == "compact/end"]
    assert [e["ok"] for e in ends] == [False, True]
    assert "sent" not in ends[0], "the overflowing call was sent"
    assert_log_explains(agent.session, emulator, tmp_path, one_shots=True)


# --- hole 5: assigning agent.config takes effect as a logged delta ---------------


async def test_setting_config_mid_session_is_a_header_delta(tmp_path: Path) -> None:
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        await agent.run("one")
        agent.config = agent.config.replace(temperature=0.5)
        assert agent.config.temperature == 0.5
        await agent.run("two")
        await agent.run("three")
    bodies = [decode(b) for b in _received(emulator)]
    assert "temperature" not in bodies[0]
    assert bodies[1]["temperature"] == 0.5
    assert bodies[2]["temperature"] == 0.5
    deltas = [e.data for e in agent.session.events if e.type == "request/header-delta"]
    config = {"provider": "deepseek", "model": "deepseek-chat", "temperature": 0.5}
    assert deltas == [{"config": config}]
    assert_log_explains(agent.session, emulator, tmp_path)


def test_the_secret_used_by_these_scenarios_is_not_a_real_key() -> None:
    assert SECRET.startswith("sk-test-")


async def test_an_inject_while_a_failed_step_closes_lands_after_the_synthetic_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool thread's ``inject()`` at the instant the step is being closed (its
    unanswered calls about to get their synthetic results) waits for them: a
    context message between a call and its result would make every later request a 400."""
    import tapelog.agent._step_end as step_end

    holder: dict[str, Agent] = {}
    real_close_step = step_end.close_step

    def close_step_with_a_racing_inject(session: Session, **kwargs: Any) -> Event | None:
        holder["agent"].inject("a tool thread's late note")  # what a pool thread may do now
        return real_close_step(session, **kwargs)

    monkeypatch.setattr(step_end, "close_step", close_step_with_a_racing_inject)

    def failing_hook(info: Any, outcome: Any) -> None:
        raise RuntimeError("post-execute hook failed")

    emulator = Emulator(
        script=[
            {
                "tool_calls": [
                    {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    {"name": "add", "arguments": '{"a": 3, "b": 4}'},
                ]
            },
            {"text": "recovered"},
        ]
    )
    async with agent_on(
        emulator, tools=[add], hooks=Hooks(tool_post_execute=failing_hook)
    ) as agent:
        holder["agent"] = agent
        with pytest.raises(RuntimeError, match="post-execute hook failed"):
            await agent.run("add twice")
        monkeypatch.setattr(step_end, "close_step", real_close_step)
        agent.hooks = Hooks()
        follow = await agent.run("go on")
    assert follow.ok, follow.reason
    types = [e.type for e in agent.session.events if e.type != "assistant/chunk"]
    results = [i for i, t in enumerate(types) if t == "tool/result"]
    note = types.index("context/message")
    assert len(results) == 2
    assert note > max(results)
    assert_log_explains(agent.session, emulator, tmp_path)
