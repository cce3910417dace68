"""The proxy's sessions: open, create, fork, release, and the index kept in the store.

A :class:`SessionState` is one session the proxy writes: its log, its store
writer (the store allows one writer per session, across processes and
machines), the header recorder of this process (its first record is the
``initial`` or ``resume`` snapshot), the invariant checker's shadow, the
wire's per-node byte cache and the session's prefix chain. A state's ``lock``
is held for the whole of one request, from matching to the answer's last
event, and the store's write lock with it: that is the per-session lock that
keeps two requests, on this replica or any other, from ever writing one
session at once. When the turn's end is durable (synced just after the
client got the answer's end: ``_turn_end``), :meth:`Sessions.release`
records the session's new point in the store's conversation index and closes
the writer, so the next request of the conversation may go to any replica.

The index (``_index``) is the store's (``tapelog.store._points``):
:meth:`Sessions.refresh` folds every record this replica has not seen yet
into it, before each match. Sessions the proxy creates by itself are named
``proxy-<time>-<random>``; when the store has no record at all (sessions
stored before the index existed, or a JSONL index file deleted),
:meth:`Sessions.rebuild` reads the newest of them (at most ``limit``) once
and records their points.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tapelog.checker._api import RequestChecker
from tapelog.llm._api import BodyCache
from tapelog.log._api import (
    Event,
    HeaderRecorder,
    History,
    LogFold,
    Session,
    new_session_id,
    repair_interrupted,
)
from tapelog.proxy._index import Point, SessionIndex
from tapelog.proxy._keys import SurfaceChain, loose_key
from tapelog.store import SessionStore, SessionWriter
from tapelog.store._api import PointRecord

if TYPE_CHECKING:
    from tapelog.proxy._exchange import Compared

__all__ = ["PROXY_PREFIX", "SessionState", "Sessions"]

PROXY_PREFIX = "proxy-"
"""The id prefix of the sessions the proxy creates (what :meth:`Sessions.scan` reads)."""

_log = logging.getLogger("tapelog.proxy")

T = TypeVar("T")

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
    compared: Compared | None = None
    """What the last request's messages were found equal to (``_exchange``)."""

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
        self._parked: dict[str, SessionState] = {}  # released by this replica, newest last
        self._claimed: set[str] = set()  # being opened or created right now
        self._closing: set[asyncio.Task[None]] = set()  # turn ends after the answer
        self.points = store.point_log()
        self._position = 0  # in the store's point log: what the index holds
        self._refreshing = asyncio.Lock()

    def busy(self, session_id: str) -> bool:
        """Whether a request holds the session (or is opening it) now."""
        state = self._open.get(session_id)
        return session_id in self._claimed or (state is not None and state.lock.locked())

    def closing(self, task: asyncio.Task[None]) -> None:
        """Keep track of a turn's end that goes on after its answer reached the
        client (``_turn_end``: the sync, the point, the release) until it is done."""
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def settled(self) -> None:
        """Wait for the turn ends under way now (:meth:`closing`): a request is
        matched only once the turns its client has seen end are recorded in the
        index and their sessions released, as if they had ended before the
        answers did."""
        pending = set(self._closing)
        if pending:
            await asyncio.wait(pending)

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
        self._parked.pop(state.id, None)
        self._open[state.id] = state
        self._evict()
        return state

    def _park(self, state: SessionState) -> None:
        """Keep a released state (at most ``max_open``), to take up again if no
        other replica wrote its session meanwhile (``SessionStore.reattach``)."""
        self._parked.pop(state.id, None)
        self._parked[state.id] = state
        while len(self._parked) > self.max_open:
            del self._parked[next(iter(self._parked))]

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

    def _reopen(self, session_id: str, parked: SessionState | None) -> SessionState:
        """Open a stored session for writing; a turn a crash left open is closed
        by logged repair events first (blocking I/O). A state this replica
        released is taken up again when the store holds exactly what it wrote:
        the same log, recorder, checker and caches, as if it had stayed open."""
        if parked is not None:
            writer = self.store.reattach(parked.writer)
            if writer is not None:
                parked.writer = writer
                return parked
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
        """The open state of a stored session (opened for writing now if needed).
        A state this replica parked is taken back inline when the store's small
        operations are (``SessionStore.quick_io``): a few system calls."""
        state = self.get(session_id)
        if state is not None:
            return state
        parked = self._parked.pop(session_id, None)
        if parked is not None and self.store.quick_io:
            writer = self.store.reattach(parked.writer)
            if writer is not None:
                parked.writer = writer
                return self._install(parked)
            parked = None  # not as it left it: open() loads the log
        self.claim(session_id)
        try:
            state = await asyncio.to_thread(self._reopen, session_id, parked)
        finally:
            self.unclaim(session_id)
        return self._install(state)

    async def quick(self, call: Callable[[], T]) -> T:
        """Run a small store operation (``SessionStore.quick_io``): inline where
        it is a few system calls on local files, else in a thread."""
        if self.store.quick_io:
            return call()
        return await asyncio.to_thread(call)

    async def create(
        self,
        session_id: str | None = None,
        *,
        origin: Mapping[str, Any] | None = None,
    ) -> SessionState:
        """A new stored session (named ``proxy-...`` unless ``session_id`` is given);
        ``origin`` is logged first as its ``session/origin`` (its ``parent``, if
        any, named in the session's header too)."""
        parent = None if origin is None else origin.get("parent")
        session = Session(session_id or PROXY_PREFIX + new_session_id(), parent=parent)
        if origin is not None:
            session.append("session/origin", origin)
        self.claim(session.id)
        try:
            state = await asyncio.to_thread(self._created, session)
        finally:
            self.unclaim(session.id)
        return self._install(state)

    async def fork(self, point: Point, source: Session | None = None) -> SessionState:
        """A new stored session seeded with ``point``'s session (``source``, when
        the caller has it from :meth:`source`) up to its ``turn/end``
        (``Session.fork``: the seed ends with ``session/end-seed``)."""
        if source is None:
            source = await self.source(point)
        child = source.fork(point.seq, id=PROXY_PREFIX + new_session_id())
        self.claim(child.id)
        try:
            state = await asyncio.to_thread(self._created, child)
        finally:
            self.unclaim(child.id)
        return self._install(state)

    async def source(self, point: Point) -> Session:
        """``point``'s session, holding at least its events up to the point: an
        open or parked state's, else loaded from the store (in a thread)."""
        parent = self.get(point.session_id) or self._parked.get(point.session_id)
        if parent is not None and len(parent.session) > point.seq:
            return parent.session  # events are only appended: its first ones are the store's
        return (await asyncio.to_thread(self.store.load, point.session_id)).session

    async def refresh(self) -> int:
        """Fold the store's records this replica has not seen into the index; how many."""
        async with self._refreshing:
            position = self._position
            records, position = await self.quick(lambda: self.points.read(position))
            for record in records:
                self.index.apply(record)
            self._position = position
            return len(records)

    def point_of(self, state: SessionState) -> PointRecord | None:
        """The session's current point (``None``: its log has none yet)."""
        events = state.session.events
        end = next((e for e in reversed(events) if e.type in _POINTS), None)
        if end is None:
            return None
        history = state.session.history()
        answer = None
        if len(history) and history[len(history) - 1][1]["role"] == "assistant":
            answer = state.session.event(history[len(history) - 1][0])
        return _record(state.id, state.chain, history, end, answer)

    def release(self, state: SessionState, point: PointRecord | None) -> None:
        """A request's turn ended and was flushed: record ``point`` in the store's
        index, then close the session's writer (releasing the store's write lock)
        so any replica may continue it (blocking I/O). A failed record is only
        a warning: the next request then matches the point before it."""
        if point is not None:
            try:
                self.points.append([point])
            except Exception as exc:
                _log.warning("recording the point of session %s failed: %s", state.id, exc)
        state.writer.close()

    def let_go(self, state: SessionState) -> None:
        """Release a session a refused request held (nothing of the request was
        logged): its writer closed, so another replica may take the session,
        and its lock (blocking I/O, on an error path only)."""
        try:
            self.release(state, None)
        except Exception as exc:  # kept open: the next request flushes or says why not
            _log.warning("releasing session %s failed: %s", state.id, exc)
        finally:
            self.settle(state)
            if state.lock.locked():
                state.lock.release()

    def settle(self, state: SessionState) -> None:
        """After :meth:`release` (in the event loop): a closed state leaves the open
        ones, kept to take up again if its writer closed with everything stored."""
        if state.writer.closed and self._open.get(state.id) is state:
            del self._open[state.id]
            if state.writer.reattachable:
                self._park(state)

    def rebuild(self, limit: int) -> int:
        """Record the points of the newest ``limit`` proxy sessions of the store in
        its index (blocking I/O: run it in a thread); how many were read. For a
        store whose index is empty."""
        summaries = [
            s for s in self.store.list() if s.id.startswith(PROXY_PREFIX) and s.error is None
        ]
        summaries.sort(key=lambda s: s.last_time or s.created or 0)
        read = 0
        for summary in summaries[max(0, len(summaries) - limit) :]:  # oldest first
            try:
                loaded = self.store.load(summary.id)
            except Exception as exc:  # a damaged session is skipped, not fatal
                _log.warning("skipping session %s: %s", summary.id, exc)
                continue
            self.points.append(_points_of(summary.id, loaded.session.events))
            read += 1
        return read

    def close(self) -> None:
        """Close every open session's writer (flushing what is buffered)."""
        states, self._open = list(self._open.values()), {}
        for state in states:
            try:
                state.writer.close()
            except Exception as exc:
                _log.warning("closing session %s failed: %s", state.id, exc)
        self.points.close()


