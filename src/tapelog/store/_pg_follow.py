"""Following a PostgreSQL session, and telling whether a writer holds it.

Every flush inserts its rows, then calls ``pg_notify`` in a transaction of
its own, so the server delivers the notification only once the rows are
durable (and never for a flush that failed). A :class:`PostgresFollower` keeps a
connection that ``LISTEN``\\ s on the store's channel (:func:`channel`; the
payload is the session id) and queries rows only after a notification named
its session: a quiet session costs no query at all, however often a reader
polls. The first read after following starts queries once, so rows flushed
before ``LISTEN`` took effect are not missed.

"Active" means a writer's connection holds the session's advisory lock (the
store's write lock), read from ``pg_locks`` without taking it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

from tapelog._errors import StoreError
from tapelog.store._follow import Follower

if TYPE_CHECKING:
    from psycopg import Connection

    from tapelog.store._postgres import PostgresStore

__all__ = ["PostgresFollower", "channel", "held_keys"]

_AFTER: Final = "SELECT seq, line FROM {s}.events WHERE session_id = %s AND seq >= %s ORDER BY seq"
_COUNT: Final = "SELECT count(*) FROM {s}.events WHERE session_id = %s"
_HELD: Final = """
SELECT l.classid::bigint, l.objid::bigint FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def channel(schema: str) -> str:
    """The ``NOTIFY`` channel of a store's flushes (shorter than PostgreSQL's 63 bytes)."""
    name = f"tapelog.{schema}"
    if len(name) <= 63:
        return name
    return "tapelog." + hashlib.blake2b(schema.encode(), digest_size=16).hexdigest()


def held_keys(conn: Connection[Any]) -> set[int]:
    """The bigint keys of every advisory lock granted in this database now."""
    return {_signed(c, o) for c, o in conn.execute(_HELD).fetchall()}


def _signed(classid: int, objid: int) -> int:
    """The bigint key of an advisory lock from ``pg_locks``' two 32-bit halves."""
    unsigned = (classid << 32) | objid
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


class PostgresFollower(Follower):
    """A session's rows from seq ``since`` on (see the module docstring)."""

    def __init__(self, store: PostgresStore, session_id: str, since: int) -> None:
        from psycopg import sql

        super().__init__(session_id, since)
        self._store = store
        self._told = True  # read once after LISTEN, whatever was flushed before it
        conn = store._connect()
        try:
            action = f"follow session {session_id} in"
            with store._errors(action, advice="check the server"):
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel(store.schema))))
                if not store._exists(conn, session_id):
                    raise store._not_found(session_id)
                row = conn.execute(store._sql(_COUNT), (session_id,)).fetchone()
            stored = 0 if row is None else int(row[0])
            if stored < since:
                raise StoreError(
                    f"session {session_id} has {stored} stored events, fewer than {since}; "
                    f"it cannot be followed from seq {since}"
                )
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _read(self) -> list[bytes]:
        with self._store._errors(f"read session {self.session_id} from", advice="check the server"):
            for notify in self._conn.notifies(timeout=0.0):  # those received meanwhile
                self._told |= notify.payload == self.session_id
            if not self._told:
                return []
            self._told = False
            query = self._store._sql(_AFTER)
            rows = self._conn.execute(query, (self.session_id, self.next_seq), binary=True)
            return [bytes(line) for _, line in rows.fetchall()]

    def _wait(self, timeout: float) -> bool:
        with self._store._errors(f"follow session {self.session_id} in", advice="check the server"):
            for notify in self._conn.notifies(timeout=timeout):
                if notify.payload == self.session_id:
                    self._told = True
                    break
        return self._told

    def _release(self) -> None:
        self._conn.close()
