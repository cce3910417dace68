"""The PostgreSQL store's derived rows: the ``audit_checkpoints`` table.

::

    audit_checkpoints(session_id text PK REFERENCES sessions, covered_events int,
                      covered_bytes bigint, covered_sha256 text, body bytea)

One row per session: the cache audit's checkpoint (``tapelog.audit._checkpoint``)
as ``body``, with what it covers in columns of their own: the first
``covered_events`` events, whose JSONL form (``session_bytes``) is
``covered_bytes`` long with that SHA-256. It is derived, never the truth:
a row may be deleted (or the table dropped) at any time, and the next
``tapelog cache`` writes it again. The table is created if absent, on the
first checkpoint kept, like the store's other tables; a role that may not
create it, or write it, just keeps no checkpoint (the audit only takes longer).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

from tapelog._errors import StoreError

if TYPE_CHECKING:
    from psycopg import Connection

    from tapelog.store._postgres import PostgresStore

__all__ = ["read_audit_checkpoint", "write_audit_checkpoint"]

CHECKPOINTS_DDL: Final = """
CREATE TABLE IF NOT EXISTS {s}.audit_checkpoints (
    session_id text PRIMARY KEY REFERENCES {s}.sessions (id),
    covered_events integer NOT NULL,
    covered_bytes bigint NOT NULL,
    covered_sha256 text NOT NULL,
    body bytea NOT NULL
);
"""
_READ: Final = "SELECT body FROM {s}.audit_checkpoints WHERE session_id = %s"
_WRITE: Final = """
INSERT INTO {s}.audit_checkpoints
    (session_id, covered_events, covered_bytes, covered_sha256, body)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (session_id) DO UPDATE SET covered_events = EXCLUDED.covered_events,
    covered_bytes = EXCLUDED.covered_bytes, covered_sha256 = EXCLUDED.covered_sha256,
    body = EXCLUDED.body
"""


def _table(store: PostgresStore) -> str:
    return f'"{store.schema}".audit_checkpoints'


def read_audit_checkpoint(store: PostgresStore, session_id: str) -> bytes | None:
    """The checkpoint body kept for ``session_id`` (``None``: none, no table yet,
    or a store that will not give it: the audit is then computed)."""
    action = f"read the audit checkpoint of session {session_id} from"
    with contextlib.suppress(StoreError), store._reading(action) as conn:
        if conn is None:
            return None
        found = conn.execute("SELECT to_regclass(%s)", (_table(store),)).fetchone()
        if found is None or found[0] is None:
            return None
        row = conn.execute(store._sql(_READ), (session_id,), binary=True).fetchone()
        return None if row is None else bytes(row[0])
    return None


def write_audit_checkpoint(
    store: PostgresStore, session_id: str, body: bytes, *, events: int, size: int, sha256: str
) -> None:
    """Keep ``body`` as the checkpoint of ``session_id`` (covering its first
    ``events`` events, ``size`` bytes with digest ``sha256``); a store that
    refuses it keeps none, and that is no error (it only saves time)."""
    action = f"keep the audit checkpoint of session {session_id} in"
    with (
        contextlib.suppress(StoreError),
        store._connect() as conn,
        store._errors(action, advice=""),
    ):
        _ensure_table(store, conn)
        conn.execute(store._sql(_WRITE), (session_id, events, size, sha256, body))


def _ensure_table(store: PostgresStore, conn: Connection[Any]) -> None:
    found = conn.execute("SELECT to_regclass(%s)", (_table(store),)).fetchone()
    if found is None or found[0] is None:
        with conn.transaction():
            # The key the store's own DDL takes: one creator at a time.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (store._lock_key(""),))
            conn.execute(store._sql(CHECKPOINTS_DDL))
