"""The log's structural rules (``LogRules``): refused on append, on load, reported by verify.

Each rule is broken once and met three ways: ``Session.append`` refuses the
event and logs nothing, ``Session.from_events`` and a store's ``load`` refuse
the log in one line that names the seq (and line), and ``tapelog verify``
reports it. A property test then checks that logs shaped like the loop's are
accepted and that single mutations breaking nesting or pairing are refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _unruly import unruly
from tapelog import CorruptLogError, EventError, LogError, Session
from tapelog.log._api import repair_interrupted
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl
from tapelog.store._format import header_line

Step = tuple[str, dict[str, Any], Any]
SOURCE = {"provider": "openai", "model": "m"}


def _user(t: str = "go") -> Step:
    return (
        "user/message",
        {"content": [{"type": "text", "text": t}], "source": {"kind": "user"}},
        "append",
    )


def _asks(turn: int, step: int, *ids: str) -> Step:
    content = [{"type": "tool_call", "id": i, "name": "read", "arguments": "{}"} for i in ids]
    data = {"turn": turn, "step": step, "content": content or [{"type": "text", "text": "ok"}]}
    return "assistant/message", {**data, "source": SOURCE}, "append"


def _call(turn: int, step: int, cid: str) -> Step:
    return (
        "tool/call",
        {"turn": turn, "step": step, "call_id": cid, "name": "read", "arguments": "{}"},
        None,
    )


def _result(turn: int, step: int, cid: str) -> Step:
    data = {"turn": turn, "step": step, "call_id": cid, "content": "x", "is_error": False}
    return "tool/result", data, "append"


def _ev(etype: str, **data: Any) -> Step:
    return etype, data, None


def _turn_end(turn: int, kind: str = "completed") -> Step:
    return "turn/end", {"turn": turn, "reason": {"kind": kind}}, None


OPEN_STEP = [_ev("turn/start", turn=1), _user(), _ev("step/start", turn=1, step=1)]

# (name, events before, the event that breaks a rule, what the refusal says)
BREAKS: list[tuple[str, list[Step], Step, str]] = [
    (
        "two-open-turns",
        [_ev("turn/start", turn=1), _user()],
        _ev("turn/start", turn=2),
        "turn 2 starts while turn 1 (seq 0) is still open",
    ),
    ("stray-turn-end", [], _turn_end(1), "turn 1 ends, but no turn is open"),
    (
        "turn-end-other-turn",
        [_ev("turn/start", turn=1)],
        _turn_end(2),
        "turn 2 ends, but the open turn is turn 1 (seq 0)",
    ),
    (
        "turn-end-in-step",
        OPEN_STEP,
        _turn_end(1),
        "turn 1 ends while its step 1 (seq 2) is still open (no step/end)",
    ),
    (
        "step-outside-turn",
        [],
        _ev("step/start", turn=1, step=1),
        "step 1 of turn 1 starts outside any turn",
    ),
    (
        "step-in-other-turn",
        [_ev("turn/start", turn=1)],
        _ev("step/start", turn=2, step=1),
        "step 1 of turn 2 starts inside turn 1 (seq 0)",
    ),
    (
        "overlapping-steps",
        OPEN_STEP,
        _ev("step/start", turn=1, step=2),
        "step 2 of turn 1 starts while step 1 of turn 1 (seq 2) is still open",
    ),
    (
        "stray-step-end",
        [_ev("turn/start", turn=1)],
        _ev("step/end", turn=1, step=1),
        "step 1 of turn 1 ends, but no step is open",
    ),
    (
        "step-end-other-step",
        OPEN_STEP,
        _ev("step/end", turn=1, step=2),
        "step 2 of turn 1 ends, but the open step is step 1 of turn 1 (seq 2)",
    ),
    (
        "event-of-another-step",
        OPEN_STEP,
        _asks(1, 2),
        "this assistant/message of step 2 of turn 1 is logged inside step 1 of turn 1",
    ),
    (
        "result-without-call",
        OPEN_STEP,
        _result(1, 1, "nobody"),
        "this tool/result answers call 'nobody', but no tool call with that id is logged",
    ),
    (
        "step-ends-with-calls-not-handed-over",
        [*OPEN_STEP, _asks(1, 1, "c1"), _call(1, 1, "c1"), _ev("step/end", turn=1, step=1)],
        _turn_end(1),
        "step 1 of turn 1 ended (seq 5) with tool calls that have no result: c1 (seq 4)",
    ),
    (
        "request-with-unanswered-call",
        [
            _ev("turn/start", turn=1),
            _ev("step/start", turn=1, step=1),
            _asks(1, 1, "c1"),
            _ev("step/end", turn=1, step=1),
        ],
        _ev("step/start", turn=1, step=2),
        "this step's request would hold tool calls without their results (c1 (seq 2))",
    ),
    (
        "summary-with-unanswered-call",
        [_asks(0, 0, "c1")],
        _ev("compact/start", id="k", region=[0], instruction="sum up", max_tokens=9),
        "this compaction's summary request would hold tool calls without their results",
    ),
]
IDS = [name for name, *_ in BREAKS]


def _append_all(session: Session, steps: list[Step]) -> None:
    for etype, data, op in steps:
        session.append(etype, data, surface_op=op)


def _bytes(session: Session) -> bytes:
    return header_line(session.info) + b"\n" + b"".join(e.encode() + b"\n" for e in session.events)


@pytest.mark.parametrize(("name", "before", "bad", "says"), BREAKS, ids=IDS)
def test_append_refuses_the_break_and_logs_nothing(
    name: str, before: list[Step], bad: Step, says: str
) -> None:
    session = Session("rules", clock=lambda: 1)
    _append_all(session, before)
    published: list[int] = []
    session.subscribe(lambda e: published.append(e.seq))
    etype, data, op = bad
    with pytest.raises(EventError, match=re.escape(says)):
        session.append(etype, data, surface_op=op)
    assert len(session) == len(before)
    assert published == []
    # the log still takes what may come next (the refused event changed no state)
    assert Session.from_events(session.events).events == session.events


@pytest.mark.parametrize(("name", "before", "bad", "says"), BREAKS, ids=IDS)
def test_load_refuses_the_break_in_one_line(
    name: str, before: list[Step], bad: Step, says: str, tmp_path: Path
) -> None:
    session = unruly(Session("rules", created=1, clock=lambda: 1))
    _append_all(session, [*before, bad])
    seq = len(before)
    with pytest.raises(LogError, match=f"^seq {seq}: {re.escape(says)}"):
        Session.from_events(session.events)
    (tmp_path / "rules.jsonl").write_bytes(_bytes(session))
    with pytest.raises(CorruptLogError) as caught:
        JsonlStore(tmp_path).load("rules")
    message = str(caught.value)
    assert "\n" not in message
    assert f"line {seq + 2}: seq {seq}: {says}" in message


@pytest.mark.parametrize(("name", "before", "bad", "says"), BREAKS, ids=IDS)
def test_verify_reports_the_break(name: str, before: list[Step], bad: Step, says: str) -> None:
    session = unruly(Session("rules", created=1, clock=lambda: 1))
    _append_all(session, [*before, bad])
    report = verify_jsonl(_bytes(session), expected_id="rules")
    seq = len(before)
    assert not report.ok
    # (a log without request headers is also reported by the request walk: not our business here)
    assert any(f"line {seq + 2} (seq {seq}): {says}" in str(p) for p in report.problems)


def test_verify_reports_every_break_not_only_the_first() -> None:
    session = unruly(Session("rules", created=1, clock=lambda: 1))
    _append_all(session, [_turn_end(1), _ev("step/end", turn=1, step=1), _turn_end(2)])
    problems = [str(p) for p in verify_jsonl(_bytes(session), expected_id="rules").problems]
    assert [p.split(":")[0] for p in problems] == [
        "line 2 (seq 0)",
        "line 3 (seq 1)",
        "line 4 (seq 2)",
    ]


def test_a_fork_seed_must_end_with_its_end_seed() -> None:
    parent = Session("parent", clock=lambda: 1)
    _append_all(parent, [_ev("turn/start", turn=1), _user(), _turn_end(1)])
    child = parent.fork(2)
    assert child.events[3].type == "session/end-seed"
    seeded = Session("child", seed_length=3, clock=lambda: 1)
    for event in parent.events:
        seeded.replay(event)
    with pytest.raises(EventError, match="not the session/end-seed a fork logs after its seed"):
        seeded.append("turn/start", {"turn": 2})
    assert len(seeded) == 3


# --- what legitimately happens ----------------------------------------------------


def test_the_proxy_hands_its_calls_to_the_client_across_digests_and_turns() -> None:
    session = Session("proxy", clock=lambda: 1)
    digest = _ev("log/digest", bytes=10, sha256="0" * 64)
    _append_all(
        session,
        [
            *OPEN_STEP,
            _asks(1, 1, "c1"),
            _call(1, 1, "c1"),
            _ev("step/end", turn=1, step=1),
            digest,
            _turn_end(1, "tool_calls"),
            _ev("turn/start", turn=2),
            _result(2, 1, "c1"),
            _ev("step/start", turn=2, step=1),
            _asks(2, 1),
            _ev("step/end", turn=2, step=1),
            _turn_end(2),
        ],
    )
    assert session.rules.handed_over() == {"c1"}


def test_repair_closes_an_open_step_within_the_rules() -> None:
    session = Session("crash", clock=lambda: 1)
    _append_all(session, [*OPEN_STEP, _asks(1, 1, "c1", "c2"), _call(1, 1, "c1")])
    closing = repair_interrupted(session)
    assert [e.type for e in closing] == [
        "tool/call",
        "tool/result",
        "tool/result",
        "step/end",
        "turn/end",
    ]
    assert Session.from_events(session.events).events == session.events


# --- property: loop-shaped logs are accepted, single breaking mutations refused ----


@st.composite
def loop_logs(draw: st.DrawFn) -> list[Step]:
    """A log shaped like the loop's (and the proxy's): turns of steps whose
    assistant messages ask for calls that are logged and answered, with
    digests, context messages and compactions where they may come."""
    steps: list[Step] = []
    digest = _ev("log/digest", bytes=10, sha256="0" * 64)
    handed: list[str] = []
    for turn in range(1, draw(st.integers(1, 4)) + 1):
        if draw(st.booleans()):
            steps.append(_ev("compact/start", id=f"k{turn}"))
            steps.append(_ev("compact/end", id=f"k{turn}", ok=True))
        steps.append(_ev("turn/start", turn=turn))
        steps.append(_user())
        steps += [_result(turn, 1, cid) for cid in handed]  # the client's results
        handed = []
        n = draw(st.integers(1, 3))
        for step in range(1, n + 1):
            if draw(st.booleans()):
                note = {"content": [{"type": "text", "text": "note"}], "source": {"kind": "inject"}}
                steps.append(("context/message", note, "append"))
            steps.append(_ev("step/start", turn=turn, step=step))
            steps.append(
                (
                    "assistant/chunk",
                    {"turn": turn, "step": step, "chunk": {"kind": "text", "text": "."}},
                    None,
                )
            )
            ids = [f"t{turn}s{step}c{k}" for k in range(draw(st.integers(0, 3)))]
            steps.append(_asks(turn, step, *ids))
            steps += [_call(turn, step, cid) for cid in ids]
            last = step == n
            hand = last and bool(ids) and draw(st.booleans())
            if not hand:
                order = draw(st.permutations(ids))
                steps += [_result(turn, step, cid) for cid in order]
            if draw(st.booleans()):
                steps.append(digest)
            steps.append(_ev("step/end", turn=turn, step=step))
            if hand:
                handed = ids
                if draw(st.booleans()):
                    steps.append(digest)
        steps.append(_turn_end(turn, "tool_calls" if handed else "completed"))
    return steps


def _load(steps: list[Step]) -> Session:
    session = unruly(Session("prop", clock=lambda: 1))
    _append_all(session, steps)
    return Session.from_events(session.events)


@settings(max_examples=60, deadline=None)
@given(loop_logs())
def test_loop_shaped_logs_are_accepted(steps: list[Step]) -> None:
    session = Session("prop", clock=lambda: 1)
    _append_all(session, steps)  # every append passes the rules
    assert _load(steps).events == session.events


def _positions(steps: list[Step], etype: str) -> list[int]:
    return [i for i, (t, _, _) in enumerate(steps) if t == etype]


@settings(max_examples=80, deadline=None)
@given(loop_logs(), st.data())
def test_single_mutations_that_break_nesting_or_pairing_are_refused(
    steps: list[Step], data: st.DataObject
) -> None:
    mutations: list[str] = ["step-start-twice", "step/start-dropped", "result-before-call"]
    ends = _positions(steps, "turn/end")[:-1]
    if ends:
        mutations.append("turn/end-dropped")
    answered = _positions(steps, "tool/result")  # the step's own, or the client's next turn's
    if answered:
        mutations.append("result-dropped")
    kind = data.draw(st.sampled_from(mutations))
    mutated = list(steps)
    if kind == "step-start-twice":
        i = data.draw(st.sampled_from(_positions(steps, "step/start")))
        mutated.insert(i, steps[i])
    elif kind == "step/start-dropped":
        del mutated[data.draw(st.sampled_from(_positions(steps, "step/start")))]
    elif kind == "result-before-call":
        i = data.draw(st.sampled_from(_positions(steps, "step/start")))
        mutated.insert(i + 1, _result(steps[i][1]["turn"], steps[i][1]["step"], "never-asked"))
    elif kind == "turn/end-dropped":
        del mutated[data.draw(st.sampled_from(ends))]
    else:
        del mutated[data.draw(st.sampled_from(answered))]
    with pytest.raises(LogError):
        _load(mutated)


def test_a_fork_seed_without_its_end_seed_is_refused_on_load_and_reported_by_verify(
    tmp_path: Path,
) -> None:
    child = unruly(Session("child", created=1, parent="p", seed_length=1, clock=lambda: 1))
    _append_all(child, [_user(), _ev("turn/start", turn=1)])
    says = "this turn/start is not the session/end-seed a fork logs after its seed"
    with pytest.raises(LogError, match=f"^seq 1: .*{re.escape(says)}"):
        Session.from_info(child.info, child.events)
    (tmp_path / "child.jsonl").write_bytes(_bytes(child))
    with pytest.raises(CorruptLogError, match=f"^.*line 3: seq 1: .*{re.escape(says)}"):
        JsonlStore(tmp_path).load("child")
    problems = [str(p) for p in verify_jsonl(_bytes(child), expected_id="child").problems]
    assert any(p.startswith("line 3 (seq 1): ") and says in p for p in problems)
