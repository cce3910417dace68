"""The agent loop end to end: real adapters, real HTTP bodies, the emulator as the edge."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tapelog import FrozenError, LlmCallConfig, Session
from tapelog.agent import Agent, Hooks, RetryPolicy, tool
from tapelog.emulator import Emulator
from tapelog.llm import LlmRequest, make_client
from tapelog.llm._api import AbortHandle
from tapelog.log import decode
from tapelog.log._api import FrozenDict
from tapelog.store import JsonlStore

from ._harness import LONG_SYSTEM, SECRET, add, agent_on, assert_bytes_rebuild, shout, types_of


def _strip_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_breakpoints(v) for v in value]
    return value


@pytest.mark.parametrize("provider", ["deepseek", "openai", "anthropic"])
async def test_requests_extend_each_other_and_hit_the_cache(provider: str) -> None:
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 3}'}]},
            {"text": "2 + 3 = 5."},
            {"text": "Still 5."},
            {"tool_calls": [{"name": "add", "arguments": '{"a": 5, "b": 5}'}]},
            {"text": "10."},
        ]
    )
    async with agent_on(emulator, provider=provider, system=LONG_SYSTEM, tools=[add]) as agent:
        first = await agent.run("What is 2 + 3?")
        second = await agent.run("Are you sure?")
        third = await agent.run("Add 5 and 5.")
    assert [r.reason["kind"] for r in (first, second, third)] == ["completed"] * 3
    assert first.steps == 2
    assert third.text == "10."
    bodies = [decode(r.body) for r in emulator.received]
    assert len(bodies) == 5
    for before, after in itertools.pairwise(bodies):
        old, new = _strip_breakpoints(before["messages"]), _strip_breakpoints(after["messages"])
        assert new[: len(old)] == old, "each request must extend the previous message list"
        assert _strip_breakpoints(before.get("tools")) == _strip_breakpoints(after.get("tools"))
    usages = [e.data["usage"] for e in agent.session.events if e.type == "assistant/message"]
    assert usages[0]["cache_read"] == 0
    assert all(u["cache_read"] > 0 for u in usages[1:]), usages
    headers = [e for e in agent.session.events if e.type.startswith("request/header")]
    assert [(e.type, e.data.get("reason")) for e in headers] == [("request/header", "initial")]
    assert_bytes_rebuild(agent.session, emulator)


async def test_tool_registration_is_one_delta_and_a_reorder_one_fallback() -> None:
    emulator = Emulator()
    async with agent_on(emulator, tools=[add]) as agent:
        await agent.run("one")
        agent.add_tool(shout)
        await agent.run("two")
        await agent.run("three")
        agent.tool_order = ["shout", "add"]
        await agent.run("four")
    headers = [e for e in agent.session.events if e.type.startswith("request/header")]
    kinds = [(e.type, e.data.get("reason")) for e in headers]
    assert kinds == [
        ("request/header", "initial"),
        ("request/header-delta", None),
        ("request/header", "fallback"),
    ]
    assert [t["name"] for t in headers[1].data["tools"]["add"]] == ["shout"]
    sent = [[t["function"]["name"] for t in decode(r.body)["tools"]] for r in emulator.received]
    assert sent == [["add"], ["add", "shout"], ["add", "shout"], ["shout", "add"]]
    assert_bytes_rebuild(agent.session, emulator)


async def test_inject_during_the_request_hook_joins_the_next_request() -> None:
    holder: dict[str, Agent] = {}
    calls: list[LlmCallConfig] = []

    def on_request(config: LlmCallConfig) -> None:
        calls.append(config)
        if len(calls) == 1:
            holder["agent"].inject("late context from the request hook")

    emulator = Emulator()
    async with agent_on(emulator, hooks=Hooks(request=on_request)) as agent:
        holder["agent"] = agent
        await agent.run("first")
        await agent.run("second")
    first, second = (r.body.decode() for r in emulator.received)
    assert "late context from the request hook" not in first
    assert "late context from the request hook" in second
    start = next(e for e in agent.session.events if e.type == "step/start")
    inject = next(e for e in agent.session.events if e.type == "context/message")
    assert inject.seq > start.seq
    assert_bytes_rebuild(agent.session, emulator)


async def test_the_request_hook_can_replace_the_config_and_it_is_logged() -> None:
    emulator = Emulator()
    hooks = Hooks(request=lambda config: config.replace(temperature=0.25))
    async with agent_on(emulator, hooks=hooks) as agent:
        await agent.run("hi")
    assert decode(emulator.received[0].body)["temperature"] == 0.25
    header = next(e for e in agent.session.events if e.type == "request/header")
    assert header.data["header"]["config"]["temperature"] == 0.25
    assert_bytes_rebuild(agent.session, emulator)


class _MutatingClient:
    """A provider edge that tries to edit the request it was given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.wire = inner.wire

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | None = None
    ) -> AsyncIterator[FrozenDict]:
        request.messages.append({"role": "user", "content": []})
        async for chunk in self.inner.stream(request, abort=abort, body=body):
            yield chunk


