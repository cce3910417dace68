"""The end of a proxied turn: make it durable, release its session, report it.

Every way a request ends (answered, streamed to its end, an upstream error,
the client leaving, a failed log write) goes through :meth:`TurnEnd.done`,
so the bookkeeping that must happen exactly once per turn lives in one
place, apart from the app's routing and sending (``_app``): the flush, the
session's point in the store's index, the lock's release, the console
summary, and (``watch_cache``) the cache audit's line for a broken prefix.

An answered turn costs its client one write, not a sync: its events are
written before the answer's end reaches the client (a proxy killed after
that loses none of them: the operating system holds the bytes), and made
durable after, off the client's wait, with the rest of the bookkeeping.
The session's lock is held until then, and the router waits for every turn
end under way before it matches a request (``Sessions.settled``), so the
next request of the conversation finds the turn synced, its point recorded
and its session released, exactly as if all of it had happened before the
answer's end; its own flush comes before its send. Only a power loss in
between can take the turn's end back, and then load repairs the turn as
interrupted (docs/proxy.md, "Durability and latency"). With a store whose
every write is durable (``SessionStore.syncs_later`` off: PostgreSQL) there
is no sync to move, and the whole turn end comes before the answer's end, so
that replicas on other machines find the session released and indexed as
soon as the client can send its next request.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import replace

from tapelog.audit._api import CacheWatch
from tapelog.llm._api import usage_prompt_tokens
from tapelog.proxy._exchange import Exchange
from tapelog.proxy._sessions import Sessions, SessionState
from tapelog.proxy._summary import RequestSummary, header_changes
from tapelog.store._api import PointRecord

__all__ = ["TurnEnd"]

_log = logging.getLogger("tapelog.proxy")


class TurnEnd:
    """Ends the turns of one proxy's sessions; ``report`` gets each turn's
    summary; ``watch_cache`` runs the cache audit as each turn ends, keeping
    at most ``max_watches`` sessions' audits (the least recently used go)."""

    def __init__(
        self,
        sessions: Sessions,
        report: Callable[[RequestSummary], None],
        *,
        watch_cache: bool,
        max_watches: int,
    ) -> None:
        self.sessions = sessions
        self.report = report
        self.watch_cache = watch_cache
        self._watches: dict[str, CacheWatch] = {}
        self._max_watches = max_watches

    async def done(
        self,
        exchange: Exchange,
        aborted: bool,
        status: int = 200,
        answered: asyncio.Future[None] | None = None,
    ) -> None:
        """A turn ended: report it and write it; then (off the client's wait, see
        the module docstring) make it durable, record its point in the store's
        index and release the session (its writer closed: any replica may take
        the next request). The client gets the answer's end only after the
        write; ``answered``: done once the client has it, and the rest waits
        for that (so its work never delays the end the client waits for).

        A turn the client left (``aborted``) is closed at once, without an
        await a second cancellation could cut short. A cancelled wait (the
        client left during the write) still closes the turn.
        """
        summary = _summary(exchange, status)
        if self.watch_cache:
            summary = replace(summary, cache_break=self._cache_break(exchange.state))
        state = exchange.state
        if aborted:
            self._close(state, summary)
            return
        if not self.sessions.store.syncs_later:
            # Every write is durable (PostgreSQL): no sync to move off the
            # client's wait, and replicas on other machines find the session
            # released and indexed as soon as the client has its answer.
            try:
                point = self.sessions.point_of(state)
                await asyncio.shield(asyncio.to_thread(self._release, state, point))
            finally:
                self._settle(state)
                self.report(summary)
            return
        try:
            flush = functools.partial(state.writer.flush, sync=False)
            await asyncio.shield(self.sessions.quick(flush))
        finally:
            self.report(summary)
            self.sessions.closing(asyncio.ensure_future(self._close_later(state, answered)))

    async def _close_later(
        self, state: SessionState, answered: asyncio.Future[None] | None
    ) -> None:
        """The rest of :meth:`done`, after the answer's end reached the client. A
        failed flush keeps the session open, its events buffered for the next
        request (the console says so: the client has its answer)."""
        try:
            if answered is not None:
                await answered
            point = self.sessions.point_of(state)
            await asyncio.to_thread(self._release, state, point)
        except Exception as exc:
            _log.warning("ending the turn of session %s failed: %s", state.id, exc)
        finally:
            self._settle(state)

    def _close(self, state: SessionState, summary: RequestSummary) -> None:
        """All of :meth:`done` at once (blocking I/O); a failed flush raises, the
        session kept open with its events buffered for the next request."""
        try:
            self._release(state, self.sessions.point_of(state))
        finally:
            self._settle(state)
            self.report(summary)

    def _release(self, state: SessionState, point: PointRecord | None) -> None:
        state.writer.flush()  # syncs what was written for the client's sake
        self.sessions.release(state, point)

    def _settle(self, state: SessionState) -> None:
        self.sessions.settle(state)
        if state.lock.locked():
            state.lock.release()

    def _cache_break(self, state: SessionState) -> str | None:
        """The cache audit's line for the request that just ended, if its
        prefix broke (the session's lock is held: no step is open)."""
        watch = self._watches.pop(state.id, None)
        if watch is None or watch.session is not state.session:
            watch = CacheWatch(state.session)
        self._watches[state.id] = watch  # newest last
        while len(self._watches) > self._max_watches:
            del self._watches[next(iter(self._watches))]
        try:
            breaks = watch.breaks()
        except Exception as exc:  # the audit must never cost the client its answer
            self._watches.pop(state.id, None)
            return f"cache audit of {state.id} failed: {exc}"
        return breaks[-1].line() if breaks else None


def _summary(exchange: Exchange, status: int) -> RequestSummary:
    """The console summary of an ended turn: its changes, tokens and error."""
    changes = [*exchange.changes, *header_changes(exchange.before, exchange.header_event)]
    message = exchange.message
    usage = message.data.get("usage") if message is not None else None
    reason = exchange.reason or {"kind": "error"}
    error = None
    if reason["kind"] not in ("completed", "tool_calls", "max_tokens"):
        error = (reason.get("error") or {}).get("message") or str(reason["kind"])
    return RequestSummary(
        session_id=exchange.state.id,
        turn=exchange.turn,
        status=status,
        prompt_tokens=usage_prompt_tokens(usage) if usage else None,
        cached_tokens=int(usage.get("cache_read", 0)) if usage else None,
        changes=tuple(changes),
        error=error,
    )
