"""The conformance of the store port's readers of running sessions: ``follow``,
``active`` and the incremental ``summaries`` (mixed into
:class:`StoreConformance`, so every backend runs it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tapelog import Session, SessionNotFoundError, StoreError
from tapelog.store import SessionStore

FED: list[tuple[str, int]] = []
"""(session, seq) of every event any :class:`Turns` fold was fed."""


class Turns:
    """A reader's fold: the seqs of a session's turn events."""

    types = frozenset({"turn/start", "turn/end"})

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.session = ""

    def feed(self, kind: str, seq: int, data: Mapping[str, Any]) -> None:
        assert kind in self.types
        assert data["turn"] in (0, 1)
        self.seqs.append(seq)
        FED.append((self.session, seq))

    def copy(self) -> Turns:
        other = Turns()
        other.seqs, other.session = list(self.seqs), self.session
        return other


def _turn(session: Session, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": f"prompt {turn}"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _lines(session: Session, since: int) -> list[bytes]:
    return [event.encode() for event in session.events[since:]]


class FollowConformance:
    """``follow`` and ``active`` on every backend (see the module docstring)."""

    def make_store(self, tmp_path: Path) -> SessionStore:
        raise NotImplementedError

    def test_a_follower_hands_out_each_flush_once_and_nothing_unflushed(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        session = Session("followed-1", created=5)
        with store.create(session) as writer:
            reader = self.make_store(tmp_path)
            with reader.follow(session.id, len(session)) as follower:
                assert follower.poll() == []
                _turn(session, 0)
                assert follower.poll() == []  # appended, not flushed: not stored yet
                since = follower.next_seq
                writer.flush()
                got = follower.poll(timeout=5)
                assert got == _lines(session, since)  # the turn and its digest
                assert [line.split(b'"type":"')[1][:10] for line in got][-1] == b"log/digest"
                assert follower.poll() == []
                _turn(session, 1)
                writer.flush()
                assert follower.poll(timeout=5) == _lines(session, since + len(got))
                assert follower.next_seq == len(session)

    def test_a_follower_starts_at_the_seq_it_is_given(self, store: SessionStore) -> None:
        session = Session("followed-2", created=5)
        with store.create(session) as writer:
            _turn(session, 0)
            writer.flush()
        with store.follow(session.id, 2) as follower:
            assert follower.poll() == _lines(session, 2)
        with store.follow(session.id, len(session)) as follower:
            assert follower.poll() == []

    def test_a_waiting_follower_wakes_when_another_thread_flushes(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        session = Session("followed-3", created=5)
        with store.create(session) as writer:
            follower = self.make_store(tmp_path).follow(session.id, len(session))

            def later() -> None:
                time.sleep(0.3)
                _turn(session, 0)
                writer.flush()

            thread = threading.Thread(target=later)
            start = time.monotonic()
            thread.start()
            try:
                lines = next(iter(follower))  # blocks until the flush is stored
                waited = time.monotonic() - start
            finally:
                thread.join()
                follower.close()
        assert lines == session.events[0].encode()
        assert 0.25 < waited < 2.0

    def test_following_what_is_not_stored_is_refused(self, store: SessionStore) -> None:
        with pytest.raises(SessionNotFoundError):
            store.follow("nobody", 0)
        session = Session("followed-4", created=5)
        with store.create(session) as writer:
            _turn(session, 0)
            writer.flush()
        with pytest.raises(StoreError, match="cannot be followed from seq 99"):
            store.follow(session.id, 99)
        follower = store.follow(session.id, 0)
        follower.close()
        with pytest.raises(StoreError, match="closed"):
            follower.poll()

    def test_active_says_whether_a_writer_holds_the_session(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        reader = self.make_store(tmp_path)
        assert reader.active("quiet") is False
        assert reader.active_sessions() == set()
        session = Session("busy", created=5)
        with store.create(session):
            other = Session("quiet", created=6)
            store.create(other).close()
            assert reader.active("busy") is True
            assert reader.active("quiet") is False
            assert reader.active_sessions() == {"busy"}
            assert reader.active("busy") is True  # asking twice takes nothing
        assert reader.active("busy") is False
        assert reader.active_sessions() == set()
        # asking never took the lock: the session opens for writing at once
        _, writer = reader.open("busy")
        writer.close()

    def test_summaries_fold_only_what_was_appended_since_the_last_call(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        reader = self.make_store(tmp_path)
        assert reader.summaries({}, Turns) == {}
        grows, still = Session("grows", created=7), Session("still", created=8, parent="grows")
        with store.create(still) as writer:
            _turn(still, 0)
        writer = store.create(grows)
        _turn(grows, 0)
        writer.flush()

        def turn_seqs(session: Session) -> list[int]:
            return [e.seq for e in session.events if e.type in Turns.types]

        def fold() -> Turns:
            return Turns()

        FED.clear()
        first = reader.summaries({}, fold)
        for folded in first.values():
            folded.fold.session = folded.id  # (the seqs fed are counted from here on)
        assert sorted(first) == ["grows", "still"]
        row = first["still"]
        assert (row.id, row.created, row.parent, row.error) == ("still", 8, "grows", None)
        assert (row.events, row.last_time) == (len(still), still.events[-1].time)
        assert row.fold.seqs == turn_seqs(still)
        assert first["grows"].fold.seqs == turn_seqs(grows)

        FED.clear()
        assert reader.summaries(first, fold) == first
        assert FED == []  # nothing appended: nothing read
        appended = len(grows)
        _turn(grows, 1)
        writer.close()
        second = reader.summaries(first, fold)
        assert second["still"] is first["still"]
        row = second["grows"]
        assert row.fold.seqs == turn_seqs(grows)
        assert [("grows", seq) for seq in turn_seqs(grows) if seq >= appended] == FED
        assert (row.events, row.last_time) == (len(grows), grows.events[-1].time)
        assert first["grows"].fold.seqs == turn_seqs(grows)[:2]  # left as it was
