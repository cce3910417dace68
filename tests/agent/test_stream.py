"""``Agent.stream`` and ``Agent.run_sync`` end to end (issue 9, item 2).

The stream is a translation of the log: every event it yields names the seq of
the log event it came from, the text deltas add up to the logged
``assistant/message`` text on both wire families, and stopping it early, an
abort, a provider error or a raising turn all leave a log that closes its turn
and rebuilds byte for byte. ``run_sync`` runs turns from plain functions on the
agent's own event loop, and refuses inside a running one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from tapelog import LogError, Session, TapelogError
from tapelog.agent import (
    Agent,
    AttemptFailed,
    Hooks,
    MessageEvent,
    ReasoningDelta,
    StepEnd,
    StreamEvent,
    TextDelta,
    Tool,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    tool,
)
from tapelog.agent._stream import _Feed
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log._api import Event, LlmCallConfig

from ._harness import add, agent_on, assert_bytes_rebuild

WIRES = ["deepseek", "openai", "anthropic"]
LONG = "Part one. " + "The log is the single source of truth. " * 40


async def _collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def _drain(events: AsyncIterator[StreamEvent], into: list[StreamEvent]) -> None:
    """Read the stream into ``into`` (what was read before an exception stays there)."""
    async for event in events:
        into.append(event)


def _of(events: list[StreamEvent], kind: type[StreamEvent]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _chunks(session: Session, kind: str) -> list[Event]:
    return [
        e for e in session.events if e.type == "assistant/chunk" and e.data["chunk"]["kind"] == kind
    ]


def _logged(session: Session, etype: str) -> list[Event]:
    return [e for e in session.events if e.type == etype]


def _blocks_text(content: Any, btype: str) -> str:
    return "".join(b["text"] for b in content if b["type"] == btype)


def _assert_deltas_match_messages(events: list[StreamEvent], session: Session) -> None:
    """Per step, the deltas after the step's last failed attempt add up to its message."""
    messages = _logged(session, "assistant/message")
    assert [m.seq for m in _of(events, MessageEvent)] == [m.seq for m in messages]
    for message in messages:
        step = message.data["step"]
        mine = [e for e in events if getattr(e, "step", None) == step and e.seq < message.seq]
        failed = [i for i, e in enumerate(mine) if isinstance(e, AttemptFailed)]
        mine = mine[failed[-1] + 1 :] if failed else mine
        text = "".join(e.text for e in mine if isinstance(e, TextDelta))
        reasoning = "".join(e.text for e in mine if isinstance(e, ReasoningDelta))
        assert text == _blocks_text(message.data["content"], "text")
        assert reasoning == _blocks_text(message.data["content"], "reasoning")


@pytest.mark.parametrize("provider", WIRES)
async def test_the_stream_is_the_log_translated_event_for_event(provider: str) -> None:
    emulator = Emulator(
        script=[
            {
                "reasoning": "I should add them with the tool, then answer in a sentence.",
                "text": "Let me add those for you.",
                "tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 3}'}],
            },
            {"reasoning": "The tool said 5.", "text": "2 + 3 = 5, as the add tool says. " * 3},
        ]
    )
    async with agent_on(emulator, provider=provider, tools=[add]) as agent:
        events = await _collect(agent.stream("What is 2 + 3?"))
        session = agent.session
    # every event names the log event it came from, in log order, none missing
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert [e.seq for e in _of(events, TextDelta)] == [e.seq for e in _chunks(session, "text")]
    assert [e.text for e in _of(events, TextDelta)] == [
        e.data["chunk"]["text"] for e in _chunks(session, "text")
    ]
    reasoning = _chunks(session, "reasoning")
    assert [e.seq for e in _of(events, ReasoningDelta)] == [e.seq for e in reasoning]
    if provider != "openai":  # the emulator sends reasoning on the DeepSeek and Anthropic wires
        assert len(reasoning) >= 2
    _assert_deltas_match_messages(events, session)
    calls, results = _logged(session, "tool/call"), _logged(session, "tool/result")
    assert [(e.seq, e.call_id, e.name, e.arguments) for e in _of(events, ToolCallEvent)] == [
        (e.seq, e.data["call_id"], e.data["name"], e.data["arguments"]) for e in calls
    ]
    assert [(e.seq, e.call_id, e.content, e.is_error) for e in _of(events, ToolResultEvent)] == [
        (e.seq, e.data["call_id"], e.data["content"], e.data["is_error"]) for e in results
    ]
    assert _of(events, ToolResultEvent)[0].content == "5"
    assert [(e.seq, e.step, e.sent) for e in _of(events, StepEnd)] == [
        (e.seq, e.data["step"], True) for e in _logged(session, "step/end")
    ]
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.seq == _logged(session, "turn/end")[-1].seq
    assert end.reason == {"kind": "completed"}
    assert end.result.ok
    assert end.result.steps == 2
    assert (
        end.result.text
        == _of(events, MessageEvent)[-1].text
        == "2 + 3 = 5, as the add tool says. " * 3
    )
    assert len(_of(events, TurnEnd)) == 1
    assert_bytes_rebuild(session, emulator)


