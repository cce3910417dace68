"""A turn's end is written before the client has the answer, synced after it.

The proxy spends one sync per request on the client's wait (the request's
events, before the send); the answer's events are written before its last
byte reaches the client and synced after, off the client's wait
(``_turn_end``). These tests hold that background part (the sync, the
index point, the release) at the moment a kill would hit it and check:
nothing logged is lost (the store's file already holds the whole turn),
the next request waits for it and extends the same session, and every body
the upstream got rebuilds byte for byte from the log.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from proxy._helpers import assert_rebuilds, in_process, post, sessions_in
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.proxy._sessions import SessionState
from tapelog.proxy._turn_end import TurnEnd
from tapelog.store import JsonlStore

_PATH = "/v1/chat/completions"


class Held:
    """``TurnEnd``'s work after the answer, held until :meth:`go` (as a kill
    would find it: the answer delivered, its end written, not yet synced)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = asyncio.Event()
        self.reached = asyncio.Event()
        close_later = TurnEnd._close_later

        async def held(
            turn_end: TurnEnd, state: SessionState, answered: asyncio.Future[None] | None
        ) -> None:
            self.reached.set()
            await self.gate.wait()
            await close_later(turn_end, state, answered)

        monkeypatch.setattr(TurnEnd, "_close_later", held)

    def go(self) -> None:
        self.gate.set()


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``os.fsync`` of the test, in order."""
    calls: list[str] = []
    fsync = os.fsync

    def counted(fd: int) -> None:
        calls.append("fsync")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def _body(messages: list[dict[str, Any]], stream: bool = False) -> dict[str, Any]:
    return {"model": "deepseek-chat", "messages": messages, "stream": stream}


def _answer(response: Any, stream: bool) -> str:
    assert response.status_code == 200, response.text
    if not stream:
        return str(response.json()["choices"][0]["message"]["content"])
    return "".join(
        part
        for line in response.text.splitlines()
        if line.startswith("data: {")
        for choice in decode(line[6:])["choices"]
        if (part := choice.get("delta", {}).get("content"))
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_proxy_killed_after_the_answer_loses_nothing_and_the_next_request_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    store, after_kill = tmp_path / "store", tmp_path / "after-kill"
    emu = Emulator()
    held = Held(monkeypatch)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    async with in_process(store, emulator=emu) as (proxy, _, http):
        response = await post(http, _PATH, _body(messages, stream))
        try:
            answer = _answer(response, stream)
            await asyncio.wait_for(held.reached.wait(), 10)  # the turn's sync is pending
            (state,) = proxy.sessions._open.values()
            live = [e.encode() for e in state.session.events]
            # A SIGKILL now: the process's memory is gone, the written bytes stay.
            shutil.copytree(store, after_kill, ignore=shutil.ignore_patterns(".locks"))
        finally:
            held.go()
    kept = sessions_in(after_kill)  # each verified first
    (session,) = kept.values()
    assert [e.encode() for e in session.events] == live, "every logged event was written"
    assert [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"] == [
        "completed"
    ]
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "two"}]
    async with in_process(after_kill, emulator=emu) as (_, _, http):  # the restarted proxy
        _answer(await post(http, _PATH, _body(messages, stream)), stream)
    kept = sessions_in(after_kill)
    assert list(kept) == [session.id], "the restarted proxy continued the same session"
    (session,) = kept.values()
    ends = [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]
    assert ends == ["completed", "completed"]
    assert_rebuilds(kept, emu)
    assert JsonlStore(after_kill).load(session.id).warnings == ()


async def test_one_fsync_before_the_send_and_the_turns_sync_after_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsyncs: list[str]
) -> None:
    emu = Emulator()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    async with in_process(tmp_path, emulator=emu) as (proxy, _, http):
        answer = _answer(await post(http, _PATH, _body(messages)), False)
        await proxy.sessions.settled()
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "two"}]
        held = Held(monkeypatch)
        fsync = os.fsync

        def marked(fd: int) -> None:
            fsync(fd)
            fsyncs.append(f"upstream had {len(emu.received)}")

        monkeypatch.setattr(os, "fsync", marked)
        fsyncs.clear()
        try:
            await post(http, _PATH, _body(messages))
            # One sync on the client's wait, before the upstream got the request.
            assert fsyncs == ["fsync", "upstream had 1"]
        finally:
            held.go()
        await proxy.sessions.settled()
        assert fsyncs[2:] == ["fsync", "upstream had 2"], "the turn's end synced after"
    assert len(sessions_in(tmp_path)) == 1


async def test_the_next_request_waits_for_the_turn_end_and_extends_the_same_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu = Emulator()
    held = Held(monkeypatch)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    async with in_process(tmp_path, emulator=emu) as (_, _, http):
        answer = _answer(await post(http, _PATH, _body(messages)), False)
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "two"}]
        second = asyncio.ensure_future(post(http, _PATH, _body(messages)))
        try:
            await asyncio.sleep(0.2)
            assert not second.done()
            assert len(emu.received) == 1, "nothing is sent before the last turn's end is durable"
        finally:
            held.go()
        _answer(await second, False)
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1, "extended, not forked around a session still closing"
    (session,) = sessions.values()
    ends = [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]
    assert ends == ["completed", "completed"]
    assert_rebuilds(sessions, emu)


async def test_a_power_loss_before_the_turns_sync_is_repaired_and_the_session_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the one window can lose: a power loss after the answer's end was
    written, before its sync, takes the file back to the request's sync. Load
    repairs that turn as interrupted (docs/format.md, "Repair on resume") and
    the conversation's next request continues the session, rebuilding byte
    for byte."""
    store, after = tmp_path / "store", tmp_path / "after-power-loss"
    emu = Emulator()
    synced: dict[str, int] = {}  # each file's size at its last fsync
    fsync = os.fsync

    def remembered(fd: int) -> None:
        fsync(fd)
        synced[os.readlink(f"/proc/self/fd/{fd}")] = os.fstat(fd).st_size

    monkeypatch.setattr(os, "fsync", remembered)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    async with in_process(store, emulator=emu) as (proxy, _, http):
        answer = _answer(await post(http, _PATH, _body(messages)), False)
        await proxy.sessions.settled()  # turn 1 synced and in the index
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "two"}]
        held = Held(monkeypatch)
        try:
            answer = _answer(await post(http, _PATH, _body(messages)), False)
            await asyncio.wait_for(held.reached.wait(), 10)
            (state,) = proxy.sessions._open.values()
            name = f"{state.id}.jsonl"
            written = (store / name).stat().st_size
            durable = synced[str((store / name).resolve())]
            shutil.copytree(store, after, ignore=shutil.ignore_patterns(".locks"))
            with (after / name).open("r+b") as copy:
                copy.truncate(durable)  # the power loss: what the last sync made durable
        finally:
            held.go()
    assert durable < written, "the answer's end was written after the request's sync"
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "three"}]
    async with in_process(after, emulator=emu) as (_, _, http):
        _answer(await post(http, _PATH, _body(messages)), False)
    kept = sessions_in(after)
    assert list(kept) == [state.id], "the next request continued the same session"
    (session,) = kept.values()
    ends = [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]
    assert ends == ["completed", "interrupted", "completed"]
    assert len(emu.received) == 3
    assert_rebuilds(kept, emu)


class _DurableWrites(JsonlStore):
    """A store whose every write is durable when it returns, as PostgreSQL's."""

    syncs_later = False


async def test_a_store_whose_writes_are_durable_ends_the_turn_before_the_answers_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No sync to move: the turn is released and indexed before the client has
    the answer's end (replicas on other machines find it so at once)."""
    monkeypatch.setattr("proxy._helpers.JsonlStore", _DurableWrites)
    held = Held(monkeypatch)
    emu = Emulator()
    async with in_process(tmp_path, emulator=emu) as (proxy, _, http):
        assert isinstance(proxy.store, _DurableWrites)
        try:
            _answer(await post(http, _PATH, _body([{"role": "user", "content": "one"}])), False)
            assert not held.reached.is_set(), "nothing left to do after the answer"
            assert not proxy.sessions._open, "released before the answer's end"
            records, _ = proxy.sessions.points.read(0)
            assert records, "its point in the store's index before the answer's end"
        finally:
            held.go()
    assert len(sessions_in(tmp_path)) == 1
