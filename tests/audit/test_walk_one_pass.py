"""The request walk visits each event once, in order, and still makes every
request in send order: a step's request when the step ends, a one-shot call
logged inside an open step after that step's request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, overload

from audit._sessions import HEADER, LogBuilder
from tapelog.log._api import Event, Session, SessionEvents
from tapelog.request import walk_requests
from tapelog.request._api import RequestWalker


class _Counted(SessionEvents):
    """A session's events that count how often one is read by index."""

    def __init__(self, events: SessionEvents) -> None:
        super().__init__(list(events))
        self.indexed = 0

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        self.indexed += 1
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[Event]:
        return super().__iter__()


def _loop_log(turns: int) -> Session:
    log = LogBuilder()
    for turn in range(turns):
        log.user(f"question {turn}")
        log.tool_round(f"call_{turn}", "result " * 20, header=turn == 0)
        log.answer(f"answer {turn}")
    return log.session


def test_the_walk_reads_no_event_twice() -> None:
    session = _loop_log(20)
    events = _Counted(session.events)
    walked = list(walk_requests(events, session_id=session.id))
    assert [(w.turn, w.step) for w in walked] == [(t, s) for t in range(1, 21) for s in (1, 2)]
    assert events.indexed == 0  # no look-ahead: each step's events fed as they come


def test_a_step_request_carries_its_own_header_and_what_came_before() -> None:
    session = _loop_log(3)
    walked = list(walk_requests(session))
    first = walked[0]
    assert first.header_seqs
    assert first.changes[-1].event.seq == first.header_seqs[-1]
    assert [len(w.nodes) for w in walked] == [1, 3, 5, 7, 9, 11]
    # What the log appended since the request before: the step's answer and result,
    # then (second step of a turn) the answer with the next question.
    assert [len(w.appended) for w in walked] == [1, 2, 2, 2, 2, 2]


def _one_shot_inside_a_step(sent: bool) -> Session:
    """A step whose compaction summary call is logged before the step ends."""
    log = LogBuilder()
    log.user("first")
    log.answer("one", header=True)
    log.user("second")
    log.step += 1
    log.append("step/start", {"turn": log.turn, "step": log.step})
    system = {**HEADER, "system": "You are terser."}
    log.append("request/header", {"header": system, "reason": "resume"})
    region = list(log.session.surface)
    start: dict[str, Any] = {"id": "c1", "trigger": "manual", "turn": log.turn}
    start |= {"context_tokens": 900, "region": region, "instruction": "Sum up.", "max_tokens": 64}
    log.append("compact/start", start)
    log.append("compact/end", {"id": "c1", "ok": False, "error": {"type": "x", "message": "y"}})
    end = {"turn": log.turn, "step": log.step}
    log.append("step/end", end if sent else {**end, "sent": False, "error": {"message": "z"}})
    log.append("turn/end", {"turn": log.turn, "reason": {"kind": "completed"}})
    return log.session


def test_a_one_shot_inside_an_open_step_comes_after_that_step() -> None:
    session = _one_shot_inside_a_step(sent=True)
    walked = list(walk_requests(session, one_shots=True))
    assert [(w.index, w.kind) for w in walked] == [(1, "loop"), (2, "loop"), (3, "compaction")]
    step, summary = walked[1], walked[2]
    assert step.header.system == "You are terser."
    assert step.header_seqs
    assert summary.header == step.header
    assert summary.changes == ()  # the step's header change went with the step's request


def test_a_step_not_sent_hands_its_header_change_to_the_one_shot_inside_it() -> None:
    session = _one_shot_inside_a_step(sent=False)
    walked = list(walk_requests(session, one_shots=True))
    assert [w.kind for w in walked] == ["loop", "compaction"]
    summary = walked[1]
    assert [c.after.system for c in summary.changes] == ["You are terser."]


def test_the_live_walker_makes_a_step_request_at_the_step_end() -> None:
    session = _loop_log(2)
    walker = RequestWalker(session.events, session.id, False)
    made = {e.seq: walker.visit(e) for e in session.events}
    ends = [seq for seq, out in made.items() if out]
    assert [session.events[seq].type for seq in ends] == ["step/end"] * 4
    assert [w.boundary_seq for seq in ends for w in made[seq]] == [
        e.seq for e in session.events if e.type == "step/start"
    ]


def test_a_failed_attempt_before_the_answer_is_counted() -> None:
    log = LogBuilder()
    log.user("first")
    log.step += 1
    log.append("step/start", {"turn": log.turn, "step": log.step})
    log.append("request/header", {"header": HEADER, "reason": "initial"})
    chunk = {"kind": "error", "attempt": 1, "status": 503, "message": "busy", "retry_in_ms": 5}
    log.append("assistant/chunk", {"turn": log.turn, "step": log.step, "chunk": chunk})
    text = {"kind": "text", "text": "hi"}
    log.append("assistant/chunk", {"turn": log.turn, "step": log.step, "chunk": text})
    source = {"provider": "deepseek", "model": "deepseek-chat"}
    content = [{"type": "text", "text": "hi"}]
    answer = {"turn": log.turn, "step": log.step, "content": content, "source": source}
    log.append("assistant/message", answer, surface_op="append")
    log.append("step/end", {"turn": log.turn, "step": log.step})
    log.append("turn/end", {"turn": log.turn, "reason": {"kind": "completed"}})
    walked = list(walk_requests(log.session))
    assert [(w.step, w.failed_attempts) for w in walked] == [(1, 1)]