async def test_a_retried_attempt_is_announced_and_only_the_last_attempt_is_the_answer() -> None:
    emulator = Emulator(
        script=[
            {"text": "This first attempt is cut off in the middle of its text.", "cut_after": 3},
            {"text": "The second attempt arrives whole."},
        ]
    )
    async with agent_on(emulator) as agent:
        events = await _collect(agent.stream("hi"))
        session = agent.session
    (failed,) = _of(events, AttemptFailed)
    assert failed.attempt == 1
    assert failed.retry_in_ms == 0
    assert not failed.overflow
    before = [e.text for e in _of(events, TextDelta) if e.seq < failed.seq]
    after = [e.text for e in _of(events, TextDelta) if e.seq > failed.seq]
    assert before  # the cut attempt's text was streamed (and logged) ...
    assert "".join(after) == "The second attempt arrives whole."  # ... but is not the answer
    _assert_deltas_match_messages(events, session)
    assert_bytes_rebuild(session, emulator)


async def test_a_provider_error_ends_the_stream_with_a_turn_end_of_kind_error() -> None:
    emulator = Emulator(script=[{"error": {"status": 400, "message": "bad request body"}}])
    async with agent_on(emulator) as agent:
        events = await _collect(agent.stream("hi"))
    message, step_end, end = events
    assert isinstance(message, MessageEvent)
    assert message.content == []
    assert message.interrupted
    assert isinstance(step_end, StepEnd)
    assert isinstance(end, TurnEnd)
    assert end.reason["kind"] == "error"
    assert end.reason["error"]["status"] == 400
    assert end.result.reason == end.reason


async def test_an_exception_of_the_turn_is_raised_after_the_events_logged_before_it() -> None:
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 1}'}]}, {"text": "2"}]
    )

    def pre_step(context: Any) -> None:
        if context.step == 2:
            raise RuntimeError("the pre-step hook broke")

    seen: list[StreamEvent] = []
    async with agent_on(emulator, tools=[add], hooks=Hooks(pre_step=pre_step)) as agent:
        with pytest.raises(RuntimeError, match="the pre-step hook broke"):
            await _drain(agent.stream("add"), seen)
        session = agent.session
    assert [type(e) for e in seen] == [
        MessageEvent,
        ToolCallEvent,
        ToolResultEvent,
        StepEnd,
        TurnEnd,
    ]
    end = seen[-1]
    assert isinstance(end, TurnEnd)
    assert end.seq == session.events[-1].seq
    assert end.reason["kind"] == "error"
    assert end.reason["error"] == {"type": "RuntimeError", "message": "the pre-step hook broke"}
    assert end.result.turn == 1
    assert end.result.steps == 2
    assert_bytes_rebuild(session, emulator)


@pytest.mark.parametrize("provider", WIRES)
async def test_abort_while_iterating_ends_with_an_aborted_turn_end(provider: str) -> None:
    emulator = Emulator(script=[{"text": LONG}, {"text": "after"}])
    async with agent_on(emulator, provider=provider) as agent:
        events: list[StreamEvent] = []
        async for event in agent.stream("talk a lot"):
            events.append(event)
            if len(_of(events, TextDelta)) == 2:
                agent.abort("test")
        session = agent.session
        (message,) = _of(events, MessageEvent)
        assert message.interrupted
        assert 0 < len(message.text) < len(LONG)
        _assert_deltas_match_messages(events, session)
        assert [e.seq for e in _of(events, TextDelta)] == [e.seq for e in _chunks(session, "text")]
        end = events[-1]
        assert isinstance(end, TurnEnd)
        assert end.reason == {"kind": "aborted", "by": "test"}
        assert session.events[-1].type == "turn/end"
        follow = await agent.run("go on")
    assert follow.ok
    assert_bytes_rebuild(session, emulator)


