"""Incremental summaries: a session's row, extended by what was appended since the last call.

A reader that lists many sessions with per-session numbers (``tapelog serve``'s
sessions page) must not replay every log each time it draws the list. The
store port gives it :meth:`~tapelog.store.SessionStore.summaries`: the reader
hands in what it folded last time (a :class:`Folded` per session: the
store's own row plus the reader's :class:`EventFold` and a :class:`Cursor`
saying how far the fold got), and gets each session back either untouched
(nothing was appended), extended with only the events appended since, or
folded anew from the start when the stored form no longer extends what was
folded (a file rewritten or cut). The reader's fold sees events in seq order,
once each, and only of the types it names (``EventFold.types``): the rest are
skipped unread (``assistant/chunk`` lines, the bulk of a log, never are
decoded), and a PostgreSQL store does not even send them.

A :class:`Cursor` is plain integers and a string, so a reader may keep it on
disk (serve's index file does) and hand it back after a restart: every cursor
is checked against the stored form before a fold is extended.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, Self, TypeVar

from tapelog.log import decode
from tapelog.log._api import SESSION_FORMAT_VERSION

__all__ = ["Cursor", "EventFold", "Folded", "envelope", "line_type", "read_header"]

_TYPE_AT: Final = b',"type":"'
_ENVELOPE: Final = re.compile(rb'\{"seq":(\d+),"time":(-?\d+),')


class EventFold(Protocol):
    """A reader's fold of one session's events (see the module docstring)."""

    @property
    def types(self) -> frozenset[str]:
        """The event types the fold reads; the store skips the others unread."""
        ...

    def feed(self, kind: str, seq: int, data: Mapping[str, Any]) -> object:
        """Fold the next event of one of :attr:`types` (in seq order): its type,
        seq and decoded data (plain JSON values, not to be kept changed); what
        it returns is the reader's business."""
        ...

    def copy(self) -> Self:
        """An independent copy (extended while the original stays as it was)."""
        ...


F = TypeVar("F", bound=EventFold)


@dataclass(frozen=True, slots=True)
class Cursor:
    """How far a fold got, as the store can check it: ``key`` identifies the
    stored form folded (JSONL: inode, size, mtime; PostgreSQL: the number of
    events), ``offset`` is where the fold stopped (JSONL: the byte after the
    last complete line; PostgreSQL: the next seq), ``tail`` (JSONL) the hex of
    up to 64 bytes before ``offset``, compared before a fold is extended."""

    key: tuple[int, ...] = ()
    offset: int = 0
    tail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"key": list(self.key), "offset": self.offset, "tail": self.tail}

    @classmethod
    def from_json(cls, obj: Any) -> Cursor:
        """A kept cursor back; ``ValueError`` if ``obj`` is not one."""
        if not isinstance(obj, dict) or set(obj) != {"key", "offset", "tail"}:
            raise ValueError("not a cursor")
        key, offset, tail = obj["key"], obj["offset"], obj["tail"]
        if not isinstance(key, list) or any(type(k) is not int for k in key):
            raise ValueError("a cursor has a bad key")
        if type(offset) is not int or not isinstance(tail, str):
            raise ValueError("a cursor has a bad offset")
        return cls(tuple(key), offset, tail)


@dataclass(slots=True, kw_only=True)
class Folded(Generic[F]):
    """One session's incremental summary: the store's row and the reader's fold."""

    id: str
    fold: F
    cursor: Cursor = field(default_factory=Cursor)
    created: int | None = None
    parent: str | None = None
    events: int = 0
    """Events stored (and so folded, the unread types included)."""
    last_time: int | None = None
    error: str | None = None
    """Why the session could not be read or folded (the fold stopped there)."""

    def extend(self, lines: Iterable[bytes], *, counted: bool = True) -> None:
        """Feed ``lines`` (event lines in seq order) to the fold. ``counted``:
        they are every line from ``events`` on, so they advance it and
        ``last_time``; else only lines of the fold's types were given and the
        caller sets those two."""
        types = self.fold.types
        last = None
        for line in lines:
            last = line
            if counted:
                self.events += 1
            if self.error is not None or line_type(line) not in types:
                continue
            try:
                obj = decode(line, path="event")
                self.fold.feed(obj["type"], obj["seq"], obj["data"])
            except Exception as exc:
                found = envelope(line)
                self.error = f"{f'seq {found[0]}' if found else 'an event'}: {exc}"
        found = envelope(last) if counted and last is not None else None
        if found is not None:
            self.last_time = found[1]

    def continued(self) -> Folded[F]:
        """A copy to fold what was appended into (this one stays as it was, for
        a reader that still holds it); its cursor is set by the caller."""
        return Folded(
            id=self.id,
            fold=self.fold.copy(),
            created=self.created,
            parent=self.parent,
            events=self.events,
            last_time=self.last_time,
        )

    def restarted(self, fold: F) -> Folded[F]:
        """A new summary of the same session, to fold from the start."""
        return Folded(id=self.id, fold=fold)


def read_header(folded: Folded[Any], line: bytes) -> None:
    """Fill ``created`` and ``parent`` from the session's header line (or the
    ``error`` of a header that is not a tapelog header of this session)."""
    try:
        obj = decode(line, path="header")
    except Exception as exc:
        folded.error = f"line 1: {exc}"
        return
    if not isinstance(obj, dict) or obj.get("format_version") != SESSION_FORMAT_VERSION:
        version = obj.get("format_version") if isinstance(obj, dict) else None
        folded.error = (
            f"line 1: not a tapelog header of format version {SESSION_FORMAT_VERSION} "
            f"(got {version!r})"
        )
        return
    if obj.get("id") != folded.id:
        folded.error = f"line 1: the header names session {obj.get('id')!r}"
        return
    created, parent = obj.get("created"), obj.get("parent")
    folded.created = created if type(created) is int else None
    folded.parent = parent if isinstance(parent, str) else None


def line_type(line: bytes) -> str | None:
    """The event type of a canonical log line, read without decoding it."""
    start = line.find(_TYPE_AT, 0, 80)
    if start < 0:
        return None
    start += len(_TYPE_AT)
    end = line.find(b'"', start, start + 40)
    return line[start:end].decode("ascii", "replace") if end > 0 else None


def envelope(line: bytes) -> tuple[int, int] | None:
    """The (seq, time) a canonical log line starts with, read without decoding it."""
    match = _ENVELOPE.match(line)
    return None if match is None else (int(match.group(1)), int(match.group(2)))
