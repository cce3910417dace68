"""repair_interrupted: closing an open turn with deterministic, logged events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tapelog import Session
from tapelog.log._api import repair_interrupted, unanswered_tool_calls
from tapelog.request._api import rebuild_requests
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

INTERRUPTED = (
    "interrupted: the process stopped before this tool call finished; its outcome is unknown"
)
NOT_RUN = (
    "interrupted: the process stopped before this tool call was logged; tools run only "
    "after their calls are logged, so it did not run"
)
HEADER = {"config": {"provider": "openai", "model": "m"}, "system": "You are terse."}


def user(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}}


def asking(*call_ids: str) -> dict[str, Any]:
    """An assistant message that asks for the tool calls ``call_ids``."""
    return {
        "turn": 0,
        "step": 0,
        "content": [
            {"type": "tool_call", "id": cid, "name": "read", "arguments": '{"path":"a"}'}
            for cid in call_ids
        ],
        "source": {"provider": "openai", "model": "m"},
    }


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
    session.append("request/header", {"header": HEADER, "reason": "initial"})
    session.append("step/end", {"turn": 0, "step": 0})
    session.append("step/start", {"turn": 0, "step": 1})
    first = call(session, "a", 1)
    call(session, "b", 1)
    third = call(session, "c", 1)
    result(session, "b", 1)
    appended = repair_interrupted(session)
    assert [e.to_json() for e in appended] == [
        {
            "seq": 9,
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
            "seq": 10,
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
        {"seq": 11, "time": appended[2].time, "type": "step/end", "data": {"turn": 0, "step": 1}},
        {
            "seq": 12,
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


# --- calls that exist only in the assistant message (a torn tool/call line) -----


def _asked_two_calls(session: Session, *, logged: int) -> int:
    """A step whose assistant message asks for c0 and c1; ``logged`` of them got
    their ``tool/call`` line before the crash. Returns the message's seq."""
    session.append("turn/start", {"turn": 0})
    session.append("user/message", user("read both"), surface_op="append")
    session.append("step/start", {"turn": 0, "step": 0})
    session.append("request/header", {"header": HEADER, "reason": "initial"})
    message = session.append("assistant/message", asking("c0", "c1"), surface_op="append")
    for k in range(logged):
        session.append(
            "tool/call",
            {"turn": 0, "step": 0, "call_id": f"c{k}", "name": "read", "arguments": '{"path":"a"}'},
        )
    return message.seq


def test_calls_only_in_the_assistant_message_are_logged_then_answered() -> None:
    session = Session("torn-call")
    _asked_two_calls(session, logged=1)
    first_call = session.events[-1]
    appended = repair_interrupted(session)
    assert [e.type for e in appended] == [
        "tool/call",
        "tool/result",
        "tool/result",
        "step/end",
        "turn/end",
    ]
    new_call, answer_logged, answer_asked, _, _ = appended
    # the lost call is logged as the message asked for it ...
    assert new_call.data == {
        "turn": 0,
        "step": 0,
        "call_id": "c1",
        "name": "read",
        "arguments": '{"path":"a"}',
    }
    # ... and every result answers a logged tool/call, in the model's order
    assert (answer_logged.data["call_id"], answer_logged.source_seqs) == ("c0", [first_call.seq])
    assert (answer_asked.data["call_id"], answer_asked.source_seqs) == ("c1", [new_call.seq])
    assert answer_logged.data["content"] == INTERRUPTED
    assert answer_asked.data["content"] == NOT_RUN
    assert all(e.data["error"] == {"kind": "interrupted"} for e in appended[1:3])
    assert "sent" not in appended[3].data  # a header is logged: the request may have left
    assert unanswered_tool_calls(session.derive_messages()) == []
    assert repair_interrupted(session) == []


def test_a_message_whose_every_call_line_was_lost_is_closed_too() -> None:
    session = Session("torn-calls")
    _asked_two_calls(session, logged=0)
    appended = repair_interrupted(session)
    assert [(e.type, e.data.get("call_id")) for e in appended[:4]] == [
        ("tool/call", "c0"),
        ("tool/call", "c1"),
        ("tool/result", "c0"),
        ("tool/result", "c1"),
    ]
    assert unanswered_tool_calls(session.derive_messages()) == []
    # the loop's next step is a request every provider accepts
    report = verify_jsonl(_jsonl(session), expected_id=session.id)
    assert report.ok, [str(p) for p in report.problems]


