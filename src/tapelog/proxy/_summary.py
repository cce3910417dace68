"""The one line the proxy reports per request, and what changed since the last one.

A cache break in a proxied session has a cause the log names; the full
attribution is the cache audit's (``tapelog cache``). As the requests go by,
the proxy says the part it sees at once: the session is new or a fork, the
client changed an earlier message (a logged replace), or the request header
changed (a header delta or snapshot: which tools, which lines of the system
prompt, which config fields).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tapelog.log._api import EpochHeader, Event, apply_header_delta, diff_header, header_from_json

__all__ = ["RequestSummary", "header_changes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSummary:
    """What one proxied request did: its session and turn, the tokens the
    upstream reported, what changed since the session's previous request, or
    the error the client got (``status`` is the HTTP status it got)."""

    session_id: str | None
    turn: int | None
    status: int
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    changes: tuple[str, ...] = field(default=())
    error: str | None = None
    cache_break: str | None = None
    """The cache audit's line when this request's cacheable prefix broke
    (``tapelog.audit.CacheBreak.line``; only when the proxy watches caches)."""

    def line(self) -> str:
        """The summary as one line (untrusted names inside: print it through a
        terminal filter)."""
        where = self.session_id or "-"
        if self.turn is not None:
            where += f" turn {self.turn}"
        if self.error is not None:
            return f"{where}: HTTP {self.status}: {self.error}"
        tokens = "no usage reported"
        if self.prompt_tokens is not None:
            tokens = f"{self.cached_tokens or 0}/{self.prompt_tokens} prompt tokens cached"
        changes = f"; {'; '.join(self.changes)}" if self.changes else ""
        return f"{where}: {tokens}{changes}"


def _config_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in dict.fromkeys([*before, *after]):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key == "model":
            out.append(f"model {old} -> {new}")
        elif key in ("extras", "wire") and isinstance(old or {}, Mapping):
            names = [
                k
                for k in dict.fromkeys([*(old or {}), *(new or {})])
                if (old or {}).get(k) != (new or {}).get(k)
            ]
            for name in names:
                value = (new or {}).get(name)
                shown = f" -> {value}" if isinstance(value, (str, int, float)) else " changed"
                out.append(f"{key}.{name}{shown}")
        else:
            out.append(f"{key} changed")
    return out


def header_changes(before: EpochHeader | None, event: Event | None) -> list[str]:
    """What a header event the proxy logged changed, in a few words each
    (nothing for a first snapshot, or a resume that changed nothing)."""
    if event is None or before is None:
        return []
    if event.type == "request/header":
        after = header_from_json(event.data["header"])
    else:
        after = apply_header_delta(before, event.data)
    delta = diff_header(before, after)
    if delta is None:
        return []
    out: list[str] = []
    system = delta.get("system")
    if system is not None:
        out.append(f"system prompt changed from line {system['keep_start'] + 1}")
    tools = delta.get("tools")
    if tools is not None:
        names = after.tool_names()
        for tool in tools.get("add", ()):
            at_end = len(names) > 1 and names[-1] == tool["name"]
            out.append(f"tool {tool['name']} added" + (" at the end" if at_end else ""))
        out.extend(f"tool {name} removed" for name in tools.get("remove", ()))
        out.extend(f"tool {t['name']} changed" for t in tools.get("change", ()))
        kept = [n for n in after.tool_names() if n in set(before.tool_names())]
        if kept != [n for n in before.tool_names() if n in set(after.tool_names())]:
            out.append("tools reordered")
    if "config" in delta:
        out.extend(_config_changes(before.config.to_json(), after.config.to_json()))
    if "prefix" in delta:
        out.append("prefix changed")
    if event.type == "request/header" and event.data["reason"] == "resume":
        out.insert(0, "resumed with another header")
    return out
