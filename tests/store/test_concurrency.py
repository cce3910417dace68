"""Threads and concurrent turns: appends, flushes and runs that overlap.

* ``Session.append`` is safe under threads: seqs stay contiguous, listeners
  see events in seq order, a thread that appends while another publishes waits
  (no ``ReentrantAppendError`` for it), and an append from a listener on the
  publishing thread is still refused.
* ``SessionWriter.flush`` while other threads append loses nothing: what
  arrives during a write waits for the next flush; a failed write keeps its
  events in front of the newer ones.
* Two concurrent ``Agent.run`` calls on one session (one ``Agent`` or two)
  are refused before anything is logged; a log where two turns did interleave
  fails ``verify``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from _unruly import unruly
from tapelog import LlmCallConfig, LogError, ReentrantAppendError, Session, StoreError
from tapelog.agent import Agent, tool
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log import encode
from tapelog.log._api import Event
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl
from tapelog.store._format import header_line


def _turn(session: Session, turn: int, text: str) -> None:
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


# --- Session.append under threads (issue 8, item 12) --------------------------


def test_eight_threads_appending_get_contiguous_seqs_and_ordered_listeners() -> None:
    session = Session("threads")
    seen: list[int] = []

    def listener(event: Event) -> None:
        time.sleep(0)  # let other threads run while this event is published
        seen.append(event.seq)

    session.subscribe(listener)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def appender(worker: int) -> None:
        start.wait()
        try:
            for i in range(500):
                chunk = {"kind": "text", "text": "x"}  # a chunk outside a step: no rule binds it
                session.append(
                    "assistant/chunk", {"turn": worker * 1000 + i, "step": 0, "chunk": chunk}
                )
        except BaseException as exc:  # the test reports it below
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [e.seq for e in session.events] == list(range(4000))
    assert seen == list(range(4000))
    turns = sorted(e.data["turn"] for e in session.events)
    assert turns == sorted(w * 1000 + i for w in range(8) for i in range(500))
    assert Session.from_events(session.events).events == session.events


def test_a_thread_appending_while_another_publishes_waits_instead_of_failing() -> None:
    session = Session("wait")
    outcome: list[object] = []

    def other_thread() -> None:
        try:
            outcome.append(session.append("turn/end", {"turn": 0, "reason": {"kind": "x"}}))
        except BaseException as exc:
            outcome.append(exc)

    def listener(event: Event) -> None:
        if event.seq == 0:
            worker = threading.Thread(target=other_thread)
            worker.start()
            worker.join(timeout=0.3)  # it must be waiting for this listener to return
            assert worker.is_alive()
            outcome.append(worker)

    session.subscribe(listener)
    session.append("turn/start", {"turn": 0})
    worker = outcome.pop(0)
    assert isinstance(worker, threading.Thread)
    worker.join(timeout=10)
    (logged,) = outcome
    assert isinstance(logged, Event), logged
    assert logged.seq == 1
    assert [e.type for e in session.events] == ["turn/start", "turn/end"]


def test_an_append_from_a_listener_on_the_publishing_thread_is_still_refused() -> None:
    session = Session("reentrant")
    caught: list[Exception] = []

    def listener(event: Event) -> None:
        try:
            session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
        except ReentrantAppendError as exc:
            caught.append(exc)

    session.subscribe(listener)
    session.append("turn/start", {"turn": 0})
    assert len(caught) == 1
    assert len(session) == 1


# --- flush racing appends (item 11) -------------------------------------------


def test_an_event_appended_while_a_flush_writes_is_kept_for_the_next_flush(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("race")
    writer = store.create(session)
    write = writer._write

    def write_then_append(lines: list[bytes]) -> None:
        write(lines)
        # another thread logs an event while this flush is finishing
        late = threading.Thread(target=_turn, args=(session, 99, "late"))
        late.start()
        late.join()

    writer._write = write_then_append  # type: ignore[method-assign]
    _turn(session, 0, "first")
    writer.flush()
    writer._write = write  # type: ignore[method-assign]
    assert writer.pending == 3
    writer.close()
    loaded = store.load("race").session
    assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]
    assert [e.data["turn"] for e in loaded.events if e.type == "turn/start"] == [0, 99]


def test_a_failed_write_keeps_its_events_in_front_of_newer_ones(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session = Session("retry")
    writer = store.create(session)
    write = writer._write
    calls = 0

    def failing_once(lines: list[bytes]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise StoreError("disk trouble")
        write(lines)

    writer._write = failing_once  # type: ignore[method-assign]
    _turn(session, 0, "first")
    with pytest.raises(StoreError, match="disk trouble"):
        writer.flush()
    _turn(session, 1, "second")
    writer.close()
    loaded = store.load("retry")
    assert [e.encode() for e in loaded.session.events] == [e.encode() for e in session.events]
    digests = [e for e in loaded.session.events if e.type == "log/digest"]
    assert len(digests) == 2  # the failed write's digest, then the one that closed both
    assert loaded.digest is not None
    assert loaded.digest.seq == len(session) - 1


def test_eight_threads_appending_and_flushing_lose_nothing(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session = Session("eight")
    writer = store.create(session)
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        start.wait()
        try:
            for i in range(400):
                text = [{"type": "text", "text": f"{number * 1000 + i}"}]
                session.append(
                    "context/message",
                    {"content": text, "source": {"kind": "inject"}},
                    surface_op="append",
                )
                if i % 25 == number % 25:
                    writer.flush()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    assert errors == []
    loaded = store.load("eight")  # every digest checked against the file
    events = loaded.session.events
    assert [e.encode() for e in events] == [e.encode() for e in session.events]
    texts = [e.data["content"][0]["text"] for e in events if e.type == "context/message"]
    assert sorted(texts) == sorted(f"{n * 1000 + i}" for n in range(8) for i in range(400))
    assert verify_jsonl(store.path("eight").read_bytes(), expected_id="eight").ok


# --- concurrent turns (item 13) ------------------------------------------------


@tool
def wait(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long to wait.
    """
    time.sleep(seconds)
    return "waited"


