"""The PostgreSQL store's conversation index: the ``points`` table.

::

    points(id bigserial PK, session_id text, digest bytea, length int,
           seq int, anchor bytea, retry bytea, alternatives bytea[],
           response_id text, turn int)

A table made before ``response_id`` and ``turn`` existed gets them when a log
first uses it (nullable columns: an instant change).

A position is the ``id`` of the last row read. Appends take a transaction-level
advisory lock first, so rows commit in ``id`` order and a reader that has
seen row ``n`` never misses a row below ``n`` that commits later. The table
is created with the store's others, on first use. One connection per log, kept
open and shared by threads under a lock (the proxy reads the index before
every request it matches); a broken connection is replaced on the next call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from tapelog.store._pg_sql import CHECK
from tapelog.store._points import PointLog, PointRecord

if TYPE_CHECKING:
    from psycopg import Connection

    from tapelog.store._postgres import PostgresStore

__all__ = ["PostgresPointLog", "ensure_points_table"]

POINTS_DDL: Final = """
CREATE TABLE IF NOT EXISTS {s}.points (
    id bigserial PRIMARY KEY,
    session_id text NOT NULL,
    digest bytea NOT NULL,
    length integer NOT NULL,
    seq integer NOT NULL,
    anchor bytea,
    retry bytea,
    alternatives bytea[] NOT NULL DEFAULT '{{}}',
    response_id text,
    turn integer
);
"""
_UPGRADE: Final = (
    "ALTER TABLE {s}.points ADD COLUMN IF NOT EXISTS response_id text, "
    "ADD COLUMN IF NOT EXISTS turn integer"
)
_INSERT: Final = (
    "INSERT INTO {s}.points (session_id, digest, length, seq, anchor, retry, alternatives, "
    "response_id, turn) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_READ: Final = (
    "SELECT id, session_id, digest, length, seq, anchor, retry, alternatives, response_id, "
    "turn FROM {s}.points WHERE id > %s ORDER BY id"
)
_LOCK_NAME: Final = "/points"  # no session id has a slash: its own advisory key


def ensure_points_table(store: PostgresStore, conn: Connection[Any]) -> None:
    """Create the store's tables and the ``points`` table if they are missing."""
    store._ensure_schema(conn)
    advice = "check the role may create a table, or run create_schema() as one that may"
    with store._errors("create the conversation index of", advice=advice):
        found = conn.execute("SELECT to_regclass(%s)", (f'"{store.schema}".points',)).fetchone()
        if found is None or found[0] is None:
            with conn.transaction():
                # The key the store's own DDL takes: one creator at a time.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (store._lock_key(""),))
                conn.execute(store._sql(POINTS_DDL))
        found = conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'points' AND column_name = 'turn'",
            (store.schema,),
        ).fetchone()
        if found is None:  # a table from before the response columns
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (store._lock_key(""),))
                conn.execute(store._sql(_UPGRADE))


class PostgresPointLog(PointLog):
    """The records of a PostgreSQL store (see the module docstring)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._conn: Connection[Any] | None = None
        self._lock = threading.Lock()
        self._ready = False

    def _connection(self) -> Connection[Any]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            conn = self._conn = self._store._connect()
        if not self._ready:
            ensure_points_table(self._store, conn)
            self._ready = True
        return conn

    def append(self, records: Sequence[PointRecord]) -> None:
        if not records:
            return
        rows = [
            (
                r.session_id,
                r.digest,
                r.length,
                r.seq,
                r.anchor,
                r.retry,
                list(r.alternatives),
                r.response_id,
                r.turn,
            )
            for r in records
        ]
        with self._lock:
            conn = self._connection()
            with (
                self._store._errors("write the conversation index of", advice=CHECK),
                conn.transaction(),
                conn.cursor() as cur,
            ):
                key = self._store._lock_key(_LOCK_NAME)
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
                cur.executemany(self._store._sql(_INSERT), rows)

    def read(self, position: int) -> tuple[list[PointRecord], int]:
        with self._lock:
            conn = self._connection()
            with self._store._errors("read the conversation index of", advice=CHECK):
                rows = conn.execute(self._store._sql(_READ), (position,)).fetchall()
        records = [
            PointRecord(
                session_id=sid,
                digest=bytes(digest),
                length=length,
                seq=seq,
                anchor=None if anchor is None else bytes(anchor),
                retry=None if retry is None else bytes(retry),
                alternatives=tuple(bytes(a) for a in alternatives or ()),
                response_id=response_id,
                turn=turn,
            )
            for _, sid, digest, length, seq, anchor, retry, alternatives, response_id, turn in rows
        ]
        return records, (rows[-1][0] if rows else position)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