def test_calls_of_an_earlier_closed_step_are_left_to_verify() -> None:
    """Repair closes only the step a crash left open; damage before it is reported."""
    session = Session("old-damage")
    _asked_two_calls(session, logged=0)
    session.append("step/end", {"turn": 0, "step": 0})
    appended = repair_interrupted(session)
    assert [e.type for e in appended] == ["turn/end"]
    report = verify_jsonl(_jsonl(session), expected_id=session.id)
    (problem,) = report.problems
    assert "the next request would hold tool calls without their results" in str(problem)
    assert "c0 (seq 4), c1 (seq 4)" in str(problem)


def test_verify_says_what_resuming_closes_and_then_verifies() -> None:
    session = Session("torn-verify")
    _asked_two_calls(session, logged=0)
    report = verify_jsonl(_jsonl(session), expected_id=session.id)
    assert report.ok
    assert any("tool calls without results (c0, c1)" in note for note in report.notes)
    assert any("resuming answers them" in note for note in report.notes)
    repair_interrupted(session)
    repaired = verify_jsonl(_jsonl(session), expected_id=session.id)
    assert repaired.ok
    assert not repaired.notes


# --- a step cut before any request header never sent its request ---------------


def test_a_step_without_any_header_ends_unsent() -> None:
    session = Session("no-header")
    session.append("turn/start", {"turn": 0})
    session.append("user/message", user("hi"), surface_op="append")
    session.append("step/start", {"turn": 0, "step": 0})
    report = verify_jsonl(_jsonl(session), expected_id=session.id)
    assert report.ok, [str(p) for p in report.problems]
    assert any('"sent": false' in note for note in report.notes)
    assert rebuild_requests(session) == []
    *_, step_end, turn_end = repair_interrupted(session)
    assert step_end.data["sent"] is False
    assert step_end.data["error"]["type"] == "Interrupted"
    assert turn_end.data["reason"] == {"kind": "interrupted"}
    assert rebuild_requests(session) == []
    assert verify_jsonl(_jsonl(session), expected_id=session.id).ok


def test_a_torn_first_flush_repairs_to_a_log_that_rebuilds_at_every_byte(
    tmp_path: Path,
) -> None:
    """The first flush (turn, prompt, step, header, digest) cut at every byte offset."""
    store = JsonlStore(tmp_path / "whole")
    session = Session("first-flush")
    with store.create(session) as writer:
        session.append("turn/start", {"turn": 0})
        session.append("user/message", user("a prompt long enough to cut"), surface_op="append")
        session.append("step/start", {"turn": 0, "step": 0})
        session.append("request/header", {"header": HEADER, "reason": "initial"})
        writer.flush()
    data = store.path(session.id).read_bytes()
    first = data.index(b"\n") + 1  # the session header line, written at create
    unsent = sent = 0
    for cut in range(first, len(data) + 1):
        root = tmp_path / f"cut-{cut}"
        root.mkdir()
        (root / f"{session.id}.jsonl").write_bytes(data[:cut])
        cut_store = JsonlStore(root)
        resumed, cut_writer = cut_store.open(session.id)
        with cut_writer:
            repair_interrupted(resumed)
            cut_writer.flush()
        stored = cut_store.path(session.id).read_bytes()
        report = verify_jsonl(stored, expected_id=session.id)
        assert report.ok, (cut, [str(p) for p in report.problems])
        loaded = cut_store.load(session.id).session
        requests = rebuild_requests(loaded)
        ends = [e for e in loaded.events if e.type == "step/end"]
        if ends and ends[0].data.get("sent") is False:
            unsent += 1
            assert requests == [], cut
        elif ends:
            sent += 1
            assert [r.request.header.system for r in requests] == [HEADER["system"]], cut
    assert unsent > 100, (unsent, sent)
    assert sent > 10, (unsent, sent)


def _jsonl(session: Session) -> bytes:
    """The session's JSONL file, as a store writes it (no digests)."""
    header = b'{"format_version":0,"id":"' + session.id.encode() + b'","created":1}\n'
    return header + b"".join(e.encode() + b"\n" for e in session.events)


def test_a_writer_that_hands_tool_calls_to_its_client_leaves_them_to_it() -> None:
    """The proxy: the client runs the calls, and its next request brings the results."""
    session = Session("proxy-like")
    _asked_two_calls(session, logged=0)
    appended = repair_interrupted(session, run_tools=False)
    assert [e.type for e in appended] == ["step/end", "turn/end"]


def test_a_log_that_ends_handing_tool_calls_to_the_client_verifies() -> None:
    session = Session("handed-off")
    _asked_two_calls(session, logged=0)
    session.append("step/end", {"turn": 0, "step": 0})
    session.append("turn/end", {"turn": 0, "reason": {"kind": "tool_calls"}})
    report = verify_jsonl(_jsonl(session), expected_id=session.id)
    assert report.ok, [str(p) for p in report.problems]
