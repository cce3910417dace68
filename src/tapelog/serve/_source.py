"""What the server needs from a store, and what it keeps about each session.

A :class:`Source` wraps one store (JSONL directory or PostgreSQL) with the
read-only operations the server adds to the :class:`~tapelog.store.SessionStore`
contract: list every session with a cheap version key and fold what changed
into its index entry, say which sessions a writer holds, and follow one
session's log as it grows (from a byte offset or a seq, never from the start).
Nothing here writes to the store.

An :class:`Entry` is a session's index row plus what makes it checkable: the
``key`` the store gave when it was folded (JSONL: inode, size and mtime of
the file; PostgreSQL: the number of events), how far the fold got
(``offset``), and for JSONL the bytes just before that offset, compared before
a fold is extended so that a file rewritten in place is folded again from the
start instead of being extended wrongly.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tapelog.log._api import Session
from tapelog.serve._summary import Summary
from tapelog.store import SessionStore

__all__ = ["Audited", "Entry", "Followed", "Source"]


@dataclass(slots=True, kw_only=True)
class Audited:
    """The cache audit of a session (:func:`tapelog.audit.cache_report`) at ``events``
    events: its totals, or why the session could not be loaded."""

    events: int
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    expected: int = 0
    error: str | None = None

    @property
    def efficiency(self) -> float | None:
        """reported / expected (1.0 when nothing was expected, as the audit says)."""
        if self.error is not None:
            return None
        return self.cached_tokens / self.expected if self.expected else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "expected": self.expected,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Audited:
        if set(obj) != {
            "events",
            "requests",
            "prompt_tokens",
            "cached_tokens",
            "expected",
            "error",
        }:
            raise ValueError("not an audit")
        ints = [
            obj[k] for k in ("events", "requests", "prompt_tokens", "cached_tokens", "expected")
        ]
        if any(type(v) is not int for v in ints) or not (
            obj["error"] is None or isinstance(obj["error"], str)
        ):
            raise ValueError("not an audit")
        return cls(**obj)


@dataclass(slots=True, kw_only=True)
class Entry:
    """One session in the index (see the module docstring)."""

    summary: Summary
    key: list[int]
    offset: int
    tail: str = ""
    """JSONL: the hex of up to 64 bytes before ``offset``."""
    audit: Audited | None = None

    @property
    def audited(self) -> Audited | None:
        """The audit, if it is of the log as folded now."""
        audit = self.audit
        return audit if audit is not None and audit.events == self.summary.events else None

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary.to_json(),
            "key": self.key,
            "offset": self.offset,
            "tail": self.tail,
            "audit": None if self.audit is None else self.audit.to_json(),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Entry:
        """A persisted entry back; ``ValueError`` (or ``TypeError``) if it is not one."""
        key, offset, tail, audit = obj["key"], obj["offset"], obj["tail"], obj["audit"]
        if not isinstance(key, list) or any(type(k) is not int for k in key):
            raise ValueError("bad key")
        if type(offset) is not int or not isinstance(tail, str):
            raise ValueError("bad offset")
        return cls(
            summary=Summary.from_json(obj["summary"]),
            key=key,
            offset=offset,
            tail=tail,
            audit=None if audit is None else Audited.from_json(audit),
        )


@dataclass(slots=True, kw_only=True)
class Followed:
    """A session loaded to be followed: where its stored form ends, and the
    SHA-256 state of those bytes (in JSONL form), so each ``log/digest`` that
    arrives later is checked as loading would check it."""

    session: Session
    position: int
    """JSONL: the byte offset after the last complete line; PostgreSQL: the next seq."""
    stored: int
    """Bytes of the JSONL form read so far."""
    hasher: Any = None
    inode: int = 0
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, session: Session, data: bytes, position: int, **extra: Any) -> Followed:
        """Following starts after ``data`` (the JSONL form of ``session``)."""
        hasher = hashlib.sha256(data)
        return cls(session=session, position=position, stored=len(data), hasher=hasher, **extra)


class Source(ABC):
    """One store, read by the server (see the module docstring)."""

    store: SessionStore
    label: str

    @abstractmethod
    def refresh(self, entries: Mapping[str, Entry]) -> dict[str, Entry]:
        """Every stored session's entry: ``entries``' own where the key is the same,
        extended or folded anew where the session changed."""

    @abstractmethod
    def running(self, ids: Iterable[str] | None = None) -> set[str]:
        """The sessions (of ``ids``, or all) a writer holds right now."""

    @abstractmethod
    def follow(self, session_id: str) -> Followed:
        """Load a session (validated as the store loads it) to follow it."""

    @abstractmethod
    def read_new(self, session_id: str, followed: Followed) -> list[bytes] | None:
        """The complete lines stored after ``followed.position`` (advancing it);
        ``None`` when the stored log no longer extends what was read (reload)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""
