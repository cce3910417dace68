"""Session.append: every rejection says what is wrong, and leaves nothing behind."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tapelog import EventError, HeaderError, JsonValueError, SurfaceError, TapelogError
from tapelog.log import encode
from tapelog.log._api import Session
from tapelog.log._events import EVENT_TYPES, SURFACE_TYPES

from ._builders import HEADER, VALID, sample_session, text, tool_result, user

SURFACE = {"surface_op": "append"}


def _with(etype: str, **changes: Any) -> dict[str, Any]:
    data = dict(VALID[etype])
    for key, value in changes.items():
        if value is _DROP:
            del data[key]
        else:
            data[key] = value
    return data


_DROP = object()

# (type, data, surface_op given?, error, message)
PAYLOAD_CASES: list[tuple[str, Any, type[TapelogError], str]] = [
    (
        "turn/start",
        _with("turn/start", turn=_DROP),
        EventError,
        "turn/start: data.turn is required",
    ),
    (
        "turn/start",
        _with("turn/start", turn="1"),
        EventError,
        "turn/start: data.turn must be an integer, got a string",
    ),
    (
        "turn/start",
        _with("turn/start", turn=True),
        EventError,
        "turn/start: data.turn must be an integer, got a boolean",
    ),
    ("turn/end", _with("turn/end", reason=_DROP), EventError, "turn/end: data.reason is required"),
    (
        "turn/end",
        _with("turn/end", reason="done"),
        EventError,
        "turn/end: data.reason must be an object, got a string",
    ),
    (
        "turn/end",
        _with("turn/end", reason={"kind": ""}),
        EventError,
        "turn/end: data.reason.kind must be a non-empty string",
    ),
    (
        "step/start",
        _with("step/start", step=_DROP),
        EventError,
        "step/start: data.step is required",
    ),
    (
        "step/end",
        _with("step/end", turn=None),
        EventError,
        "step/end: data.turn must be an integer, got null",
    ),
    (
        "user/message",
        _with("user/message", content=_DROP),
        EventError,
        "user/message: data.content is required",
    ),
    (
        "user/message",
        _with("user/message", content="hi"),
        EventError,
        "user/message: data.content must be a list, got a string",
    ),
    (
        "user/message",
        _with("user/message", source=_DROP),
        EventError,
        "user/message: data.source is required",
    ),
    (
        "context/message",
        _with("context/message", source={"kind": ""}),
        EventError,
        "context/message: data.source.kind must be a non-empty string",
    ),
    (
        "user/message",
        _with("user/message", content=["hi"]),
        EventError,
        "user/message: data.content[0] must be an object, got a string",
    ),
    (
        "user/message",
        _with("user/message", content=[{"type": "video"}]),
        EventError,
        "user/message: data.content[0].type must be one of image, item, openai_part, reasoning, "
        "text, tool_call, tool_result, wire, got 'video'",
    ),
    (
        "user/message",
        _with("user/message", role="assistant"),
        EventError,
        "user/message: data.role must be one of developer, system (absent: user), got 'assistant'",
    ),
    (
        "context/message",
        _with("context/message", role="developer"),
        EventError,
        "context/message: data.role must be one of developer, system",
    ),
    (
        "user/message",
        _with("user/message", fields=["name"]),
        EventError,
        "user/message: data.fields must be an object, got a list",
    ),
    (
        "user/message",
        _with("user/message", content=[*text("a"), {"type": "text"}]),
        EventError,
        "user/message: data.content[1].text is required in a text block",
    ),
    (
        "user/message",
        _with("user/message", content=[{"type": "text", "text": 3}]),
        EventError,
        "user/message: data.content[0].text has the wrong type (an integer)",
    ),
    (
        "user/message",
        _with("user/message", content=[{"type": "reasoning", "text": "", "signature": 1}]),
        EventError,
        "user/message: data.content[0].signature must be a string",
    ),
    (
        "user/message",
        _with("user/message", content=[{"type": "image", "media_type": "image/png"}]),
        EventError,
        "user/message: data.content[0] needs a base64 'data' string or a 'url' string",
    ),
    (
        "user/message",
        _with(
            "user/message",
            content=[
                {"type": "tool_result", "tool_call_id": "c", "content": [{}], "is_error": False}
            ],
        ),
        EventError,
        "user/message: data.content[0].content[0].type must be one of",
    ),
    (
        "assistant/chunk",
        _with("assistant/chunk", chunk=_DROP),
        EventError,
        "assistant/chunk: data.chunk is required",
    ),
    (
        "assistant/chunk",
        _with("assistant/chunk", chunk={"text": "x"}),
        EventError,
        "assistant/chunk: data.chunk.kind must be a string",
    ),
    (
        "assistant/message",
        _with("assistant/message", step=_DROP),
        EventError,
        "assistant/message: data.step is required",
    ),
    (
        "assistant/message",
        _with("assistant/message", source={"provider": "openai"}),
        EventError,
        "assistant/message: data.source.model must be a string",
    ),
    (
        "assistant/message",
        _with(
            "assistant/message",
            content=[{"type": "tool_call", "id": "c", "name": "n", "arguments": {}}],
        ),
        EventError,
        "assistant/message: data.content[0].arguments has the wrong type (an object)",
    ),
    (
        "assistant/message",
        _with("assistant/message", usage=[1]),
        EventError,
        "assistant/message: data.usage must be an object",
    ),
    (
        "assistant/message",
        _with("assistant/message", interrupted="yes"),
        EventError,
        "assistant/message: data.interrupted must be a boolean",
    ),
    (
        "tool/call",
        _with("tool/call", call_id=_DROP),
        EventError,
        "tool/call: data.call_id is required",
    ),
    ("tool/call", _with("tool/call", name=7), EventError, "tool/call: data.name must be a string"),
    (
        "tool/call",
        _with("tool/call", arguments={"path": "a"}),
        EventError,
        "tool/call: data.arguments must be a string, got an object",
    ),
    (
        "tool/result",
        _with("tool/result", content=3),
        EventError,
        "tool/result: data.content must be a string or a list, got an integer",
    ),
    (
        "tool/result",
        _with("tool/result", is_error=_DROP),
        EventError,
        "tool/result: data.is_error is required",
    ),
    (
        "tool/result",
        _with("tool/result", error=5),
        EventError,
        "tool/result: data.error must be a string or an object",
    ),
    (
        "tool/result",
        _with("tool/result", content=[{"type": "text"}]),
        EventError,
        "tool/result: data.content[0].text is required in a text block",
    ),
    (
        "request/header",
        _with("request/header", header=_DROP),
        EventError,
        "request/header: data.header is required",
    ),
    (
        "request/header",
        _with("request/header", reason="restart"),
        EventError,
        "request/header: data.reason must be one of initial, resume, fallback, got 'restart'",
    ),
    (
        "request/header",
        _with("request/header", header={"system": "x"}),
        HeaderError,
        "header.config is required",
    ),
    (
        "request/header",
        _with("request/header", header={**HEADER, "tools": [{"name": "a"}, {"name": "a"}]}),
        HeaderError,
        "header.tools has two tools named 'a'",
    ),
    (
        "request/header",
        _with(
            "request/header", header={**HEADER, "config": {"provider": "p", "model": "m", "x": 1}}
        ),
        HeaderError,
        "header.config has an unknown field 'x'",
    ),
    (
        "request/header-delta",
        {},
        EventError,
        "request/header-delta: a delta needs at least one of system, tools, config, prefix",
    ),
    (
        "request/header-delta",
        {"config": {"provider": "p", "model": "m"}, "reason": "x"},
        EventError,
        "request/header-delta: unknown delta field 'reason'",
    ),
    (
        "session/origin",
        {"parent_seq": 3, "client": {"signal": "session_id", "id": "c"}},
        EventError,
        "session/origin: data.parent_seq needs data.parent",
    ),
    (
        "session/origin",
        {"why": "x"},
        EventError,
        "session/origin: an origin needs a parent or a client",
    ),
    (
        "session/origin",
        {"client": {"signal": "prompt_cache_key"}},
        EventError,
        "session/origin: data.client needs string signal and id",
    ),
    (
        "compact/summary",
        _with("compact/summary", max_tokens="100"),
        EventError,
        "compact/summary: data.max_tokens must be an integer, got a string",
    ),
    (
        "compact/summary",
        _with("compact/summary", provider=_DROP),
        EventError,
        "compact/summary: data.provider is required",
    ),
]


def _append(session: Session, etype: str, data: Any, **kw: Any) -> None:
    if etype in SURFACE_TYPES and "surface_op" not in kw:
        kw["surface_op"] = "append"
    session.append(etype, data, **kw)


def test_every_event_type_has_a_valid_example_and_accepts_it() -> None:
    assert set(VALID) == EVENT_TYPES
    session = Session("s", clock=lambda: 5)
    # In an order the loop could log them (the structural rules hold too).
    order = [
        "session/origin",
        "session/end-seed",
        "compact/start",
        "compact/summary",
        "compact/end",
        "turn/start",
        "user/message",
        "context/message",
        "step/start",
        "request/header",
        "request/header-delta",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/approval",
        "tool/result",
        "step/end",
        "log/digest",
        "turn/end",
    ]
    assert sorted(order) == sorted(EVENT_TYPES)
    for etype in order:
        _append(session, etype, VALID[etype])
    assert [e.seq for e in session.events] == list(range(len(EVENT_TYPES)))
    assert all(e.time == 5 for e in session.events)


@pytest.mark.parametrize(("etype", "data", "error", "message"), PAYLOAD_CASES)
def test_payload_rules(etype: str, data: Any, error: type[Exception], message: str) -> None:
    session = sample_session()
    with pytest.raises(error, match=re.escape(message)):
        _append(session, etype, data)


ENVELOPE_CASES: list[tuple[str, Any, dict[str, Any], type[Exception], str]] = [
    ("foo/bar", {}, {}, EventError, "unknown event type 'foo/bar'; known types: assistant/chunk"),
    (5, {}, {}, EventError, "event type must be a string, got 5"),  # type: ignore[list-item]
    ("turn/start", [0], {}, EventError, "turn/start: data must be a JSON object"),
    (
        "turn/start",
        {"turn": 0, "x": float("nan")},
        {},
        JsonValueError,
        "data.x: nan is not valid JSON",
    ),
    (
        "turn/start",
        {"turn": 0},
        {"surface_op": "append"},
        EventError,
        "turn/start is not a surface event and must not carry a surface_op",
    ),
    (
        "tool/call",
        VALID["tool/call"],
        {"source_seqs": [0]},
        EventError,
        "tool/call is not a surface event and must not carry source_seqs",
    ),
    (
        "user/message",
        user(),
        {"surface_op": None},
        EventError,
        "user/message is a surface event and needs a surface_op",
    ),
    (
        "user/message",
        user(),
        {"surface_op": "prepend"},
        SurfaceError,
        "surface_op must be \"append\" or a replace object, got 'prepend'",
    ),
    (
        "user/message",
        user(),
        {"surface_op": {"op": "replace", "start": 2}},
        SurfaceError,
        'surface_op must be "append" or {"op": "replace", "start": S, "end": E}',
    ),
    (
        "user/message",
        user(),
        {"surface_op": {"op": "delete", "start": 2, "end": 2}},
        SurfaceError,
        'surface_op must be "append" or {"op": "replace", "start": S, "end": E}',
    ),
    (
        "user/message",
        user(),
        {"surface_op": {"op": "replace", "start": "2", "end": 2}},
        SurfaceError,
        "surface_op replace start and end must be integer seqs",
    ),
    (
        "user/message",
        user(),
        {"surface_op": "append", "source_seqs": [2, 99]},
        EventError,
        "user/message: source_seqs must name earlier events, got 99 at seq 13",
    ),
    (
        "user/message",
        user(),
        {"surface_op": "append", "source_seqs": [-1]},
        EventError,
        "user/message: source_seqs must name earlier events, got -1 at seq 13",
    ),
    (
        "user/message",
        user(),
        {"surface_op": "append", "source_seqs": [True]},
        EventError,
        "user/message: source_seqs must name earlier events, got True at seq 13",
    ),
    (
        "user/message",
        user(),
        {"surface_op": "append", "source_seqs": ["2"]},
        EventError,
        "user/message: source_seqs must name earlier events, got '2' at seq 13",
    ),
    (
        "request/header-delta",
        {"tools": {"remove": ["write"]}},
        {},
        HeaderError,
        "delta.tools removes 'write', which the header does not have",
    ),
    (
        "request/header-delta",
        {"system": {"keep_start": 5, "keep_end": 0, "insert": []}},
        {},
        HeaderError,
        "delta.system keeps 5+0 lines of a 2-line prompt",
    ),
    (
        "request/header-delta",
        {"tools": {"add": [{"name": "read"}]}},
        {},
        HeaderError,
        "delta.tools adds 'read', which the header already has",
    ),
]


@pytest.mark.parametrize(("etype", "data", "kw", "error", "message"), ENVELOPE_CASES)
def test_envelope_and_surface_op_rules(
    etype: str, data: Any, kw: dict[str, Any], error: type[Exception], message: str
) -> None:
    session = sample_session()
    with pytest.raises(error, match=re.escape(message)):
        session.append(etype, data, **kw)


def test_a_delta_before_any_snapshot_is_refused() -> None:
    session = Session("s", clock=lambda: 0)
    with pytest.raises(
        HeaderError,
        match=r"^request/header-delta before any request/header snapshot; log a full",
    ):
        session.append("request/header-delta", VALID["request/header-delta"])
    assert len(session) == 0


def _state(session: Session) -> tuple[Any, ...]:
    return (
        [e.encode() for e in session.events],
        session.surface,
        session.replace_generation,
        None if session.header is None else encode(session.header.to_json()),
        session.seq,
    )


ALL_BAD: list[tuple[str, Any, dict[str, Any]]] = [(c[0], c[1], {}) for c in PAYLOAD_CASES] + [
    (c[0], c[1], c[2]) for c in ENVELOPE_CASES
]


@pytest.mark.parametrize(("etype", "data", "kw"), ALL_BAD)
def test_a_failed_append_leaves_nothing_behind(etype: str, data: Any, kw: dict[str, Any]) -> None:
    session = sample_session()
    # A replace makes the surface and cache non-trivial; derive fills the cache.
    session.append(
        "tool/result",
        tool_result(content="[trimmed]"),
        surface_op={"op": "replace", "start": 7, "end": 7},
    )
    messages = session.derive_messages()
    before = _state(session)
    if etype in SURFACE_TYPES and "surface_op" not in kw:
        kw = {"surface_op": "append"}
    with pytest.raises(TapelogError):
        session.append(etype, data, **kw)
    assert _state(session) == before
    after = session.derive_messages()
    assert after == messages
    assert all(a is b for a, b in zip(after, messages, strict=True))
    assert session.append("turn/start", {"turn": 1}).seq == before[-1]


def test_a_failed_replace_leaves_the_surface_as_it_was() -> None:
    session = sample_session()
    messages = session.derive_messages()
    before = _state(session)
    with pytest.raises(SurfaceError, match="trimming must keep call_id"):
        session.append(
            "tool/result",
            tool_result("other"),
            surface_op={"op": "replace", "start": 7, "end": 7},
        )
    assert _state(session) == before
    assert session.derive_messages() == messages


def test_append_returns_the_logged_frozen_event() -> None:
    session = Session("s", clock=lambda: 42)
    data: dict[str, Any] = {"content": text("hi"), "source": {"kind": "user"}}
    event = session.append("user/message", data, surface_op="append", source_seqs=[])
    data["content"][0]["text"] = "changed"  # the caller's copy is not the logged one
    assert event is session.events[0]
    assert event.data["content"][0]["text"] == "hi"
    assert event.encode() == (
        b'{"seq":0,"time":42,"type":"user/message","data":{"content":[{"type":"text",'
        b'"text":"hi"}],"source":{"kind":"user"}},"surface_op":"append","source_seqs":[]}'
    )
