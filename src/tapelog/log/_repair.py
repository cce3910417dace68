"""Closing a turn that a crash left open, as logged, deterministic events.

A process can stop mid-turn: after ``tool/call`` but before its result, or
between ``step/start`` and ``step/end``. The next request must still be a pure
function of the log, so resume does not patch anything in memory: it appends
the events that close the turn, and their content depends only on the log.

* a tool call the open step's ``assistant/message`` asked for whose
  ``tool/call`` line was lost (a torn write: the loop logs every call of a
  step in one flush, then runs the tools) gets that ``tool/call`` first, with
  the name and arguments of the message's block: every result answers a logged
  call, as in every step the loop writes;
* every tool call of the open step without a ``tool/result`` gets an error
  result, ``error.kind`` ``interrupted``: the outcome is unknown when its
  ``tool/call`` was logged (the tool may or may not have run), and it did not
  run when repair had to log the call;
* then ``step/end`` for the open step, with ``"sent": false`` when no request
  header is logged at all (a torn first flush): a request is only ever built
  from a logged header, so that one never left;
* then ``turn/end`` with reason ``{"kind": "interrupted"}``.

So no later request holds a tool call without its result, and every request
the log says was sent rebuilds.

A compaction the crash cut short is closed first with ``compact/end``: ``ok``
when its replacing message was already logged (the history did change), else
``ok: false`` with an ``interrupted`` error (nothing changed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from tapelog.log._events import Event
from tapelog.log._pairing import OpenCall, ToolLedger
from tapelog.log._session import Session
from tapelog.log._session_info import open_turn_at

__all__ = [
    "INTERRUPTED_TOOL_RESULT",
    "NOT_RUN_TOOL_RESULT",
    "RepairPlan",
    "answer_call",
    "answer_open_calls",
    "plan_repair",
    "repair_interrupted",
]

INTERRUPTED_TOOL_RESULT: Final = (
    "interrupted: the process stopped before this tool call finished; its outcome is unknown"
)
NOT_RUN_TOOL_RESULT: Final = (
    "interrupted: the process stopped before this tool call was logged; tools run only "
    "after their calls are logged, so it did not run"
)


def _close_compaction(session: Session) -> list[Event]:
    """``compact/end`` for a ``compact/start`` that has none (at most one can be open)."""
    events = session.events
    for seq in range(len(events) - 1, -1, -1):
        etype = events.type_at(seq)  # by type: the events read back are many, small
        if etype == "compact/end":
            return []
        if etype == "compact/start":
            event = events[seq]
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


@dataclass(frozen=True, slots=True)
class RepairPlan:
    """What :func:`repair_interrupted` will append, read from the log alone.

    ``verify`` reads the same plan to say what resuming will close.
    """

    turn: int | None
    """The turn left open (``None``: every turn is closed, nothing to do past a compaction)."""
    step: Event | None
    """The ``step/start`` of the step left open, if any."""
    calls: tuple[OpenCall, ...]
    """The open step's tool calls without a result, in the order the model asked for them."""
    sent: bool
    """Whether the open step's request may have left: not when no request header
    is logged at all, since a request is built only from a logged header."""


def plan_repair(session: Session, *, run_tools: bool = True) -> RepairPlan:
    """The events an interrupted turn needs to be closed (see the module docstring).

    ``run_tools=False`` is for a writer that hands tool calls to its client
    instead of running them (the proxy): the client's next request brings their
    results, so only logged ``tool/call`` events are answered (it logs none).
    """
    events = session.events
    turn = open_turn_at(events, len(events) - 1) if events else None
    if turn is None:
        return RepairPlan(turn=None, step=None, calls=(), sent=True)
    step: Event | None = None
    for seq in range(len(events) - 1, -1, -1):
        event = events[seq]
        if event.type in ("step/end", "turn/start"):
            break
        if event.type == "step/start":
            step = event
            break
    if step is None:
        return RepairPlan(turn=turn, step=None, calls=(), sent=True)
    ledger = ToolLedger().observe_all(events[step.seq + 1 :])
    calls = tuple(c for c in ledger.open_calls() if run_tools or c.call is not None)
    return RepairPlan(turn=turn, step=step, calls=calls, sent=session.header is not None)


def repair_interrupted(session: Session, *, run_tools: bool = True) -> list[Event]:
    """Append the events that close an interrupted turn (and compaction); return
    them ([] if nothing was open). ``run_tools`` as for :func:`plan_repair`."""
    if not len(session):
        return []
    appended = _close_compaction(session)
    plan = plan_repair(session, run_tools=run_tools)
    if plan.turn is None:
        return appended
    if plan.step is not None:
        appended += _close_step(session, plan.step, plan.calls, sent=plan.sent)
    appended.append(
        session.append("turn/end", {"turn": plan.turn, "reason": {"kind": "interrupted"}})
    )
    return appended


def answer_open_calls(
    session: Session,
    start: Event,
    calls: Iterable[OpenCall],
    *,
    kind: str,
    content: Callable[[OpenCall], str],
) -> list[Event]:
    """Close the open tool calls of the step that ``start`` opened: first a
    ``tool/call`` for each call only its ``assistant/message`` names (so every
    result answers a logged call, as in every step the loop writes), then an
    error result for each, in the model's order. Repair and the loop's early
    step end (``tapelog.agent``) both close a step this way."""
    turn, step = start.data["turn"], start.data["step"]
    calls = list(calls)
    appended: list[Event] = []
    logged: dict[str, Event] = {}
    for call in calls:
        if call.call is None:
            data = {"turn": turn, "step": step, "call_id": call.call_id}
            data |= {"name": call.name, "arguments": call.arguments}
            logged[call.call_id] = session.append("tool/call", data)
            appended.append(logged[call.call_id])
    for call in calls:
        event = call.call if call.call is not None else logged[call.call_id]
        appended.append(answer_call(session, event, content(call), kind))
    return appended


def _repair_text(call: OpenCall) -> str:
    return INTERRUPTED_TOOL_RESULT if call.call is not None else NOT_RUN_TOOL_RESULT


def _close_step(
    session: Session, start: Event, calls: tuple[OpenCall, ...], *, sent: bool
) -> list[Event]:
    """Log the calls a torn write lost, answer every open call, end the step."""
    appended = answer_open_calls(session, start, calls, kind="interrupted", content=_repair_text)
    end: dict[str, object] = {"turn": start.data["turn"], "step": start.data["step"]}
    if not sent:
        end["sent"] = False
        end["error"] = {
            "type": "Interrupted",
            "message": "the process stopped before this step's request was sent "
            "(no request header is logged)",
        }
    appended.append(session.append("step/end", end))
    return appended
