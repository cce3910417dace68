"""assemble_message: arbitrary splits join back exactly; order and flags."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.llm._api import assemble_message
from tapelog.llm._types import normalise_usage


def _split(value: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(value)) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(value[start:point])
        start = point
    pieces.append(value[start:])
    return pieces


@settings(max_examples=80, deadline=None)
@given(
    reasoning=st.text(min_size=1),
    answer=st.text(min_size=1),
    arguments=st.text(),
    cuts=st.lists(st.integers(0, 40), max_size=6),
)
def test_arbitrary_splits_join_back_exactly(
    reasoning: str, answer: str, arguments: str, cuts: list[int]
) -> None:
    chunks: list[dict[str, Any]] = [
        {"kind": "reasoning", "text": p} for p in _split(reasoning, cuts)
    ]
    chunks += [{"kind": "text", "text": p} for p in _split(answer, cuts)]
    pieces = _split(arguments, cuts)
    chunks.append(
        {"kind": "tool_call", "index": 0, "id": "c1", "name": "f", "arguments": pieces[0]}
    )
    chunks += [{"kind": "tool_call", "index": 0, "arguments": p} for p in pieces[1:]]
    chunks.append({"kind": "finish", "reason": "tool_calls", "raw": "tool_calls"})
    message = assemble_message(chunks)
    assert message.content == [
        {"type": "reasoning", "text": reasoning},
        {"type": "text", "text": answer},
        {"type": "tool_call", "id": "c1", "name": "f", "arguments": arguments},
    ]
    assert message.finish == "tool_calls"
    assert not message.interrupted


def test_blocks_keep_first_appearance_order_and_indexes_separate_blocks() -> None:
    usage = normalise_usage(input=3, output=2)
    chunks = [
        {"kind": "reasoning", "index": 0, "text": "think"},
        {"kind": "reasoning_signature", "index": 0, "signature": "s1"},
        {"kind": "text", "index": 1, "text": "a"},
        {"kind": "tool_call", "index": 2, "id": "t1", "name": "f", "arguments": ""},
        {"kind": "text", "index": 3, "text": "b"},
        {"kind": "tool_call", "index": 2, "arguments": '{"x":1}'},
        {"kind": "reasoning_redacted", "index": 4, "data": "opaque"},
        {"kind": "error", "attempt": 1, "message": "ignored"},
        {"kind": "usage", "usage": usage},
        {"kind": "finish", "reason": "stop", "raw": "end_turn"},
    ]
    message = assemble_message(chunks)
    assert message.content == [
        {"type": "reasoning", "text": "think", "signature": "s1"},
        {"type": "text", "text": "a"},
        {"type": "tool_call", "id": "t1", "name": "f", "arguments": '{"x":1}'},
        {"type": "text", "text": "b"},
        {"type": "reasoning", "text": "", "data": "opaque"},
    ]
    assert message.usage == usage
    assert (message.finish, message.finish_raw) == ("stop", "end_turn")


def test_no_finish_means_interrupted_and_calls_without_id_get_one() -> None:
    message = assemble_message(
        [
            {"kind": "text", "text": ""},
            {"kind": "tool_call", "index": 0, "name": "f", "arguments": "{"},
        ]
    )
    assert message.interrupted
    assert message.finish == "interrupted"
    assert message.usage is None
    assert message.content == [{"type": "tool_call", "id": "call_1", "name": "f", "arguments": "{"}]
