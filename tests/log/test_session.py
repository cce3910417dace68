"""Session: listeners, the projection cache, surface replaces, seeds and forks."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tapelog import EventError, ForkError, FrozenError, ReentrantAppendError, SurfaceError
from tapelog.log import encode
from tapelog.log._api import Event, Session, derive_event_message
from tapelog.log._projection import fold_messages

from ._builders import VALID, assistant, sample_session, ticking_clock, tool_result, user

# --- listeners ---------------------------------------------------------------


def test_listeners_see_the_logged_event_after_commit() -> None:
    session = Session("s", clock=lambda: 7)
    seen: list[tuple[Event, int, Event]] = []
    session.subscribe(lambda e: seen.append((e, len(session), session.events[-1])))
    event = session.append("turn/start", {"turn": 0})
    assert len(seen) == 1
    got, length, last = seen[0]
    assert got is event
    assert last == event  # committed before it is published (a packed event: an equal copy)
    assert length == 1


def test_unsubscribe_stops_the_calls() -> None:
    session = Session("s", clock=lambda: 7)
    seen: list[int] = []
    unsubscribe = session.subscribe(lambda e: seen.append(e.seq))
    session.append("turn/start", {"turn": 0})
    unsubscribe()
    unsubscribe()  # twice is harmless
    session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
    assert seen == [0]


def test_an_append_from_a_listener_is_refused() -> None:
    session = Session("s", clock=lambda: 7)
    caught: list[Exception] = []

    def listener(event: Event) -> None:
        try:
            session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
        except ReentrantAppendError as exc:
            caught.append(exc)

    session.subscribe(listener)
    session.append("turn/start", {"turn": 0})
    assert len(caught) == 1
    assert str(caught[0]) == (
        "cannot append 'turn/end' while another event is being published to listeners; "
        "append after the listener returns"
    )
    assert [e.type for e in session.events] == ["turn/start"]
    # Publishing is over: appending works again.
    session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
    assert len(caught) == 2  # the listener tried again on the second event
    assert len(session) == 2


def test_a_failing_listener_does_not_undo_the_commit_or_starve_others() -> None:
    session = Session("s", clock=lambda: 7)
    seen: list[int] = []

    def broken(event: Event) -> None:
        raise RuntimeError("disk full")

    session.subscribe(broken)
    session.subscribe(lambda e: seen.append(e.seq))
    with pytest.raises(RuntimeError, match="disk full"):
        session.append("turn/start", {"turn": 0})
    assert seen == [0]
    assert len(session) == 1


# --- the projection cache ----------------------------------------------------


def test_derive_messages_is_a_fresh_list_over_shared_frozen_messages() -> None:
    session = sample_session()
    first = session.derive_messages()
    second = session.derive_messages()
    assert first is not second
    assert first == second
    assert all(a is b for a, b in zip(first, second, strict=True))
    first.append(first[0])  # the list is the caller's own
    assert len(session.derive_messages()) == len(second)
    with pytest.raises(FrozenError, match="FrozenDict is frozen"):
        second[0]["role"] = "assistant"
    with pytest.raises(FrozenError, match="FrozenList is frozen"):
        second[0]["content"].append({"type": "text", "text": "x"})


def test_projection_of_each_surface_type() -> None:
    session = sample_session()
    assert session.derive_nodes() == [
        (2, {"role": "user", "content": [{"type": "text", "text": "read a"}]}),
        (
            5,
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_call", "id": "c0", "name": "read", "arguments": '{"path":"a"}'}
                ],
            },
        ),
        (
            7,
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_call_id": "c0",
                        "content": "file text",
                        "is_error": False,
                    }
                ],
            },
        ),
        (10, {"role": "assistant", "content": [{"type": "text", "text": "done"}]}),
    ]
    context = session.append("context/message", VALID["context/message"], surface_op="append")
    assert derive_event_message(context) == {
        "role": "user",
        "content": VALID["context/message"]["content"],
    }
    empty = session.append("assistant/message", assistant(""), surface_op="append")
    assert derive_event_message(empty) is None
    assert session.surface[-1] == empty.seq  # on the surface, but shows nothing
    assert derive_event_message(session.event(0)) is None
    assert derive_event_message(session.event(6)) is None


def test_new_nodes_are_projected_once_and_a_replace_rebuilds() -> None:
    session = sample_session()
    before = session.derive_messages()
    session.append("user/message", user("next"), surface_op="append")
    grown = session.derive_messages()
    assert len(grown) == len(before) + 1
    assert all(a is b for a, b in zip(before, grown, strict=False))
    generation = session.replace_generation
    session.append(
        "tool/result",
        tool_result(content="[trimmed]"),
        surface_op={"op": "replace", "start": 7, "end": 7},
    )
    assert session.replace_generation == generation + 1
    rebuilt = session.derive_messages()
    assert rebuilt == fold_messages(session.event(s) for s in session.surface)
    assert rebuilt[2]["content"][0]["content"] == "[trimmed]"
    assert encode(rebuilt) != encode(grown)


# --- surface replaces --------------------------------------------------------


def _replace(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "start": start, "end": end}


@pytest.mark.parametrize(
    ("etype", "data", "op", "message"),
    [
        (
            "user/message",
            user(),
            _replace(3, 7),
            "replace start seq 3 is not on the current surface",
        ),
        (
            "user/message",
            user(),
            _replace(2, 40),
            "replace end seq 40 is not on the current surface",
        ),
        (
            "user/message",
            user(),
            _replace(-1, 2),
            "replace start seq -1 is not on the current surface",
        ),
        (
            "user/message",
            user(),
            _replace(7, 2),
            "replace start seq 7 comes after end seq 2 on the surface",
        ),
        (
            "tool/result",
            tool_result(),
            _replace(5, 7),
            "a tool/result may only replace a single tool/result node (trimming)",
        ),
        (
            "tool/result",
            tool_result(),
            _replace(10, 10),
            "a tool/result may only replace a single tool/result node (trimming)",
        ),
        (
            "tool/result",
            tool_result("c9"),
            _replace(7, 7),
            "trimming must keep call_id 'c0', got 'c9'",
        ),
        (
            "tool/result",
            tool_result(is_error=True),
            _replace(7, 7),
            "trimming may change only content; is_error changed",
        ),
        (
            "tool/result",
            tool_result(content="", error="gone", step=3),
            _replace(7, 7),
            "trimming may change only content; error, step changed",
        ),
    ],
)
def test_illegal_replaces(etype: str, data: Any, op: Any, message: str) -> None:
    session = sample_session()
    with pytest.raises(SurfaceError, match=re.escape(message)):
        session.append(etype, data, surface_op=op)


def test_a_replaced_node_is_gone_from_the_surface() -> None:
    session = sample_session()
    compact = session.append(
        "user/message",
        {"content": [{"type": "text", "text": "summary"}], "source": {"kind": "compaction"}},
        surface_op=_replace(2, 7),
        source_seqs=[2, 5, 7],
    )
    assert session.surface == [compact.seq, 10]
    assert session.replace_generation == 1
    assert compact.source_seqs == [2, 5, 7]
    with pytest.raises(SurfaceError, match="replace start seq 5 is not on the current surface"):
        session.append("user/message", user(), surface_op=_replace(5, 5))
    # A replace may span the replacing node itself; the generation never resets.
    again = session.append("user/message", user("all"), surface_op=_replace(compact.seq, 10))
    assert session.surface == [again.seq]
    assert session.replace_generation == 2
    assert [m["content"][0]["text"] for m in session.derive_messages()] == ["all"]


def test_trimming_replaces_only_the_content() -> None:
    session = sample_session()
    trimmed = session.append(
        "tool/result",
        tool_result(content=[{"type": "text", "text": "[trimmed]"}]),
        surface_op=_replace(7, 7),
    )
    assert session.surface == [2, 5, trimmed.seq, 10]
    assert session.derive_messages()[2]["content"][0]["content"] == [
        {"type": "text", "text": "[trimmed]"}
    ]


# --- seeds -------------------------------------------------------------------


def _lines(session: Session) -> list[dict[str, Any]]:
    return [dict(e.to_json()) for e in session.events]


def test_from_events_rebuilds_the_same_session_from_events_or_json() -> None:
    original = sample_session()
    original.append(
        "tool/result", tool_result(content="[t]"), surface_op=_replace(7, 7), source_seqs=[7]
    )
    for seed in (original.events, _lines(original)):
        copy = Session.from_events(seed, id="copy")
        assert [e.encode() for e in copy.events] == [e.encode() for e in original.events]
        assert copy.surface == original.surface
        assert copy.replace_generation == original.replace_generation
        assert copy.header == original.header
        assert copy.derive_messages() == original.derive_messages()


@pytest.mark.parametrize(
    ("mangle", "error", "message"),
    [
        (lambda ls: ls.pop(3), EventError, "event 3: seq must be 3 (contiguous from 0), got 4"),
        (
            lambda ls: ls.__setitem__(
                1, {"time": 1, "seq": 1, "type": "turn/start", "data": {"turn": 0}}
            ),
            EventError,
            "event 1: envelope keys must be in the order seq, time, type, data",
        ),
        (
            lambda ls: ls[1].update(extra=1),
            EventError,
            "event 1: unknown envelope key 'extra'",
        ),
        (lambda ls: ls[1].pop("data"), EventError, "event 1: envelope is missing 'data'"),
        (
            lambda ls: ls[1].update(type="turn/begin"),
            EventError,
            "event 1: unknown event type 'turn/begin'; this version of tapelog reads format "
            "version 0 types only",
        ),
        (
            lambda ls: ls[1].update(seq=-1),
            EventError,
            "event 1: seq must be a non-negative integer, got -1",
        ),
        (
            lambda ls: ls[1].update(time="now"),
            EventError,
            "event 1: time must be an integer (epoch ms), got 'now'",
        ),
        (lambda ls: ls[1].update(data=[]), EventError, "event 1: data must be a JSON object"),
        (
            lambda ls: ls.__setitem__(1, [1]),
            EventError,
            "event 1: an event must be a JSON object, got list",
        ),
        (
            lambda ls: ls[1].update(surface_op=None),
            EventError,
            "event 1: surface_op must be left out rather than null",
        ),
        (lambda ls: ls[1].update(data={}), EventError, "seq 1: turn/start: data.turn is required"),
        (
            lambda ls: ls[1].update(surface_op="append"),
            EventError,
            "seq 1: turn/start is not a surface event and must not carry a surface_op",
        ),
        (
            lambda ls: ls[7].update(surface_op=_replace(3, 3)),
            SurfaceError,
            "seq 7: replace start seq 3 is not on the current surface",
        ),
    ],
)
def test_seeds_are_held_to_the_append_rules(
    mangle: Any, error: type[Exception], message: str
) -> None:
    lines = _lines(sample_session())
    mangle(lines)
    with pytest.raises(error, match=re.escape(message)):
        Session.from_events(lines)


def test_a_seed_that_starts_with_a_delta_is_refused_once_with_its_seq() -> None:
    lines = [
        {"seq": 0, "time": 1, "type": "request/header-delta", "data": VALID["request/header-delta"]}
    ]
    with pytest.raises(
        Exception,
        match=r"^seq 0: request/header-delta before any request/header snapshot; log a full",
    ):
        Session.from_events(lines)


# --- forks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "message"),
    [
        (-1, "cannot fork at seq -1: the session has seqs 0..12"),
        (13, "cannot fork at seq 13: the session has seqs 0..12"),
        ("3", "cannot fork at seq '3': the session has seqs 0..12"),
        (
            1,
            "cannot fork at seq 1: turn 0 is still open there; fork at or after its turn/end, "
            "or before its turn/start",
        ),
        (11, "cannot fork at seq 11: turn 0 is still open there"),
    ],
)
def test_illegal_fork_boundaries(at: Any, message: str) -> None:
    with pytest.raises(ForkError, match=re.escape(message)):
        sample_session().fork(at)


@pytest.mark.parametrize("at", [0, 12])
def test_a_fork_carries_the_seed_and_marks_where_it_ends(at: int) -> None:
    parent = Session.from_events(sample_session().events, id="parent", cwd="/work")
    child = parent.fork(at, id="child")
    assert child.id == "child"
    assert child.info.parent == "parent"
    assert child.info.seed_length == at + 1
    assert child.info.cwd == "/work"
    assert [e.encode() for e in child.events[: at + 1]] == [
        e.encode() for e in parent.events[: at + 1]
    ]
    end = child.events[at + 1]
    assert end.type == "session/end-seed"
    assert end.data == {"parent": "parent", "seed_length": at + 1}
    assert len(child) == at + 2
    assert child.header == parent.header
    reference = Session.from_events(parent.events[: at + 1])
    assert child.derive_messages() == reference.derive_messages()
    # The parent is untouched and the child appends on its own.
    assert len(parent) == 13
    child.append("turn/start", {"turn": 1})
    assert len(parent) == 13


def test_a_fork_gets_a_fresh_id_by_default() -> None:
    parent = sample_session()
    child = parent.fork(12)
    assert child.id != parent.id
    assert child.info.parent == parent.id


def test_session_ids_and_clock() -> None:
    session = Session(clock=ticking_clock(100))
    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{8}", session.id)
    assert session.info.created == 101
    assert session.append("turn/start", {"turn": 0}).time == 102


def test_a_user_message_projects_its_role_and_fields() -> None:
    session = sample_session()
    content = [{"type": "text", "text": "Be terse."}]
    data = {"content": content, "source": {"kind": "client"}, "role": "developer"}
    dev = session.append("user/message", {**data, "fields": {"name": "ops"}}, surface_op="append")
    assert derive_event_message(dev) == {
        "role": "developer",
        "content": content,
        "fields": {"name": "ops"},
    }
    # An assistant message with no content but other members still shows.
    only = session.append(
        "assistant/message",
        {**assistant(""), "fields": {"refusal": "no"}},
        surface_op="append",
    )
    assert derive_event_message(only) == {
        "role": "assistant",
        "content": [],
        "fields": {"refusal": "no"},
    }
