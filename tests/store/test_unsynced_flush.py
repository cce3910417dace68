"""``SessionWriter.flush(sync=False)``: written at once, synced later.

The proxy writes a turn's end before the answer's last byte reaches the
client (so a killed process loses nothing: the operating system holds the
written bytes) and syncs it after, off the client's wait. These tests hold
the writer to that: every event is in the file after the unsynced write,
the file verifies, and the next flush (or ``close``) syncs what it left,
once.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tapelog import Session, StoreError
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl


def _turn(session: Session, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": f"hi {turn}"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    fsync = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def test_an_unsynced_flush_writes_every_event_and_the_next_flush_syncs_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("unsynced")
    writer = store.create(session)
    fsyncs = _count_fsyncs(monkeypatch)
    _turn(session, 1)
    writer.flush(sync=False)
    assert fsyncs == []
    # What a process killed now leaves: every event, closed by its digest.
    stored = store.path("unsynced").read_bytes()
    assert verify_jsonl(stored, expected_id="unsynced").ok
    assert [e.encode() for e in store.load("unsynced").session.events] == [
        e.encode() for e in session.events
    ]
    assert session.events[-1].type == "log/digest"
    writer.flush()  # nothing buffered: it syncs what the write left
    assert len(fsyncs) == 1
    writer.flush()
    assert len(fsyncs) == 1, "synced already: no second fsync"
    writer.close()
    assert len(fsyncs) == 1


def test_close_syncs_an_unsynced_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JsonlStore(tmp_path)
    session = Session("closing")
    writer = store.create(session)
    fsyncs = _count_fsyncs(monkeypatch)
    _turn(session, 1)
    writer.flush(sync=False)
    writer.close()
    assert len(fsyncs) == 1
    assert store.load("closing").session.events[-1].type == "log/digest"


def test_a_synced_flush_after_an_unsynced_one_syncs_both_with_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("both")
    writer = store.create(session)
    fsyncs = _count_fsyncs(monkeypatch)
    _turn(session, 1)
    writer.flush(sync=False)
    _turn(session, 2)
    writer.flush()
    assert len(fsyncs) == 1  # one fsync covers the file's earlier writes too
    writer.sync()
    writer.close()
    assert len(fsyncs) == 1
    assert len(store.load("both").session) == len(session)


def test_a_failed_sync_says_the_events_are_written_and_the_next_sync_tries_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("flaky")
    writer = store.create(session)
    fsync = os.fsync
    failed: list[int] = []

    def flaky(fd: int) -> None:
        if not failed:
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", flaky)
    _turn(session, 1)
    writer.flush(sync=False)
    with pytest.raises(StoreError, match="are written but may not survive a power loss"):
        writer.sync()
    writer.sync()  # tried again, and it holds now
    writer.close()
    assert len(store.load("flaky").session) == len(session)
