"""A packed event's record is a lossless codec of its line (issue 20: memory per message).

A session's fold keeps each event of ``PACKED_TYPES`` as one compact record
(type and chunk-kind codes, time, payload bytes) and makes a ``PackedEvent``
over it when the event is read. Whatever line a load or an append packs, the
event read back from the fold gives the same bytes, type, time, payload and
chunk kind, for every time JSON can hold (int64, and the uint64 range past it).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.log import _session_info, decode, encode
from tapelog.log._api import Session
from tapelog.log._events import (
    PACKED_TYPES,
    PackedEvent,
    chunk_kind,
    event_from_json,
    unpack_record,
)

_TIMES = st.one_of(
    st.integers(0, 2**41),  # epoch milliseconds
    st.integers(-(2**63), 2**64 - 1),  # anything a JSON int of the log may be
    st.sampled_from([-(2**63), 2**63 - 1, 2**63, 2**64 - 1, 0, -1]),
)
_TEXT = st.text(max_size=12)
_KINDS = st.one_of(st.sampled_from(["text", "tool_call", "usage", "finish", "error"]), _TEXT)


@st.composite
def packed_lines(draw: st.DrawFn) -> tuple[bytes, dict[str, Any]]:
    etype = draw(st.sampled_from(sorted(PACKED_TYPES)))
    data: dict[str, Any] = {"turn": draw(st.integers(0, 10**6)), "step": 1}
    if etype == "assistant/chunk":
        data["chunk"] = {"kind": draw(_KINDS), "text": draw(_TEXT)}
    else:
        data["note"] = draw(_TEXT)  # any payload: the codec does not judge it
    envelope = {"seq": draw(st.integers(0, 10**9)), "time": draw(_TIMES), "type": etype}
    envelope["data"] = data
    return encode(envelope), envelope


@settings(max_examples=300, deadline=None)
@given(packed_lines())
def test_an_event_read_from_its_record_is_its_line(case: tuple[bytes, dict[str, Any]]) -> None:
    line, envelope = case
    event = event_from_json(decode(line), decoded=True, line=line)
    assert type(event) is PackedEvent
    read = unpack_record(envelope["seq"], event._record)
    for got in (event, read):
        assert got.encode() == line
        assert (got.seq, got.time, got.type) == (
            envelope["seq"],
            envelope["time"],
            envelope["type"],
        )
        assert got.data == envelope["data"]
        assert got.surface_op is None
        assert got.source_seqs is None
        if envelope["type"] == "assistant/chunk":
            assert chunk_kind(got) == envelope["data"]["chunk"]["kind"]
    assert read == event


def test_a_session_keeps_records_and_reads_back_equal_events() -> None:
    session = Session("r", clock=lambda: 2**64 - 1)  # past int64: kept in decimal
    appended = [
        session.append("turn/start", {"turn": 1}),
        session.append("step/start", {"turn": 1, "step": 1}),
        session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"kind": "text"}}),
    ]
    assert list(session.events) == appended
    assert [e.encode() for e in reversed(session.events)] == [e.encode() for e in appended[::-1]]
    assert session.events[-1] == appended[-1]
    assert session.events[1:] == appended[1:]
    assert session.events[2].time == 2**64 - 1


def test_types_are_read_without_making_the_events(monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session("t", clock=lambda: 3)
    session.append("turn/start", {"turn": 1})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("step/start", {"turn": 1, "step": 1})
    expected = [e.type for e in session.events]

    def refused(*args: Any) -> Any:
        raise AssertionError("an event was made to read a type")

    monkeypatch.setattr(_session_info, "unpack_record", refused)
    monkeypatch.setattr(_session_info, "iter_events", refused)
    assert list(session.events.types()) == expected
    assert list(session.events.types(1)) == expected[1:]
    assert [session.events.type_at(s) for s in range(len(expected))] == expected
    with pytest.raises(AssertionError):
        list(session.events)  # the premise: reading events makes them


def test_slices_of_the_events_are_the_slices_of_a_list_of_them() -> None:
    session = Session("s", clock=lambda: 1)
    for turn in range(1, 4):
        session.append("turn/start", {"turn": turn})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    full = list(session.events)
    for cut in (slice(None), slice(2, 5), slice(-3, None), slice(None, None, 2), slice(5, 1, -1)):
        sliced = session.events[cut]
        assert sliced == full[cut]
        assert [e.seq for e in sliced] == [e.seq for e in full[cut]]
