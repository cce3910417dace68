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

__all__ = ["Audited", "Entry"]


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
