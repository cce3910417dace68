"""A cause of a cache drop, as the cache audit names it: kind, seqs, detail.

Kept apart from the audit's walk (``_cache_report``) because the report's views
render causes too: a label for tables, a sentence a person can act on, JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tapelog.audit._diff import HeaderDiff, tool_marks
from tapelog.audit._sentences import cause_sentence, duration

__all__ = ["CacheCause", "header_detail", "header_label"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheCause:
    """One logged reason (or the lack of one) for a cache drop."""

    kind: str
    """One of ``header-delta``, ``header-fallback``, ``resume-drift``,
    ``client-edit``, ``compaction``, ``trim``, ``new-process``, ``idle-gap``,
    ``unexplained`` (docs/cli.md, "tapelog cache")."""
    seqs: tuple[int, ...]
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """A short label for tables: ``tools +word_count``, ``compaction c1``, ..."""
        d = self.detail
        if self.kind == "header-delta":
            return header_label(d)
        if self.kind == "header-fallback":
            return "fallback: " + header_label(d)
        if self.kind == "resume-drift":
            return "resume drift: " + ", ".join(d.get("fields", ()))
        if self.kind == "client-edit":
            return f"client edit: message {d.get('message')} ({d.get('what')})"
        if self.kind == "compaction":
            return f"compaction {d.get('id') or '?'}"
        if self.kind == "trim":
            n = d.get("results", len(self.seqs))
            return f"trim {n} result{'s' if n != 1 else ''}"
        if self.kind == "new-process":
            return f"new process ({d.get('provider')} cache is per process)"
        if self.kind == "idle-gap":
            return f"idle {duration(d.get('gap_ms', 0))} > {duration(d.get('lifetime_ms', 0))}"
        return self.kind

    @property
    def sentence(self) -> str:
        """The cause as a sentence a person can act on (``_sentences``)."""
        return cause_sentence(self.kind, self.detail, self.seqs)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "seqs": list(self.seqs), "detail": dict(self.detail)}


def header_label(detail: Mapping[str, Any]) -> str:
    parts: list[str] = []
    config = detail.get("config") or {}
    if config:
        parts.append("config " + ", ".join(config))
    lines = detail.get("system_lines", 0)
    if lines:
        parts.append(f"system {lines} line{'s' if lines != 1 else ''}")
    tools = detail.get("tools") or {}
    marks = tool_marks(tools.get("added", ()), tools.get("removed", ()), tools.get("changed", ()))
    if marks:
        parts.append("tools " + marks)
    elif tools.get("reordered"):
        parts.append("tools reordered")
    if detail.get("prefix") is not None:
        parts.append("prefix")
    return "; ".join(parts) or "header unchanged"


def header_detail(diff: HeaderDiff) -> dict[str, Any]:
    data = diff.to_json()
    return {
        "fields": diff.fields(),
        "config": data["config"],
        "tools": data["tools"],
        "system_lines": diff.system_lines,
        "system_change": data["system_change"],
        "prefix": data["prefix"],
    }