@tool
async def nap(seconds: float) -> str:
    """Sleep for a while."""
    await asyncio.sleep(seconds)
    return "rested"


async def test_abort_during_a_tool_ends_the_stream_at_once() -> None:
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "nap", "arguments": '{"seconds": 30}'}]}, {"text": "ok"}]
    )
    async with agent_on(emulator, tools=[nap]) as agent:
        started = time.perf_counter()
        events: list[StreamEvent] = []
        async for event in agent.stream("rest"):
            events.append(event)
            if isinstance(event, ToolCallEvent):
                agent.abort("test")
        assert time.perf_counter() - started < 5
    result = _of(events, ToolResultEvent)[0]
    assert result.is_error
    assert result.error == {"kind": "aborted"}
    assert [type(e) for e in events[-3:]] == [ToolResultEvent, StepEnd, TurnEnd]
    assert events[-1].reason == {"kind": "aborted", "by": "test"}  # type: ignore[attr-defined]
    assert_bytes_rebuild(agent.session, emulator)


@pytest.mark.parametrize("provider", WIRES)
async def test_closing_the_stream_early_aborts_the_turn_and_the_log_closes_it(
    provider: str,
) -> None:
    emulator = Emulator(script=[{"text": LONG}, {"text": "after"}])
    async with agent_on(emulator, provider=provider) as agent:
        deltas = 0
        async with contextlib.aclosing(agent.stream("talk a lot")) as events:
            async for event in events:
                deltas += isinstance(event, TextDelta)
                if deltas == 2:
                    break
        # aclose() returned: the turn is over and its end is logged
        session = agent.session
        end = session.events[-1]
        assert end.type == "turn/end"
        assert end.data["reason"] == {"kind": "aborted", "by": "stream-closed"}
        (message,) = _logged(session, "assistant/message")
        assert message.data["interrupted"] is True
        assert _blocks_text(message.data["content"], "text") == "".join(
            e.data["chunk"]["text"] for e in _chunks(session, "text")
        )
        follow = await agent.run("go on")
    assert follow.ok
    assert_bytes_rebuild(session, emulator)


async def test_a_plain_break_aborts_the_turn_too() -> None:
    emulator = Emulator(script=[{"text": LONG}, {"text": "after"}])
    async with agent_on(emulator) as agent:
        async for event in agent.stream("talk a lot"):
            if isinstance(event, TextDelta):
                break
        # The generator is closed when collected (at once in CPython), by a
        # task the event loop schedules: the turn ends soon after, aborted.
        gc.collect()
        for _ in range(500):
            if agent.session.events[-1].type == "turn/end":
                break
            await asyncio.sleep(0.01)
        end = agent.session.events[-1]
        assert end.type == "turn/end"
        assert end.data["reason"] == {"kind": "aborted", "by": "stream-closed"}
        follow = await agent.run("go on")
    assert follow.ok
    assert_bytes_rebuild(agent.session, emulator)


async def test_cancelling_the_consumer_aborts_the_turn_without_a_hang() -> None:
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "nap", "arguments": '{"seconds": 30}'}]}, {"text": "ok"}]
    )
    async with agent_on(emulator, tools=[nap]) as agent:
        calling = asyncio.Event()

        async def consume() -> None:
            async for event in agent.stream("rest"):
                if isinstance(event, ToolCallEvent):
                    calling.set()

        started = time.perf_counter()
        consumer = asyncio.create_task(consume())
        await calling.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
        assert time.perf_counter() - started < 5
        end = agent.session.events[-1]
        assert end.type == "turn/end"
        assert end.data["reason"] == {"kind": "aborted", "by": "stream-closed"}
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_second_turn_on_a_busy_session_raises_and_streams_nothing_of_the_other() -> None:
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "nap", "arguments": '{"seconds": 0.2}'}]}, {"text": "ok"}]
    )
    async with agent_on(emulator, tools=[nap]) as agent:
        other = Agent(agent.session, agent.client, config=agent.config)
        running = asyncio.create_task(agent.run("rest"))
        while not _logged(agent.session, "tool/call"):
            await asyncio.sleep(0.01)
        seen: list[StreamEvent] = []
        with pytest.raises(LogError, match="already running"):
            await _drain(other.stream("me too"), seen)
        assert seen == []
        assert (await running).ok
    assert len(_logged(agent.session, "turn/start")) == 1


