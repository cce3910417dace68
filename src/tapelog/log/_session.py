"""The in-memory session: an append-only event log with its surface and caches.

``append`` is synchronous and does no I/O: it validates the envelope, the
payload, the surface op and (for header events) the header fold, then commits
a frozen event and publishes it to listeners. A store subscribes as a listener
and persists on its own schedule (``flush``).

``append`` is safe to call from several threads (tools run in worker threads
and may log through ``Agent.inject``): one lock is held around validate,
commit and publish, so seqs stay contiguous and listeners see events in seq
order. A thread that appends while another is publishing waits for it; an
append from inside a listener, on the publishing thread, is refused
(:class:`ReentrantAppendError`), since it would publish out of order.

The session caches two folds of its log, both incremental: the derived
messages (one projection per surface node, rebuilt only when a replace moves
``replace_generation``) and the request header in force.
"""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tapelog._errors import EventError, LogError, ReentrantAppendError
from tapelog.log._events import (
    PACKED_TYPES,
    RECORD_TYPES,
    Event,
    PackedEvent,
    check_packed,
    chunk_shape_ok,
    event_from_json,
    unpack_unchecked,
)
from tapelog.log._fold import History, LogFold
from tapelog.log._fork import fork_session
from tapelog.log._freeze import FrozenDict
from tapelog.log._header import EpochHeader
from tapelog.log._record_blocks import LooseRecords, RecordBlock
from tapelog.log._rules import LogRules
from tapelog.log._session_check import check_event, packed
from tapelog.log._session_info import RunClaim, SessionEvents, SessionInfo, new_session_id

__all__ = ["Listener", "RuleBreaks", "Session", "replay_scan"]

Listener = Callable[[Event], None]
RuleBreaks = Callable[[Event, LogError], None]
"""Told of each event that breaks a rule of :class:`LogRules` while replaying
(``verify`` collects them all rather than stopping at the first)."""

_thread_id = threading.get_ident


def _now_ms() -> int:
    return _time.time_ns() // 1_000_000


