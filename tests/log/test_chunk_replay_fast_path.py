"""A load checks a decoded ``assistant/chunk`` inline, and judges as the full path (issue 20).

Half of a log's events are chunks, so ``Session._replay_many`` checks a chunk
that a load just decoded in one expression (its payload's common shape,
:meth:`LogRules.passes_chunk`) instead of the per-event validation. Here logs
shaped like the loop's, with a chunk moved, duplicated or damaged, are judged
both ways: loaded from their bytes (the inline path) and replayed from events
built without their lines (plain events: every check the long way). Both must
accept the same logs, refuse with the same sentence, and ``verify`` must report
the same breaks as the long way's rule reports.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog import CorruptLogError, LogError, Session
from tapelog.log import encode
from tapelog.log._api import SessionInfo, event_from_json
from tapelog.store._api import read_session_bytes, verify_jsonl
from tapelog.store._format import header_line

Line = tuple[str, Any, Any]  # (type, data, surface_op)
SOURCE = {"provider": "openai", "model": "m"}


def _chunk(turn: Any, step: Any, chunk: Any = None) -> Line:
    return "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk or {"kind": "text"}}, None


def _turn(turn: int, steps: int, calls: bool, hand: bool) -> list[Line]:
    lines: list[Line] = [
        ("turn/start", {"turn": turn}, None),
        (
            "user/message",
            {"content": [{"type": "text", "text": "go"}], "source": {"kind": "user"}},
            "append",
        ),
    ]
    for step in range(1, steps + 1):
        cid = f"c{turn}.{step}"
        asks = [{"type": "tool_call", "id": cid, "name": "read", "arguments": "{}"}]
        content = asks if calls else [{"type": "text", "text": "ok"}]
        lines += [
            ("step/start", {"turn": turn, "step": step}, None),
            _chunk(turn, step),
            _chunk(turn, step, {"kind": "text", "text": "more"}),
            (
                "assistant/message",
                {"turn": turn, "step": step, "content": content, "source": SOURCE},
                "append",
            ),
        ]
        handing = calls and hand and step == steps
        if calls and not handing:
            result = {"turn": turn, "step": step, "call_id": cid, "content": "x", "is_error": False}
            lines.append(("tool/result", result, "append"))
        lines.append(("step/end", {"turn": turn, "step": step}, None))
        if handing:
            lines.append(_chunk(turn, step))  # after a step that hands calls on: refused
            return lines
    lines.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, None))
    return lines


_BAD_CHUNKS = st.sampled_from(
    [
        {"kind": 3},
        {},
        [],
        "text",
        None,
        {"kind": "text", "extra": [1, {"a": None}]},  # extra fields are carried: accepted
    ]
)


@st.composite
def logs(draw: st.DrawFn) -> tuple[int | None, list[Line]]:
    """A loop-shaped log with one chunk mutation (or none), and the fork seed length."""
    lines: list[Line] = []
    turns = draw(st.integers(1, 3))
    for turn in range(1, turns + 1):
        lines += _turn(
            turn,
            draw(st.integers(1, 2)),
            draw(st.booleans()),
            turn == turns and draw(st.booleans()),
        )
    if lines[-1][0] == "assistant/chunk" and draw(st.booleans()):
        lines.pop()  # the handing step ends the log cleanly
    chunks = [i for i, (t, _, _) in enumerate(lines) if t == "assistant/chunk"]
    mutation = draw(
        st.sampled_from(["none", "move", "other-step", "bad-payload", "bad-turn", "seed"])
    )
    at = draw(st.sampled_from(chunks))
    seed = None
    if mutation == "move":  # anywhere: before turn/start, between steps, after turn/end
        chunk = lines.pop(at)
        lines.insert(draw(st.integers(0, len(lines))), chunk)
    elif mutation == "other-step":
        _, data, _ = lines[at]
        lines[at] = _chunk(data["turn"], data["step"] + draw(st.sampled_from([1, -1])))
    elif mutation == "bad-payload":
        _, data, _ = lines[at]
        lines[at] = _chunk(data["turn"], data["step"], draw(_BAD_CHUNKS))
    elif mutation == "bad-turn":
        _, data, _ = lines[at]
        lines[at] = _chunk(draw(st.sampled_from(["1", None, 1.5, True])), data["step"])
    elif mutation == "seed":  # a fork whose seed ends at a chunk instead of its end-seed
        seed = at
    return seed, lines


def _envelopes(lines: list[Line]) -> list[dict[str, Any]]:
    out = []
    for seq, (etype, data, op) in enumerate(lines):
        envelope: dict[str, Any] = {"seq": seq, "time": 1, "type": etype, "data": data}
        if op is not None:
            envelope["surface_op"] = op
        out.append(envelope)
    return out


def _info(seed: int | None) -> SessionInfo:
    return SessionInfo(id="fast", created=1, parent="p" if seed else None, seed_length=seed)


def _long_way(
    seed: int | None, lines: list[Line], breaks: list[tuple[int, str]] | None
) -> str | None:
    """The verdict of replaying plain events (no packed line: every check in full)."""
    events = [event_from_json(e, where="event") for e in _envelopes(lines)]
    rule_breaks = None if breaks is None else lambda e, exc: breaks.append((e.seq, str(exc)))
    try:
        Session.from_info(_info(seed), events, rule_breaks=rule_breaks)
    except LogError as exc:
        return str(exc)
    return None


def _bytes(seed: int | None, lines: list[Line]) -> bytes:
    body = b"".join(encode(e) + b"\n" for e in _envelopes(lines))
    return header_line(_info(seed)) + b"\n" + body


@settings(max_examples=250, deadline=None)
@given(logs())
def test_a_load_judges_chunks_as_the_full_checks(case: tuple[int | None, list[Line]]) -> None:
    seed, lines = case
    expected = _long_way(seed, lines, None)
    data = _bytes(seed, lines)
    if expected is None:
        loaded, _ = read_session_bytes(data)
        assert [e.encode() for e in loaded.session.events] == data.split(b"\n")[1:-1]
    else:
        with pytest.raises(CorruptLogError) as refused:
            read_session_bytes(data)
        assert str(refused.value).endswith(expected)
    breaks: list[tuple[int, str]] = []
    if _long_way(seed, lines, breaks) is None:  # only rule breaks: verify lists each
        reported = [(p.seq, p.message) for p in verify_jsonl(data).problems]
        for seq, message in breaks:
            assert (seq, f"seq {seq}: {message}") in reported or (seq, message) in reported


def test_most_chunks_take_the_inline_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The premise: a clean load replays no chunk the long way, and (read in
    bulk) no turn or step marker and no appended message either."""
    lines = _turn(1, 2, calls=True, hand=False)
    long_way: list[str] = []
    replay = Session._replay

    def counted(self: Session, event: Any) -> None:
        long_way.append(event.type)
        replay(self, event)

    monkeypatch.setattr(Session, "_replay", counted)
    read_session_bytes(_bytes(None, lines))
    assert "assistant/chunk" not in long_way
    assert long_way == []
