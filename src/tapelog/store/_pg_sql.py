"""The PostgreSQL store's SQL and the small pieces around it, kept out of the store class.

The schema (``DDL``), the listing query, the insert of a session's row, and how
a lock holder is named in the "open for writing by ..." sentence: each is
text or a pure function, so the store module holds only the port's logic.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence
from typing import Any, Final

from tapelog._errors import CorruptLogError
from tapelog.log._api import SESSION_FORMAT_VERSION, SessionInfo
from tapelog.store._base import SessionSummary
from tapelog.store._format import header_line, summarise_session

__all__ = [
    "APPEND",
    "APP_NAME",
    "CHECK",
    "DDL",
    "HOLDER",
    "INSERT_SESSION",
    "LAST_SEQ",
    "LIST",
    "SCHEMA_NAME",
    "first_line",
    "joined_lines",
    "locked_message",
    "session_row",
    "summarise_row",
]

SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
APP_NAME: Final = re.compile(r"tapelog pid (\d+) on (.*)")
DDL: Final = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.sessions (
    id text PRIMARY KEY,
    format_version integer NOT NULL,
    created bigint NOT NULL,
    cwd text,
    parent text,
    seed_length integer,
    header bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.events (
    session_id text NOT NULL REFERENCES {s}.sessions (id),
    seq integer NOT NULL CHECK (seq >= 0),
    line bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""

# Each summary reads the header, the byte count and the last line (the primary
# key index finds it) but no other event.
LIST: Final = """
SELECT s.id, s.header, octet_length(s.header) + 1 + coalesce(e.size, 0), last.line
FROM {s}.sessions s
LEFT JOIN LATERAL (
    SELECT sum(octet_length(line) + 1) AS size FROM {s}.events WHERE session_id = s.id
) e ON true
LEFT JOIN LATERAL (
    SELECT line FROM {s}.events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1
) last ON true
"""

CHECK: Final = "check the server"

# A flush: every row of the batch from one array parameter, in one statement
# (on an autocommit connection, one transaction). The followers' notification
# (NOTIFY) is sent by a statement of its own, right after it (see
# PostgresStore._insert_events).
APPEND: Final = """
INSERT INTO {s}.events (session_id, seq, line)
SELECT %s, %s + t.n - 1, t.line FROM unnest(%b::bytea[]) WITH ORDINALITY AS t(line, n)
"""

INSERT_SESSION: Final = """
INSERT INTO {s}.sessions (id, format_version, created, cwd, parent, seed_length, header)
VALUES (%s, %s, %s, %s, %s, %s, %s)
"""
LAST_SEQ: Final = "SELECT max(seq) FROM {s}.events WHERE session_id = %s"

HOLDER: Final = """
SELECT a.application_name, l.pid
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid::bigint = %s AND l.objid::bigint = %s
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def session_row(info: SessionInfo) -> tuple[object, ...]:
    return (
        info.id,
        SESSION_FORMAT_VERSION,
        info.created,
        info.cwd,
        info.parent,
        info.seed_length,
        header_line(info),
    )


def summarise_row(session_id: str, header: bytes, size: int, last: bytes | None) -> SessionSummary:
    """A summary from the header and the last event only (as the JSONL store does)."""
    return summarise_session(
        session_id,
        bytes(header),
        None if last is None else bytes(last),
        size,
        details="load the session for details",
    )


def locked_message(session_id: str, holder: tuple[Any, ...] | None) -> str:
    prefix = f"session {session_id} is open for writing by"
    wait = "wait for it to finish or stop it, then try again"
    app, backend = holder if holder is not None else (None, None)
    match = APP_NAME.fullmatch(app or "")
    if match is None:
        who = "another connection" if backend is None else f"another connection (backend {backend})"
        return f"{prefix} {who} to the database; {wait}"
    pid, host = int(match.group(1)), match.group(2)
    if pid == os.getpid() and host == socket.gethostname()[: len(host)]:
        return (
            f"{prefix} another writer in this process (pid {pid}); "
            "close that writer before opening the session again"
        )
    return f"{prefix} another process (pid {pid} on {host}); {wait}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__


def joined_lines(source: str, header: bytes, rows: Sequence[tuple[int, bytes]]) -> bytes:
    """A session's header and ``(seq, line)`` rows joined as its JSONL file.

    Rows a file could not hold line for line (a gap in ``seq``, a newline
    inside a line) are refused, naming the line they would be on.
    """
    parts = [header]
    for index, (seq, line) in enumerate(rows):
        where = f"{source}: line {index + 2}"
        if seq != index:
            raise CorruptLogError(
                f"{where}: the events table has seq {seq} where seq {index} belongs "
                "(rows are missing)",
                line=index + 2,
            )
        if b"\n" in line:
            raise CorruptLogError(
                f"{where} (seq {seq}): the stored event contains a newline byte, which "
                "canonical event bytes never do",
                line=index + 2,
            )
        parts.append(bytes(line))
    return b"\n".join(parts) + b"\n"
