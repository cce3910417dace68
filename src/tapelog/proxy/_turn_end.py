"""The end of a proxied turn: make it durable, release its session, report it.

Every way a request ends (answered, streamed to its end, an upstream error,
the client leaving, a failed log write) goes through :meth:`TurnEnd.done`,
so the bookkeeping that must happen exactly once per turn lives in one
place, apart from the app's routing and sending (``_app``): the flush, the
session's point in the store's index, the lock's release, the console
summary, and (``watch_cache``) the cache audit's line for a broken prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from tapelog.audit._api import CacheWatch
from tapelog.llm._api import usage_prompt_tokens
from tapelog.proxy._exchange import Exchange
from tapelog.proxy._sessions import Sessions, SessionState
from tapelog.proxy._summary import RequestSummary, header_changes

__all__ = ["TurnEnd"]


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

    async def done(self, exchange: Exchange, aborted: bool, status: int = 200) -> None:
        """A turn ended: make it durable, record its point in the store's index,
        release the session (its writer closed: any replica may take the next
        request), report. The client gets the answer's end only after this.

        The lock is released and the line reported even if the wait is
        cancelled (the client left): the flush and the release still complete.
        A failed flush keeps the session open, its events buffered for the next.
        """
        state = exchange.state
        summary = _summary(exchange, status)
        point = self.sessions.point_of(state)

        def release() -> None:
            state.writer.flush()
            self.sessions.release(state, point)

        if self.watch_cache:
            summary = replace(summary, cache_break=self._cache_break(state))
        try:
            if aborted:
                release()  # no await a second cancellation could cut short
            else:
                await asyncio.shield(asyncio.to_thread(release))
        finally:
            self.sessions.settle(state)
            if state.lock.locked():
                state.lock.release()
            self.report(summary)

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
