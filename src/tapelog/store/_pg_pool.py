"""Writer connections kept for the next writer of a PostgreSQL store.

A writer's connection holds its session's advisory lock; closing the writer
unlocks it. The proxy closes each session's writer at the end of every turn
(so another replica may take the next one) and takes the session up again
for the next turn (``reattach``): setting up a new connection every turn
would cost more than the turn's own writes. So a closed writer's connection,
unlocked and idle (no transaction), is kept here (at most ``size`` of them)
and handed to the next writer; one that is broken or busy is closed instead.
Kept connections are closed when the store is collected or the process exits.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["IdleConnections"]


def _close_all(conns: list[Connection[Any]]) -> None:
    while conns:
        with contextlib.suppress(Exception):
            conns.pop().close()


class IdleConnections:
    """Unlocked writer connections for reuse (see the module docstring)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._conns: list[Connection[Any]] = []
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._conns)

    def take(self) -> Connection[Any] | None:
        """A kept connection that still works, or ``None``."""
        with self._lock:
            while self._conns:
                conn = self._conns.pop()
                if not conn.closed and not conn.broken:
                    return conn
        return None

    def give(self, conn: Connection[Any]) -> None:
        """Keep ``conn`` (its locks already released) or close it."""
        from psycopg.pq import TransactionStatus

        idle = conn.info.transaction_status == TransactionStatus.IDLE
        if idle and not conn.closed and not conn.broken:
            with self._lock:
                if len(self._conns) < self.size:
                    self._conns.append(conn)
                    return
        conn.close()

    def __contains__(self, conn: object) -> bool:
        with self._lock:
            return any(c is conn for c in self._conns)

    def close(self) -> None:
        with self._lock:
            _close_all(self._conns)
