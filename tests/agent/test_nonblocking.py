"""Store flushes never hold the caller's event loop (issue 9, item 6).

Asserted structurally, never by timing:

* every flush the loop makes runs on a thread other than the event loop's,
  and while it runs a task of the same loop gets to run (a flush that waits
  for that task would deadlock on the loop's own thread);
* appends from the event loop while a flush writes in another thread wait for
  the next flush: nothing is lost, the digests check, the log rebuilds;
* the ordering guarantees stay: a failing flush ends the step as not sent
  (nothing reaches the provider), the turn ends once, and a turn cancelled
  while its flush runs still stores its end before ``run()`` raises.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from pathlib import Path
from typing import Any

import pytest

from tapelog import Session, StoreError
from tapelog.audit import rebuild_requests
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.store import JsonlStore, SessionWriter
from tapelog.store import _jsonl as jsonl_module
from tapelog.store._api import verify_jsonl

from ._harness import add, agent_on, assert_bytes_rebuild

_DEADLOCK = 10.0  # seconds: only ever waited out when a flush blocks the event loop

TOOL_THEN_TEXT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
    {"text": "3"},
]


class HandshakeWriter:
    """A store writer whose every flush first waits for a task of the event loop
    to answer it. On the event loop's own thread no task could run meanwhile,
    so the flush would never be answered: the test fails instead of hanging."""

    def __init__(self, inner: SessionWriter, loop: asyncio.AbstractEventLoop) -> None:
        self.inner = inner
        self.loop = loop
        self.requests: asyncio.Queue[threading.Event] = asyncio.Queue()
        self.threads: list[int] = []

    def flush(self) -> None:
        self.threads.append(threading.get_ident())
        answered = threading.Event()
        self.loop.call_soon_threadsafe(self.requests.put_nowait, answered)
        if not answered.wait(_DEADLOCK):
            raise AssertionError("the flush ran on the event loop: no task ran during it")
        self.inner.flush()

    async def answer(self) -> None:
        while True:
            (await self.requests.get()).set()


def _stored_types(path: Path) -> list[str]:
    return [decode(line)["type"] for line in path.read_bytes().splitlines()[1:]]


async def test_every_flush_runs_off_the_event_loop_while_its_tasks_run(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session = Session()
    emulator = Emulator(script=[*TOOL_THEN_TEXT, *TOOL_THEN_TEXT])
    loop_thread = threading.get_ident()
    with store.create(session) as inner:
        writer = HandshakeWriter(inner, asyncio.get_running_loop())
        answering = asyncio.create_task(writer.answer())
        async with agent_on(emulator, session=session, writer=writer, tools=[add]) as agent:
            first = await agent.run("add")
            second = await agent.run("add again")
        answering.cancel()
        stored = _stored_types(store.path(session.id))
    assert first.ok, first.reason
    assert second.ok, second.reason
    # per turn: before each of its 2 requests, after the tool call, at its end
    assert len(writer.threads) == 8
    assert loop_thread not in writer.threads
    assert stored[-2:] == ["turn/end", "log/digest"], "turn/end is durable when run() returns"
    assert stored == [e.type for e in session.events]
    assert_bytes_rebuild(session, emulator)


async def test_appends_from_the_loop_during_a_flush_in_another_thread_wait_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("concurrent")
    writer = store.create(session)
    loop = asyncio.get_running_loop()
    writing = asyncio.Event()
    appended = threading.Event()
    write_all = jsonl_module.write_all

    def held_write(fd: int, data: bytes) -> None:  # the flush's write, mid-way
        loop.call_soon_threadsafe(writing.set)
        assert appended.wait(_DEADLOCK)
        write_all(fd, data)

    def context(text: str) -> None:
        content = [{"type": "text", "text": text}]
        data = {"content": content, "source": {"kind": "inject"}}
        session.append("context/message", data, surface_op="append")

    context("before the flush")
    monkeypatch.setattr(jsonl_module, "write_all", held_write)
    flushing = asyncio.ensure_future(asyncio.to_thread(writer.flush))
    await writing.wait()
    for i in range(20):  # on the event loop's thread, while the other one writes
        context(f"during the flush {i}")
    appended.set()
    await flushing
    monkeypatch.setattr(jsonl_module, "write_all", write_all)
    assert writer.pending == 20  # the flush stored what it had taken, and its digest
    stored = _stored_types(store.path("concurrent"))
    assert stored == ["context/message", "log/digest"]
    writer.close()
    data = store.path("concurrent").read_bytes()
    assert verify_jsonl(data, expected_id="concurrent").ok
    loaded = store.load("concurrent").session
    assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]
    assert [e.type for e in loaded.events][2:] == ["context/message"] * 20 + ["log/digest"]


def _disk_full_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """Let ``writes`` writes through (the new file's header is the first), then
    fail each one as a full disk does."""
    write_all = jsonl_module.write_all
    done = 0

    def full(fd: int, data: bytes) -> None:
        nonlocal done
        done += 1
        if done > writes:
            raise OSError(errno.ENOSPC, "No space left on device")
        write_all(fd, data)

    monkeypatch.setattr(jsonl_module, "write_all", full)


async def test_a_flush_failing_in_its_thread_ends_the_step_unsent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session()
    emulator = Emulator(script=[{"text": "never asked"}])
    _disk_full_after(monkeypatch, 1)  # every flush fails
    writer = store.create(session)
    async with agent_on(emulator, session=session, writer=writer) as agent:
        with pytest.raises(StoreError, match="No space left on device"):
            await agent.run("hi")
    assert emulator.received == []
    step_end = next(e for e in session.events if e.type == "step/end")
    assert step_end.data["sent"] is False
    assert [e.type for e in session.events].count("turn/end") == 1
    assert rebuild_requests(session.events) == []
    with pytest.raises(StoreError):
        writer.close()


async def test_a_turn_end_flush_that_fails_logs_the_end_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session()
    emulator = Emulator(script=[{"text": "hello"}])
    _disk_full_after(monkeypatch, 2)  # the header, the flush before the request
    writer = store.create(session)
    async with agent_on(emulator, session=session, writer=writer) as agent:
        with pytest.raises(StoreError, match="No space left on device"):
            await agent.run("hi")
    types = [e.type for e in session.events]
    assert types.count("turn/end") == 1
    assert types.count("step/end") == 1
    assert len(emulator.received) == 1
    assert_bytes_rebuild(session, emulator)
    monkeypatch.undo()  # the disk has room again: the writer stores what it kept
    writer.close()
    loaded = store.load(session.id).session
    assert [e.type for e in loaded.events].count("turn/end") == 1


async def test_a_turn_cancelled_while_its_flush_runs_stores_its_end_before_raising(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    session = Session()
    emulator = Emulator(script=[{"text": "never asked"}])
    loop = asyncio.get_running_loop()
    flushing = asyncio.Event()
    release = threading.Event()

    class HeldWriter:
        """Holds the first flush in its worker thread until the test releases it."""

        def __init__(self, inner: SessionWriter) -> None:
            self.inner = inner
            self.held = False

        def flush(self) -> None:
            if not self.held:
                self.held = True
                loop.call_soon_threadsafe(flushing.set)
                assert release.wait(_DEADLOCK)
            self.inner.flush()

    with store.create(session) as inner:
        async with agent_on(emulator, session=session, writer=HeldWriter(inner)) as agent:
            turn = asyncio.create_task(agent.run("hi"))
            await flushing.wait()
            turn.cancel()
            release.set()  # the worker thread's write goes on; the loop's flush waits for it
            with pytest.raises(asyncio.CancelledError):
                await turn
        stored = _stored_types(store.path(session.id))
    assert emulator.received == []
    types = [e.type for e in session.events]
    assert types.count("turn/end") == 1
    assert stored[-2:] == ["turn/end", "log/digest"]
    assert stored == types
    assert next(e for e in session.events if e.type == "step/end").data["sent"] is False
