"""Cache-break causes as sentences a person can act on.

``tapelog cache`` prints them under its table, ``tapelog diff`` for each
edited message, and the HTML report in its table of breaks. They are built
from a cause's JSON ``detail`` only (so the JSON and the words cannot
disagree). Log text in them (tool names, excerpts, config values) is bounded
and printable (:func:`tapelog.audit._edits.excerpt`); each medium still
escapes it (HTML) or cleans it (terminal) when it shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tapelog.audit._edits import excerpt
from tapelog.log._api import encode_str

__all__ = ["cause_sentence", "duration", "edit_sentence", "header_sentence"]

_NAME_CHARS: Final = 48
_VALUE_CHARS: Final = 40
_OTHERS_SHOWN: Final = 5

_WHAT: Final = {
    "timestamp": "a timestamp changed",
    "arguments-reserialized": "tool-call arguments re-serialized",
    "reasoning-dropped": "reasoning dropped",
    "content-edited": "content edited",
    "removed": "message removed",
    "inserted": "message inserted",
}


def duration(ms: int) -> str:
    """``45s``, ``20m``, ``20m05s``, ``1h02m``."""
    seconds = int(ms) // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _q(text: Any) -> str:
    """A log string, bounded and printable, in quotes."""
    return f"“{excerpt(str(text), _NAME_CHARS)}”"


def _value(value: Any) -> str:
    return "unset" if value is None else excerpt(encode_str(value), _VALUE_CHARS)


def _change(old: Any, new: Any) -> str:
    """``“old” → “new”`` from two excerpts (either may be missing)."""
    if old is None and new is None:
        return ""
    if new is None:
        return f"“{old}”"
    if old is None:
        return f"“{new}”"
    return f"“{old}” → “{new}”"


# --- edited messages -----------------------------------------------------------------


def edit_sentence(change: Mapping[str, Any], *, subject: str = "the client") -> str:
    """One edited message (a :class:`tapelog.audit._edits.MessageChange` as JSON)."""
    what = change.get("what")
    at = f"message {change.get('message')} ({excerpt(str(change.get('role')), 16)})"
    field = change.get("field") or "the message"
    old, new = change.get("old"), change.get("new")
    if what == "removed":
        text = f"{subject} removed {at} of the previous request: {_change(old, None)}"
    elif what == "inserted":
        text = f"{subject} inserted {at}: {_change(None, new)}"
    elif what == "timestamp":
        text = f"{subject} changed {at}: a timestamp in {field}, {_change(old, new)}"
    elif what == "arguments-reserialized":
        call = f"{_q(change.get('tool', '?'))} ({excerpt(str(change.get('call_id', '')), 40)})"
        text = (
            f"{subject} changed {at}: the arguments of tool call {call} were re-serialized "
            f"(same JSON value, other text: {_change(old, new)})"
        )
    elif what == "reasoning-dropped":
        blocks = int(change.get("blocks", 1))
        noun = "block" if blocks == 1 else "blocks"
        text = f"{subject} changed {at}: dropped {blocks} reasoning {noun} ({field}: “{old}”)"
    else:
        text = f"{subject} changed {at}: {field} edited, {_change(old, new)}"
    also = change.get("also") or ()
    if also:
        text += "; also " + ", ".join(_WHAT.get(str(w), str(w)) for w in also)
    return text


def _client_edit(detail: Mapping[str, Any]) -> str:
    text = edit_sentence(detail)
    total = int(detail.get("changed", 1))
    if total > 1:
        others = detail.get("others") or ()
        shown = "; ".join(
            f"message {o.get('message')}: {_WHAT.get(str(o.get('what')), o.get('what'))}"
            for o in others[:_OTHERS_SHOWN]
        )
        more = total - 1 - min(len(others), _OTHERS_SHOWN)
        if more > 0:
            shown += f"; {more} more"
        noun = "message" if total == 2 else "messages"
        text += f" (and {total - 1} more {noun}: {shown})"
    return text


# --- header changes -------------------------------------------------------------------


def _config_part(key: str, old: Any, new: Any) -> str:
    if key in ("model", "provider"):
        return f"{key} switched: {_value(old)} → {_value(new)}"
    if old is None:
        return f"{key} set to {_value(new)}"
    if new is None:
        return f"{key} unset (was {_value(old)})"
    return f"{key} changed: {_value(old)} → {_value(new)}"


def _names(names: Sequence[Any]) -> str:
    shown = ", ".join(_q(n) for n in names[:_OTHERS_SHOWN])
    more = len(names) - _OTHERS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _tools_parts(tools: Mapping[str, Any]) -> list[str]:
    parts: list[str] = []
    added = list(tools.get("added") or ())
    at = tools.get("added_at") or {}
    if added and tools.get("at_end"):
        noun = "a tool was" if len(added) == 1 else f"{len(added)} tools were"
        parts.append(f"{noun} added at the end: {_names(added)}")
    elif added:
        parts.extend(
            f"tool {_q(n)} added" + (f" at position {at[n]}" if n in at else "") for n in added
        )
    removed = list(tools.get("removed") or ())
    if removed:
        parts.append(f"tool{'s' if len(removed) > 1 else ''} {_names(removed)} removed")
    keys = tools.get("changed_keys") or {}
    for name in tools.get("changed") or ():
        which = ", ".join(excerpt(str(k), 32) for k in keys.get(name, ()))
        parts.append(f"tool {_q(name)} schema changed" + (f" ({which})" if which else ""))
    if tools.get("reordered"):
        moved = tools.get("moved")
        where = (
            f" (position {moved['position']}: {_q(moved['new'])} now stands where "
            f"{_q(moved['old'])} was)"
            if moved
            else ""
        )
        parts.append("tools reordered" + where)
    return parts


def _system_part(change: Mapping[str, Any]) -> str:
    line, removed, added = int(change["line"]), int(change["removed"]), int(change["added"])
    what, old, new = change.get("what"), change.get("old"), change.get("new")
    if what == "inserted":
        noun = "line" if added == 1 else f"{added} lines"
        return f"{noun} inserted into the system prompt at line {line}: {_change(None, new)}"
    span = f"line {line}" if removed == 1 else f"lines {line}-{line + removed - 1}"
    if what == "removed":
        return f"system prompt {span} removed: {_change(old, None)}"
    counts = "" if removed == added == 1 else f" ({removed} removed, {added} added)"
    if what == "timestamp":
        return f"system prompt {span} changed{counts}: a timestamp, {_change(old, new)}"
    return f"system prompt {span} edited{counts}: {_change(old, new)}"


def header_sentence(detail: Mapping[str, Any]) -> str:
    """What a header change did, from a header cause's ``detail``."""
    parts = [_config_part(k, v[0], v[1]) for k, v in (detail.get("config") or {}).items()]
    change = detail.get("system_change")
    if change:
        parts.append(_system_part(change))
    elif detail.get("system_lines"):
        parts.append(f"system prompt changed ({detail['system_lines']} lines)")
    parts.extend(_tools_parts(detail.get("tools") or {}))
    prefix = detail.get("prefix")
    if prefix is not None:
        parts.append(f"the session prefix changed ({prefix['old']} → {prefix['new']} messages)")
    return "; ".join(parts) or "the header was logged again, unchanged"


