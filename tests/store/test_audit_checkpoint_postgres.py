"""The cache audit's checkpoint on PostgreSQL: the ``audit_checkpoints`` table.

Same server as test_postgres.py (its ``pg_conninfo`` fixture), one schema per
test. ``tapelog cache`` and ``tapelog report`` on a PostgreSQL session keep
their checkpoint in the table (what it covers in columns of its own), read it
back when it covers exactly the session's bytes, resume from it when the
session grew, and ignore a row that does not fit; the live view reads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from audit._growing import AuditCounter, Growing, TurnPlan, grow
from tapelog.audit import CacheReport, cache_report
from tapelog.cli import cli
from tapelog.log import decode
from tapelog.store import PostgresStore

from .test_cli_postgres import SECRET, url_of
from .test_postgres import drop_schema, pg_conninfo, schema_for

__all__ = ["pg_conninfo"]  # the imported fixture, shared with test_postgres.py


@pytest.fixture
def pg(pg_conninfo: str, tmp_path: Path) -> Iterator[tuple[str, PostgresStore]]:
    """A store URL with a password the server ignores (it must not reach the
    checkpoint, which names the store it was read from), and the same store."""
    schema = schema_for(tmp_path)
    url = url_of(pg_conninfo, schema, password=SECRET)
    yield url, PostgresStore(pg_conninfo, schema=schema)
    drop_schema(pg_conninfo, schema)


def _cache(url: str, sid: str, *more: str) -> str:
    result = CliRunner().invoke(cli, ["cache", sid, "--store", url, *more], obj={"debug": False})
    assert result.exit_code == 0, result.output
    return result.stdout


def _row(store: PostgresStore, sid: str) -> tuple[Any, ...] | None:
    query = sql.SQL(
        "SELECT covered_events, covered_bytes, covered_sha256, body "
        "FROM {}.audit_checkpoints WHERE session_id = %s"
    ).format(sql.Identifier(store.schema))
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        return conn.execute(query, (sid,)).fetchone()


def _execute(store: PostgresStore, statement: str, *args: Any) -> None:
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL(statement).format(sql.Identifier(store.schema)), args)


def test_cache_keeps_its_checkpoint_in_the_table_and_reads_it_back(
    pg: tuple[str, PostgresStore], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store = pg
    growing = Growing(tmp_path, store=store)
    grow(growing, [TurnPlan(rounds=2), TurnPlan(rounds=1, low_usage=True)])
    counted = AuditCounter(monkeypatch)
    first = _cache(url, growing.sid, "--json")
    assert counted.count == 5
    row = _row(store, growing.sid)
    assert row is not None
    data = store.session_bytes(growing.sid)
    assert row[:3] == (len(store.load(growing.sid).session), len(data), _sha(data))
    assert _cache(url, growing.sid, "--json") == first  # from the row
    assert counted.count == 5
    assert b"postgres:" in row[3]
    assert SECRET.encode() not in row[3]
    growing.close()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_session_that_grew_resumes_from_its_row_and_equals_a_fresh_audit(
    pg: tuple[str, PostgresStore], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store = pg
    growing = Growing(tmp_path, store=store)
    grow(growing, [TurnPlan(rounds=2), TurnPlan(rounds=0, idle_before=True, low_usage=True)])
    _cache(url, growing.sid, "--json")
    grow(growing, [TurnPlan(rounds=1, new_header=True), TurnPlan(rounds=1)])
    growing.close()
    counted = AuditCounter(monkeypatch)
    resumed = _cache(url, growing.sid, "--json")
    assert counted.count == 1 + 4  # the last request covered, then the new ones
    row = _row(store, growing.sid)
    _execute(store, "DELETE FROM {}.audit_checkpoints")
    assert _cache(url, growing.sid, "--json") == resumed
    assert _row(store, growing.sid) == row  # the same checkpoint, from scratch
    fresh = cache_report(store.load(growing.sid).session).to_json()
    assert decode(resumed) == fresh
    assert len(fresh["requests"]) == 3 + 1 + 2 + 2


@pytest.mark.parametrize("damage", ["body", "session grew elsewhere", "table dropped"])
def test_a_row_that_does_not_fit_is_ignored_and_rewritten(
    pg: tuple[str, PostgresStore], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    url, store = pg
    growing = Growing(tmp_path, store=store)
    grow(growing, [TurnPlan(rounds=1), TurnPlan(rounds=1)])
    growing.close()
    truth = _cache(url, growing.sid, "--json")
    row = _row(store, growing.sid)
    assert row is not None
    if damage == "body":
        _execute(store, "UPDATE {}.audit_checkpoints SET body = %s", b"{not a checkpoint")
    elif damage == "session grew elsewhere":  # a checkpoint of another log's bytes
        other = row[3].replace(row[2].encode(), b"0" * 64)
        _execute(store, "UPDATE {}.audit_checkpoints SET body = %s", other)
    else:
        _execute(store, "DROP TABLE {}.audit_checkpoints")
    counted = AuditCounter(monkeypatch)
    assert _cache(url, growing.sid, "--json") == truth
    assert counted.count == 4  # audited from the start
    assert _row(store, growing.sid) == row  # and kept again, as it was


def test_report_and_the_live_view_use_the_row(
    pg: tuple[str, PostgresStore], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store = pg
    growing = Growing(tmp_path, store=store)
    grow(growing, [TurnPlan(rounds=1), TurnPlan(rounds=2)])
    page = tmp_path / "page.html"
    result = CliRunner().invoke(
        cli, ["report", growing.sid, "--store", url, "-o", str(page)], obj={"debug": False}
    )
    assert result.exit_code == 0, result.output
    assert _row(store, growing.sid) is not None  # report keeps one too
    counted = AuditCounter(monkeypatch)
    audit = _live_audit(store, growing.sid)
    assert counted.count == 0
    assert audit.to_json() == cache_report(store.load(growing.sid).session).to_json()
    grow(growing, [TurnPlan(rounds=1)])
    growing.close()
    counted.count = 0
    audit = _live_audit(store, growing.sid)
    assert counted.count == 1 + 2  # the last request covered, then the new ones
    assert audit.to_json() == cache_report(store.load(growing.sid).session).to_json()


def _live_audit(store: PostgresStore, sid: str) -> CacheReport:
    """The audit ``tapelog serve`` shows on a first view of the session."""
    from tapelog.serve._live import LiveSession

    live = LiveSession(store, sid)
    try:
        return live.audit()
    finally:
        live.close()