async def test_mutating_the_frozen_request_raises_and_ends_the_turn_with_an_error() -> None:
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        agent.client = _MutatingClient(agent.client)
        with pytest.raises(FrozenError, match="FrozenList is frozen"):
            await agent.run("hi")
    end = agent.session.events[-1]
    assert end.type == "turn/end"
    assert end.data["reason"]["kind"] == "error"
    assert end.data["reason"]["error"]["type"] == "FrozenError"
    assert types_of(agent.session)[-2] == "step/end"
    assert emulator.received == []


async def test_abort_mid_stream_logs_an_interrupted_message_and_closes_the_turn() -> None:
    emulator = Emulator(script=[{"text": "word " * 200}, {"text": "after"}])
    async with agent_on(emulator) as agent:
        seen: list[int] = []

        def on_event(event: Any) -> None:
            if event.type == "assistant/chunk" and event.data["chunk"]["kind"] == "text":
                seen.append(event.seq)
                if len(seen) == 3:
                    agent.abort("test")

        agent.session.subscribe(on_event)
        result = await agent.run("talk a lot")
        message = next(e for e in agent.session.events if e.type == "assistant/message")
        assert message.data["interrupted"] is True
        assert 0 < len(message.data["content"][0]["text"]) < len("word " * 200)
        assert result.reason["kind"] == "aborted"
        assert result.reason["by"] == "test"
        assert types_of(agent.session)[-2:] == ["step/end", "turn/end"]
        follow = await agent.run("go on")
        assert follow.reason["kind"] == "completed"
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_500_then_success_is_retried_and_each_attempt_logged() -> None:
    emulator = Emulator(script=[{"error": {"status": 500, "message": "boom"}}, {"text": "fine"}])
    async with agent_on(emulator) as agent:
        result = await agent.run("hi")
    assert result.reason["kind"] == "completed"
    assert result.text == "fine"
    errors = [
        e.data["chunk"]
        for e in agent.session.events
        if e.type == "assistant/chunk" and e.data["chunk"]["kind"] == "error"
    ]
    assert len(errors) == 1
    assert errors[0]["status"] == 500
    assert errors[0]["attempt"] == 1
    assert len(emulator.received) == 2
    assert emulator.received[0].body == emulator.received[1].body
    assert SECRET not in errors[0]["message"]
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_non_retryable_error_ends_the_turn_with_its_status() -> None:
    emulator = Emulator(script=[{"error": {"status": 400, "message": "bad request body"}}])
    async with agent_on(emulator) as agent:
        result = await agent.run("hi")
    assert result.reason["kind"] == "error"
    assert result.reason["error"]["status"] == 400
    assert "bad request body" in result.reason["error"]["message"]
    assert types_of(agent.session)[-3:] == ["assistant/message", "step/end", "turn/end"]
    message = agent.session.events[-3]
    assert message.data["content"] == []
    assert message.data["interrupted"] is True


async def test_a_bad_tool_argument_becomes_an_error_result_and_the_loop_goes_on() -> None:
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": "two", "b": 3}'}]},
            {"text": "sorry"},
        ]
    )
    async with agent_on(emulator, tools=[add]) as agent:
        result = await agent.run("add")
    res = next(e for e in agent.session.events if e.type == "tool/result")
    assert res.data["is_error"] is True
    assert res.data["content"].startswith("invalid arguments for add: a:")
    assert result.reason["kind"] == "completed"
    second = decode(emulator.received[1].body)["messages"]
    assert second[-1]["role"] == "tool"
    assert "invalid arguments" in second[-1]["content"]


async def test_max_tokens_ends_the_turn_with_that_reason() -> None:
    emulator = Emulator(script=[{"text": "cut", "finish": "length"}])
    async with agent_on(emulator) as agent:
        result = await agent.run("hi")
    assert result.reason["kind"] == "max_tokens"


async def test_the_api_key_never_reaches_the_store(tmp_path: Path) -> None:
    emulator = Emulator(
        script=[{"error": {"status": 503, "message": "busy"}}, {"text": "ok"}, {"text": "again"}]
    )
    store = JsonlStore(tmp_path)
    session = Session()
    with store.create(session) as writer:
        async with agent_on(emulator, session=session, writer=writer) as agent:
            await agent.run("hi")
            await agent.run("hello")
    data = (tmp_path / f"{session.id}.jsonl").read_bytes()
    assert SECRET.encode() not in data
    assert b"sk-test" not in data
    assert all(SECRET not in str(dict(r.headers)) for r in emulator.received)


