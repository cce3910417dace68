"""The server's view of a PostgreSQL store: rows, seqs and advisory locks.

Events are rows keyed by (session, seq) that are only ever inserted, so a
session's number of events identifies what is stored: an index entry stays
valid while that number is the same, and a session that gained events is
folded from the first new seq. One query lists every session with its last
seq (an index probe per session); one more fetches, for the sessions that
changed, only the new rows whose type the list needs (the type filter runs in
the server, so ``assistant/chunk`` rows are never sent).

The store sends no notifications, so following a session polls for rows
with a seq above the last one read. "Running" means a writer's connection
holds the session's advisory lock (the store's own write lock), read from
``pg_locks`` without taking it.

The server keeps one connection, used by one thread at a time, opened again
after an error. Every error is one sentence without the connection's secrets.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from tapelog._errors import CorruptLogError, StoreError
from tapelog.log import redact
from tapelog.serve._source import Entry, Followed, Source
from tapelog.serve._summary import Summary, envelope
from tapelog.store import PostgresStore
from tapelog.store._api import read_session_bytes, validate_session_id

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["PostgresSource"]

_LIST: Final = """
SELECT s.id, s.header, last.seq, substring(last.line from 1 for 96)
FROM {s}.sessions s
LEFT JOIN LATERAL (
    SELECT seq, line FROM {s}.events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1
) last ON true
"""
_NEW_ROWS: Final = """
SELECT e.session_id, e.line
FROM {s}.events e
JOIN unnest(%s::text[], %s::int[]) AS w(id, first) ON e.session_id = w.id AND e.seq >= w.first
WHERE encode(substring(e.line from 1 for 96), 'escape') ~ %s
ORDER BY e.session_id, e.seq
"""
_FOLDED: Final = '"type":"(turn/|step/|request/|assistant/message)'
_AFTER: Final = "SELECT seq, line FROM {s}.events WHERE session_id = %s AND seq >= %s ORDER BY seq"
_LOCKS: Final = """
SELECT l.classid::bigint, l.objid::bigint FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def _signed(classid: int, objid: int) -> int:
    """The bigint key of an advisory lock from ``pg_locks``' two 32-bit halves."""
    unsigned = (classid << 32) | objid
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


class PostgresSource(Source):
    """A PostgreSQL store (see the module docstring)."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = self._pg = store
        self.label = repr(store)
        self._conn: Connection[Any] | None = None
        self._lock = threading.Lock()
        self._keys: dict[str, int] = {}

    @contextlib.contextmanager
    def _connection(self, action: str) -> Iterator[Connection[Any]]:
        import psycopg

        with self._lock:
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._conn = psycopg.connect(self._pg.conninfo, autocommit=True)
                yield self._conn
            except psycopg.Error as exc:
                if self._conn is not None and (self._conn.broken or self._conn.closed):
                    self._conn = None
                text = str(exc).strip().splitlines()
                reason = redact(text[0].rstrip(".") if text else type(exc).__name__)
                raise StoreError(
                    f"could not {action} the store {self.label}: {reason}; check the server"
                ) from None

    def _sql(self, template: str) -> Any:
        from psycopg import sql

        return sql.SQL(template).format(s=sql.Identifier(self._pg.schema))

    def _tables_exist(self, conn: Connection[Any]) -> bool:
        names = (f'"{self._pg.schema}".sessions', f'"{self._pg.schema}".events')
        query = "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL"
        row = conn.execute(query, names).fetchone()
        return row is not None and row[0] is True

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # --- the index -------------------------------------------------------------

    def refresh(self, entries: Mapping[str, Entry]) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        with self._connection("list the sessions in") as conn:
            if not self._tables_exist(conn):
                return out  # nothing is created until the first session is
            rows = conn.execute(self._sql(_LIST), binary=True).fetchall()
            todo: dict[str, tuple[Entry, int, int | None]] = {}
            for session_id, header, last_seq, last_line in rows:
                events = 0 if last_seq is None else last_seq + 1
                old = entries.get(session_id)
                if old is not None and old.key == [events]:
                    out[session_id] = old
                    continue
                if old is not None and old.summary.error is None and old.offset < events:
                    summary = old.summary.copy()
                else:  # new, or (never, rows being append-only) fewer events than folded
                    summary = Summary(id=session_id)
                    summary.header(bytes(header))
                found = envelope(bytes(last_line)) if last_line is not None else None
                entry = Entry(summary=summary, key=[events], offset=events)
                todo[session_id] = (entry, summary.events, None if found is None else found[1])
            if todo:
                ids = list(todo)
                firsts = [todo[i][1] for i in ids]
                query = self._sql(_NEW_ROWS)
                lines: dict[str, list[bytes]] = {i: [] for i in ids}
                for session_id, line in conn.execute(query, (ids, firsts, _FOLDED), binary=True):
                    lines[session_id].append(bytes(line))
        for session_id, (entry, _, last_time) in todo.items():
            summary = entry.summary
            if summary.error is None:
                summary.lines(lines[session_id], counted=False)
            summary.events, summary.last_time = entry.offset, last_time
            out[session_id] = entry
        return out

    # --- writers ---------------------------------------------------------------

    def _key(self, session_id: str) -> int:
        key = self._keys.get(session_id)
        if key is None:
            # The store's own advisory-lock key of the session (its writer's lock).
            key = self._keys[session_id] = self._pg._lock_key(session_id)
        return key

    def running(self, ids: Iterable[str] | None = None) -> set[str]:
        with self._connection("read the write locks of") as conn:
            held = {_signed(c, o) for c, o in conn.execute(_LOCKS).fetchall()}
            if not held:
                return set()
            if ids is None:
                if not self._tables_exist(conn):
                    return set()
                ids = [r[0] for r in conn.execute(self._sql("SELECT id FROM {s}.sessions"))]
        return {i for i in ids if self._key(i) in held}

    # --- following one session -------------------------------------------------

    def follow(self, session_id: str) -> Followed:
        validate_session_id(session_id)
        data = self.store.session_bytes(session_id)  # not found: one sentence
        source = f"session {session_id} in the store {self.label}"
        loaded, _ = read_session_bytes(data, source=source)
        if loaded.session.id != session_id:
            raise CorruptLogError(
                f"{source}: line 1: the header names session {loaded.session.id!r}", line=1
            )
        return Followed.of(loaded.session, data, len(loaded.session), warnings=loaded.warnings)

    def read_new(self, session_id: str, followed: Followed) -> list[bytes] | None:
        with self._connection(f"read session {session_id} from") as conn:
            query = self._sql(_AFTER)
            rows = conn.execute(query, (session_id, followed.position), binary=True).fetchall()
        lines: list[bytes] = []
        for seq, line in rows:
            if seq != followed.position + len(lines):
                return None  # a gap: not a log this server read (reload says why)
            lines.append(bytes(line))
        followed.position += len(lines)
        return lines
