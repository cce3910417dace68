"""Digests in a PostgreSQL store: the same events over the same bytes as a JSONL file.

A PostgreSQL writer logs a ``log/digest`` at each flush over the bytes of the
session's JSONL form (``store.session_bytes``), so a session copied from one
backend to the other keeps valid digests, and an edited row is reported by
``verify`` and refused by ``load`` exactly as an edited line is. Threads
appending while another flushes lose nothing here either.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tapelog import CorruptLogError, Session, UndigestedEventsError
from tapelog.log import decode
from tapelog.store import JsonlStore, PostgresStore
from tapelog.store._api import verify_jsonl

from .test_postgres import drop_schema, pg_conninfo, schema_for
from .test_undigested import FORGED, forged_line

__all__ = ["pg_conninfo"]  # the imported fixture, shared with test_postgres.py


@pytest.fixture
def store(pg_conninfo: str, tmp_path: Path) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_conninfo, schema=schema_for(tmp_path))
    yield store
    drop_schema(pg_conninfo, store.schema)


def _turn(session: Session, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": f"prompt {turn}"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def test_postgres_digests_cover_the_session_bytes_and_match_a_jsonl_copy(
    store: PostgresStore, tmp_path: Path
) -> None:
    session = Session("pg-d", created=5)
    with store.create(session) as writer:
        _turn(session, 1)
        writer.flush()
        _turn(session, 2)
    resumed, writer = store.open("pg-d")
    with writer:
        _turn(resumed, 3)
    data = store.session_bytes("pg-d")
    lines = data.splitlines(keepends=True)
    digests = [i for i, line in enumerate(lines) if b'"type":"log/digest"' in line]
    assert len(digests) == 3
    for index in digests:
        before = b"".join(lines[:index])
        assert decode(lines[index])["data"] == {
            "bytes": len(before),
            "sha256": hashlib.sha256(before).hexdigest(),
        }
    report = verify_jsonl(data, expected_id="pg-d")
    assert report.ok, report.problems
    # the same bytes as a file: the JSONL store loads them and checks the same digests
    jsonl = JsonlStore(tmp_path / "files")
    jsonl.root.mkdir()
    jsonl.path("pg-d").write_bytes(data)
    assert jsonl.load("pg-d").digest == store.load("pg-d").digest == report.digest


def test_an_edited_row_fails_verify_and_load(store: PostgresStore) -> None:
    session = Session("pg-e", created=5)
    with store.create(session) as writer:
        _turn(session, 1)
        writer.flush()
        _turn(session, 2)
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {}.events SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                "'prompt 1', 'prompt X'), 'UTF8') WHERE session_id = 'pg-e' AND seq = 1"
            ).format(sql.Identifier(store.schema))
        )
    report = verify_jsonl(store.session_bytes("pg-e"), expected_id="pg-e")
    assert [str(p) for p in report.problems] == [
        "line 5 (seq 3): the digest does not match the first "
        f"{len(b''.join(store.session_bytes('pg-e').splitlines(keepends=True)[:4]))} bytes of "
        "the file: they were changed after the digest was written (a line edited, removed, "
        "added or reordered), anywhere before it (no earlier digest of the session matches)"
    ]
    with pytest.raises(CorruptLogError, match=r"line 5 \(seq 3\): the digest does not match"):
        store.load("pg-e")


def test_a_row_added_after_the_last_digest_stops_a_resume_until_accepted(
    store: PostgresStore,
) -> None:
    session = Session("pg-u", created=5)
    with store.create(session):
        _turn(session, 1)
    stored = len(session)
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.events (session_id, seq, line) VALUES (%s, %s, %s)").format(
                sql.Identifier(store.schema)
            ),
            ("pg-u", stored, forged_line(stored).rstrip(b"\n")),
        )
    loaded = store.load("pg-u")
    assert loaded.undigested == 1
    note = loaded.undigested_note()
    assert note is not None
    assert note.startswith(
        f"session pg-u: 1 event (seq {stored}) after the last digest (seq {stored - 1})"
    )
    assert not verify_jsonl(store.session_bytes("pg-u"), expected_id="pg-u").ok
    with pytest.raises(UndigestedEventsError, match="--accept-undigested"):
        store.open("pg-u")
    resumed, writer = store.open("pg-u", accept_undigested=True)  # the lock was released
    writer.close()
    assert resumed.events[stored].data["content"][0]["text"] == FORGED
    assert resumed.events[-1].type == "log/digest"
    assert verify_jsonl(store.session_bytes("pg-u"), expected_id="pg-u").ok


def test_threads_appending_while_a_postgres_writer_flushes_lose_nothing(
    store: PostgresStore,
) -> None:
    session = Session("pg-t", created=5)
    writer = store.create(session)
    start = threading.Barrier(4)

    def worker(number: int) -> None:
        start.wait()
        for i in range(100):
            text = [{"type": "text", "text": f"{number}-{i}"}]
            session.append(
                "context/message", {"content": text, "source": {"kind": "t"}}, surface_op="append"
            )
            if i % 10 == number:
                writer.flush()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    loaded = store.load("pg-t").session
    assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]
    assert sum(1 for e in loaded.events if e.type == "context/message") == 400
