"""The sessions index: its numbers are the cache audit's, and it stays correct as logs change.

Every check compares the index with what the store loads and the audit
computes from scratch: a grown log is folded from where the last fold stopped
(and only that part is read), a log rewritten in place or cut is folded
again, a restart reads the index file back and trusts no entry the store's
key does not confirm, and the status comes from the write lock and the log.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tapelog.audit import cache_report
from tapelog.serve._index import Row, SessionIndex
from tapelog.store import JsonlStore
from tapelog.store._api import Folded

from ._helpers import TIME, HandLog, write_store


def _index(root: Path, path: Path | None = None) -> SessionIndex:
    return SessionIndex(JsonlStore(root), path)


def _by_id(rows: list[Row]) -> dict[str, Row]:
    return {r.id: r for r in rows}


@pytest.fixture
def folded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many log lines each fold was given (a spy on the store's ``Folded.extend``)."""
    calls: list[int] = []
    original = Folded.extend

    def spy(self: Folded[Any], lines: Any, *, counted: bool = True) -> None:
        lines = list(lines)
        calls.append(len(lines))
        original(self, lines, counted=counted)

    monkeypatch.setattr(Folded, "extend", spy)
    return calls


def _unsent_step(log: HandLog) -> None:
    """A turn whose first step failed before its request left (``sent: false``)."""
    s, log.turn = log.session, log.turn + 1
    turn = log.turn
    s.append("turn/start", {"turn": turn})
    user = {"content": [{"type": "text", "text": "hm"}], "source": {"kind": "user"}}
    s.append("user/message", user, surface_op="append")
    s.append("step/start", {"turn": turn, "step": 1})
    empty = {"turn": turn, "step": 1, "content": [], "interrupted": True}
    source = {"provider": log.provider, "model": log.model}
    s.append("assistant/message", empty | {"source": source}, surface_op="append")
    error = {"type": "ReconstructionError", "message": "refused"}
    s.append("step/end", {"turn": turn, "step": 1, "sent": False, "error": error})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "error", "error": error}})


def test_rows_agree_with_the_cache_audit_unsent_steps_included(tmp_path: Path) -> None:
    plain = HandLog("plain")
    plain.ask("a", "b")
    failing = HandLog("failing", created=TIME + 1)
    failing.ask("a", "b")
    _unsent_step(failing)
    failing.ask("c", "d")
    write_store(tmp_path, plain, failing)
    index = _index(tmp_path)
    rows = _by_id(index.rows())
    index.audit(["plain", "failing"], events=10**9)
    rows = _by_id(index.rows(refresh=False))
    for session_id, row in rows.items():
        totals = cache_report(JsonlStore(tmp_path).load(session_id).session).totals
        s = row.summary
        assert (s.requests, s.prompt_tokens, s.cached_tokens) == (
            totals.requests,
            totals.prompt_tokens,
            totals.cached_reported,
        )
        assert row.audited
        assert row.efficiency == pytest.approx(totals.efficiency)
    assert rows["failing"].summary.requests == 4  # the unsent step is not a request
    assert rows["failing"].summary.turns == 3
    assert rows["failing"].summary.last_reason == "completed"


def test_a_grown_log_is_folded_from_where_the_fold_stopped(
    tmp_path: Path, folded: list[int]
) -> None:
    log = HandLog("grows")
    log.ask("a", "b")
    write_store(tmp_path, log)
    index = _index(tmp_path)
    index.rows()
    assert folded == [len(log.session)]
    store = JsonlStore(tmp_path)
    session, writer = store.open("grows")
    with writer:
        log.session = session
        added = log.ask("c", "d")
        writer.flush()  # the new events and a log/digest
    folded.clear()
    row = _by_id(index.rows())["grows"]
    assert folded == [len(added) + 1]  # only what was appended was read
    fresh = _by_id(_index(tmp_path).rows())["grows"]
    assert row.summary == fresh.summary
    assert row.summary.requests == 4
    folded.clear()
    index.rows()
    assert folded == []  # unchanged: nothing read


def test_a_log_rewritten_in_place_or_cut_is_folded_again(tmp_path: Path) -> None:
    log = HandLog("edited")
    log.ask("a", "b")
    log.ask("c", "d")
    write_store(tmp_path, log)
    path = JsonlStore(tmp_path).path("edited")
    index = _index(tmp_path)
    assert _by_id(index.rows())["edited"].summary.cached_tokens == 600
    data = path.read_bytes()
    # Rewritten in place: same inode and size, other bytes (the last answer's
    # cached tokens), a new mtime: folded again from the start.
    edited = data.replace(b'"cache_read":300', b'"cache_read":900')
    assert len(edited) == len(data)
    assert edited != data
    with path.open("r+b") as f:
        f.write(edited)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert _by_id(index.rows())["edited"].summary.cached_tokens == 1200
    # Cut to its first turn: shorter than what was folded.
    first_turn = data[: data.index(b'"type":"turn/start","data":{"turn":2}')]
    path.write_bytes(first_turn[: first_turn.rindex(b"\n") + 1])
    row = _by_id(index.rows())["edited"]
    assert (row.summary.turns, row.summary.requests) == (1, 2)