async def test_resume_writes_a_resume_snapshot_and_still_rebuilds_byte_exact(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    store = JsonlStore(tmp_path)
    session = Session()
    with store.create(session) as writer:
        async with agent_on(emulator, session=session, writer=writer, tools=[add]) as agent:
            await agent.run("one")
    resumed, writer = store.open(session.id)
    with writer:
        async with agent_on(emulator, session=resumed, writer=writer, tools=[add]) as agent:
            await agent.run("two")
    reloaded = store.load(session.id).session
    reasons = [e.data["reason"] for e in reloaded.events if e.type == "request/header"]
    assert reasons == ["initial", "resume"]
    assert_bytes_rebuild(reloaded, emulator)
    usage = [e.data["usage"] for e in reloaded.events if e.type == "assistant/message"]
    assert usage[1]["cache_read"] > 0


async def test_an_interrupted_turn_is_repaired_deterministically_on_resume() -> None:
    session = Session()
    session.append("turn/start", {"turn": 1})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 1}'}]}, {"text": "2"}]
    )
    async with agent_on(emulator, session=session, tools=[add]) as agent:
        pass
    # Simulate a crash after the tool call was logged: drop everything from tool/result on.
    async with agent_on(emulator, session=Session(), tools=[add]) as live:
        await live.run("add")
    events = list(live.session.events)
    cut = next(e.seq for e in events if e.type == "tool/result")
    crashed = Session.from_events(events[:cut])
    async with agent_on(Emulator(), session=crashed, tools=[add]) as agent:
        repaired = [e.type for e in agent.repaired]
        assert repaired == ["tool/result", "step/end", "turn/end"]
        result_event = agent.repaired[0]
        assert result_event.data["is_error"] is True
        assert "outcome is unknown" in result_event.data["content"]
        assert agent.repaired[-1].data["reason"]["kind"] == "interrupted"
        follow = await agent.run("again")
    assert follow.reason["kind"] == "completed"


async def test_hooks_feed_the_request_only_through_logged_channels() -> None:
    prefix_calls: list[Any] = []
    pre_steps: list[tuple[int, int, int]] = []

    def session_prefix(seed: Any) -> list[dict[str, Any]]:
        prefix_calls.append(seed)
        return [{"role": "user", "content": [{"type": "text", "text": "Project notes: v2."}]}]

    hooks = Hooks(
        session_prefix=session_prefix,
        pre_step=lambda ctx: pre_steps.append((ctx.turn, ctx.step, len(ctx.prefix))),
        prompt_submit=lambda content: "submitted at noon",
        tool_post_execute=lambda info, outcome: f"{info.name} ran",
    )
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]}, {"text": "3"}]
    )
    async with agent_on(emulator, tools=[add], hooks=hooks) as agent:
        await agent.run("one")
        await agent.run("two")
    assert len(prefix_calls) == 1, "the prefix is composed once per loop instance"
    assert prefix_calls[0] == []
    assert pre_steps == [(1, 1, 1), (1, 2, 1), (2, 1, 1)]
    header = next(e for e in agent.session.events if e.type == "request/header")
    assert header.data["header"]["prefix"][0]["content"][0]["text"] == "Project notes: v2."
    contexts = [
        (e.data["source"]["kind"], e.data["content"][0]["text"])
        for e in agent.session.events
        if e.type == "context/message"
    ]
    assert contexts == [
        ("prompt-submit", "submitted at noon"),
        ("tool-post-execute", "add ran"),
        ("prompt-submit", "submitted at noon"),
    ]
    second = decode(emulator.received[1].body)["messages"]
    assert second[1]["content"] == "Project notes: v2."
    assert second[-1] == {"role": "user", "content": "add ran"}
    assert_bytes_rebuild(agent.session, emulator)


@tool
async def slow(label: str, delay: float) -> str:
    """Sleep, then echo the label."""
    await asyncio.sleep(delay)
    return label


async def test_tool_calls_run_concurrently_and_commit_in_the_models_order() -> None:
    emulator = Emulator(
        script=[
            {
                "tool_calls": [
                    {"name": "slow", "arguments": '{"label": "first", "delay": 0.3}'},
                    {"name": "slow", "arguments": '{"label": "second", "delay": 0.0}'},
                ]
            },
            {"text": "done"},
        ]
    )
    async with agent_on(emulator, tools=[slow]) as agent:
        started = time.perf_counter()
        await agent.run("go")
        elapsed = time.perf_counter() - started
    results = [e.data["content"] for e in agent.session.events if e.type == "tool/result"]
    assert results == ["first", "second"]
    kinds = [e.type for e in agent.session.events if e.type in ("tool/call", "tool/result")]
    assert kinds == ["tool/call", "tool/call", "tool/result", "tool/result"]
    assert elapsed < 0.55, "the two calls overlapped"


