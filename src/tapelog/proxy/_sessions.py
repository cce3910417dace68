"""The proxy's sessions: open, create, fork, and the index rebuilt from the store.

A :class:`SessionState` is one session the proxy writes: its log, its store
writer (the store allows one writer per session, so the proxy keeps exactly
one state per session), the header recorder of this process (its first
record is the ``initial`` or ``resume`` snapshot), the invariant checker's
shadow, the wire's per-node byte cache and the session's prefix chain. A
state's ``lock`` is held for the whole of one request, from matching to the
answer's last event: that is the per-session lock that keeps two requests
from ever writing one session at once.

Sessions the proxy creates by itself are named ``proxy-<time>-<random>``; at
start :meth:`Sessions.scan` reads the newest of them (at most ``limit``) once,
records their points in the index and lets the logs go, so a restarted proxy
continues the same conversations while holding only their digests. A session
is opened for writing when a request first continues it; at most
``max_open`` idle sessions stay open (the least recently used is closed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tapelog.checker._api import RequestChecker
from tapelog.llm._api import BodyCache
from tapelog.log._api import (
    Event,
    HeaderRecorder,
    LogFold,
    Session,
    new_session_id,
    repair_interrupted,
)
from tapelog.proxy._index import Point, SessionIndex
from tapelog.proxy._keys import SurfaceChain, loose_key
from tapelog.store import SessionStore, SessionWriter

__all__ = ["PROXY_PREFIX", "SessionState", "Sessions"]

PROXY_PREFIX = "proxy-"
"""The id prefix of the sessions the proxy creates (what :meth:`Sessions.scan` reads)."""

_log = logging.getLogger("tapelog.proxy")

_POINTS = frozenset({"turn/end", "session/end-seed"})
"""The events after which a session's history is a point a request may continue."""


@dataclass(eq=False, slots=True)
class SessionState:
    """One session the proxy writes (see the module docstring)."""

    session: Session
    writer: SessionWriter
    checker: RequestChecker | None
    recorder: HeaderRecorder = field(init=False)
    cache: BodyCache = field(default_factory=BodyCache)
    chain: SurfaceChain = field(default_factory=SurfaceChain)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    turn: int = 0
    pending: dict[str, int | None] = field(default_factory=dict)
    """Tool calls of the last answer that no logged result answers yet."""

    def __post_init__(self) -> None:
        self.recorder = HeaderRecorder(self.session)
        self.turn = _last_turn(self.session.events)
        self.pending = _pending_calls(self.session.events)

    @property
    def id(self) -> str:
        return self.session.id


def _last_turn(events: Sequence[Event]) -> int:
    for event in reversed(events):
        if event.type == "turn/start":
            turn: int = event.data["turn"]
            return turn
    return 0


def _pending_calls(seq: Sequence[Event]) -> dict[str, int | None]:
    """The tool calls of the assistant messages of the last step that have no
    appended result after them (what the next request must answer), each with
    the seq of its ``tool/call`` (``None``: a log from before the proxy logged them)."""
    calls: dict[str, int | None] = {}
    for event in reversed(seq):
        if event.type == "step/start":
            break
        if event.type == "assistant/message":
            for block in event.data["content"]:
                if block["type"] == "tool_call":
                    calls[block["id"]] = None
    if not calls:
        return {}
    start = next((e.seq for e in reversed(seq) if e.type == "step/start"), 0)
    for event in seq[start:]:
        if event.type == "tool/call" and event.data["call_id"] in calls:
            calls[event.data["call_id"]] = event.seq
        elif event.type == "tool/result" and event.surface_op == "append":
            calls.pop(event.data["call_id"], None)
    return calls


