"""Closing a turn that a crash left open, as logged, deterministic events.

A process can stop mid-turn: after ``tool/call`` but before its result, or
between ``step/start`` and ``step/end``. The next request must still be a pure
function of the log, so resume does not patch anything in memory: it appends
the events that close the turn, and their content depends only on the log.

* every ``tool/call`` of the open step without a ``tool/result`` gets an error
  result (the outcome is unknown: the tool may or may not have run);
* then ``step/end`` for the open step;
* then ``turn/end`` with reason ``{"kind": "interrupted"}``.

A compaction the crash cut short is closed first with ``compact/end``: ``ok``
when its replacing message was already logged (the history did change), else
``ok: false`` with an ``interrupted`` error (nothing changed).
"""

from __future__ import annotations

from typing import Final

from tapelog.log._events import Event
from tapelog.log._session import Session, open_turn_at

__all__ = ["INTERRUPTED_TOOL_RESULT", "answer_call", "repair_interrupted"]

INTERRUPTED_TOOL_RESULT: Final = (
    "interrupted: the process stopped before this tool call finished; its outcome is unknown"
)


def _close_compaction(session: Session) -> list[Event]:
    """``compact/end`` for a ``compact/start`` that has none (at most one can be open)."""
    events = session.events
    for event in reversed(events):
        if event.type == "compact/end":
            return []
        if event.type == "compact/start":
            cid = event.data.get("id")
            applied = any(
                e.type == "user/message" and e.data["source"].get("id") == cid
                for e in events[event.seq + 1 :]
            )
            data: dict[str, object] = {"id": cid, "ok": applied}
            if not applied:
                data["error"] = {
                    "type": "Interrupted",
                    "message": "the process stopped during compaction; nothing was changed",
                }
            return [session.append("compact/end", data)]
    return []


def answer_call(session: Session, call: Event, content: str, kind: str) -> Event:
    """Close a logged ``tool/call`` that has no result with an error result
    (``error.kind`` says why): a call without its result makes every later
    request invalid on both wires."""
    return session.append(
        "tool/result",
        {
            "turn": call.data["turn"],
            "step": call.data["step"],
            "call_id": call.data["call_id"],
            "content": content,
            "is_error": True,
            "error": {"kind": kind},
        },
        surface_op="append",
        source_seqs=[call.seq],
    )


def repair_interrupted(session: Session) -> list[Event]:
    """Append the events that close an interrupted turn (and compaction); return
    them ([] if nothing was open)."""
    events = session.events
    if not events:
        return []
    closed = _close_compaction(session)
    turn = open_turn_at(events, len(events) - 1)
    if turn is None:
        return closed
    turn_start = max(i for i, e in enumerate(events) if e.type == "turn/start")
    open_step: Event | None = None
    unanswered: dict[str, Event] = {}  # call_id -> tool/call, in call order
    for event in events[turn_start:]:
        if event.type == "step/start":
            open_step, unanswered = event, {}
        elif event.type == "step/end":
            open_step, unanswered = None, {}
        elif event.type == "tool/call":
            unanswered[event.data["call_id"]] = event
        elif event.type == "tool/result":
            unanswered.pop(event.data["call_id"], None)
    appended: list[Event] = closed
    if open_step is not None:
        for call in unanswered.values():
            appended.append(answer_call(session, call, INTERRUPTED_TOOL_RESULT, "interrupted"))
        step = {"turn": open_step.data["turn"], "step": open_step.data["step"]}
        appended.append(session.append("step/end", step))
    appended.append(session.append("turn/end", {"turn": turn, "reason": {"kind": "interrupted"}}))
    return appended
