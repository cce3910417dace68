"""Which session a request goes to, its lock held: the same answer on every replica.

A request that names its session (``explicit``) gets that one, opened or
created. Any other is matched against the conversation index (``_index``),
brought up to date from the store first (after this replica's turn ends under
way are done, ``Sessions.settled``: their clients may already have the
answers), so a replica routes a request by what every replica recorded:
**extend**, **retry** or **edit** open the matched session,
**fork** seeds a new one at the matched point, **new** creates one. A
Responses request that continues a logged response (``previous_response_id``)
**continues** the session whose last turn logged it, when that session is idle
at exactly that turn (else it is matched as any other). A request
another agent of the client sent (``_identity``: a subagent that holds the
main conversation's first exchange under its own system prompt and tools)
**branches** instead: a new session, seeded with nothing, whose
``session/origin`` names the matched session and point. The router remembers
who sent each session's last request, so a match on another agent's session
gives way to a shorter one of the request's own agent (``SessionIndex.match``,
``fits``): an agent taking its conversation back after a handoff.

The per-session lock spans replicas: opening a session for writing takes the
store's write lock (an advisory lock in PostgreSQL, ``flock`` for JSONL), so
a session another replica is answering a request of is refused with
:class:`SessionLockedError`. That is usually the previous turn of the same
conversation, still closing on the other replica (its client already has the
answer), so the request waits briefly (``lock_wait`` seconds, retrying) and
then, if the session is still held, treats it as busy: a fork, exactly as a
session busy on this replica is, so two requests never write one session.
A session the index names but the store no longer holds (deleted) is
forgotten, and the request matched again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from tapelog._errors import ProxyError, SessionLockedError, SessionNotFoundError
from tapelog.proxy._identity import RUN_SIGNALS, Signal, Who
from tapelog.proxy._index import Match, Point
from tapelog.proxy._sessions import Sessions, SessionState

__all__ = ["DEFAULT_LOCK_WAIT", "Assigned", "Router"]

DEFAULT_LOCK_WAIT = 2.0
"""How long a request waits for a session another replica holds (seconds)."""
_RETRY = 0.01
_RUNS = 10_000  # client runs remembered (oldest forgotten first)
_ATTEMPTS = 16  # matches lost to a request of this replica that took the session first


class Assigned:
    """Where a request went: its state (lock held), how it was found, the
    session it forked or branched from, and why it branched."""

    def __init__(
        self, state: SessionState, how: str, parent: str | None = None, why: str = ""
    ) -> None:
        self.state, self.how, self.parent, self.why = state, how, parent, why

    def changes(self, changed: str | None) -> list[str]:
        """What the summary says of where the request went; ``changed``: the
        first client message that differed from the log, if one did."""
        changes: list[str] = []
        if self.how == "new":
            changes.append("new session")
        elif self.how == "fork":
            changes.append(f"forked from {self.parent}")
        elif self.how == "branch":
            changes.append(f"branched from {self.parent}: {self.why}")
        elif self.how == "retry":
            changes.append("the last request again: its earlier answer replaced")
        if changed is not None and self.how != "retry":
            changes.append(f"client changed {changed}")
        return changes


class Router:
    """Assigns requests to sessions (see the module docstring)."""

    def __init__(self, sessions: Sessions, *, lock_wait: float = DEFAULT_LOCK_WAIT) -> None:
        self.sessions = sessions
        self.lock_wait = lock_wait
        self._explicit = asyncio.Lock()
        self._runs: dict[Signal, str] = {}  # a client run's first session (this replica's)
        self._agents: dict[str, Who] = {}  # who sent each session's last request here

    async def assign(
        self,
        explicit: str | None,
        keys: Sequence[bytes],
        chain: Sequence[bytes],
        who: Who | None = None,
        previous: str | None = None,
    ) -> Assigned:
        """The session of a request whose messages have these loose ``keys`` and
        prefix ``chain``, sent by ``who``, its lock held; :class:`SessionLockedError`
        when the named session stays held elsewhere. A request of another agent
        than the matched session's (``_identity``) branches off it."""
        if explicit is not None:
            return Assigned(await self._named(explicit), "explicit")
        sessions = self.sessions
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lock_wait
        if previous is not None:
            continued = await self._continued(previous, deadline)
            if continued is not None:
                return self._assigned(continued, who)
        elsewhere: set[str] = set()  # held by another replica past the deadline

        def busy(session_id: str) -> bool:
            return session_id in elsewhere or sessions.busy(session_id)

        attempts = 0
        while attempts < _ATTEMPTS:
            await sessions.settled()
            await sessions.refresh()
            match: Match = sessions.index.match(chain, keys, busy, self._fits(who))
            point = match.point
            if match.kind in ("extend", "retry", "edit"):
                assert point is not None
                try:
                    state = await sessions.open(point.session_id)
                except SessionLockedError:
                    if loop.time() >= deadline:
                        elsewhere.add(point.session_id)
                    else:
                        await asyncio.sleep(_RETRY)
                    continue
                except SessionNotFoundError:  # deleted since it was indexed
                    sessions.index.forget(point.session_id)
                    continue
                if state.lock.locked():  # taken while it was being opened: match again
                    attempts += 1
                    continue
                await state.lock.acquire()
                why = None if who is None else who.differs(state.session)
                if why is None:
                    return self._assigned(Assigned(state, match.kind), who)
                await self._put_back(state)
                return await self._branch(point, why, who)
            if match.kind == "fork":
                assert point is not None
                try:
                    source = await sessions.source(point)
                except SessionNotFoundError:
                    sessions.index.forget(point.session_id)
                    continue
                why = None if who is None else who.differs(source)
                if why is not None:
                    return await self._branch(point, why, who)
                state = await sessions.fork(point, source)
                await state.lock.acquire()
                return self._assigned(Assigned(state, "fork", point.session_id), who)
            return await self._new(who)
        raise ProxyError("the proxy is busy with this conversation; retry", status=409)

    async def _continued(self, response_id: str, deadline: float) -> Assigned | None:
        """The session whose last turn logged ``response_id``, its lock held, when
        it is idle at exactly that turn (a request that continues that response by
        ``previous_response_id`` continues the conversation); ``None`` otherwise
        (the request is matched as any other)."""
        sessions = self.sessions
        loop = asyncio.get_running_loop()
        while True:
            await sessions.settled()
            await sessions.refresh()
            point = sessions.index.continued(response_id)
            if point is None or sessions.busy(point.session_id):
                return None
            try:
                state = await sessions.open(point.session_id)
            except SessionLockedError:
                if loop.time() >= deadline:
                    return None
                await asyncio.sleep(_RETRY)
                continue
            except SessionNotFoundError:  # deleted since it was indexed
                sessions.index.forget(point.session_id)
                return None
            if state.lock.locked():  # taken while it was being opened
                return None
            await state.lock.acquire()
            ends = (e.seq for e in reversed(state.session.events) if e.type == "turn/end")
            if next(ends, None) != point.seq:  # moved on since it was indexed
                await self._put_back(state)
                return None
            return Assigned(state, "continue", point.session_id)

    async def _put_back(self, state: SessionState) -> None:
        """Let go of a session opened for a request that went elsewhere: its
        writer closed (any replica may take it), then its lock."""
        try:
            await asyncio.to_thread(self.sessions.release, state, None)
        finally:
            self.sessions.settle(state)
            state.lock.release()

    async def _new(self, who: Who | None) -> Assigned:
        """A new session; one whose client names a run this replica saw joins
        that run's family: its first session is its parent (no seq: they share
        no history), so a side call lists with the conversation it serves."""
        origin: dict[str, Any] = {}
        run = None
        if who is not None:
            signal = who.signal
            run = signal if signal is not None and signal.kind in RUN_SIGNALS else None
            parent = None if run is None else self._runs.get(run)
            if parent is not None and run is not None:
                why = f"the same client run ({run.kind}), no shared history"
                origin = who.origin(parent, None, why)
            else:
                origin = who.origin()
        state = await self.sessions.create(origin=origin or None)
        if run is not None and run not in self._runs:
            self._runs[run] = state.id
            if len(self._runs) > _RUNS:
                del self._runs[next(iter(self._runs))]
        await state.lock.acquire()
        how = "branch" if "parent" in origin else "new"
        return self._assigned(
            Assigned(state, how, origin.get("parent"), origin.get("why", "")), who
        )

    async def _branch(self, point: Point, why: str, who: Who | None) -> Assigned:
        """A new session for another agent's request that shares ``point``'s
        history: linked to it (``session/origin``), seeded with nothing."""
        assert who is not None
        origin = who.origin(point.session_id, point.seq, why)
        state = await self.sessions.create(origin=origin)
        await state.lock.acquire()
        return self._assigned(Assigned(state, "branch", point.session_id, why), who)

    def _assigned(self, assigned: Assigned, who: Who | None) -> Assigned:
        """Remember who the session's last request came from (for :meth:`_fits`)."""
        if who is not None:
            agents = self._agents
            agents.pop(assigned.state.id, None)
            agents[assigned.state.id] = who
            if len(agents) > _RUNS:
                del agents[next(iter(agents))]
        return assigned

    def _fits(self, who: Who | None) -> Callable[[str], bool] | None:
        """Whether a session is ``who``'s agent's, as far as this replica knows
        (a session it did not route a request to since it started: yes)."""
        if who is None:
            return None
        agents = self._agents

        def fits(session_id: str) -> bool:
            last = agents.get(session_id)
            return last is None or last.same_as(who)

        return fits

    async def _named(self, session_id: str) -> SessionState:
        """The named session, opened or created, its lock held. A state whose
        writer a finished request closed meanwhile is opened again."""
        sessions = self.sessions
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lock_wait
        while True:
            async with self._explicit:  # one opener per id at a time
                state = sessions.get(session_id)
                if state is None:
                    try:
                        exists = await asyncio.to_thread(sessions.store.exists, session_id)
                        opener = sessions.open if exists else sessions.create
                        state = await opener(session_id)
                    except SessionLockedError:
                        if loop.time() >= deadline:
                            raise
                        state = None
            if state is None:
                await asyncio.sleep(_RETRY)
                continue
            await state.lock.acquire()
            if not state.writer.closed:
                return state
            state.lock.release()
