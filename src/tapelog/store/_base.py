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
  ``SESSION_FORMAT_VERSION`` and any unknown event type.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from tapelog._errors import StoreError
from tapelog.log import Event, Session

__all__ = ["LoadedSession", "SessionStore", "SessionSummary", "SessionWriter"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedSession:
    """A session read from a store, with what the reader had to tolerate.

    ``warnings`` are whole sentences (for example a dropped torn final line);
    an empty tuple means the stored log was read exactly as written.
    """

    session: Session
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """What ``store.list()`` knows about a session without replaying it.

    ``events`` and ``last_time`` come from the last complete stored event
    (``None`` when there is none, or when ``error`` says the session could not
    be read); ``size`` is the stored size in bytes.
    """

    id: str
    created: int | None
    parent: str | None
    events: int | None
    last_time: int | None
    size: int
    error: str | None = None


class SessionWriter(ABC):
    """Persists one session's appended events; the only writer of that session.

    The writer subscribes to the session on construction and buffers each
    event's canonical bytes. :meth:`flush` hands the buffer to the backend in
    one durable write; :meth:`close` flushes, unsubscribes and releases the
    write lock (events appended after ``close`` are not stored). Use it as a
    context manager so the lock is released on every path.
    """

    def __init__(self, session: Session, *, warnings: tuple[str, ...] = ()) -> None:
        self._session = session
        self._pending: list[bytes] = []
        self._closed = False
        self.warnings = warnings
        """Sentences about what opening had to repair (e.g. a dropped torn tail)."""
        self._unsubscribe: Callable[[], None] = session.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
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

    def flush(self) -> None:
        """Write every buffered event durably; on failure they stay buffered."""
        if self._closed:
            raise StoreError(
                f"the writer of session {self.session_id} is closed; "
                "open the session again to append to it"
            )
        if not self._pending:
            return
        self._write(self._pending)
        self._pending = []

    def close(self) -> None:
        """Flush, stop listening and release the write lock (idempotent)."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._unsubscribe()
            self._release()

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
        :class:`StoreError` leaving the stored log as it was."""

    @abstractmethod
    def _release(self) -> None:
        """Release the write lock and any handles (called once, by ``close``)."""


class SessionStore(ABC):
    """A place sessions are kept. See the module docstring for the rules."""

    @abstractmethod
    def create(self, session: Session) -> SessionWriter:
        """Store a new session and return its writer.

        Writes the session's identity and every event it already has (a fork's
        seed) durably before returning. Raises :class:`SessionExistsError` if
        the id is taken and :class:`SessionLockedError` if another writer holds
        it.
        """

    @abstractmethod
    def open(self, session_id: str) -> tuple[Session, SessionWriter]:
        """Load a session for appending (resume): the replayed session and its writer.

        A torn final event (a crash mid-write) is dropped from storage, with a
        sentence in ``writer.warnings``. Closing an interrupted turn is the
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
