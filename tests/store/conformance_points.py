"""The store contract for the proxy's replicas: the conversation index
(``point_log``) and taking a released session up again (``reattach``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tapelog import Session, SessionLockedError
from tapelog.store import SessionStore
from tapelog.store._api import PointRecord, verify_jsonl


def _record(i: int, session: str = "s-1") -> PointRecord:
    anchor = None if i % 2 else bytes([i % 256]) * 16
    response = (f"resp_{i}", i) if i % 3 == 0 else (None, None)
    return PointRecord(session, bytes([i % 256]) * 16, i + 1, 3 * i, anchor, anchor, (), *response)


def _turn(session: Session, text: str) -> None:
    turn = sum(1 for e in session.events if e.type == "turn/start")
    session.append("turn/start", {"turn": turn})
    content = [{"type": "text", "text": text}]
    data = {"content": content, "source": {"kind": "user"}}
    session.append("user/message", data, surface_op="append")
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


class PointsConformance:
    def make_store(self, tmp_path: Path) -> SessionStore:
        raise NotImplementedError

    def test_point_records_are_read_back_in_order_by_every_instance(self, tmp_path: Path) -> None:
        store, other = self.make_store(tmp_path), self.make_store(tmp_path)
        assert store.point_log() is store.point_log()
        assert store.point_log().read(0) == ([], 0)
        records = [_record(i) for i in range(5)]
        store.point_log().append(records[:2])
        other.point_log().append(records[2:])
        got, position = other.point_log().read(0)
        assert got == records
        assert store.point_log().read(position) == ([], position)
        first, middle = store.point_log().read(0)[0][:2], None
        assert first == records[:2]
        store.point_log().append([_record(9, "s-2")])
        middle, _ = store.point_log().read(position)
        assert middle == [_record(9, "s-2")]
        store.point_log().close()
        assert store.point_log().read(0)[0][-1] == _record(9, "s-2")  # usable after close
        store.point_log().close()
        other.point_log().close()

    def test_concurrent_appends_are_never_lost_or_reordered(self, tmp_path: Path) -> None:
        def write(n: int) -> None:
            log = self.make_store(tmp_path).point_log()
            for i in range(20):
                log.append([_record(i, f"w-{n}")])
            log.close()

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        log = self.make_store(tmp_path).point_log()
        got, _ = log.read(0)
        log.close()
        assert len(got) == 80
        for n in range(4):
            assert [r for r in got if r.session_id == f"w-{n}"] == [
                _record(i, f"w-{n}") for i in range(20)
            ]

    def test_a_released_writer_is_reattached_when_nothing_changed(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        session = Session("re-1")
        writer = store.create(session)
        _turn(session, "one")
        writer.close()
        assert writer.reattachable
        again = store.reattach(writer)
        assert again is not None
        assert again.session is session
        _turn(session, "two")
        with pytest.raises(SessionLockedError):
            self.make_store(tmp_path).open("re-1")
        again.close()
        report = verify_jsonl(store.session_bytes("re-1"), expected_id="re-1")
        assert report.ok, [str(p.error) for p in report.problems]
        loaded = self.make_store(tmp_path).load("re-1").session
        assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]

    def test_a_writer_is_not_reattached_after_another_wrote(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        session = Session("re-2")
        writer = store.create(session)
        _turn(session, "one")
        writer.close()
        held = store.reattach(writer)
        assert held is not None
        with pytest.raises(SessionLockedError):  # held by a writer: refused, as open is
            self.make_store(tmp_path).reattach(writer)
        held.close()
        other, other_writer = self.make_store(tmp_path).open("re-2")
        _turn(other, "elsewhere")
        other_writer.close()
        assert store.reattach(held) is None, "the store holds more than this session"
        open_writer = store.create(Session("re-3"))
        assert not open_writer.reattachable  # not closed
        assert store.reattach(open_writer) is None
        open_writer.close()
