"""Reserving a new session id: its write lock, held until ``create`` takes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tapelog._errors import StoreError

if TYPE_CHECKING:
    from tapelog.store._base import SessionStore

__all__ = ["Reservation"]


class Reservation:
    """The write lock of a session id that is not stored yet, held for ``create``.

    A command that resumes or creates a session decides which before a slow
    set-up (a provider, MCP servers) and creates only after it. Holding the
    lock across that gap means a second process on the same new id is told the
    truth, that another process (pid N) is writing the session, instead of
    finding it created meanwhile ("already exists, choose another id").
    Pass it to :meth:`SessionStore.create`, which takes the lock over; release
    it (or leave the ``with`` block) if the session is not created after all.
    """

    def __init__(
        self, session_id: str, owner: SessionStore, handle: Any, release: Callable[[], None]
    ) -> None:
        self.session_id = session_id
        self._owner = owner
        self._handle = handle  # what the store locked with (a lock file, a connection)
        self._release: Callable[[], None] | None = release

    @property
    def held(self) -> bool:
        return self._release is not None

    def take(self, store: SessionStore, session_id: str) -> Any:
        """Hand the lock over to ``store.create`` (called by the store): its handle."""
        if store is not self._owner or session_id != self.session_id:
            raise StoreError(
                f"the reservation of session {self.session_id} does not hold session "
                f"{session_id} in this store; reserve that id in the store that creates it"
            )
        if self._release is None:
            raise StoreError(
                f"the reservation of session {self.session_id} was released or used; "
                "reserve the id again"
            )
        self._release = None
        return self._handle

    def release(self) -> None:
        """Release the lock unless ``create`` took it (idempotent)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
