"""The proxy's Responses translation carries every item: whatever items a
client sends, the responses wire sends exactly them back from the log's
messages (property), and those a log understands become its blocks."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.llm._api import ResponsesWire
from tapelog.proxy._responses_in import parse_responses, translate_responses

ids = st.sampled_from(["call_1", "call_2", "call_3"])
text = st.text(max_size=20)
extra = st.dictionaries(st.sampled_from(["id", "status"]), st.text(max_size=5), max_size=2)
user = st.builds(
    lambda t, e: {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": t}],
        **e,
    },
    text,
    extra,
)
developer = st.builds(lambda t: {"role": "developer", "content": t}, text)
call = st.builds(
    lambda i, n, a, e: {"type": "function_call", "call_id": i, "name": n, "arguments": a, **e},
    ids,
    st.sampled_from(["add", "ls"]),
    text,
    extra,
)
output = st.builds(
    lambda i, o, e: {"type": "function_call_output", "call_id": i, "output": o, **e},
    ids,
    text,
    extra,
)
reasoning = st.builds(
    lambda t, e: {"type": "reasoning", "summary": [{"type": "summary_text", "text": t}], **e},
    text,
    st.dictionaries(
        st.sampled_from(["id", "encrypted_content", "content"]), st.none() | text, max_size=3
    ),
)
answer = st.builds(
    lambda t, e: {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": t}],
        **e,
    },
    text,
    extra,
)
other = st.builds(lambda t: {"type": "web_search_call", "id": t, "status": "completed"}, text)
items = st.lists(st.one_of(user, developer, call, output, reasoning, answer, other), max_size=8)


def _carried(sent: list[Any]) -> list[Any]:
    request = parse_responses({"model": "m", "input": sent})
    wire = ResponsesWire()
    out: list[Any] = []
    for i, group in enumerate(request.messages):
        for message in translate_responses(group, f"messages[{i}]").messages:
            out.extend(wire.items(message))
    return out


@settings(max_examples=150, deadline=None)
@given(sent=items)
def test_every_item_is_carried_exactly(sent: list[Any]) -> None:
    assert _carried(sent) == sent


def test_bare_items_become_the_logs_blocks() -> None:
    sent = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "b.txt"},
    ]
    request = parse_responses({"model": "m", "input": sent})
    neutral = [
        m
        for i, group in enumerate(request.messages)
        for m in translate_responses(group, f"messages[{i}]").messages
    ]
    kinds = [(m["role"], [b["type"] for b in m["content"]]) for m in neutral]
    assert kinds == [
        ("user", ["text"]),
        ("assistant", ["reasoning", "tool_call"]),
        ("tool", ["tool_result"]),
        # A call sent with its own id is kept whole, and so is its output: the
        # log never holds a result without its call.
        ("assistant", ["item"]),
        ("user", ["item"]),
    ]
    assert _carried(sent) == sent
