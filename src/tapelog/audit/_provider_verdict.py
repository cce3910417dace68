"""The provider's own verdict on its prompt cache, beside the audit's causes.

Some providers answer with their own cache diagnostics: Anthropic's
``diagnostics.cache_miss_reason`` (``model_changed``, ``system_changed``,
``tools_changed``, ``messages_changed``, or null when the request did not
diverge from the one it names), OpenAI's ``prompt_cache_diagnostics``
(``cache_hit``, or ``cache_miss`` with a ``reason``). The stream parsers log
the object as given in the answer's usage (``usage.cache_diagnostics``).
Here it is read as one *verdict* word and checked against the causes the
audit found in the log: a provider that names a divergence the log does not
show, or sees none where the log shows a changed prefix, disagrees; a
verdict that compared nothing (not found, unavailable, still running) is
inconclusive (docs/cli.md, "tapelog cache").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tapelog.audit._cache_cause import CacheCause

__all__ = ["NO_DIVERGENCE", "agrees", "provider_verdict"]

NO_DIVERGENCE: Final = "no-divergence"
"""The verdict of a provider that found the request's prefix unchanged."""

_DIVERGED: Final = frozenset(
    {"model_changed", "system_changed", "tools_changed", "messages_changed"}
)


def provider_verdict(usage: Mapping[str, Any] | None) -> str | None:
    """The provider's verdict in one word, from a logged usage (``None``: it gave none)."""
    found = (usage or {}).get("cache_diagnostics")
    if not isinstance(found, Mapping):
        return None
    if "cache_miss_reason" in found:  # Anthropic
        reason = found["cache_miss_reason"]
        if reason is None:
            return NO_DIVERGENCE
        return _word(reason)
    kind = found.get("type")  # OpenAI
    if kind == "cache_hit":
        return NO_DIVERGENCE
    if kind == "cache_miss":
        return _word(found.get("reason"))
    return str(kind) if kind is not None else "unknown"


def _word(reason: Any) -> str:
    if isinstance(reason, Mapping):
        reason = reason.get("type")
    return str(reason) if reason is not None else "pending"


def _log_says(causes: Sequence[CacheCause]) -> set[str] | None:
    """The verdicts the audit's causes support (``None``: any, the log cannot tell)."""
    said: set[str] = set()
    for cause in causes:
        d = cause.detail
        if cause.kind in ("header-delta", "header-fallback", "resume-drift"):
            config = d.get("config") or {}
            if "model" in config:
                said.add("model_changed")
            if d.get("system_lines") or d.get("system_change"):
                said.add("system_changed")
            if any(d.get("tools") or {}):
                said.add("tools_changed")
            if d.get("prefix") is not None:
                said.add("messages_changed")
        elif cause.kind in ("client-edit", "compaction", "trim"):
            said.add("messages_changed")
        elif cause.kind == "unexplained" and d.get("reason") == "prefix changed":
            return None
    return said


def agrees(verdict: str | None, causes: Sequence[CacheCause]) -> bool | None:
    """Whether the provider's verdict fits the audit's causes (``None``: no
    verdict, or one that compared nothing)."""
    if verdict is None or (verdict != NO_DIVERGENCE and verdict not in _DIVERGED):
        return None
    said = _log_says(causes)
    if said is None:
        return None
    if verdict == NO_DIVERGENCE:
        return not said
    return verdict in said
