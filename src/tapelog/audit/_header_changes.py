"""The finer facts of a header change that people need to fix the agent behind it.

:func:`tapelog.audit._diff.header_diff` says *which* header fields changed;
this module says *where* and *how*, from the two headers alone (so a delta, a
``fallback`` snapshot and a resume read alike):

* the system prompt: which lines, from the log's own line trim
  (:func:`tapelog.log.diff_header`'s ``keep_start`` / ``keep_end``), and for a
  changed block whether only a timestamp changed (:mod:`._edits`);
* tools: where each added tool went (at the end, after every tool sent
  before, or in between), which top-level schema keys of a changed tool
  differ, and the first position a reorder moved;
* config: provider extras and wire options key by key (``extras.x``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tapelog.audit._edits import excerpt, text_change
from tapelog.log._api import EpochHeader, diff_header, system_lines
from tapelog.log._api import encode_trusted as encode

__all__ = [
    "SystemChange",
    "ToolMove",
    "config_changes",
    "system_change",
    "tool_positions",
]

_NESTED = ("extras", "wire", "headers")
_KEYS_SHOWN = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemChange:
    """Which system prompt lines changed (1-based line numbers of the old prompt)."""

    line: int
    """The first changed line (where inserted lines go, for a pure insertion)."""
    removed: int
    """Lines of the old prompt replaced (``line`` .. ``line + removed - 1``)."""
    added: int
    """Lines that took their place."""
    what: str
    """``timestamp`` (only date/time tokens differ), ``edited``, ``inserted`` or ``removed``."""
    old: str | None
    new: str | None
    """Short printable excerpts of what changed (``None``: nothing on that side)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "removed": self.removed,
            "added": self.added,
            "what": self.what,
            "old": self.old,
            "new": self.new,
        }


def system_change(old: EpochHeader, new: EpochHeader) -> SystemChange | None:
    """The system prompt's changed lines, as the header delta's line trim gives them."""
    delta = diff_header(old, new)
    trim = delta.get("system") if delta is not None else None
    if trim is None:
        return None
    keep_start, keep_end = int(trim["keep_start"]), int(trim["keep_end"])
    old_lines, new_lines = system_lines(old.system), system_lines(new.system)
    removed = old_lines[keep_start : len(old_lines) - keep_end]
    added = new_lines[keep_start : len(new_lines) - keep_end]
    if removed and added:
        change = text_change("\n".join(removed), "\n".join(added))
        assert change is not None  # the trim keeps every equal line out
        what, before, after = change.what, change.old, change.new
    elif added:
        what, before, after = "inserted", None, excerpt(added[0])
    else:
        what, before, after = "removed", excerpt(removed[0]), None
    return SystemChange(
        line=keep_start + 1,
        removed=len(removed),
        added=len(added),
        what=what,
        old=before,
        new=after,
    )


def config_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``key -> (old, new)`` for every config value that differs (``None``: unset);
    ``extras``, ``wire`` and ``headers`` key by key (``extras.response_format``)."""
    changes: dict[str, tuple[Any, Any]] = {}
    for key in [*old, *(k for k in new if k not in old)]:
        a, b = old.get(key), new.get(key)
        if encode(a) == encode(b):
            continue
        if key in _NESTED and isinstance(a or {}, Mapping) and isinstance(b or {}, Mapping):
            inner_a, inner_b = a or {}, b or {}
            for sub in [*inner_a, *(k for k in inner_b if k not in inner_a)]:
                x, y = inner_a.get(sub), inner_b.get(sub)
                if encode(x) != encode(y):
                    changes[f"{key}.{sub}"] = (x, y)
        else:
            changes[key] = (a, b)
    return changes


@dataclass(frozen=True, slots=True)
class ToolMove:
    """The first place a reorder shows: ``new`` now stands where ``old`` stood."""

    position: int
    """1-based position in the new tool list."""
    old: str
    new: str

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "old": self.old, "new": self.new}


@dataclass(frozen=True, slots=True)
class ToolPositions:
    added_at: Mapping[str, int]
    """Each added tool's 1-based position in the new tool list."""
    at_end: bool
    """Every added tool comes after every tool that was sent before."""
    changed_keys: Mapping[str, tuple[str, ...]]
    """The top-level schema keys that differ, per changed tool (at most 10)."""
    moved: ToolMove | None


def tool_positions(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> ToolPositions:
    """Where tools went between two tool lists (see :class:`ToolPositions`)."""
    old_by = {str(t["name"]): t for t in old}
    names = [str(t["name"]) for t in new]
    kept = [i for i, n in enumerate(names) if n in old_by]
    added_at = {n: i + 1 for i, n in enumerate(names) if n not in old_by}
    at_end = bool(added_at and kept and min(added_at.values()) > max(kept) + 1)
    changed_keys: dict[str, tuple[str, ...]] = {}
    for tool in new:
        name = str(tool["name"])
        before = old_by.get(name)
        if before is None or encode(before) == encode(tool):
            continue
        keys = [*before, *(k for k in tool if k not in before)]
        differing = [k for k in keys if encode(before.get(k)) != encode(tool.get(k))]
        changed_keys[name] = tuple(differing[:_KEYS_SHOWN]) or ("key order",)
    old_order = [str(t["name"]) for t in old if str(t["name"]) in set(names)]
    new_order = [names[i] for i in kept]
    moved = None
    for a, b in zip(old_order, new_order, strict=True):
        if a != b:
            moved = ToolMove(names.index(b) + 1, a, b)
            break
    return ToolPositions(added_at, at_end, changed_keys, moved)
