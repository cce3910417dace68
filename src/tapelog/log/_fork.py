"""Forking a session: a new session seeded with a prefix of another's log.

The seed is replayed through :meth:`Session.from_events` (every rule applies)
and closed with ``session/end-seed``; a boundary inside an open turn is refused,
since the child would start with a half-finished turn no request can explain.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from tapelog._errors import ForkError
from tapelog.log._session_info import open_turn_at

if TYPE_CHECKING:
    from tapelog.log._session import Session

__all__ = ["fork_session"]


def fork_session(session: Session, at: int, *, id: str | None, clock: Callable[[], int]) -> Session:
    """A new session seeded with events ``0..at`` (inclusive) of ``session``,
    stamping times with ``clock`` (the parent's)."""
    if type(at) is not int or not 0 <= at < len(session.events):
        raise ForkError(
            f"cannot fork at seq {at!r}: the session has seqs 0..{len(session.events) - 1}"
        )
    turn = open_turn_at(session.events, at)
    if turn is not None:
        raise ForkError(
            f"cannot fork at seq {at}: turn {turn} is still open there; "
            "fork at or after its turn/end, or before its turn/start"
        )
    child = type(session).from_events(
        session.events[: at + 1],
        id=id,
        clock=clock,
        cwd=session.info.cwd or os.getcwd(),
        parent=session.id,
        seed_length=at + 1,
    )
    child.append("session/end-seed", {"parent": session.id, "seed_length": at + 1})
    return child