def test_an_edit_behind_a_grown_log_is_caught_by_the_audit(tmp_path: Path) -> None:
    log = HandLog("grown")
    log.ask("a", "the answer")
    write_store(tmp_path, log)
    path = JsonlStore(tmp_path).path("grown")
    index = _index(tmp_path)
    index.rows()
    data = path.read_bytes().replace(b"the answer", b"THE ANSWER")
    path.write_bytes(data + b'{"seq":99')  # grown (a torn line), the tail intact
    index.audit(["grown"], events=10**9)
    row = _by_id(index.rows())["grown"]
    assert row.status == "damaged"
    assert "digest does not match" in (row.error or "")


def test_a_restart_reads_the_index_file_and_checks_every_entry(
    tmp_path: Path, folded: list[int]
) -> None:
    root, path = tmp_path / "store", tmp_path / "cache" / "index"
    logs = [HandLog(f"s{i}", created=TIME + i) for i in range(3)]
    for log in logs:
        log.ask("a", "b")
    write_store(root, *logs)
    first = _index(root, path)
    first.rows()
    first.audit(["s0", "s1", "s2"], events=10**9)
    first.close()
    assert path.stat().st_mode & 0o777 == 0o600
    folded.clear()
    second = _index(root, path)
    rows = _by_id(second.rows())
    assert folded == []  # warm: every entry's key still matches
    assert all(r.audited for r in rows.values())
    assert second.pending() == []
    # A session changed while the server was down is folded (and audited) again.
    session, writer = JsonlStore(root).open("s1")
    stored = len(session)
    with writer:
        logs[1].session = session
        logs[1].ask("c", "d")
    third = _index(root, path)
    rows = _by_id(third.rows())
    assert folded == [len(session) - stored]  # its second turn and the digest closing it
    assert rows["s1"].summary.requests == 4
    assert not rows["s1"].audited
    assert rows["s1"].efficiency is not None  # the old audit, shown as stale
    assert third.pending() == ["s1"]


def test_a_foreign_or_garbled_index_file_is_ignored(tmp_path: Path, folded: list[int]) -> None:
    root, path = tmp_path / "store", tmp_path / "index"
    log = HandLog("one")
    log.ask("a", "b")
    write_store(root, log)
    path.write_bytes(b'{"tapelog_serve_index":1,"store":"/elsewhere"}\n{"summary":1}\n')
    assert _by_id(_index(root, path).rows())["one"].summary.requests == 2
    assert folded == [len(log.session)]
    path.write_bytes(b"\x00garbage")
    assert _by_id(_index(root, path).rows())["one"].summary.requests == 2


def test_status_comes_from_activity_not_from_a_held_lock(tmp_path: Path) -> None:
    """A writer holding a session between turns (a proxy keeps every session it
    served open) leaves it idle, and audited; only a turn in progress is running."""
    ended, open_turn, held, busy = (HandLog(n, created=TIME + i) for i, n in enumerate("abcd"))
    for log in (ended, open_turn, held, busy):
        log.ask("q", "a")
    for log in (open_turn, busy):
        s = log.session
        s.append("turn/start", {"turn": 2})
        user = {"content": [{"type": "text", "text": "cut"}], "source": {"kind": "user"}}
        s.append("user/message", user, surface_op="append")
    write_store(tmp_path, ended, open_turn, held, busy)
    index = _index(tmp_path)
    store = JsonlStore(tmp_path)
    writers = [store.open("c")[1], store.open("d")[1]]
    try:
        rows = _by_id(index.rows())
        assert {i: r.status for i, r in rows.items()} == {
            "a": "ended",
            "b": "interrupted",
            "c": "idle",
            "d": "running",
        }
        # an idle session is audited too; one in a turn is not, newest first
        assert index.pending() == ["c", "b", "a"]
        index.audit(index.pending(), events=10**9)
        rows = _by_id(index.rows(refresh=False))
        assert rows["c"].audited
        assert rows["c"].efficiency == cache_report(held.session).totals.efficiency
    finally:
        for writer in writers:
            writer.close()
    assert _by_id(index.rows())["c"].status == "ended"


