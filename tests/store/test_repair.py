"""repair_interrupted: closing an open turn with deterministic, logged events."""

from __future__ import annotations

from tapelog import Session
from tapelog.log._api import repair_interrupted

INTERRUPTED = (
    "interrupted: the process stopped before this tool call finished; its outcome is unknown"
)


def call(session: Session, call_id: str, step: int = 0) -> int:
    event = session.append(
        "tool/call",
        {"turn": 0, "step": step, "call_id": call_id, "name": "ls", "arguments": "{}"},
    )
    return event.seq


def result(session: Session, call_id: str, step: int = 0) -> None:
    session.append(
        "tool/result",
        {"turn": 0, "step": step, "call_id": call_id, "content": "ok", "is_error": False},
        surface_op="append",
    )


def test_nothing_to_repair() -> None:
    session = Session("ok")
    assert repair_interrupted(session) == []
    session.append("turn/start", {"turn": 0})
    session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
    assert repair_interrupted(session) == []
    assert len(session) == 2


def test_open_step_with_unanswered_tool_calls() -> None:
    session = Session("crash")
    session.append("turn/start", {"turn": 0})
    session.append("step/start", {"turn": 0, "step": 0})
    session.append("step/end", {"turn": 0, "step": 0})
    session.append("step/start", {"turn": 0, "step": 1})
    first = call(session, "a", 1)
    call(session, "b", 1)
    third = call(session, "c", 1)
    result(session, "b", 1)
    appended = repair_interrupted(session)
    assert [e.to_json() for e in appended] == [
        {
            "seq": 8,
            "time": appended[0].time,
            "type": "tool/result",
            "data": {
                "turn": 0,
                "step": 1,
                "call_id": "a",
                "content": INTERRUPTED,
                "is_error": True,
                "error": {"kind": "interrupted"},
            },
            "surface_op": "append",
            "source_seqs": [first],
        },
        {
            "seq": 9,
            "time": appended[1].time,
            "type": "tool/result",
            "data": {
                "turn": 0,
                "step": 1,
                "call_id": "c",
                "content": INTERRUPTED,
                "is_error": True,
                "error": {"kind": "interrupted"},
            },
            "surface_op": "append",
            "source_seqs": [third],
        },
        {"seq": 10, "time": appended[2].time, "type": "step/end", "data": {"turn": 0, "step": 1}},
        {
            "seq": 11,
            "time": appended[3].time,
            "type": "turn/end",
            "data": {"turn": 0, "reason": {"kind": "interrupted"}},
        },
    ]
    assert list(session.events[-4:]) == appended
    assert repair_interrupted(session) == []


def test_open_turn_between_steps_only_gets_turn_end() -> None:
    session = Session("between")
    session.append("turn/start", {"turn": 3})
    session.append("step/start", {"turn": 3, "step": 0})
    session.append("step/end", {"turn": 3, "step": 0})
    (end,) = repair_interrupted(session)
    assert (end.type, end.data) == ("turn/end", {"turn": 3, "reason": {"kind": "interrupted"}})


def test_repair_is_deterministic_apart_from_time() -> None:
    def crashed() -> Session:
        session = Session("same", created=1, clock=lambda: 42)
        session.append("turn/start", {"turn": 0})
        session.append("step/start", {"turn": 0, "step": 0})
        call(session, "x")
        return session

    one, two = crashed(), crashed()
    repair_interrupted(one)
    repair_interrupted(two)
    assert [e.encode() for e in one.events] == [e.encode() for e in two.events]
    assert one.derive_messages() == two.derive_messages()


def test_a_compaction_cut_short_is_closed_first_and_says_whether_it_applied() -> None:
    session = Session()
    session.append("turn/start", {"turn": 1})
    first = session.append(
        "user/message",
        {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("compact/start", {"id": "c1", "trigger": "auto", "turn": 1})
    appended = repair_interrupted(session)
    assert [e.type for e in appended] == ["compact/end", "turn/end"]
    assert appended[0].data["ok"] is False
    assert appended[0].data["error"]["type"] == "Interrupted"

    applied = Session()
    applied.append("compact/start", {"id": "c2", "trigger": "manual", "turn": None})
    node = applied.append(
        "user/message",
        {"content": [{"type": "text", "text": "old"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    applied.append(
        "user/message",
        {
            "content": [{"type": "text", "text": "sum"}],
            "source": {"kind": "compaction", "id": "c2"},
        },
        surface_op={"op": "replace", "start": node.seq, "end": node.seq},
    )
    closed = repair_interrupted(applied)
    assert [(e.type, e.data["ok"]) for e in closed] == [("compact/end", True)]
    assert first.seq == 1
