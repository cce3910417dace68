"""The PostgreSQL writer: one session's events appended as rows.

Kept apart from the store (:mod:`tapelog.store._postgres`) because it is the
one object a running agent holds for a session's whole life: it owns the
connection that holds the session's write lock, knows the seq of the next
row, and turns a failed insert into the writer's whole-sentence error. The
store makes it (``create``, ``open``, ``reattach``) and does the SQL.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from tapelog._errors import StoreError
from tapelog.log._api import Session
from tapelog.store._base import SessionWriter, count_events

if TYPE_CHECKING:
    from psycopg import Connection

    from tapelog.store._postgres import PostgresStore

__all__ = ["PostgresWriter"]


class PostgresWriter(SessionWriter):
    """Appends a session's events as rows; its connection holds the write lock."""

    def __init__(
        self,
        session: Session,
        *,
        store: PostgresStore,
        conn: Connection[Any],
        warnings: tuple[str, ...] = (),
        stored: bytes = b"",
    ) -> None:
        self._store = store
        self._conn = conn
        self._next_seq = len(session)
        super().__init__(session, warnings=warnings, stored=stored)

    def _write(self, lines: builtins.list[bytes]) -> None:
        action = f"write {count_events(len(lines))} of session {self.session_id}"

        def failed(head: str) -> StoreError:
            return self._write_failed(head, len(lines), "Fix the cause")

        with self._store._errors(action + " to", advice="", failed=failed):
            self._store._insert_events(self._conn, self.session_id, self._next_seq, lines)
        self._next_seq += len(lines)

    @property
    def next_seq(self) -> int:
        """The seq of the next event this writer stores."""
        return self._next_seq

    def _release(self) -> None:
        self._store._hang_up(self._conn)
