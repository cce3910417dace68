"""Incremental summaries of a PostgreSQL store (:mod:`._summaries`): rows and seqs.

Events are rows keyed by (session, seq) that are only ever inserted, so a
session's number of events identifies what is stored: a summary stays valid
while that number is the same, and a session that gained events is folded
from the first new seq. One query lists every session with its last seq (an
index probe per session); one more fetches, for the sessions that changed,
only the new rows of the types the reader's fold reads (the filter runs in
the server, so ``assistant/chunk`` rows are never sent).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from tapelog.store._summaries import Cursor, F, Folded, envelope, read_header

if TYPE_CHECKING:
    from tapelog.store._postgres import PostgresStore

__all__ = ["pg_summaries"]

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


def pg_summaries(
    store: PostgresStore, previous: Mapping[str, Folded[F]], new_fold: Callable[[], F]
) -> dict[str, Folded[F]]:
    """Every session's summary in ``store`` (see the module docstring)."""
    out: dict[str, Folded[F]] = {}
    todo: dict[str, tuple[Folded[F], int | None]] = {}
    lines: dict[str, list[bytes]] = {}
    with store._reading("list the sessions in") as conn:
        if conn is None:
            return out  # nothing is created until the first session is
        rows = conn.execute(store._sql(_LIST), binary=True).fetchall()
        for session_id, header, last_seq, last_line in rows:
            events = 0 if last_seq is None else last_seq + 1
            old = previous.get(session_id)
            if old is not None and old.cursor.key == (events,):
                out[session_id] = old
                continue
            if old is not None and old.error is None and old.cursor.offset < events:
                folded = old.continued()
            else:  # new, or (never, rows being append-only) fewer events than folded
                folded = Folded(id=session_id, fold=new_fold())
                read_header(folded, bytes(header))
            found = envelope(bytes(last_line)) if last_line is not None else None
            folded.cursor = Cursor((events,), events)
            todo[session_id] = (folded, None if found is None else found[1])
        if todo:
            ids = list(todo)
            firsts = [todo[i][0].events for i in ids]
            types = "|".join(re.escape(t) for t in sorted(new_fold().types))
            wanted = f'"type":"({types})"'
            lines = {i: [] for i in ids}
            query = store._sql(_NEW_ROWS)
            for session_id, line in conn.execute(query, (ids, firsts, wanted), binary=True):
                lines[session_id].append(bytes(line))
    for session_id, (folded, last_time) in todo.items():
        if folded.error is None:
            folded.extend(lines[session_id], counted=False)
        folded.events, folded.last_time = folded.cursor.offset, last_time
        out[session_id] = folded
    return out
