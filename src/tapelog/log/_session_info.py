"""What a session is apart from its events, and the read-only view of its event list.

Kept beside :mod:`tapelog.log._session` so the session module holds the append
path alone: the identity a store writes in its header line (:class:`SessionInfo`,
fresh ids), the turn a prefix of a log leaves open, and :class:`SessionEvents`.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import overload

from tapelog._errors import LogError
from tapelog.log._events import RECORD_TYPES, Event, iter_events, unpack_record
from tapelog.log._record_blocks import RecordBlock

__all__ = ["RunClaim", "SessionEvents", "SessionInfo", "new_session_id", "open_turn_at"]


def new_session_id() -> str:
    """A fresh, time-sortable session id such as ``20261130T054500-3f9a2c1b``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """What a session is, apart from its events (the store's header line)."""

    id: str
    created: int
    cwd: str | None = None
    parent: str | None = None
    seed_length: int | None = None


def open_turn_at(events: Sequence[Event], upto: int) -> int | None:
    """The turn left open after ``events[: upto + 1]`` (``None`` if all closed):
    read back from ``upto`` to the last turn boundary, not from the start."""
    for seq in range(min(upto, len(events) - 1), -1, -1):
        event = events[seq]
        if event.type == "turn/start":
            turn: int = event.data["turn"]
            return turn
        if event.type == "turn/end":
            return None
    return None


class SessionEvents(Sequence[Event]):
    """A read-only view of a session's events; slicing returns a list copy.

    Only a :class:`Session` (or its fold) makes one, over events it validated:
    readers may fold them without validating again. A packed event is held as
    its record and made into a :class:`PackedEvent` each time it is read (equal
    each time, not the same object).
    """

    __slots__ = ("_items",)

    def __init__(self, items: list[Event | bytes | RecordBlock]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        items = self._items
        if isinstance(index, slice):
            start, stop, step = index.indices(len(items))
            if step == 1:
                return list(iter_events(items[start:stop], start))
            return [_event(items, seq) for seq in range(start, stop, step)]
        item = items[index]  # (an IndexError as a list's)
        if type(item) is bytes:
            return unpack_record(index if index >= 0 else index + len(items), item)
        if type(item) is RecordBlock:
            seq = index if index >= 0 else index + len(items)
            return unpack_record(seq, item.record(seq))
        return item  # type: ignore[return-value]

    def __iter__(self) -> Iterator[Event]:
        return iter_events(self._items)

    @property
    def items(self) -> list[Event | bytes | RecordBlock]:
        """What the view reads: each event, or a packed event's record or the
        :class:`RecordBlock` sealing it (a reader of every event, see
        :func:`tapelog.log._peek.iter_event_runs`; do not modify)."""
        return self._items

    def types(self, start: int = 0) -> Iterator[str]:
        """The type of each event from seq ``start`` on, without making the
        event of a packed one (a reader looking for a few types among many)."""
        items = self._items if start == 0 else self._items[start:]
        types = RECORD_TYPES
        for seq, item in enumerate(items, start):
            if type(item) is bytes:
                yield types[item[0] & 0x7F]
            elif type(item) is RecordBlock:  # sealed (see _record_blocks)
                yield types[item.record(seq)[0] & 0x7F]
            else:
                yield item.type  # type: ignore[union-attr]

    def type_at(self, seq: int) -> str:
        """The type of the event at ``seq`` (see :meth:`types`)."""
        item = self._items[seq]
        if isinstance(item, Event):
            return item.type
        if isinstance(item, RecordBlock):
            item = item.record(seq if seq >= 0 else seq + len(self._items))
        return RECORD_TYPES[item[0] & 0x7F]

    def __reversed__(self) -> Iterator[Event]:
        items = self._items
        for seq in range(len(items) - 1, -1, -1):
            yield _event(items, seq)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SessionEvents):
            return self._items == other._items or list(self) == list(other)
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self._items)} events>"


def _event(items: list[Event | bytes | RecordBlock], seq: int) -> Event:
    item = items[seq]
    if type(item) is RecordBlock:
        return unpack_record(seq, item.record(seq))
    return unpack_record(seq, item) if type(item) is bytes else item  # type: ignore[return-value]


class RunClaim:
    """Who runs a turn (or compaction) on a session now: at most one at a time.

    Two turns at once on one session would interleave their steps, so a request
    would hold a tool call whose result is logged after it, and every later
    request would be refused by the provider.
    """

    __slots__ = ("_lock", "_running")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: str | None = None

    @contextmanager
    def held(self, what: str, session_id: str) -> Iterator[None]:
        """Hold the claim for ``what`` until the block ends; a second claim while
        one is held raises :class:`LogError` before anything is logged."""
        with self._lock:
            if self._running is not None:
                raise LogError(
                    f"cannot start a {what} on session {session_id}: a {self._running} is "
                    "already running on it (another Agent.run or compaction that has not "
                    f"returned); wait for it to finish, then start the {what}: two at once "
                    "would interleave their events and break every later request"
                )
            self._running = what
        try:
            yield
        finally:
            self._running = None