class Sessions:
    """The open sessions and the index of every known one."""

    def __init__(
        self,
        store: SessionStore,
        index: SessionIndex,
        *,
        check: bool,
        max_open: int = 64,
    ) -> None:
        self.store = store
        self.index = index
        self.check = check
        self.max_open = max_open
        self._open: dict[str, SessionState] = {}
        self._claimed: set[str] = set()  # being opened or created right now

    def busy(self, session_id: str) -> bool:
        """Whether a request holds the session (or is opening it) now."""
        state = self._open.get(session_id)
        return session_id in self._claimed or (state is not None and state.lock.locked())

    def claim(self, session_id: str) -> None:
        """Mark a session as being opened (see :meth:`busy`) until :meth:`unclaim`."""
        self._claimed.add(session_id)

    def unclaim(self, session_id: str) -> None:
        self._claimed.discard(session_id)

    def get(self, session_id: str) -> SessionState | None:
        """The open state of ``session_id``, if it is open (most recently used last)."""
        state = self._open.pop(session_id, None)
        if state is not None:
            self._open[session_id] = state
        return state

    def _install(self, state: SessionState) -> SessionState:
        self._open[state.id] = state
        self.note_end(state)
        self._evict()
        return state

    def _evict(self) -> None:
        idle = [s for s in self._open.values() if not s.lock.locked() and s.id not in self._claimed]
        for state in idle[: max(0, len(self._open) - self.max_open)]:
            del self._open[state.id]
            try:
                state.writer.close()
            except Exception as exc:  # the next request reopens it, or says why not
                _log.warning("closing session %s failed: %s", state.id, exc)

    def _state(self, session: Session, writer: SessionWriter) -> SessionState:
        return SessionState(
            session=session,
            writer=writer,
            # Carry, never reshape: a client's unpaired tool calls are the
            # provider's to refuse, not the proxy's.
            checker=RequestChecker(session, tool_pairs=False) if self.check else None,
        )

    def _reopen(self, session_id: str) -> SessionState:
        """Open a stored session for writing; a turn a crash left open is closed
        by logged repair events first (blocking I/O)."""
        session, writer = self.store.open(session_id)
        try:
            # The client runs the tool calls: its next request brings their results.
            if repair_interrupted(session, run_tools=False):
                writer.flush()
            return self._state(session, writer)
        except BaseException:
            writer.close()
            raise

    def _created(self, session: Session) -> SessionState:
        return self._state(session, self.store.create(session))

    async def open(self, session_id: str) -> SessionState:
        """The open state of a stored session (opened for writing now if needed)."""
        state = self.get(session_id)
        if state is not None:
            return state
        self.claim(session_id)
        try:
            state = await asyncio.to_thread(self._reopen, session_id)
        finally:
            self.unclaim(session_id)
        return self._install(state)

    async def create(self, session_id: str | None = None) -> SessionState:
        """A new stored session (named ``proxy-...`` unless ``session_id`` is given)."""
        session = Session(session_id or PROXY_PREFIX + new_session_id())
        self.claim(session.id)
        try:
            state = await asyncio.to_thread(self._created, session)
        finally:
            self.unclaim(session.id)
        return self._install(state)

    async def fork(self, point: Point) -> SessionState:
        """A new stored session seeded with ``point``'s session up to its
        ``turn/end`` (``Session.fork``: the seed ends with ``session/end-seed``)."""
        parent = self.get(point.session_id)
        if parent is not None:
            source = parent.session
        else:
            source = (await asyncio.to_thread(self.store.load, point.session_id)).session
        child = source.fork(point.seq, id=PROXY_PREFIX + new_session_id())
        self.claim(child.id)
        try:
            state = await asyncio.to_thread(self._created, child)
        finally:
            self.unclaim(child.id)
        return self._install(state)

    def note_end(self, state: SessionState) -> None:
        """Record the session's current history as its end in the index."""
        events = state.session.events
        end = next((e for e in reversed(events) if e.type in _POINTS), None)
        if end is None:
            return
        history = state.session.history()
        chain = state.chain.update(history)
        anchor: bytes | None = None
        others: tuple[bytes, ...] = ()
        if len(history) and history[len(history) - 1][1]["role"] == "assistant":
            anchor = state.chain.key_at(history, len(history) - 1)
            others = _alternatives(state.session.event(history[len(history) - 1][0]))
        self.index.record(state.id, chain, end.seq, anchor=anchor, alternatives=others)

    def scan(self, limit: int) -> int:
        """Record the points of the newest ``limit`` proxy sessions of the store
        (blocking I/O: run it in a thread); how many were read."""
        summaries = [
            s for s in self.store.list() if s.id.startswith(PROXY_PREFIX) and s.error is None
        ]
        summaries.sort(key=lambda s: s.last_time or s.created or 0, reverse=True)
        read = 0
        for summary in summaries[:limit]:
            try:
                loaded = self.store.load(summary.id)
            except Exception as exc:  # a damaged session is skipped, not fatal
                _log.warning("skipping session %s: %s", summary.id, exc)
                continue
            self._points_of(summary.id, loaded.session.events)
            read += 1
        return read

    def _points_of(self, session_id: str, events: Iterable[Event]) -> None:
        fold = LogFold()
        chain = SurfaceChain()
        answers: dict[int, Event] = {}
        for event in events:
            fold.apply(event)
            if event.type == "assistant/message":
                answers[event.seq] = event
            if event.type in _POINTS:
                history = fold.history()
                digests = chain.update(history)
                anchor: bytes | None = None
                others: tuple[bytes, ...] = ()
                if len(history) and history[len(history) - 1][1]["role"] == "assistant":
                    anchor = chain.key_at(history, len(history) - 1)
                    last = answers.get(history[len(history) - 1][0])
                    others = _alternatives(last) if last is not None else ()
                self.index.record(
                    session_id, digests, event.seq, anchor=anchor, alternatives=others
                )

    def close(self) -> None:
        """Close every open session's writer (flushing what is buffered)."""
        states, self._open = list(self._open.values()), {}
        for state in states:
            try:
                state.writer.close()
            except Exception as exc:
                _log.warning("closing session %s failed: %s", state.id, exc)


def _alternatives(answer: Event) -> tuple[bytes, ...]:
    """The loose keys of an answer's other choices (``n`` > 1): a request that
    holds one of them in the answer's place continues the session."""
    return tuple(
        loose_key({"role": "assistant", "content": a["content"]})
        for a in answer.data.get("alternatives", ())
        if a["content"]
    )
