"""The cache audit's bottom line: what the breaks cost, by cause, in one sentence.

"Why is my hit rate low?" wants one answer before any table: how many prompt
tokens were paid at full price although the cache could have served them, in
how many breaks, and from what. ``cache``, ``report``, ``serve`` and
``sessions`` all print :attr:`BottomLine.sentence` first (issue 21).

Each break is charged to its first cause (the one the log shows first), named
by a short phrase a person recognises ("a timestamp in the system prompt").
Cached reads beyond what the session's own requests left behind are named as
what they are: a prefix another session had cached (a provider's cache is
shared across sessions), never an efficiency above 100%.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from tapelog.audit._cache_cause import CacheCause
    from tapelog.audit._cache_report import RequestCache

__all__ = ["BottomLine", "bottom_line", "cause_phrase"]

_CLIENT_EDITS: Final = {
    "timestamp": "a timestamp the client changed in an earlier message",
    "arguments-reserialized": "tool-call arguments the client re-serialized",
    "reasoning-dropped": "reasoning the client dropped",
}

_PHRASES: Final = {
    "compaction": "compaction",
    "trim": "trimmed tool results",
    "new-process": "a new process (its cache lives in the process)",
    "idle-gap": "idle gaps longer than the cache keeps a prefix",
    "unexplained": "causes the log does not show",
}


def _header_phrase(detail: Mapping[str, Any]) -> str:
    change = detail.get("system_change") or {}
    if change.get("what") == "timestamp":
        return "a timestamp in the system prompt"
    if change or detail.get("system_lines"):
        return "system prompt edits"
    if detail.get("tools"):
        tools = detail["tools"]
        if tools.get("added") or tools.get("removed") or tools.get("changed"):
            return "tool list changes"
        if tools.get("reordered"):
            return "tools reordered"
    if detail.get("config"):
        return "config changes (" + ", ".join(sorted(detail["config"])) + ")"
    if detail.get("prefix") is not None:
        return "session prefix changes"
    return "a header logged again"


def cause_phrase(cause: CacheCause) -> str:
    """A cause as the short phrase of the bottom line ("a timestamp in the system prompt")."""
    if cause.kind in ("header-delta", "header-fallback"):
        return _header_phrase(cause.detail)
    if cause.kind == "resume-drift":
        return "a resume with another header: " + _header_phrase(cause.detail)
    if cause.kind == "client-edit":
        what = str(cause.detail.get("what"))
        return _CLIENT_EDITS.get(what, "earlier messages the client sent differently")
    return _PHRASES.get(cause.kind, cause.kind)


@dataclass(frozen=True, slots=True)
class CauseCost:
    cause: str
    tokens: int
    breaks: int

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "tokens": self.tokens, "breaks": self.breaks}


@dataclass(frozen=True, slots=True)
class BottomLine:
    lost_tokens: int
    """Prompt tokens paid at full price that the cache could have served."""
    breaks: int
    """Requests that lost any."""
    by_cause: tuple[CauseCost, ...]
    """Largest first."""
    cross_session_tokens: int
    """Cached tokens read from a prefix another session had cached."""

    @property
    def sentence(self) -> str:
        """The bottom line for people, e.g. ``1,536 prompt tokens paid at full price
        that the cache could have served, in 2 breaks: all from a timestamp in the
        system prompt.``"""
        if self.lost_tokens == 0:
            text = "No prompt tokens paid at full price that the cache could have served."
        else:
            noun = "break" if self.breaks == 1 else "breaks"
            if len(self.by_cause) == 1:
                why = f"all from {self.by_cause[0].cause}"
            else:
                why = ", ".join(f"{c.tokens:,} from {c.cause}" for c in self.by_cause)
            text = (
                f"{self.lost_tokens:,} prompt tokens paid at full price that the cache could "
                f"have served, in {self.breaks} {noun}: {why}."
            )
        if self.cross_session_tokens:
            text += (
                f" {self.cross_session_tokens:,} cached tokens came from a prefix another "
                "session had cached."
            )
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "lost_tokens": self.lost_tokens,
            "breaks": self.breaks,
            "lost_by_cause": [c.to_json() for c in self.by_cause],
            "cross_session_tokens": self.cross_session_tokens,
            "bottom_line": self.sentence,
        }


def bottom_line(rows: Iterable[RequestCache]) -> BottomLine:
    """Sum the audit's rows into the bottom line."""
    tokens: dict[str, int] = {}
    counts: dict[str, int] = {}
    lost = breaks = cross = 0
    for row in rows:
        cross += row.cross_session_tokens
        if row.lost_tokens <= 0:
            continue
        lost += row.lost_tokens
        breaks += 1
        phrase = cause_phrase(row.causes[0]) if row.causes else _PHRASES["unexplained"]
        tokens[phrase] = tokens.get(phrase, 0) + row.lost_tokens
        counts[phrase] = counts.get(phrase, 0) + 1
    by_cause = tuple(
        CauseCost(phrase, n, counts[phrase])
        for phrase, n in sorted(tokens.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return BottomLine(lost, breaks, by_cause, cross)
