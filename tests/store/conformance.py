"""The store conformance suite: one contract, every backend.

A backend's test module subclasses :class:`StoreConformance` as ``Test<Name>``
and implements :meth:`make_store` (a store over the storage under
``tmp_path``; calling it twice gives two instances over the same storage) and
:meth:`write_raw` (store a session's raw lines as-is, to test how loading
treats data no writer of ours would produce).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tapelog import (
    EpochHeader,
    FormatVersionError,
    InvalidSessionIdError,
    LlmCallConfig,
    Session,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
)
from tapelog.log import encode
from tapelog.log._api import repair_interrupted
from tapelog.log._events import EVENT_TYPES
from tapelog.store import SessionStore

from .conformance_follow import FollowConformance
from .conformance_points import PointsConformance


def full_session(session_id: str = "full-1") -> Session:
    """A valid session that uses every event type (and a replace of each kind)."""
    s = Session(session_id, cwd="/work/project")
    header = EpochHeader(
        config=LlmCallConfig(provider="emulator", model="echo-1", max_tokens=64, temperature=0.25),
        system="You help.\nBe brief.",
        tools=[{"name": "ls", "description": "list files", "parameters": {"type": "object"}}],
    )
    s.append("request/header", {"header": header.to_json(), "reason": "initial"})
    s.append("turn/start", {"turn": 0})
    first = s.append(
        "user/message",
        {
            "content": [{"type": "text", "text": 'héllo ✓ "quoted" \\ \u2028 \x01 🙂'}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )
    s.append("step/start", {"turn": 0, "step": 0})
    s.append("assistant/chunk", {"turn": 0, "step": 0, "chunk": {"kind": "text", "text": "hi"}})
    s.append(
        "assistant/message",
        {
            "turn": 0,
            "step": 0,
            "content": [
                {"type": "reasoning", "text": "think", "signature": "c2lnbmF0dXJl"},
                {"type": "text", "text": "hi"},
                {"type": "tool_call", "id": "c1", "name": "ls", "arguments": '{"path": "."}'},
            ],
            "source": {"provider": "emulator", "model": "echo-1"},
            "usage": {"input": 10, "cache_read": 0, "output": 3, "ratio": 0.1, "big": 2**63},
        },
        surface_op="append",
    )
    call = s.append(
        "tool/call",
        {"turn": 0, "step": 0, "call_id": "c1", "name": "ls", "arguments": '{"path": "."}'},
    )
    s.append(
        "tool/approval",
        {"turn": 0, "step": 0, "call_id": "c1", "approved": True, "by": "ann", "reason": "ok"},
    )
    result = s.append(
        "tool/result",
        {"turn": 0, "step": 0, "call_id": "c1", "content": "a.txt\nb.txt", "is_error": False},
        surface_op="append",
        source_seqs=[call.seq],
    )
    last = s.append(
        "context/message",
        {"content": [{"type": "text", "text": "note"}], "source": {"kind": "inject"}},
        surface_op="append",
    )
    s.append("step/end", {"turn": 0, "step": 0})
    s.append(
        "request/header-delta", {"system": {"keep_start": 1, "keep_end": 0, "insert": ["Short."]}}
    )
    s.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
    s.append(
        "tool/result",
        {"turn": 0, "step": 0, "call_id": "c1", "content": "[trimmed]", "is_error": False},
        surface_op={"op": "replace", "start": result.seq, "end": result.seq},
        source_seqs=[result.seq],
    )
    s.append("compact/start", {"range": [first.seq, last.seq]})
    s.append(
        "compact/summary",
        {"provider": "emulator", "model": "echo-1", "max_tokens": 256, "usage": {"output": 5}},
    )
    s.append(
        "user/message",
        {"content": [{"type": "text", "text": "summary"}], "source": {"kind": "compaction"}},
        surface_op={"op": "replace", "start": first.seq, "end": last.seq},
    )
    s.append("compact/end", {})
    s.append("session/end-seed", {"note": "every type once"})
    s.append("session/origin", {"client": {"signal": "session_id", "id": "c-1"}, "note": 1})
    return s


def one_turn(session: Session, turn: int = 0) -> None:
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": f"prompt {turn}"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def lines_of(session: Session) -> list[bytes]:
    return [event.encode() for event in session.events]


class StoreConformance(FollowConformance, PointsConformance):
    """Subclass as ``Test<Backend>`` and implement the two hooks below."""

    def make_store(self, tmp_path: Path) -> SessionStore:
        raise NotImplementedError

    def write_raw(self, store: SessionStore, session_id: str, lines: list[bytes]) -> None:
        """Store ``lines`` (header first, then events) for ``session_id`` verbatim."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> SessionStore:
        return self.make_store(tmp_path)

    # --- round trip ----------------------------------------------------------

    def test_every_event_type_round_trips_byte_for_byte(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        session = full_session()
        # every type but log/digest, which only a store's writer logs
        assert {e.type for e in session.events} == EVENT_TYPES - {"log/digest"}
        with store.create(session) as writer:
            writer.checkpoint()
        assert {e.type for e in session.events} == EVENT_TYPES
        loaded = self.make_store(tmp_path).load(session.id)
        assert loaded.warnings == ()
        assert loaded.digest is not None
        assert loaded.digest.seq == len(session) - 1
        assert lines_of(loaded.session) == lines_of(session)
        assert loaded.session.info == session.info
        assert loaded.session.derive_messages() == session.derive_messages()
        assert loaded.session.replace_generation == session.replace_generation == 2
        assert loaded.session.header == session.header

    def test_events_appended_after_create_are_stored(self, store: SessionStore) -> None:
        session = Session("live-1", parent="p-0", seed_length=1)
        seed = {"content": [{"type": "text", "text": "seed"}], "source": {"kind": "inject"}}
        session.append("context/message", seed, surface_op="append")
        session.append("session/end-seed", {"parent": "p-0", "seed_length": 1})
        with store.create(session) as writer:
            one_turn(session)
            assert writer.pending == 3
            writer.flush()
            assert writer.pending == 0
            one_turn(session, 1)
        loaded = store.load("live-1").session
        assert lines_of(loaded) == lines_of(session)
        assert loaded.info == session.info

    # --- ids, exists, list ---------------------------------------------------

    @pytest.mark.parametrize(
        ("bad", "why"),
        [
            ("", "it is empty"),
            ("a/b", "it contains a path separator"),
            ("..", "it starts with '.'"),
            ("a..b", "it contains '..'"),
            (".hidden", "it starts with '.'"),
            ("x" * 129, "it is 129 characters long"),
            ("sp ace", "it contains the character ' '"),
        ],
    )
    def test_invalid_ids_are_refused_everywhere(
        self, store: SessionStore, bad: str, why: str
    ) -> None:
        rule = "a session id is 1 to 128 characters from A-Z, a-z, 0-9, '.', '_' and '-'"
        calls = [lambda: store.load(bad), lambda: store.open(bad), lambda: store.exists(bad)]
        if bad:  # Session("") generates an id
            calls.append(lambda: store.create(Session(bad)))
        for call in calls:
            with pytest.raises(InvalidSessionIdError) as info:
                call()
            assert why in str(info.value)
            assert rule in str(info.value)

    def test_longest_legal_id_is_accepted(self, store: SessionStore) -> None:
        session_id = "A-z_0." + "x" * 122
        with store.create(Session(session_id)):
            pass
        assert store.exists(session_id)

    def test_exists_and_list(self, store: SessionStore) -> None:
        assert store.list() == []
        assert not store.exists("a")
        older = Session("older", created=1_000)
        newer = Session("newer", created=2_000, parent="older", seed_length=3)
        with store.create(older):
            one_turn(older)
        with store.create(newer):
            pass
        assert store.exists("older")
        assert store.exists("newer")
        summaries = store.list()
        assert [s.id for s in summaries] == ["newer", "older"]
        new, old = summaries
        assert (new.created, new.parent, new.events, new.last_time) == (2_000, "older", 0, None)
        # the turn's three events and the digest the writer logged when it closed
        assert (old.created, old.parent, old.events) == (1_000, None, 4)
        assert old.last_time == older.events[-1].time
        assert old.size > new.size > 0
        assert old.error is None

    def test_missing_session_is_reported(self, store: SessionStore) -> None:
        for call in (lambda: store.load("ghost"), lambda: store.open("ghost")):
            with pytest.raises(SessionNotFoundError, match="no session ghost in the store"):
                call()

    # --- writers -------------------------------------------------------------

    def test_create_twice_is_refused(self, store: SessionStore) -> None:
        with store.create(Session("twice")):
            pass
        with pytest.raises(SessionExistsError, match="session twice already exists"):
            store.create(Session("twice"))

    def test_a_reserved_new_id_is_locked_until_created_or_released(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        other = self.make_store(tmp_path)
        reservation = store.reserve("booked")
        assert reservation is not None
        assert not store.exists("booked")
        with pytest.raises(SessionLockedError, match="session booked is open for writing by"):
            other.reserve("booked")
        with pytest.raises(SessionLockedError, match="session booked is open for writing by"):
            other.create(Session("booked"))
        reservation.release()
        reservation.release()  # idempotent
        reservation = other.reserve("booked")
        assert reservation is not None
        session = Session("booked")
        with other.create(session, reservation=reservation):
            assert not reservation.held  # create took the lock over
            session.append("turn/start", {"turn": 1})
            with pytest.raises(SessionLockedError, match="session booked is open for writing"):
                store.reserve("booked")
        reservation.release()  # a no-op now: the writer released it
        assert store.reserve("booked") is None  # stored: open it instead
        resumed, writer = store.open("booked")
        writer.close()
        assert len(resumed) == 2  # the turn/start and its digest

    def test_one_writer_per_session(self, store: SessionStore, tmp_path: Path) -> None:
        session = Session("solo")
        writer = store.create(session)
        other = self.make_store(tmp_path)
        with pytest.raises(SessionLockedError, match="session solo is open for writing by another"):
            other.open("solo")
        with pytest.raises(SessionLockedError, match="session solo is open for writing by another"):
            store.open("solo")
        writer.close()
        _, again = other.open("solo")
        with pytest.raises(SessionLockedError, match="session solo is open for writing"):
            store.open("solo")
        again.close()

    def test_flush_makes_events_durable(self, store: SessionStore, tmp_path: Path) -> None:
        session = Session("durable")
        writer = store.create(session)
        one_turn(session)
        writer.flush()
        seen = self.make_store(tmp_path).load("durable").session
        assert lines_of(seen) == lines_of(session)
        writer.close()

    def test_closed_writer_refuses_flush_and_stops_listening(self, store: SessionStore) -> None:
        session = Session("closed")
        writer = store.create(session)
        writer.close()
        writer.close()  # idempotent
        assert writer.closed
        one_turn(session)  # not stored: the writer no longer listens
        assert len(store.load("closed").session) == 0
        with pytest.raises(StoreError, match="the writer of session closed is closed"):
            writer.flush()

    def test_reopen_continues_seqs(self, store: SessionStore) -> None:
        session = Session("resume")
        with store.create(session):
            one_turn(session)
        resumed, writer = store.open("resume")
        assert lines_of(resumed) == lines_of(session)
        assert writer.warnings == ()
        with writer:
            one_turn(resumed, 1)
        loaded = store.load("resume").session
        # each writer's close logged a digest after its turn
        assert [e.seq for e in loaded.events] == list(range(8))
        assert [e.type for e in loaded.events[3::4]] == ["log/digest", "log/digest"]
        assert lines_of(loaded) == lines_of(resumed)

    def test_resume_repairs_an_interrupted_turn_as_logged_events(self, store: SessionStore) -> None:
        session = Session("crashed")
        with store.create(session):
            session.append("turn/start", {"turn": 0})
            session.append("step/start", {"turn": 0, "step": 0})
            session.append(
                "tool/call",
                {"turn": 0, "step": 0, "call_id": "c9", "name": "ls", "arguments": "{}"},
            )
        resumed, writer = store.open("crashed")
        with writer:
            repaired = repair_interrupted(resumed)
        assert [e.type for e in repaired] == ["tool/result", "step/end", "turn/end"]
        loaded = store.load("crashed").session
        assert lines_of(loaded) == lines_of(resumed)
        assert loaded.events[-2].data["reason"] == {"kind": "interrupted"}
        assert loaded.events[-1].type == "log/digest"

    def test_fork_seed_is_written(self, store: SessionStore) -> None:
        parent = Session("parent")
        one_turn(parent)
        one_turn(parent, 1)
        with store.create(parent):
            pass
        child = parent.fork(2, id="child")
        with store.create(child) as writer:
            assert writer.pending == 0  # the seed was written by create
            one_turn(child, 1)
        loaded = store.load("child").session
        assert lines_of(loaded) == lines_of(child)
        assert loaded.info.parent == "parent"
        assert loaded.info.seed_length == 3
        assert loaded.events[3].type == "session/end-seed"
        assert [s.parent for s in store.list() if s.id == "child"] == ["parent"]

    # --- refusals on load ----------------------------------------------------

    def test_load_refuses_another_format_version(self, store: SessionStore) -> None:
        header = encode({"format_version": 1, "id": "future", "created": 5})
        self.write_raw(store, "future", [header])
        with pytest.raises(FormatVersionError) as info:
            store.load("future")
        assert "stored in format version 1" in str(info.value)
        assert "reads format version 0 only" in str(info.value)

    def test_load_refuses_an_unknown_event_type(self, store: SessionStore) -> None:
        session = Session("odd", created=5)
        one_turn(session)
        header = encode({"format_version": 0, "id": "odd", "created": 5})
        strange = encode({"seq": 3, "time": 9, "type": "turn/pause", "data": {"turn": 0}})
        self.write_raw(store, "odd", [header, *lines_of(session), strange])
        with pytest.raises(StoreError) as info:
            store.load("odd")
        assert "line 5" in str(info.value)
        assert "unknown event type 'turn/pause'" in str(info.value)

    def test_load_refuses_an_invalid_event(self, store: SessionStore) -> None:
        header = encode({"format_version": 0, "id": "gap", "created": 5})
        events = [
            encode({"seq": 0, "time": 1, "type": "turn/start", "data": {"turn": 0}}),
            encode({"seq": 2, "time": 1, "type": "turn/end", "data": {"turn": 0}}),
        ]
        self.write_raw(store, "gap", [header, *events])
        with pytest.raises(StoreError, match=r"line 3: .*seq must be 1 \(contiguous from 0\)"):
            store.load("gap")
