"""What the server keeps about each session: its list row and its last audit.

An :class:`Entry` is a session's incremental summary as the store folded it
(:meth:`tapelog.store.SessionStore.summaries`: the row, a
:class:`~tapelog.serve._summary.Summary`, and the store's cursor saying how
far the fold got, checked by the store before the fold is extended) plus the
cache audit of the session at some length (:class:`Audited`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tapelog.serve._summary import Summary
from tapelog.store._api import Cursor, Folded

__all__ = ["Audited", "Entry", "activity"]


def activity(held: bool, open_turn: bool) -> str:
    """A session's status from what it is doing, not from who holds it.

    ``running``: a writer holds it and a turn is in progress; ``idle``: a
    writer holds it between turns (a proxy keeps every session it served
    open); ``interrupted``: no writer, and the log ends inside a turn;
    ``ended``: no writer, every turn ended. An idle session is audited like
    an ended one: its log only grows by whole turns.
    """
    if held:
        return "running" if open_turn else "idle"
    return "interrupted" if open_turn else "ended"


_INTS = (
    "events",
    "requests",
    "prompt_tokens",
    "cached_tokens",
    "expected",
    "lost_tokens",
    "cross_session_tokens",
)


@dataclass(slots=True, kw_only=True)
class Audited:
    """The cache audit of a session (:func:`tapelog.audit.cache_report`) at ``events``
    events: its totals, or why the session could not be loaded."""

    events: int
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    expected: int = 0
    lost_tokens: int = 0
    """Prompt tokens paid at full price that the cache could have served."""
    cross_session_tokens: int = 0
    """Cached tokens read from a prefix another session had cached."""
    bottom_line: str = ""
    """The audit's bottom line (``BottomLine.sentence``)."""
    error: str | None = None

    @property
    def efficiency(self) -> float | None:
        """As the audit says it: expected tokens read / expected, never above 1."""
        if self.error is not None:
            return None
        own = self.cached_tokens - self.cross_session_tokens
        return min(1.0, own / self.expected) if self.expected else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "expected": self.expected,
            "lost_tokens": self.lost_tokens,
            "cross_session_tokens": self.cross_session_tokens,
            "bottom_line": self.bottom_line,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Audited:
        if set(obj) != {*_INTS, "bottom_line", "error"}:
            raise ValueError("not an audit")
        if (
            any(type(obj[k]) is not int for k in _INTS)
            or not isinstance(obj["bottom_line"], str)
            or not (obj["error"] is None or isinstance(obj["error"], str))
        ):
            raise ValueError("not an audit")
        return cls(**obj)


@dataclass(slots=True, kw_only=True)
class Entry:
    """One session in the index (see the module docstring)."""

    folded: Folded[Summary]
    audit: Audited | None = None

    @property
    def summary(self) -> Summary:
        return self.folded.fold

    @property
    def audited(self) -> Audited | None:
        """The audit, if it is of the log as folded now."""
        audit = self.audit
        return audit if audit is not None and audit.events == self.summary.events else None

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary.to_json(),
            "cursor": self.folded.cursor.to_json(),
            "audit": None if self.audit is None else self.audit.to_json(),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Entry:
        """A persisted entry back; ``ValueError`` (or ``TypeError``) if it is not one."""
        summary, audit = Summary.from_json(obj["summary"]), obj["audit"]
        folded = Folded(
            id=summary.id,
            fold=summary,
            cursor=Cursor.from_json(obj["cursor"]),
            created=summary.created,
            parent=summary.parent,
            events=summary.events,
            last_time=summary.last_time,
            error=summary.error,
        )
        return cls(folded=folded, audit=None if audit is None else Audited.from_json(audit))
