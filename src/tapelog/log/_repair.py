"""Closing a turn that a crash left open, as logged, deterministic events.

A process can stop mid-turn: after ``tool/call`` but before its result, or
between ``step/start`` and ``step/end``. The next request must still be a pure
function of the log, so resume does not patch anything in memory: it appends
the events that close the turn, and their content depends only on the log.

* every ``tool/call`` of the open step without a ``tool/result`` gets an error
  result (the outcome is unknown: the tool may or may not have run);
* then ``step/end`` for the open step;
* then ``turn/end`` with reason ``{"kind": "interrupted"}``.
"""

from __future__ import annotations

from typing import Final

from tapelog.log._events import Event
from tapelog.log._session import Session, open_turn_at

__all__ = ["INTERRUPTED_TOOL_RESULT", "repair_interrupted"]

INTERRUPTED_TOOL_RESULT: Final = (
    "interrupted: the process stopped before this tool call finished; its outcome is unknown"
)


def repair_interrupted(session: Session) -> list[Event]:
    """Append the events that close an interrupted turn; return them ([] if none was open)."""
    events = session.events
    if not events:
        return []
    turn = open_turn_at(events, len(events) - 1)
    if turn is None:
        return []
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
    appended: list[Event] = []
    if open_step is not None:
        for call in unanswered.values():
            appended.append(
                session.append(
                    "tool/result",
                    {
                        "turn": call.data["turn"],
                        "step": call.data["step"],
                        "call_id": call.data["call_id"],
                        "content": INTERRUPTED_TOOL_RESULT,
                        "is_error": True,
                        "error": {"kind": "interrupted"},
                    },
                    surface_op="append",
                    source_seqs=[call.seq],
                )
            )
        step = {"turn": open_step.data["turn"], "step": open_step.data["step"]}
        appended.append(session.append("step/end", step))
    appended.append(session.append("turn/end", {"turn": turn, "reason": {"kind": "interrupted"}}))
    return appended
