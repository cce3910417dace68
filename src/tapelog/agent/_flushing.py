"""Making the log durable without holding the caller's event loop.

A store flush is blocking I/O: one ``write`` + ``fsync`` for the JSONL store,
one insert transaction for PostgreSQL, a few milliseconds on a good disk and
far more on a busy one. The loop flushes before every request, after a step's
``tool/call`` events and at turn end, so flushing on the event loop's thread
would stall every other task of the caller's loop (a web server's requests, a
UI, other agents) that long, about twice a step. :func:`flush_off_loop` runs
the writer's ``flush()`` in a worker thread and awaits it, so the ordering is
kept (the loop goes on only after the flush returned, and a failed flush
raises where it is awaited) while the event loop serves other tasks.

A store writer may be flushed from another thread while the session is
appended to (:class:`tapelog.store.SessionWriter`: the buffer is taken and its
``log/digest`` logged under the session lock, the write happens outside it).
That ``log/digest`` append, and so the session's listeners for it, then runs
on the worker thread, as appends from tool threads already do.

A writer that also has an ``async def aflush()`` (a natively asynchronous
store) is awaited through it instead, on the event loop. When a turn ends by
an exception, cancellation included, the loop calls ``flush()`` on its own
thread: an await there could be cancelled again and leave the turn's end
unstored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tapelog.agent._turn import Flushable

__all__ = ["flush_off_loop"]


async def flush_off_loop(writer: Flushable) -> None:
    """Flush ``writer`` without blocking the event loop; returns when it is durable."""
    aflush: Callable[[], Awaitable[None]] | None = getattr(writer, "aflush", None)
    if callable(aflush):
        await aflush()
    else:
        await asyncio.to_thread(writer.flush)
