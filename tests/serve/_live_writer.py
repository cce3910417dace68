"""A writer in a process of its own, for the live view's PostgreSQL test.

    python -m serve._live_writer CONNINFO SCHEMA SESSION_ID     (cwd: tests/)

Stores a one-turn session and prints ``stored``; on a line from stdin logs a
second turn, flushes and prints the seqs of its answer and its ``turn/start``;
on the next line closes the writer (releasing the session) and exits.
"""

from __future__ import annotations

import sys

from serve._helpers import HandLog
from tapelog.store import PostgresStore


def main() -> None:
    conninfo, schema, session_id = sys.argv[1:4]
    store = PostgresStore(conninfo, schema=schema)
    log = HandLog(session_id, tool="lookup")
    log.ask("first question", "first answer")
    with store.create(log.session) as writer:
        writer.checkpoint()
        print("stored", flush=True)
        sys.stdin.readline()
        events = log.ask("What is new?", "Something <b>new</b>")
        answer = next(e for e in reversed(events) if e.type == "assistant/message")
        writer.flush()
        print(answer.seq, events[0].seq, flush=True)  # the turn shows its end reason
        sys.stdin.readline()


if __name__ == "__main__":
    main()
