"""Properties of the emulator's Responses wire: the stream says what the
whole response says, and any change to sealed reasoning is caught."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.cache._api import CacheOutcome
from tapelog.emulator._responses_input import _verified, seal_reasoning
from tapelog.emulator._responses_wire import Ids, output_items, stream_frames, usage_of
from tapelog.emulator._script import Reply, ToolCallSpec
from tapelog.log import decode

text = st.text(max_size=80)
calls = st.lists(
    st.builds(ToolCallSpec, name=st.from_regex(r"[a-z_]{1,12}", fullmatch=True), arguments=text),
    max_size=3,
)
replies = st.builds(
    Reply,
    text=text,
    reasoning=text,
    tool_calls=calls.map(tuple),
    finish=st.sampled_from([None, "length"]),
)


def _events(frames: list[bytes]) -> list[tuple[str, Any]]:
    out = []
    for frame in frames:
        head, data = frame.decode("utf-8").split("\n", 1)
        assert head.startswith("event: ")
        assert data.startswith("data: ")
        assert data.endswith("\n\n")
        out.append((head[len("event: ") :], decode(data[len("data: ") : -2])))
    return out


@settings(max_examples=80, deadline=None)
@given(reply=replies, encrypted=st.booleans())
def test_stream_deltas_rebuild_the_completed_output(reply: Reply, encrypted: bool) -> None:
    calls = tuple(
        ToolCallSpec(c.name, c.arguments, f"call_{i}") for i, c in enumerate(reply.tool_calls)
    )
    reply = Reply(text=reply.text, reasoning=reply.reasoning, tool_calls=calls, finish=reply.finish)
    ids = Ids(7, 1_700_000_000, "gpt-5")
    output = output_items(reply, ids, seal_reasoning if encrypted else None)
    usage = usage_of(CacheOutcome(10, 0, 0, 10), reply)
    frames = stream_frames({"model": "gpt-5"}, output, usage, ids, reply=reply).complete()
    events = _events(frames)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert all(name == data["type"] for name, data in events)
    # Deltas joined per output index are the text, summary and arguments of each item.
    joined: dict[int, str] = {}
    for name, data in events:
        if name.endswith(".delta"):
            joined[data["output_index"]] = joined.get(data["output_index"], "") + data["delta"]
    done = [data["item"] for name, data in events if name == "response.output_item.done"]
    final = events[-1][1]["response"]
    assert done == final["output"] == output
    for index, item in enumerate(output):
        if item["type"] == "reasoning":
            assert joined.get(index, "") == item["summary"][0]["text"]
            assert ("encrypted_content" in item) is encrypted
        elif item["type"] == "message":
            assert joined.get(index, "") == item["content"][0]["text"]
        else:
            assert joined.get(index, "") == item["arguments"]
    assert events[-1][0] == (
        "response.incomplete" if reply.finish == "length" else "response.completed"
    )
    assert final["usage"] == usage


@settings(max_examples=80, deadline=None)
@given(reasoning=text, position=st.integers(min_value=0), replacement=st.characters())
def test_any_change_to_sealed_reasoning_is_caught(
    reasoning: str, position: int, replacement: str
) -> None:
    sealed = seal_reasoning("rs_1", reasoning)
    assert _verified(sealed)
    at = position % len(sealed)
    changed = sealed[:at] + replacement + sealed[at + 1 :]
    assert _verified(changed) is (changed == sealed)