# --- any cause ---------------------------------------------------------------------------


def cause_sentence(kind: str, detail: Mapping[str, Any], seqs: Sequence[int] = ()) -> str:
    """The readable sentence for one cache-break cause."""
    d = detail
    if kind == "client-edit":
        return _client_edit(d)
    if kind == "header-delta":
        return header_sentence(d)
    if kind == "header-fallback":
        return header_sentence(d) + " (logged as a full header snapshot: no delta expresses it)"
    if kind == "resume-drift":
        return "a new loop instance resumed with another header: " + header_sentence(d)
    if kind == "compaction":
        shadowed = d.get("shadowed") or {}
        span = f" seqs {shadowed['start']}-{shadowed['end']}" if shadowed else " earlier messages"
        return f"compaction {excerpt(str(d.get('id') or '?'), 32)} replaced{span} with a summary"
    if kind == "trim":
        n = int(d.get("results", len(seqs)))
        return f"{n} tool result{'s' if n != 1 else ''} trimmed"
    if kind == "new-process":
        return (
            f"a new process: the {excerpt(str(d.get('provider')), 32)} cache lives in the "
            "process, so it started empty"
        )
    if kind == "idle-gap":
        return (
            f"idle for {duration(d.get('gap_ms', 0))} before this request, longer than the "
            f"{excerpt(str(d.get('provider')), 32)} cache keeps a prefix "
            f"({duration(d.get('lifetime_ms', 0))})"
        )
    if kind == "unexplained" and d.get("reason") == "reported below expected":
        return (
            f"the provider reported {int(d.get('reported', 0)):,} cached tokens where "
            f"{int(d.get('expected', 0)):,} were expected, and the log shows no reason "
            "(eviction, another machine, a cut stream)"
        )
    if kind == "unexplained":
        return "the prompt changed before its end and the log shows no reason"
    return kind