class Session:
    """An append-only session log.

    ``Session()`` starts an empty session with a generated id. Events from a
    store or a fork are replayed with :meth:`from_events`, which holds them to
    the same rules as live appends.
    """

    def __init__(
        self,
        id: str | None = None,
        *,
        clock: Callable[[], int] | None = None,
        created: int | None = None,
        cwd: str | None = None,
        parent: str | None = None,
        seed_length: int | None = None,
    ) -> None:
        self._clock = clock or _now_ms
        self.info = SessionInfo(
            id=id or new_session_id(),
            created=self._clock() if created is None else created,
            cwd=cwd,
            parent=parent,
            seed_length=seed_length,
        )
        self._fold = LogFold()
        self._rules = LogRules(seed_length=seed_length)
        self._rule_breaks: RuleBreaks | None = None
        self._events: list[Event | bytes | RecordBlock] = self._fold.items
        # The records appended live, sealed into blocks as they add up.
        self._loose = LooseRecords(self._events)
        self._surface = self._fold.surface
        self._listeners: list[Listener] = []
        self._publishing = False
        self._last_time = -1
        # Held around validate + commit + publish; ``_owner`` is the thread
        # holding it (read without the lock only to compare with one's own id).
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._claim = RunClaim()  # what runs a turn on the session now
        self._appended = False  # whether any event was appended live (not replayed)

    # --- identity and views --------------------------------------------------

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def events(self) -> SessionEvents:
        """The events so far: a read-only live view (no copy; events are frozen).
        An event of :data:`PACKED_TYPES` is made from its record on each read:
        equal every time, not the same object."""
        return self._fold.events

    @property
    def seq(self) -> int:
        """The seq the next event will get (the number of events so far)."""
        return len(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def event(self, seq: int) -> Event:
        return self._fold.events[seq]

    @property
    def surface(self) -> list[int]:
        """Seqs of the current surface nodes, in order."""
        return self._surface.nodes

    def on_surface(self, seq: int) -> bool:
        """Whether the event ``seq`` is a node of the current surface (O(1))."""
        return self._surface.position(seq) is not None

    @property
    def replace_generation(self) -> int:
        return self._surface.replace_generation

    @property
    def rules(self) -> LogRules:
        """The structural state of the log (open turn, step, tool calls): read it only."""
        return self._rules

    @property
    def header(self) -> EpochHeader | None:
        """The request header folded from the log (``None`` before any snapshot)."""
        return self._fold.header

    # --- listeners -----------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` after each commit; returns an unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # --- appending -----------------------------------------------------------

    def append(
        self,
        type: str,
        data: Mapping[str, Any],
        *,
        surface_op: str | Mapping[str, Any] | None = None,
        source_seqs: Sequence[int] | None = None,
    ) -> Event:
        """Validate and commit one event; return the logged (frozen) event.

        Nothing is committed when validation fails. Listeners run after the
        commit; if one raises, every listener still runs and the first error
        is re-raised -- the event is in the log all the same (``seq`` says so).

        Safe from any thread: a thread that appends while another one is
        appending or publishing waits for it (see the module docstring).
        """
        me = _thread_id()
        if self._owner == me:  # inside locked(), or a listener of this thread
            if self._publishing:
                raise ReentrantAppendError(
                    f"cannot append {type!r} while another event is being published to "
                    "listeners; append after the listener returns"
                )
            return self._append(type, data, surface_op, source_seqs)
        with self._lock:
            self._owner = me
            try:
                return self._append(type, data, surface_op, source_seqs)
            finally:
                self._owner = None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Keep every other thread from appending while the block runs.

        This thread may append inside the block. A store writer uses it to take
        its buffered events and log their digest in one step. Entered from a
        listener it raises :class:`ReentrantAppendError`; nested, it is a no-op.
        """
        me = _thread_id()
        if self._owner == me:
            if self._publishing:
                raise ReentrantAppendError(
                    "cannot hold the session log from inside a listener while an event is "
                    "being published; do it after the listener returns"
                )
            yield
            return
        with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None

    @contextmanager
    def running(self, what: str = "turn") -> Iterator[None]:
        """Claim the session for one turn (or compaction) until the block ends.

        Two turns at once on one session would interleave their steps, so a
        request would hold a tool call whose result is logged after it, and
        every later request would be refused by the provider. A second claim
        while one is held (from another task, thread or ``Agent``) raises
        :class:`LogError` before anything is logged.
        """
        with self._claim.held(what, self.id):
            yield

    def _append(
        self,
        type: str,
        data: Mapping[str, Any],
        surface_op: str | Mapping[str, Any] | None,
        source_seqs: Sequence[int] | None,
    ) -> Event:
        # The event against the log so far, then the structural rules.
        event, header, frozen = check_event(
            self._fold,
            seq=len(self._events),
            time=self._time(),
            etype=type,
            data=data,
            surface_op=surface_op,
            source_seqs=source_seqs,
        )
        self._check_rules(event, frozen)
        if type in PACKED_TYPES:
            event = packed(event)
        self._appended = True
        self._commit(event, header, frozen)
        if event.seq >= self._loose.check_at:
            self._loose.check()
        self._publish(event)
        return event

    def _time(self) -> int:
        """The clock's time; the same int object as the last event's while the
        millisecond has not moved (a session keeps one per event)."""
        now = self._clock()
        if now == self._last_time:
            return self._last_time
        self._last_time = now
        return now

    def _check_rules(self, event: Event, data: Mapping[str, Any]) -> None:
        """The structural rules (:class:`LogRules`); while replaying for ``verify``
        a break is reported to it and the event kept, so it can judge the rest."""
        try:
            self._rules.check(event, data)
        except LogError as exc:
            if self._rule_breaks is None:
                raise
            self._rule_breaks(event, exc)

    def _commit(self, event: Event, header: EpochHeader | None, data: Mapping[str, Any]) -> None:
        self._fold.apply_folded(event, header)
        self._rules.apply(event, data)

    def _publish(self, event: Event) -> None:
        if not self._listeners:
            return
        self._publishing = True
        errors: list[BaseException] = []
        try:
            for listener in list(self._listeners):
                try:
                    listener(event)
                except Exception as exc:
                    errors.append(exc)
        finally:
            self._publishing = False
        if errors:
            raise errors[0]

    def replay(self, event: Event) -> None:
        """Commit an already-built event (from a store or another log), validated
        exactly as a live append; listeners are not called. Safe from any thread,
        as :meth:`append` is."""
        me = _thread_id()
        if self._owner == me:
            if self._publishing:
                raise ReentrantAppendError(
                    f"cannot replay seq {event.seq} while another event is being published "
                    "to listeners; replay after the listener returns"
                )
            self._replay(event)
            return
        with self._lock:
            self._owner = me
            try:
                self._replay(event)
            finally:
                self._owner = None

    def _replay(self, event: Event) -> None:
        expected = len(self._events)
        if event.seq != expected:
            raise EventError(
                f"event {expected}: seq must be {expected} (contiguous from 0), got {event.seq}"
            )
        if type(event) is PackedEvent:
            # A packed event touches neither the surface nor the header: its
            # payload is all there is to check.
            pending = event._unchecked
            try:
                check_packed(event)
                data = event.data if pending is None else pending
                self._check_rules(event, data)
            except LogError as exc:
                raise type(exc)(f"seq {event.seq}: {exc}") from None
            self._commit(event, self._fold.header, data)
            return
        try:
            checked, header, frozen = check_event(
                self._fold,
                seq=event.seq,
                time=event.time,
                etype=event.type,
                data=event.data,
                surface_op=event.surface_op,
                source_seqs=event.source_seqs,
                event=event,
            )
            self._check_rules(checked, frozen)
        except LogError as exc:
            raise type(exc)(f"seq {event.seq}: {exc}") from None
        if checked.type in PACKED_TYPES:
            checked = packed(checked)
        self._commit(checked, header, frozen)

    # --- projection ----------------------------------------------------------

    def derive_messages(self) -> list[FrozenDict]:
        """The model-visible history: a fresh list over shared frozen messages."""
        return self._fold.messages()

    def derive_nodes(self) -> list[tuple[int, FrozenDict]]:
        """Like :meth:`derive_messages`, paired with each message's event seq."""
        return self._fold.nodes()

    def history(self) -> History:
        """The projected history as an O(1), never-changing view (what the loop
        builds each request from; see :class:`tapelog.log.History`)."""
        return self._fold.history()

    def loaded_fold(self) -> LogFold | None:
        """A copy of the fold, with its own list, while every event came from a
        log (replayed, none appended live), else ``None`` (the checker's shadow
        starts from :meth:`shadow_fold`, which reads the session's list instead)."""
        return None if self._appended else self._fold.copy()

    def shadow_fold(self) -> LogFold:
        """A fold for the checker's shadow: it folds this session's events on
        its own (surface, header, projection) but reads them from the session's
        list rather than holding a reference to each again. Started from a copy
        of the load's fold while every event came from a log (see
        :meth:`loaded_fold`), else from nothing."""
        if self._appended:
            return LogFold(self._events)
        return self._fold.copy(self._events)

    # --- seeds and forks -----------------------------------------------------

    @classmethod
    def from_events(
        cls,
        events: Iterable[Event | Mapping[str, Any]],
        *,
        id: str | None = None,
        clock: Callable[[], int] | None = None,
        created: int | None = None,
        cwd: str | None = None,
        parent: str | None = None,
        seed_length: int | None = None,
        rule_breaks: RuleBreaks | None = None,
    ) -> Session:
        """Rebuild a session from events, validating each as a live append would.

        ``rule_breaks``, if given, is told of each event that breaks a
        structural rule (:class:`LogRules`) instead of refusing the log: for
        ``verify``, which reports every break; other errors still raise."""
        session = cls(
            id,
            clock=clock,
            created=created,
            cwd=cwd,
            parent=parent,
            seed_length=seed_length,
        )
        return replay_scan(session, events, (), rule_breaks)

    def _replay_many(
        self,
        events: Iterable[Event | Mapping[str, Any] | bytes],
        payloads: Sequence[Any] = (),
    ) -> None:
        """:meth:`_replay` each event. An item of a store's scan may be a packed
        event's record (bytes, at its seq's position), its decoded payload at
        the same position of ``payloads``. A packed ``assistant/chunk`` a load
        just decoded (half of a log's events) is checked inline: its payload's
        common shape and :meth:`LogRules.passes_chunk`, the same rules in fewer
        calls, since a chunk touches neither the surface, the header nor the
        structural state. Anything else takes the full path."""
        log = self._events
        rules = self._rules
        for i, raw in enumerate(events):
            if type(raw) is bytes:
                data = payloads[i]
                if (
                    RECORD_TYPES[raw[0] & 0x7F] == "assistant/chunk"
                    and chunk_shape_ok(data)
                    and rules.passes_chunk(i, data)
                ):
                    log.append(raw)
                    continue
                self._replay(unpack_unchecked(i, raw, data))
                continue
            event = raw if isinstance(raw, Event) else event_from_json(raw, where=f"event {i}")
            self._replay(event)

    @classmethod
    def from_info(
        cls,
        info: SessionInfo,
        events: Iterable[Event | Mapping[str, Any]],
        *,
        rule_breaks: RuleBreaks | None = None,
    ) -> Session:
        """:meth:`from_events` with the identity taken from a :class:`SessionInfo`."""
        return cls.from_events(
            events,
            id=info.id,
            created=info.created,
            cwd=info.cwd,
            parent=info.parent,
            seed_length=info.seed_length,
            rule_breaks=rule_breaks,
        )

    def fork(self, at: int, *, id: str | None = None) -> Session:
        """A new session seeded with events ``0..at`` (inclusive) of this one.

        Refuses a boundary inside an open turn: the child would start with a
        half-finished turn that no request can explain.
        """
        return fork_session(self, at, id=id, clock=self._clock)


def replay_scan(
    session: Session,
    items: Iterable[Event | Mapping[str, Any] | bytes],
    payloads: Sequence[Any],
    rule_breaks: RuleBreaks | None = None,
) -> Session:
    """Replay into a new, empty ``session`` (see :meth:`Session.from_events`) what
    a store's scan of a log file made: events, and for a packed event its record
    (at its seq's position) with its decoded payload at that position of
    ``payloads``: no object per packed event (see ``_replay_many``)."""
    session._rule_breaks = rule_breaks
    session._replay_many(items, payloads)  # no other thread knows the new session yet
    session._rule_breaks = None
    return session
