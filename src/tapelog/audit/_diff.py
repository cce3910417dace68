"""What changed between two loop requests, and which logged events explain it.

``request_diff(events, a, b)`` compares requests A and B (1-based, as
``tapelog requests`` numbers them): the header field by field (config keys old
-> new, tools added / removed / changed by name, the system prompt as a unified
line diff, the prefix) and the history (the common prefix of nodes, the nodes
replaced by compaction or trimming, the nodes appended), each with the seqs of
the events between the two boundaries that explain it. Both requests come from
the same walk the cache report uses (:func:`tapelog.request.walk_requests`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tapelog._errors import LogError
from tapelog.audit._edits import MessageChange
from tapelog.audit._header_changes import (
    SystemChange,
    ToolMove,
    config_changes,
    system_change,
    tool_positions,
)
from tapelog.audit._history_edits import history_changes
from tapelog.audit._refs import RequestRef
from tapelog.log import encode
from tapelog.log._api import EpochHeader, Event, History, Session, system_lines
from tapelog.request import walk_requests
from tapelog.request._api import HeaderChange, WalkedRequest, request_fields

__all__ = [
    "HeaderDiff",
    "MessagesDiff",
    "Replacement",
    "RequestDiff",
    "RequestSummary",
    "header_diff",
    "is_client_edit",
    "replacement_kind",
    "request_diff",
    "tool_marks",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderDiff:
    """Field-by-field differences between two request headers (empty: equal)."""

    config: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    """Config values that differ: ``key -> (old, new)`` (``None`` = unset); ``extras``
    and ``wire`` key by key (``extras.response_format``)."""
    tools_added: tuple[str, ...] = ()
    tools_removed: tuple[str, ...] = ()
    tools_changed: tuple[str, ...] = ()
    tools_reordered: bool = False
    system: tuple[str, ...] = ()
    """The system prompt as a unified line diff (no lines: unchanged)."""
    system_lines: int = 0
    """Lines changed: each run of removed and added lines counts its longer side
    (one line edited is 1, as the sentence says "line 1 changed")."""
    prefix: tuple[int, int] | None = None
    """``(old count, new count)`` of prefix messages when the prefix changed."""
    tools_added_at: Mapping[str, int] = field(default_factory=dict)
    """Each added tool's 1-based position in the new tool list."""
    tools_at_end: bool = False
    """Every added tool comes after every tool sent before (appended, not inserted)."""
    tools_changed_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per changed tool, the top-level schema keys that differ."""
    tools_moved: ToolMove | None = None
    """For a reorder: the first position where another tool now stands."""
    system_change: SystemChange | None = None
    """Which system prompt lines changed, and how (``None``: unchanged)."""

    @property
    def empty(self) -> bool:
        return not (
            self.config
            or self.tools_added
            or self.tools_removed
            or self.tools_changed
            or self.tools_reordered
            or self.system
            or self.prefix
        )

    @property
    def system_changed(self) -> str:
        """``1 line changed``, ``3 lines changed``."""
        n = self.system_lines
        return f"{n} line changed" if n == 1 else f"{n} lines changed"

    def fields(self) -> list[str]:
        """The changed fields by name: ``config``, ``system``, ``tools``, ``prefix``."""
        tools = self.tools_added or self.tools_removed or self.tools_changed
        flags = {
            "config": bool(self.config),
            "system": bool(self.system),
            "tools": bool(tools or self.tools_reordered),
            "prefix": self.prefix is not None,
        }
        return [name for name, changed in flags.items() if changed]

    def to_json(self) -> dict[str, Any]:
        return {
            "config": {k: [old, new] for k, (old, new) in self.config.items()},
            "tools": {
                "added": list(self.tools_added),
                "removed": list(self.tools_removed),
                "changed": list(self.tools_changed),
                "reordered": self.tools_reordered,
                "added_at": dict(self.tools_added_at),
                "at_end": self.tools_at_end,
                "changed_keys": {k: list(v) for k, v in self.tools_changed_keys.items()},
                "moved": None if self.tools_moved is None else self.tools_moved.to_json(),
            },
            "system": list(self.system),
            "system_change": None if self.system_change is None else self.system_change.to_json(),
            "prefix": None
            if self.prefix is None
            else {"old": self.prefix[0], "new": self.prefix[1]},
        }


def tool_marks(added: Iterable[str], removed: Iterable[str], changed: Iterable[str]) -> str:
    """Tool changes as people read them everywhere: ``+added -removed ~changed``."""
    marks = [f"+{n}" for n in added] + [f"-{n}" for n in removed] + [f"~{n}" for n in changed]
    return " ".join(marks)


def _lines_changed(diff: Sequence[str]) -> int:
    """Lines changed in a unified diff: per run of ``-``/``+`` lines, the longer side."""
    total = removed = added = 0
    for line in (*diff[2:], " "):
        if line[:1] == "-":
            removed += 1
        elif line[:1] == "+":
            added += 1
        else:
            total += max(removed, added)
            removed = added = 0
    return total


def header_diff(old: EpochHeader | None, new: EpochHeader) -> HeaderDiff:
    """Compare two headers (``old=None``: everything in ``new`` is new)."""
    old_config = dict(old.config.to_json()) if old is not None else {}
    new_config = dict(new.config.to_json())
    changes = config_changes(old_config, new_config)
    config = {key: changes[key] for key in sorted(changes, key=_config_order)}
    old_tools = {t["name"]: t for t in old.tools} if old is not None else {}
    new_tools = {t["name"]: t for t in new.tools}
    common_old = [n for n in old_tools if n in new_tools]
    common_new = [n for n in new_tools if n in old_tools]
    old_lines = system_lines(old.system) if old is not None else []
    new_lines = system_lines(new.system)
    system = tuple(
        line.rstrip("\n")
        for line in difflib.unified_diff(old_lines, new_lines, "before", "after", lineterm="")
    )
    old_prefix = list(old.prefix) if old is not None else []
    places = tool_positions(old.tools if old is not None else (), new.tools)
    return HeaderDiff(
        config=config,
        tools_added=tuple(n for n in new_tools if n not in old_tools),
        tools_removed=tuple(n for n in old_tools if n not in new_tools),
        tools_changed=tuple(n for n in common_new if encode(old_tools[n]) != encode(new_tools[n])),
        tools_reordered=common_old != common_new,
        system=system,
        system_lines=_lines_changed(system),
        prefix=None
        if encode(old_prefix) == encode(list(new.prefix))
        else (len(old_prefix), len(new.prefix)),
        tools_added_at=places.added_at,
        tools_at_end=places.at_end,
        tools_changed_keys=places.changed_keys,
        tools_moved=places.moved,
        system_change=system_change(old, new) if old is not None else None,
    )


_CONFIG_ORDER = ("provider", "model", "max_tokens", "temperature", "top_p", "seed", "stop")


def _config_order(key: str) -> tuple[int, str]:
    base = key.split(".", 1)[0]
    return (_CONFIG_ORDER.index(base) if base in _CONFIG_ORDER else len(_CONFIG_ORDER), key)


@dataclass(frozen=True, slots=True, kw_only=True)
class Replacement:
    """History nodes of A that B shows replaced, and the event that replaced them."""

    kind: str
    """``compaction``, ``trim`` or ``replace`` (another replacing event)."""
    by: int
    replaced: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "by": self.by, "replaced": list(self.replaced)}


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesDiff:
    """How B's history relates to A's: common prefix, replacements, appends."""

    common: int
    """History messages both requests start with."""
    replaced: tuple[Replacement, ...]
    appended: tuple[int, ...]
    """Seqs of B's history nodes appended after A's boundary."""
    dropped: tuple[int, ...]
    """A's nodes after the common prefix that B no longer shows."""
    edits: tuple[MessageChange, ...] = ()
    """What a client changed in messages it sent again (replaces other than
    compaction and trimming), message by message (:mod:`._edits`), at most 50."""
    edits_total: int = 0
    """How many messages the client changed (``edits`` shows the first 50)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "common": self.common,
            "replaced": [r.to_json() for r in self.replaced],
            "appended": list(self.appended),
            "dropped": list(self.dropped),
            "edits": [e.to_json() for e in self.edits],
            "edits_total": self.edits_total,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSummary(RequestRef):
    messages: int

    def to_json(self) -> dict[str, Any]:
        return {**self.ref_json(), "messages": self.messages}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestDiff:
    """What changed from request ``a`` to request ``b`` and which events say why."""

    session: str | None
    a: RequestSummary
    b: RequestSummary
    header: HeaderDiff
    header_seqs: tuple[int, ...]
    """Header events between the two requests (B's own step's included)."""
    messages: MessagesDiff
    message_seqs: tuple[int, ...]
    """Events that changed the history: compact/*, replacing and appended nodes."""

    def to_json(self) -> dict[str, Any]:
        """The stable JSON shape documented in docs/cli.md (``tapelog diff --json``)."""
        return {
            "session": self.session,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "header": {**self.header.to_json(), "seqs": list(self.header_seqs)},
            "messages": {**self.messages.to_json(), "seqs": list(self.message_seqs)},
        }


def _summary(request: WalkedRequest) -> RequestSummary:
    return RequestSummary(
        **request_fields(request), messages=len(request.header.prefix) + len(request.nodes)
    )


def replacement_kind(event: Event) -> str:
    """``trim`` for a tool-result replace, ``compaction`` for a compaction summary."""
    if event.type == "tool/result":
        return "trim"
    source = event.data.get("source")
    if isinstance(source, Mapping) and source.get("kind") == "compaction":
        return "compaction"
    return "replace"


_EDITS_SHOWN = 50


def is_client_edit(event: Event) -> bool:
    """A replacing surface event that is neither a compaction summary nor a trim:
    in a proxied session, a client that sent an earlier message differently."""
    return isinstance(event.surface_op, Mapping) and replacement_kind(event) == "replace"


def request_diff(
    events: Session | Sequence[Event], a: int, b: int, *, session_id: str | None = None
) -> RequestDiff:
    """Compare loop requests ``a`` and ``b`` (1-based send order) of a log."""
    if isinstance(events, Session):
        session_id = session_id or events.id
    log: Sequence[Event] = events.events if isinstance(events, Session) else events
    found: dict[int, tuple[RequestSummary, EpochHeader, History]] = {}
    changes: list[HeaderChange] = []
    between: list[Event] = []
    count = 0
    low, high = sorted((a, b))
    for request in walk_requests(log):
        count = request.index
        if low < request.index <= high:
            changes.extend(request.changes)
            between.extend(request.compaction)
            between.extend(request.replaces)
            between.extend(log[s] for s in request.appended)
        if request.index in (a, b):
            found[request.index] = (_summary(request), request.header, request.nodes)
    for n in (a, b):
        if n not in found and count == 0:
            raise LogError(
                f"request {n} does not exist: the session has no loop requests yet; "
                "run a turn first (see `tapelog show`)."
            )
        if n not in found:
            raise LogError(
                f"request {n} does not exist: the session has {count} loop request(s); "
                f"give indexes from 1 to {count} (see `tapelog requests`)."
            )
    # With A after B the same events lie between them; the diff still reads A -> B.
    (sa, ha, nodes_a), (sb, hb, nodes_b) = found[a], found[b]
    messages = _messages_diff([s for s, _ in nodes_a], [s for s, _ in nodes_b], between)
    if any(is_client_edit(e) for e in between):
        found_edits = history_changes(
            nodes_a, nodes_b, old_base=len(ha.prefix), new_base=len(hb.prefix), limit=_EDITS_SHOWN
        )
        messages = replace(messages, edits=found_edits.changes, edits_total=found_edits.total)
    explaining = {e.seq for e in between if e.type.startswith("compact/")}
    explaining.update(r.by for r in messages.replaced)
    explaining.update(messages.appended)
    return RequestDiff(
        session=session_id,
        a=sa,
        b=sb,
        header=header_diff(ha, hb),
        header_seqs=tuple(c.event.seq for c in changes),
        messages=messages,
        message_seqs=tuple(sorted(explaining)),
    )


def _messages_diff(seqs_a: list[int], seqs_b: list[int], between: Sequence[Event]) -> MessagesDiff:
    common = 0
    for x, y in zip(seqs_a, seqs_b, strict=False):
        if x != y:
            break
        common += 1
    rest_a, rest_b = seqs_a[common:], set(seqs_b[common:])
    shown = set(seqs_a)
    replaced: list[Replacement] = []
    for event in between:
        op = event.surface_op
        if not isinstance(op, Mapping):
            continue
        if event.source_seqs:
            covered = tuple(s for s in event.source_seqs if s in shown)
        else:
            covered = tuple(s for s in rest_a if op["start"] <= s <= op["end"])
        if covered or event.seq in rest_b:
            replaced.append(
                Replacement(kind=replacement_kind(event), by=event.seq, replaced=covered)
            )
    appended = tuple(e.seq for e in between if e.surface_op == "append" and e.seq in rest_b)
    gone = {s for r in replaced for s in r.replaced}
    dropped = tuple(s for s in rest_a if s not in rest_b and s not in gone)
    return MessagesDiff(common=common, replaced=tuple(replaced), appended=appended, dropped=dropped)
