"""The store contract every backend implements (JSONL now, PostgreSQL later).

A store persists sessions; the :class:`~tapelog.log.Session` stays the one
place where events are validated and committed. A writer subscribes to a
session, keeps each appended event as its canonical bytes in memory, and makes
them durable only when the agent loop says so (:meth:`SessionWriter.flush`, at
the loop's durability points: before a request is sent, at turn end). That
keeps ``Session.append`` free of I/O and makes one flush one write + one sync.

The rules a backend must keep (tests/store/conformance.py checks them all):

* at most one writer per session, across processes (:class:`SessionLockedError`);
* writes only append; a stored event's bytes never change;
* loading replays every event through ``Session.from_info``, so a stored log is
  held to the same rules as live appends, and refuses any format version but
  ``SESSION_FORMAT_VERSION`` and any unknown event type;
* every flush ends with a ``log/digest`` event: the SHA-256 of every byte of
  the session's JSONL form before that event's line (for PostgreSQL, of the
  bytes ``session_bytes`` returns), logged through the session like any event
  (docs/format.md, "Digests").

A writer may be flushed from any thread while others append: the buffer is
taken (and its digest logged) while the session is locked, written outside
the lock, and put back in front of what arrived meanwhile if the write fails.

What reading gives back (``LoadedSession``, ``SessionSummary``) is defined in
:mod:`tapelog.store._loaded` and re-exported here.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import ClassVar

from tapelog._errors import StoreError, UnstoredEventsError
from tapelog.log._api import Event, Session
from tapelog.store._follow import Follower
from tapelog.store._loaded import Digest, LoadedSession, SessionSummary, count_events
from tapelog.store._points import PointLog
from tapelog.store._reserve import Reservation
from tapelog.store._summaries import F, Folded

__all__ = [
    "Digest",
    "LoadedSession",
    "SessionStore",
    "SessionSummary",
    "SessionWriter",
    "count_events",
    "os_error_advice",
]


class SessionWriter(ABC):
    """Persists one session's appended events; the only writer of that session.

    The writer subscribes to the session on construction and buffers each
    event's canonical bytes. :meth:`flush` logs a ``log/digest`` event covering
    everything stored so far plus the buffer, then hands the buffer (digest
    included) to the backend in one durable write; :meth:`close` flushes,
    unsubscribes and releases the write lock (events appended after ``close``
    are not stored). Use it as a context manager so the lock is released on
    every path. ``stored`` is what the backend already holds, as JSONL bytes
    (the header line and the seed or loaded events), where the digests start.
    """

    def __init__(
        self, session: Session, *, warnings: tuple[str, ...] = (), stored: bytes = b""
    ) -> None:
        self._session = session
        self._pending: list[bytes] = []
        self._closed = False
        self._closing = False
        self._flushing = threading.Lock()  # one flush (or close) at a time
        self._hash = hashlib.sha256(stored)  # of every stored byte, header line included
        self._stored_bytes = len(stored)
        self._stored_events = len(session)
        self._unsynced = False  # written by flush(sync=False), not yet synced
        self.warnings = warnings
        """Sentences about what opening had to repair (e.g. a dropped torn tail)."""
        self._unsubscribe: Callable[[], None] = session.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        # Called by Session.append with the session locked: in seq order, and
        # never at the same time as flush() takes the buffer.
        self._pending.append(event.encode())

    @property
    def session(self) -> Session:
        return self._session

    @property
    def session_id(self) -> str:
        return self._session.id

    @property
    def pending(self) -> int:
        """Events appended since the last flush (not yet durable)."""
        return len(self._pending)

    @property
    def closed(self) -> bool:
        return self._closed

    def flush(self, *, sync: bool = True) -> None:
        """Write every buffered event durably, closed by a ``log/digest`` event.

        Safe while other threads append: what they append during the write
        waits for the next flush. On failure nothing of this flush is stored
        and the events stay buffered, in order, for the next flush.

        ``sync=False`` writes without waiting for the disk: the events then
        survive the process (a kill, a crash of the program: the operating
        system holds the bytes) but not yet a power loss, until the next
        flush, :meth:`sync` or :meth:`close` syncs them (with a backend whose
        every write is durable, such as PostgreSQL, it is the same write). A
        flush with nothing buffered still syncs what such a write left.
        """
        with self._flushing:
            if self._closed:
                raise StoreError(
                    f"the writer of session {self.session_id} is closed; "
                    "open the session again to append to it"
                )
            self._flush(sync=sync)

    def sync(self) -> None:
        """Make durable what ``flush(sync=False)`` wrote (nothing to do otherwise)."""
        self.flush()

    def _flush(self, *, always: bool = False, sync: bool = True) -> None:
        if sync and self._unsynced and not self._pending and not always:
            self._sync()  # outside the session's lock: appends go on meanwhile
            self._unsynced = False
        session = self._session
        with session.locked():
            lines = self._pending
            if not lines and not always:
                return
            self._pending = []
            body = b"\n".join(lines) + b"\n" if lines else b""
            digest = self._hash.copy()
            digest.update(body)
            data = {"bytes": self._stored_bytes + len(body), "sha256": digest.hexdigest()}
            try:
                session.append("log/digest", data)
            except BaseException:
                # The digest's line, if it was logged (another listener raised
                # after the commit), stays after the lines it covers.
                self._pending = lines + self._pending
                raise
            lines += self._pending  # the digest's line
            self._pending = []
        try:
            if sync:
                self._write(lines)  # syncs what an unsynced write left too
            else:
                self._write_unsynced(lines)
        except BaseException:
            with session.locked():
                self._pending[:0] = lines
            raise
        self._unsynced = not sync
        last = lines[-1] + b"\n"
        digest.update(last)
        self._hash = digest
        self._stored_bytes += len(body) + len(last)
        self._stored_events += len(lines)

    @property
    def reattachable(self) -> bool:
        """Whether this writer is closed with every event of its session stored
        (what :meth:`SessionStore.reattach` continues from)."""
        return self._closed and not self._pending and self._stored_events == len(self._session)

    def _carry(self, closed: SessionWriter) -> None:
        """Continue where ``closed`` (a writer of the same session) stopped: its
        stored byte count and running digest, instead of hashing the stored log again."""
        self._hash = closed._hash.copy()
        self._stored_bytes = closed._stored_bytes
        self._stored_events = closed._stored_events

    def checkpoint(self) -> None:
        """Flush, logging a digest even when nothing is buffered (so the stored
        log ends with one, e.g. after opening dropped a write a crash cut short)."""
        with self._flushing:
            if self._closed:
                raise StoreError(
                    f"the writer of session {self.session_id} is closed; "
                    "open the session again to append to it"
                )
            self._flush(always=True)

    def close(self) -> None:
        """Flush, stop listening and release the write lock (idempotent).

        If the final flush fails, its events are lost with the writer: the
        error says so, and where the stored session ends.
        """
        with self._flushing:
            if self._closed:
                return
            self._closing = True
            try:
                self._flush()
            finally:
                self._closed = True
                self._unsubscribe()
                self._release()

    def _write_failed(self, head: str, count: int, advice: str) -> UnstoredEventsError:
        """The error of a failed write of ``count`` events; ``head`` says what failed
        and why ("could not write 7 events of session s to f: Input/output error")."""
        target = self._stored_events + count
        return UnstoredEventsError(
            lambda: f"{head}; {self._unwritten(count, advice, target=target)}"
        )

    def _unwritten(self, count: int, advice: str, *, target: int | None = None) -> str:
        """The end of a failed write's message: what is stored now, what happens next.

        Worked out when the message is shown (``target``: the stored event count
        that would include the failed write), so that a later flush that stored
        the events (the closing one, say) is what the message reports."""
        n = self._stored_events
        where = f"after seq {n - 1}" if n else "before its first event"
        them = "it" if count == 1 else "them"
        if target is not None and n >= target:
            return (
                f"a later flush stored {them} after all: the stored session ends {where}, "
                "nothing is missing"
            )
        stored = f"the stored session still ends {where}, its last complete write"
        none = (
            "the event was not stored" if count == 1 else f"none of the {count} events was stored"
        )
        if self._closing or self._closed:
            lost = "it is" if count == 1 else "they are"
            return (
                f"{none}, and the writer is closing, so {lost} lost; {stored}. {advice}, "
                "then resume the session to continue from there"
            )
        return f"{none}; {stored}. {advice}, then flush again (the writer keeps {them} until then)"

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @abstractmethod
    def _write(self, lines: builtins.list[bytes]) -> None:
        """Durably append ``lines`` (canonical event bytes, in seq order) or raise
        :class:`StoreError` leaving the stored log as it was (its message ends
        with :meth:`_unwritten`)."""

    def _write_unsynced(self, lines: builtins.list[bytes]) -> None:
        """Append ``lines`` as :meth:`_write` does, without waiting for the disk
        where the backend can (:meth:`_sync` finishes it). By default, :meth:`_write`."""
        self._write(lines)

    def _sync(self) -> None:
        """Make what :meth:`_write_unsynced` appended durable, or raise
        :class:`StoreError` (it stays written, and is synced again next time).
        By default nothing: every :meth:`_write_unsynced` was a durable write."""
        return

    @abstractmethod
    def _release(self) -> None:
        """Release the write lock and any handles (called once, by ``close``)."""


def os_error_advice(exc: OSError) -> str:
    """What to do about a failed write, by its cause: a sentence start, without its
    end (``"Free space on that file system"``), to go on with ", then ..."."""
    code = exc.errno
    if code == errno.ENOSPC:
        return "Free space on that file system"
    if code == errno.EDQUOT:
        return "Free space or raise the disk quota"
    if code in (errno.EACCES, errno.EPERM):
        return "Check the permissions of the file and its directory"
    if code == errno.EROFS:
        return "Remount the file system read-write"
    return "Fix the cause"


class SessionStore(ABC):
    """A place sessions are kept. See the module docstring for the rules."""

    quick_io: ClassVar[bool] = False
    """Whether this store's small operations (a writer's ``flush(sync=False)``,
    :meth:`reattach`, reading the point log's new records) are system calls on
    local files, which an event loop runs faster inline than through a thread
    (JSONL); ``False`` where they may wait on a network (PostgreSQL)."""

    syncs_later: ClassVar[bool] = False
    """Whether a writer's ``flush(sync=False)`` leaves a sync to do later (JSONL:
    the ``fsync``); ``False`` where every write is durable when it returns
    (PostgreSQL's commit), so there is no disk wait to move anywhere."""

    @abstractmethod
    def create(self, session: Session, *, reservation: Reservation | None = None) -> SessionWriter:
        """Store a new session and return its writer.

        Writes the session's identity and every event it already has (a fork's
        seed) durably before returning. Takes the write lock first (or over
        from ``reservation``, see :meth:`reserve`), then raises
        :class:`SessionExistsError` if the id is taken; raises
        :class:`SessionLockedError` if another writer holds it.
        """

    @abstractmethod
    def reserve(self, session_id: str) -> Reservation | None:
        """Take the write lock of ``session_id`` for a later :meth:`create`;
        ``None`` (nothing held) when the session is stored, to :meth:`open` it.

        Raises :class:`SessionLockedError`, naming the holder, when another
        writer holds the id, stored or not.
        """

    @abstractmethod
    def open(
        self, session_id: str, *, accept_undigested: bool = False
    ) -> tuple[Session, SessionWriter]:
        """Load a session for appending (resume): the replayed session and its writer.

        A torn final event (a crash mid-write) is dropped from storage, with a
        sentence in ``writer.warnings``. Whole events after the last digest are
        refused with :class:`UndigestedEventsError` before anything changes,
        unless ``accept_undigested`` (then a digest covers them at once; see
        :meth:`LoadedSession.check_resumable`); any note about undigested
        events is in ``writer.warnings`` too. Closing an interrupted turn is the
        caller's job (``tapelog.log.repair_interrupted``), so that it is logged.
        """

    @abstractmethod
    def load(self, session_id: str) -> LoadedSession:
        """Read a session without locking or changing anything."""

    @abstractmethod
    def session_bytes(self, session_id: str) -> bytes:
        """The stored session as the bytes of its JSONL file, read-only.

        Exactly what :meth:`load` scans and replays, so a verifier (``tapelog
        verify``) checks the bytes the store would load, whatever the backend.
        """

    @abstractmethod
    def exists(self, session_id: str) -> bool:
        """Whether a session with this id is stored."""

    @abstractmethod
    def list(self) -> builtins.list[SessionSummary]:
        """Every stored session, newest first, without replaying any."""

    # --- readers of running sessions -------------------------------------------

    @abstractmethod
    def follow(self, session_id: str, since: int) -> Follower:
        """Follow a stored session: its events from seq ``since`` on (``since``:
        how many a reader already has), each as soon as a flush stores it.

        Raises :class:`SessionNotFoundError` for no such session, and
        :class:`StoreError` when fewer than ``since`` events are stored.
        """

    @abstractmethod
    def active(self, session_id: str) -> bool:
        """Whether a writer holds ``session_id`` now: found out without taking
        its lock (a writer starting at that instant must not be refused)."""

    @abstractmethod
    def summaries(
        self, previous: Mapping[str, Folded[F]], new_fold: Callable[[], F]
    ) -> dict[str, Folded[F]]:
        """Every stored session's incremental summary (``tapelog.store._summaries``):
        ``previous``' own where nothing was appended, extended by only the new
        events where the session grew, folded anew (with ``new_fold()``) where
        the stored form no longer extends what was folded. Nothing is changed in
        ``previous``; no session is replayed."""

    @abstractmethod
    def active_sessions(self) -> set[str]:
        """Every session a writer holds now (as :meth:`active` says of each)."""

    def reattach(self, closed: SessionWriter) -> SessionWriter | None:
        """A new writer of the session of ``closed``, a writer of this store that
        closed with everything stored (:attr:`SessionWriter.reattachable`), on
        the same :class:`Session` object, without loading the log again: when the
        stored session is still exactly what ``closed`` stored. ``None`` when it
        is not (another writer appended meanwhile, or it cannot tell): then
        :meth:`open` the session. Raises :class:`SessionLockedError` as ``open``
        does. The proxy closes each session between requests, so that a replica
        on another machine may take the next one; this keeps that cheap for the
        replica that wrote last."""
        return None

    # --- the proxy's conversation index ----------------------------------------

    @abstractmethod
    def point_log(self) -> PointLog:
        """The store's conversation index (``tapelog.store._points``): where every
        proxy replica on this store records and reads conversation points. The
        same object on every call."""
