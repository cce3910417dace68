"""``Agent.open(store, id, ...)``: a stored session, created or resumed, in one call.

The agent layer does not import the stores (tests/test_layout.py): any object
with a store's ``reserve`` / ``create`` / ``open`` (docs/stores.md) will do.
The id is reserved first, so deciding "new" and creating cannot race a second
process on the same id; a stored session is opened with its writer, and the
agent's constructor repairs an interrupted turn as a resume always does.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, Self

from tapelog.agent._model_string import resolve_target
from tapelog.log._api import Session

__all__ = ["Opened", "SessionStoreLike", "StoredSessionOwner", "open_stored"]

Opened = Literal["created", "resumed"]


class SessionStoreLike(Protocol):
    """What :meth:`Agent.open` needs of a store (``JsonlStore``, ``PostgresStore``)."""

    def reserve(self, session_id: str) -> Any: ...

    def create(self, session: Session, *, reservation: Any = None) -> Any: ...

    def open(self, session_id: str, *, accept_undigested: bool = False) -> tuple[Session, Any]: ...


def open_stored(
    store: SessionStoreLike, session_id: str, *, accept_undigested: bool = False
) -> tuple[Session, Any, Opened]:
    """The session, its writer, and whether it was created or resumed."""
    reservation = store.reserve(session_id)
    if reservation is None:  # stored already: resume it
        session, writer = store.open(session_id, accept_undigested=accept_undigested)
        return session, writer, "resumed"
    try:
        session = Session(session_id)
    except BaseException:
        reservation.release()
        raise
    return session, store.create(session, reservation=reservation), "created"


class StoredSessionOwner:
    """The part of :class:`Agent` that opens a stored session and owns its writer."""

    opened: Opened | None = None
    """``"created"`` or ``"resumed"`` for an agent :meth:`open` made; ``None`` otherwise."""

    _owned_writer: Any = None  # the writer open() made; close() closes it

    def __init__(self, session: Session, *, writer: Any, **options: Any) -> None:
        raise NotImplementedError  # the agent's own constructor; here for open()'s typing

    @classmethod
    def open(
        cls,
        store: SessionStoreLike,
        session_id: str,
        *,
        accept_undigested: bool = False,
        **options: Any,
    ) -> Self:
        """The agent of stored session ``session_id``: created when the store lacks
        it, resumed (repaired, as any resume) when it has it; ``opened`` says which.

        ``options`` are the constructor's (``model=...``, or ``client=`` with
        ``config=``, ``system``, ``tools``, ...); the agent owns the session's
        writer until :meth:`close` (or the end of a ``with`` block).
        """
        if options.get("model") is not None:  # a bad string or a missing key: nothing stored
            _, options["client"], options["config"] = resolve_target(
                None, options.get("client"), options.get("config"), options.pop("model")
            )
        session, writer, opened = open_stored(
            store, session_id, accept_undigested=accept_undigested
        )
        try:
            agent = cls(session, writer=writer, **options)
        except BaseException:
            writer.close()
            raise
        agent.opened, agent._owned_writer = opened, writer
        return agent

    def close(self) -> None:
        """Close the writer :meth:`open` made (flushing it): the session's write
        lock is released. Idempotent; a no-op for an agent given its writer."""
        owned, self._owned_writer = self._owned_writer, None
        if owned is not None:
            owned.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