@tool
async def nap(seconds: float) -> str:
    """Sleep for a while."""
    await asyncio.sleep(seconds)
    return "rested"


async def test_abort_mid_tool_cancels_it_with_an_error_result_and_closes_the_turn() -> None:
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "nap", "arguments": '{"seconds": 30}'}]}, {"text": "ok"}]
    )
    async with agent_on(emulator, tools=[nap]) as agent:

        def on_event(event: Any) -> None:
            if event.type == "tool/call":
                asyncio.get_running_loop().call_later(0.05, agent.abort, "test")

        agent.session.subscribe(on_event)
        started = time.perf_counter()
        result = await agent.run("rest")
        assert time.perf_counter() - started < 5
        assert result.reason == {"kind": "aborted", "by": "test"}
        res = next(e for e in agent.session.events if e.type == "tool/result")
        assert res.data["is_error"] is True
        assert res.data["error"] == {"kind": "aborted"}
        assert types_of(agent.session)[-3:] == ["tool/result", "step/end", "turn/end"]
        follow = await agent.run("again")
    assert follow.reason["kind"] == "completed"
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_connection_error_is_retried_with_the_same_bytes() -> None:
    emulator = Emulator(script=[{"text": "reached"}])
    inner = emulator.transport()
    failures: list[bytes] = []

    class FlakyEdge(httpx.AsyncBaseTransport):
        """The network edge: the first connection attempt fails."""

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if not failures:
                failures.append(await request.aread())
                raise httpx.ConnectError("connection refused", request=request)
            return await inner.handle_async_request(request)

    config = LlmCallConfig(provider="deepseek", model="deepseek-chat")
    async with httpx.AsyncClient(transport=FlakyEdge()) as http:
        client = make_client(
            config,
            base_url="http://emulator/deepseek",
            http_client=http,
            env={"DEEPSEEK_API_KEY": SECRET},
        )
        agent = Agent(Session(), client, config=config, retry=RetryPolicy(base_delay=0.0))
        result = await agent.run("hi")
    assert result.text == "reached"
    errors = [e.data["chunk"] for e in agent.session.events if e.type == "assistant/chunk"]
    assert errors[0]["kind"] == "error"
    assert errors[0]["status"] is None
    assert "connection" in errors[0]["message"].lower()
    assert failures == [emulator.received[0].body]


class _DurabilityProbe:
    """The provider edge looks at the stored file at the moment a request goes out."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner, self.path = inner, path
        self.provider, self.wire = inner.provider, inner.wire
        self.seen: list[list[str]] = []

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | None = None
    ) -> AsyncIterator[FrozenDict]:
        lines = self.path.read_bytes().splitlines()[1:]
        self.seen.append([decode(line)["type"] for line in lines])
        async for chunk in self.inner.stream(request, abort=abort, body=body):
            yield chunk


async def test_the_store_is_durable_before_each_request_and_at_turn_end(tmp_path: Path) -> None:
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 1}'}]}, {"text": "2"}]
    )
    store = JsonlStore(tmp_path)
    session = Session()
    with store.create(session) as writer:
        async with agent_on(emulator, session=session, writer=writer, tools=[add]) as agent:
            probe = _DurabilityProbe(agent.client, tmp_path / f"{session.id}.jsonl")
            agent.client = probe
            await agent.run("add")
            on_disk = [decode(x)["type"] for x in probe.path.read_bytes().splitlines()[1:]]
            # each flush ends with the digest of what it wrote
            assert on_disk[-2:] == ["turn/end", "log/digest"], (
                "the turn end is flushed before run() returns"
            )
    for seen in probe.seen:
        assert seen[-1] == "log/digest"
        assert seen[-2] in ("request/header", "step/start", "request/header-delta")
    assert probe.seen[1].count("tool/result") == 1


async def test_an_abort_before_the_request_is_sent_sends_nothing_and_ends_the_turn() -> None:
    holder: dict[str, Agent] = {}
    emulator = Emulator()
    hooks = Hooks(request=lambda config: holder["agent"].abort("early"))
    async with agent_on(emulator, hooks=hooks) as agent:
        holder["agent"] = agent
        result = await agent.run("hi")
    assert result.reason == {"kind": "aborted", "by": "early"}
    assert emulator.received == []
    assert types_of(agent.session)[-3:] == ["assistant/message", "step/end", "turn/end"]
    message = next(e for e in agent.session.events if e.type == "assistant/message")
    assert message.data["interrupted"] is True
    assert message.data["content"] == []