async def test_a_stream_never_iterated_starts_nothing() -> None:
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        stream = agent.stream("hi")
        del stream
        gc.collect()
        await asyncio.sleep(0)
        assert len(agent.session.events) == 0
        await agent.stream("hi").aclose()
        assert len(agent.session.events) == 0
    assert emulator.received == []


async def test_appends_from_other_threads_reach_the_consumer_in_log_order() -> None:
    """The listener runs on whichever thread appends (inside the session lock):
    events from a worker thread and from the loop's own thread are handed over
    in seq order, and a worker thread's append wakes the consumer."""
    session = Session()
    feed = _Feed(asyncio.get_running_loop())
    feed.started = True  # as after this turn's turn/start
    session.subscribe(feed.listen)

    def chunk(text: str) -> None:
        session.append(
            "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"kind": "text", "text": text}}
        )

    worker = threading.Thread(target=lambda: [chunk(f"thread {i}") for i in range(200)])
    worker.start()
    for i in range(200):
        chunk(f"loop {i}")
        await asyncio.sleep(0)
    worker.join()
    assert [e.seq for e in feed.pending] == list(range(400))
    feed.pending.clear()
    feed.wake.clear()
    threading.Thread(target=chunk, args=("late",)).start()
    await asyncio.wait_for(feed.wake.wait(), timeout=5)
    assert [e.seq for e in feed.pending] == [400]


# --- run_sync ------------------------------------------------------------------


def _sync_agent(emulator: Emulator, tools: Sequence[Tool] = (add,)) -> Agent:
    config = LlmCallConfig(provider="emulator", model="emulator-1")
    http = httpx.AsyncClient(transport=emulator.transport(), timeout=30)
    client = make_client(config, base_url="http://emulator/v1", http_client=http)
    return Agent(Session(), client, config=config, tools=tools)


def test_run_sync_runs_consecutive_turns_from_plain_code() -> None:
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 2}'}]},
            {"text": "four"},
            {"text": "still four"},
        ]
    )
    agent = _sync_agent(emulator)
    first = agent.run_sync("2 + 2?")
    second = agent.run_sync("sure?")
    assert (first.text, first.steps, first.ok) == ("four", 2, True)
    assert (second.text, second.turn, second.ok) == ("still four", 2, True)
    assert_bytes_rebuild(agent.session, emulator)


def test_run_sync_reuses_connections_across_calls(loopback_emulator: tuple[Emulator, int]) -> None:
    """Over real TCP: the first turn's error answer leaves its connection in the
    HTTP client's pool; the second turn reuses it, which only works on the
    loop that opened it (a fresh loop per call fails with "Event loop is closed")."""
    emulator, port = loopback_emulator
    emulator.push({"error": {"status": 400, "message": "refused once"}}, {"text": "second"})
    config = LlmCallConfig(provider="emulator", model="emulator-1")
    client = make_client(config, base_url=f"http://127.0.0.1:{port}/v1")
    agent = Agent(Session(), client, config=config)
    first = agent.run_sync("one")
    assert first.reason["kind"] == "error"
    assert "refused once" in first.reason["error"]["message"]
    second = agent.run_sync("two")
    assert second.ok, second.reason
    assert second.text == "second"
    assert_bytes_rebuild(agent.session, emulator)
    # The answer was read to its end, so its connection stays in the pool
    # (kept alive) until the client is closed, on the loop that opened it.
    agent._sync.run(client.aclose, "await client.aclose()")


def test_run_sync_from_a_second_thread_is_refused_while_a_turn_runs() -> None:
    emulator = Emulator(
        script=[{"tool_calls": [{"name": "nap", "arguments": '{"seconds": 0.5}'}]}, {"text": "ok"}]
    )
    agent = _sync_agent(emulator, tools=[nap])
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(agent.run_sync("rest")))
    first.start()
    while not _logged(agent.session, "tool/call"):
        time.sleep(0.01)
    with pytest.raises(TapelogError, match="already running a turn of this agent"):
        agent.run_sync("me too")
    first.join(timeout=30)
    assert results[0].ok
    assert len(_logged(agent.session, "turn/start")) == 1
    assert agent.run_sync("now").ok  # the loop is free again


async def test_run_sync_inside_a_running_loop_says_to_await_run() -> None:
    emulator = Emulator()
    agent = _sync_agent(emulator)
    with pytest.raises(TapelogError, match=r"use `await agent.run\(\.\.\.\)` there instead"):
        agent.run_sync("hi")
    assert len(agent.session.events) == 0
    assert (await agent.run("hi")).ok
