"""Why a request's prompt did not extend the previous one, in the log's own events.

The cache audit (``_cache_report``) asks :func:`log_causes` when a request
broke the prefix chain: the header events, client edits, compactions and trims
logged since the previous request (:class:`Previous`, what the audit carries
from one request to the next).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tapelog.audit._cache_cause import CacheCause, header_detail
from tapelog.audit._diff import header_diff, is_client_edit, replacement_kind
from tapelog.audit._history_edits import history_changes
from tapelog.cache._api import Prompt, Rule
from tapelog.log._api import Event, FrozenDict, History
from tapelog.request._api import WalkedRequest

__all__ = ["Previous", "client_edit", "log_causes"]


def log_causes(request: WalkedRequest, previous: Previous | None) -> list[CacheCause]:
    """What the log changed between the previous request and this one."""
    causes: list[CacheCause] = []
    for change in request.changes:
        event = change.event
        diff = header_diff(change.before, change.after)
        if event.type == "request/header-delta":
            causes.append(
                CacheCause(kind="header-delta", seqs=(event.seq,), detail=header_detail(diff))
            )
        elif event.data.get("reason") == "fallback":
            causes.append(
                CacheCause(kind="header-fallback", seqs=(event.seq,), detail=header_detail(diff))
            )
        elif change.before is not None and not diff.empty:
            # A resume (or a new loop instance) whose header differs from the fold.
            causes.append(
                CacheCause(kind="resume-drift", seqs=(event.seq,), detail=header_detail(diff))
            )
    edit = client_edit(request, previous)
    if edit is not None:
        causes.append(edit)
    causes.extend(_compactions(request))
    trims = [e for e in request.replaces if replacement_kind(e) == "trim"]
    if trims:
        causes.append(
            CacheCause(
                kind="trim",
                seqs=tuple(e.seq for e in trims),
                detail={"results": len(trims), "replaced": [_replaced(e) for e in trims]},
            )
        )
    return causes


_OTHERS_KEPT = 9


def client_edit(request: WalkedRequest, previous: Previous | None) -> CacheCause | None:
    """Messages a client sent differently than before, compared with the previous request.

    The replacing events are the ``seqs``; ``detail`` is the first changed
    message (:class:`tapelog.audit._edits.MessageChange` as JSON), ``changed``
    the number of changed messages and ``others`` the next ones (at most 9).
    """
    replacing = [e for e in request.replaces if is_client_edit(e)]
    if not replacing or previous is None:
        return None
    # What the client was shown last: the previous history and its answer (a
    # client that re-serializes the answer's tool arguments edits it in place).
    old = previous.nodes if previous.answer is None else [*previous.nodes, previous.answer]
    found = history_changes(
        old,
        request.nodes,
        old_base=previous.prefix,
        new_base=len(request.header.prefix),
        limit=1 + _OTHERS_KEPT,
    )
    if not found.changes:
        return None
    first, *others = found.changes
    detail = {**first.to_json(), "changed": found.total, "others": [c.to_json() for c in others]}
    return CacheCause(kind="client-edit", seqs=tuple(e.seq for e in replacing), detail=detail)


def _replaced(event: Event) -> int | None:
    op = event.surface_op
    return int(op["start"]) if isinstance(op, Mapping) else None


def _compactions(request: WalkedRequest) -> list[CacheCause]:
    by_id: dict[str, list[Event]] = {}
    replacing: dict[str, Event] = {}
    for event in request.compaction:
        by_id.setdefault(str(event.data.get("id")), []).append(event)
    for event in request.replaces:
        if replacement_kind(event) == "compaction":
            replacing[str(event.data["source"].get("id"))] = event
    causes: list[CacheCause] = []
    for cid in sorted(set(by_id) | set(replacing), key=lambda c: _first_seq(by_id, replacing, c)):
        if cid not in replacing:
            continue  # a failed compaction changes nothing
        events = sorted([*by_id.get(cid, []), replacing[cid]], key=lambda e: e.seq)
        detail: dict[str, Any] = {"id": cid, "replacing_seq": replacing[cid].seq}
        for event in events:
            if event.type == "compact/start":
                detail["trigger"] = event.data.get("trigger")
            elif event.type == "compact/summary":
                detail["shadowed"] = dict(event.data.get("shadowed", {}))
        causes.append(
            CacheCause(kind="compaction", seqs=tuple(e.seq for e in events), detail=detail)
        )
    return causes


def _first_seq(by_id: Mapping[str, list[Event]], replacing: Mapping[str, Event], cid: str) -> int:
    seqs = [e.seq for e in by_id.get(cid, [])]
    if cid in replacing:
        seqs.append(replacing[cid].seq)
    return min(seqs)


@dataclass
class Previous:
    length: int
    last_key: str | None
    end_time: int
    """When the previous request's answer was logged (epoch ms)."""
    nodes: History
    """Its history (an O(1) view), to compare what a client sent again."""
    prefix: int
    """How many prefix messages came before that history."""
    answer: tuple[int, FrozenDict] | None = None
    """Its answer as a history node: a client may send that back differently too."""
    rule: Rule | None = None
    prompt: Prompt | None = None
    """Its rendered prompt: what it would have read sent again is what a break cost."""
