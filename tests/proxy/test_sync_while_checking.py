"""The request's sync runs while its body is rebuilt and checked; the send waits for both.

On a JSONL store the proxy writes the request's events at once, syncs them in
a thread and meanwhile rebuilds the body from the log and checks it
(``Proxy._durably``). What must still hold: exactly one sync before the
upstream has the request, nothing sent before that sync ends, and a body the
checker refuses, or a sync that fails, sends nothing and leaves a whole log
that the next request continues.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from proxy._helpers import assert_rebuilds, in_process, post, sessions_in
from tapelog._errors import ReconstructionError
from tapelog.checker._checker import RequestChecker
from tapelog.emulator import Emulator
from tapelog.log import decode

_PATH = "/v1/chat/completions"


def _body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "deepseek-chat", "messages": messages}


async def _first(http: Any, messages: list[dict[str, Any]]) -> None:
    """Send the conversation's first request; add its answer and a new user message."""
    answer = await post(http, _PATH, _body(messages))
    assert answer.status_code == 200, answer.text
    text = decode(answer.content)["choices"][0]["message"]["content"]
    messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "two"}]


def _types(session: Any) -> list[str]:
    return [e.type for e in session.events if e.type not in ("assistant/chunk", "log/digest")]


async def test_the_check_runs_during_the_sync_and_the_send_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu = Emulator()
    marks: list[str] = []
    fsync, check = os.fsync, RequestChecker.check

    def slow_fsync(fd: int) -> None:
        marks.append(f"sync starts, upstream had {len(emu.received)}")
        time.sleep(0.05)  # a slow disk: the check is done before the sync is
        fsync(fd)
        marks.append(f"sync ends, upstream had {len(emu.received)}")

    def marked(self: RequestChecker, request: Any, body: Any) -> None:
        check(self, request, body)
        marks.append(f"checked in the {threading.current_thread().name}")

    monkeypatch.setattr(RequestChecker, "check", marked)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    async with in_process(tmp_path, emulator=emu) as (proxy, _, http):
        await _first(http, messages)
        await proxy.sessions.settled()
        monkeypatch.setattr(os, "fsync", slow_fsync)
        marks.clear()
        answer = await post(http, _PATH, _body(messages))
        assert answer.status_code == 200, answer.text
        main = threading.main_thread().name
        # The check (in the event loop) did not wait for the sync (in a thread),
        # and the upstream got nothing until the sync ended.
        assert sorted(marks[:2]) == [f"checked in the {main}", "sync starts, upstream had 1"]
        assert marks[2] == "sync ends, upstream had 1"
        assert len(emu.received) == 2
        await proxy.sessions.settled()
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1, "the request extended the conversation's session"
    assert_rebuilds(sessions, emu)


class _FailsOnce:
    """Arms a replacement that raises ``error`` on its next call only."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.armed = False

    def __call__(self, *args: Any, real: Any) -> Any:
        if self.armed:
            self.armed = False
            raise self.error
        return real(*args)


async def _failed_then_retried(
    tmp_path: Path, emu: Emulator, fails: _FailsOnce, words: str, why: str
) -> Any:
    """A conversation's second request fails (``fails`` armed) with a 500 saying
    ``words`` and sends nothing; the same request, retried, is answered. The
    session, verified as it loads."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    async with in_process(tmp_path, emulator=emu) as (proxy, _, http):
        await _first(http, messages)
        await proxy.sessions.settled()
        fails.armed = True
        failed = await post(http, _PATH, _body(messages))
        assert failed.status_code == 500
        assert words in failed.text
        assert len(emu.received) == 1, why
        await proxy.sessions.settled()
        again = await post(http, _PATH, _body(messages))  # the same request, retried
        assert again.status_code == 200, again.text
        await proxy.sessions.settled()
    (session,) = sessions_in(tmp_path).values()  # verified: a whole log
    return session


async def test_a_refused_body_is_never_sent_and_the_log_stays_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu = Emulator()
    check = RequestChecker.check
    fails = _FailsOnce(ReconstructionError("the body does not rebuild (test)"))
    monkeypatch.setattr(
        RequestChecker, "check", lambda self, request, body: fails(self, request, body, real=check)
    )
    session = await _failed_then_retried(
        tmp_path, emu, fails, "does not rebuild", "a refused body is never sent"
    )
    ends = [e for e in session.events if e.type == "step/end"]
    assert [e.data.get("sent", True) for e in ends] == [True, False, True]
    assert_rebuilds({session.id: session}, emu)


async def test_a_failed_sync_sends_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    emu = Emulator()
    fsync = os.fsync
    fails = _FailsOnce(OSError(5, "Input/output error"))
    monkeypatch.setattr(os, "fsync", lambda fd: fails(fd, real=fsync))
    session = await _failed_then_retried(
        tmp_path,
        emu,
        fails,
        "could not log the request",
        "nothing is sent before its events are durable",
    )
    assert _types(session).count("turn/end") == 3
    assert_rebuilds({session.id: session}, emu)