def test_an_unreadable_session_is_listed_as_damaged(tmp_path: Path) -> None:
    good, tampered = HandLog("good"), HandLog("tampered", created=TIME + 1)
    good.ask("q", "a")
    tampered.ask("q", "the answer")
    tampered.ask("q2", "a2")
    write_store(tmp_path, good, tampered)
    (tmp_path / "garbage.jsonl").write_bytes(b"not json\n")
    (tmp_path / "never.jsonl").write_bytes(b"")
    path = JsonlStore(tmp_path).path("tampered")
    # An edit of the same length before the last digest: the fold reads it, the
    # audit's load checks the digest and refuses it.
    path.write_bytes(path.read_bytes().replace(b"the answer", b"THE ANSWER"))
    index = _index(tmp_path)
    index.rows()
    index.audit(["good", "tampered"], events=10**9)
    rows = _by_id(index.rows(refresh=False))
    assert rows["good"].status == "ended"
    assert rows["garbage"].status == "damaged"
    assert rows["never"].status == "damaged"
    assert "never started" in (rows["never"].error or "")
    assert rows["tampered"].status == "damaged"
    assert "digest" in (rows["tampered"].error or "")


def test_a_step_cut_before_its_first_header_counts_as_the_walk_counts_it(tmp_path: Path) -> None:
    """The list's request count is the walk's (one StepFold), also for a step
    open at the end of the log: without any request header it never left; once
    its header is logged it did (and a later step/end sent:false takes it back)."""
    from tapelog import Session
    from tapelog.request import walk_requests

    store = JsonlStore(tmp_path)
    session = Session("cut", created=TIME)
    writer = store.create(session)
    session.append("turn/start", {"turn": 0})
    user = {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}
    session.append("user/message", user, surface_op="append")
    session.append("step/start", {"turn": 0, "step": 0})
    writer.flush()
    index = _index(tmp_path)

    def counts() -> tuple[int, int]:
        walked = list(walk_requests(store.load("cut").session))
        return _by_id(index.rows())["cut"].summary.requests, len(walked)

    assert counts() == (0, 0)
    log = HandLog("cut")
    log.session = session
    log.header()  # the request/header the loop logs right after step/start
    writer.flush()
    assert counts() == (1, 1)
    error = {"type": "ReconstructionError", "message": "refused"}
    session.append("step/end", {"turn": 0, "step": 0, "sent": False, "error": error})
    writer.close()
    assert counts() == (0, 0)


def test_a_middle_line_cut_short_is_listed_as_damaged(tmp_path: Path) -> None:
    """The store's listing reads the ends of a file; the audit's load reads every
    line, so a session damaged in the middle is listed as damaged once audited."""
    log = HandLog("cut")
    log.ask("q1", "a1")
    log.ask("q2", "a2")
    write_store(tmp_path, log)
    path = JsonlStore(tmp_path).path("cut")
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][: len(lines[3]) // 2]
    path.write_bytes(b"\n".join(lines))
    index = _index(tmp_path)
    index.audit([r.id for r in index.rows()], events=10**9)
    row = _by_id(index.rows(refresh=False))["cut"]
    assert row.status == "damaged"
    assert row.error
    assert row.lost_tokens is None


def test_a_session_with_a_checkpoint_of_its_bytes_takes_its_totals_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No load and no audit for a session ``tapelog cache`` left a checkpoint
    of; a session that grew since is audited as without one."""
    from click.testing import CliRunner

    import tapelog.audit._cache_report as audit_module
    from tapelog.cli import cli

    log = HandLog("checked")
    log.ask("a", "b")
    log.ask("c", "d")
    write_store(tmp_path, log)
    args = ["cache", "checked", "--store", str(tmp_path), "--json"]
    assert CliRunner().invoke(cli, args, obj={"debug": False}).exit_code == 0
    audited: list[object] = []
    real = audit_module._audit_one

    def counted(*a: Any, **kw: Any) -> Any:
        audited.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(audit_module, "_audit_one", counted)
    index = _index(tmp_path)
    index.rows()
    index.audit(["checked"], events=10**9)
    row = _by_id(index.rows(refresh=False))["checked"]
    assert audited == []
    assert row.audited  # for the events the log holds: not stale
    totals = cache_report(JsonlStore(tmp_path).load("checked").session).totals
    assert row.efficiency == pytest.approx(totals.efficiency)
    assert (row.lost_tokens, row.bottom_line) == (
        totals.bottom_line.lost_tokens,
        totals.bottom_line.sentence,
    )
    # The log grows (its checkpoint now covers a prefix): audited again, in full.
    path = JsonlStore(tmp_path).path("checked")
    path.write_bytes(path.read_bytes() + b'{"seq":99')  # a torn line: the bytes changed
    audited.clear()
    index = _index(tmp_path)
    index.rows()
    index.audit(["checked"], events=10**9)
    assert len(audited) == totals.requests