def _tool_script(turns: int) -> list[dict[str, Any]]:
    call = {"tool_calls": [{"name": "wait", "arguments": '{"seconds": 0.05}'}]}
    return [call, {"text": "done"}] * turns


@pytest.mark.parametrize("agents", [1, 2])
async def test_a_second_concurrent_run_on_a_session_is_refused_before_logging(
    tmp_path: Path, agents: int
) -> None:
    emulator = Emulator(script=_tool_script(3))
    store = JsonlStore(tmp_path)
    session = Session("busy")
    config = LlmCallConfig(provider="emulator", model="emulator-1")
    async with httpx.AsyncClient(transport=emulator.transport()) as http:
        with store.create(session) as writer:
            made = [
                Agent(session, make_client(config, http_client=http), config=config, tools=[wait])
                for _ in range(agents)
            ]
            for agent in made:
                agent.writer = writer
            first, second = made[0], made[-1]
            results = await asyncio.gather(
                first.run("one"), second.run("two"), return_exceptions=True
            )
            ok, refused = results
            assert not isinstance(ok, BaseException), ok
            assert ok.reason["kind"] == "completed"
            assert isinstance(refused, LogError)
            assert str(refused) == (
                "cannot start a turn on session busy: a turn is already running on it "
                "(another Agent.run or compaction that has not returned); wait for it to "
                "finish, then start the turn: two at once would interleave their events and "
                "break every later request"
            )
            prompts = [e for e in session.events if e.type == "user/message"]
            assert len(prompts) == 1  # nothing of the refused turn was logged
            later = await second.run("three")  # once the first is done, the next may run
            assert later.reason["kind"] == "completed"
            assert later.turn == 2
    report = verify_jsonl(store.path("busy").read_bytes(), expected_id="busy")
    assert report.ok, [str(p) for p in report.problems]
    assert len(emulator.received) == 4


def _interleaved_log() -> bytes:
    """What two turns run at once used to log: turn 2 starts inside turn 1, and
    its request goes out while turn 1's tool call has no result yet."""
    s = unruly(Session("mixed", created=1, clock=lambda: 2))
    header = {"config": {"provider": "emulator", "model": "e"}}
    s.append("request/header", {"header": header, "reason": "initial"})
    text = [{"type": "text", "text": "go"}]
    call = {"type": "tool_call", "id": "c1", "name": "wait", "arguments": "{}"}
    source = {"provider": "emulator", "model": "e"}
    s.append("turn/start", {"turn": 1})
    s.append("user/message", {"content": text, "source": {"kind": "user"}}, surface_op="append")
    s.append("step/start", {"turn": 1, "step": 1})
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "content": [call], "source": source},
        surface_op="append",
    )
    s.append(
        "tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "wait", "arguments": "{}"}
    )
    s.append("turn/start", {"turn": 1})
    s.append("user/message", {"content": text, "source": {"kind": "user"}}, surface_op="append")
    s.append("step/start", {"turn": 1, "step": 1})
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "content": text, "source": source},
        surface_op="append",
    )
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    body = header_line(s.info) + b"\n"
    return body + b"".join(encode(e.to_json()) + b"\n" for e in s.events)


def test_verify_reports_interleaved_turns_and_an_unanswered_tool_call() -> None:
    report = verify_jsonl(_interleaved_log(), expected_id="mixed")
    assert [str(p) for p in report.problems] == [
        "line 8 (seq 6): turn 1 starts while turn 1 (seq 1) is still open: two turns ran at "
        "once on the session, or a turn/end is missing",
        "line 10 (seq 8): this step's request would hold tool calls without their results "
        "(c1 (seq 4)): a provider refuses such a request; two turns ran at once on the "
        "session, or results are missing",
    ]
    assert not report.ok


def test_verify_reports_a_step_inside_another_and_a_call_left_unanswered() -> None:
    s = unruly(Session("steps", created=1, clock=lambda: 2))
    s.append(
        "request/header",
        {"header": {"config": {"provider": "e", "model": "e"}}, "reason": "initial"},
    )
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "x", "arguments": "{}"})
    s.append("step/start", {"turn": 1, "step": 2})
    s.append("step/end", {"turn": 1, "step": 2})
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    data = header_line(s.info) + b"\n" + b"".join(e.encode() + b"\n" for e in s.events)
    assert [str(p) for p in verify_jsonl(data).problems] == [
        "line 6 (seq 4): step 2 of turn 1 starts while step 1 of turn 1 (seq 2) is still "
        "open: two turns ran at once on the session, or a step/end is missing",
        "line 8 (seq 6): step 1 of turn 1 ends, but no step is open",
    ]
    with pytest.raises(LogError, match=r"^seq 4: step 2 of turn 1 starts while step 1"):
        Session.from_events(s.events)  # load refuses it at the first break