def _record(
    session_id: str, chain: SurfaceChain, history: History, end: Event, answer: Event | None
) -> PointRecord:
    """The point of a session whose history is ``history`` at event ``end`` (a
    ``turn/end`` or ``session/end-seed``); ``answer`` is the event of its last
    message when that is an answer. A ``turn/end`` whose reason names the
    upstream's ``response_id`` (a Responses turn) puts it in the record, so
    every replica can say where a continued response is logged."""
    digests = chain.update(history)
    anchor = retry = None
    others: tuple[bytes, ...] = ()
    if len(history) and history[len(history) - 1][1]["role"] == "assistant":
        anchor = chain.key_at(history, len(history) - 1)
        others = _alternatives(answer) if answer is not None else ()
        # Not after a first exchange: two clients that open with the same
        # message are far likelier than a first answer lost on the way.
        retry = digests[-2] if len(digests) > 2 else None
    digest = digests[-1] if digests else b""
    reason = end.data.get("reason") if end.type == "turn/end" else None
    response_id = reason.get("response_id") if isinstance(reason, Mapping) else None
    turn = end.data.get("turn")
    if not isinstance(response_id, str) or not isinstance(turn, int):
        response_id = turn = None
    return PointRecord(
        session_id, digest, len(digests), end.seq, anchor, retry, others, response_id, turn
    )


def _points_of(session_id: str, events: Iterable[Event]) -> list[PointRecord]:
    """Every point of a stored session, in order."""
    fold = LogFold()
    chain = SurfaceChain()
    records: list[PointRecord] = []
    answers: dict[int, Event] = {}
    for event in events:
        fold.apply(event)
        if event.type == "assistant/message":
            answers[event.seq] = event
        if event.type in _POINTS:
            history = fold.history()
            last = answers.get(history[len(history) - 1][0]) if len(history) else None
            records.append(_record(session_id, chain, history, event, last))
    return records


def _alternatives(answer: Event) -> tuple[bytes, ...]:
    """The loose keys of an answer's other choices (``n`` > 1): a request that
    holds one of them in the answer's place continues the session."""
    return tuple(
        loose_key({"role": "assistant", "content": a["content"]})
        for a in answer.data.get("alternatives", ())
        if a["content"]
    )
