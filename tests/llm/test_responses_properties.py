"""Properties of the Responses codec (random output items and random event streams).

output items -> the real event stream (random delta cuts) -> parser -> chunks ->
the assistant message (what the log holds) -> encoded back: the items sent are
the items the model returned (reasoning and unknown items verbatim), and the
same log gives the same bytes, with or without the piece cache.
"""

from __future__ import annotations

from typing import Any

import orjson
from httpx_sse import ServerSentEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.llm._api import BodyCache, ResponsesWire, assemble_message
from tapelog.llm._responses_stream import ResponsesStreamParser
from tapelog.log import decode, encode
from tapelog.log._api import encode_str, freeze, thaw

from ._requests import make_request, text
from ._responses_events import response_events

WIRE = ResponsesWire()

words = st.text(min_size=1, max_size=12)
ids = st.integers(0, 10**6)
arguments = st.dictionaries(
    st.text(max_size=5), st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=6)), max_size=3
).map(encode_str)

messages_out = st.builds(
    lambda n, t: {
        "id": f"msg_{n}",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": t, "annotations": [], "logprobs": []}],
    },
    ids,
    words,
)
calls_out = st.builds(
    lambda n, name, args: {
        "id": f"fc_{n}",
        "type": "function_call",
        "status": "completed",
        "arguments": args,
        "call_id": f"call_{n}",
        "name": name,
    },
    ids,
    st.sampled_from(["read", "exec_command", "write_stdin"]),
    arguments,
)
reasoning_out = st.builds(
    lambda n, parts, secret: {
        "id": f"rs_{n}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": p} for p in parts],
        "encrypted_content": secret,
    },
    ids,
    st.lists(words, max_size=3),
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
        min_size=1,
        max_size=80,
    ),
)
other_out = st.builds(
    lambda n, q: {
        "id": f"ws_{n}",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": q},
    },
    ids,
    words,
)
outputs = st.lists(
    st.one_of(messages_out, calls_out, reasoning_out, other_out), min_size=1, max_size=6
)
cuts = st.lists(st.integers(1, 7), min_size=1, max_size=4)
usages = st.builds(
    lambda i, c, o, r: {
        "input_tokens": i + c,
        "input_tokens_details": {"cached_tokens": c},
        "output_tokens": o + r,
        "output_tokens_details": {"reasoning_tokens": r},
        "total_tokens": i + c + o + r,
    },
    st.integers(0, 10**5),
    st.integers(0, 10**5),
    st.integers(0, 10**4),
    st.integers(0, 10**4),
)


def _sent_back(item: dict[str, Any]) -> dict[str, Any]:
    """What the loop sends back for an output item: reasoning and unknown items as
    they came; a message's text and a call's id, name and arguments."""
    if item["type"] == "message":
        part = {"type": "output_text", "text": item["content"][0]["text"]}
        return {"type": "message", "role": "assistant", "content": [part]}
    if item["type"] == "function_call":
        return {
            "type": "function_call",
            "call_id": item["call_id"],
            "name": item["name"],
            "arguments": item["arguments"],
        }
    return item


def _parse(events: list[dict[str, Any]]) -> list[Any]:
    parser = ResponsesStreamParser("openai")
    chunks: list[Any] = []
    for n, event in enumerate(events):
        data = orjson.dumps({**event, "sequence_number": n}).decode()
        chunks.extend(parser.feed(ServerSentEvent(event=event["type"], data=data)))
    assert parser.done
    chunks.extend(parser.end())
    return chunks


# Events that change nothing: progress, annotations, keep-alives, event types of
# a newer API version. The parser must pass over them wherever they fall.
noise_events = st.sampled_from(
    [
        {"type": "response.in_progress", "response": {"status": "in_progress"}},
        {"type": "response.output_text.annotation.added", "output_index": 0, "annotation": {}},
        {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"},
        {"type": "response.some_future_event", "output_index": 0, "delta": "not text"},
    ]
)
noises = st.lists(st.tuples(st.integers(1, 10**6), noise_events), max_size=4)


@settings(max_examples=60, deadline=None)
@given(items=outputs, cut=cuts, usage=usages, noise=noises)
def test_output_items_round_trip_through_the_log(
    items: list[dict[str, Any]],
    cut: list[int],
    usage: dict[str, Any],
    noise: list[tuple[int, dict[str, Any]]],
) -> None:
    events = list(response_events(items, usage=usage, cuts=cut))
    for at, event in noise:  # never after the terminal event
        events.insert(1 + at % (len(events) - 1), event)
    chunks = _parse(events)
    # The chunks are logged as events: they survive the log's own encoding.
    logged = [decode(encode(c)) for c in chunks]
    message = assemble_message(logged)
    assert not message.interrupted
    calls = any(i["type"] == "function_call" for i in items)
    assert message.finish == ("tool_calls" if calls else "stop")
    assert message.usage is not None
    cached = usage["input_tokens_details"]["cached_tokens"]
    assert message.usage["cache_read"] == cached
    assert message.usage["input"] == usage["input_tokens"] - cached
    assert message.usage["reasoning"] == usage["output_tokens_details"]["reasoning_tokens"]
    # Nothing the provider said is lost: each done message / call is its logged
    # envelope plus the text or arguments its deltas gave.
    envelopes = {c["index"]: thaw(c["item"]) for c in logged if c["kind"] == "output_item"}
    for index, item in enumerate(items):
        streamed = "".join(
            c.get("text", c.get("arguments", ""))
            for c in logged
            if c.get("index") == index and c["kind"] in ("text", "tool_call")
        )
        if item["type"] == "message":
            envelope = envelopes.pop(index)
            envelope["content"][0]["text"] = streamed
            assert envelope == item
        elif item["type"] == "function_call":
            assert {**envelopes.pop(index), "arguments": streamed} == item
    assert envelopes == {}
    assistant = {"role": "assistant", "content": thaw(message.content)}
    request = make_request([text("user", "go"), assistant], tools=())
    body = decode(WIRE.encode_body(request))
    assert body["input"][1:] == [_sent_back(i) for i in items]
    # Reasoning text is the summary, part by part.
    for block, item in zip(
        (b for b in message.content if b["type"] == "reasoning"),
        (i for i in items if i["type"] == "reasoning"),
        strict=True,
    ):
        assert block["text"] == "\n\n".join(p["text"] for p in item["summary"])


@settings(max_examples=30, deadline=None)
@given(items=outputs, cut=cuts)
def test_a_cut_stream_keeps_what_arrived_and_has_no_finish(
    items: list[dict[str, Any]], cut: list[int]
) -> None:
    events = list(response_events(items, cuts=cut))[:-1]  # no response.completed
    parser = ResponsesStreamParser("openai")
    chunks: list[Any] = []
    for event in events:
        chunks.extend(parser.feed(ServerSentEvent(event=event["type"], data=encode_str(event))))
    assert not parser.done
    message = assemble_message(chunks)
    assert message.interrupted
    texts = [i["content"][0]["text"] for i in items if i["type"] == "message"]
    assert [b["text"] for b in message.content if b["type"] == "text"] == texts


said = st.one_of(
    st.builds(
        lambda role, t: {"role": role, "content": [{"type": "text", "text": t}]},
        st.sampled_from(["user", "developer", "system"]),
        words,
    ),
    st.builds(
        lambda t, q: {
            "role": "user",
            "content": [
                {"type": "text", "text": t},
                {"type": "item", "item": {"type": "item_reference", "id": q}},
            ],
        },
        words,
        words,
    ),
)
assistant_blocks = st.one_of(
    words.map(lambda t: {"type": "text", "text": t}),
    st.builds(
        lambda t, s: {
            "type": "reasoning",
            "text": t,
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": t}],
            "encrypted_content": s,
        },
        words,
        words,
    ),
    words.map(lambda t: {"type": "reasoning", "text": t, "signature": "sig"}),
    st.builds(
        lambda i, args: {"type": "tool_call", "id": f"call_{i}", "name": "read", "arguments": args},
        ids,
        arguments,
    ),
    words.map(lambda q: {"type": "item", "item": {"type": "web_search_call", "q": q}}),
)
tool_results = st.builds(
    lambda i, t: {
        "role": "tool",
        "content": [
            {"type": "tool_result", "tool_call_id": f"call_{i}", "content": t, "is_error": False}
        ],
    },
    ids,
    st.one_of(words, st.lists(words.map(lambda t: {"type": "text", "text": t}), max_size=2)),
)
histories = st.lists(
    st.one_of(
        said,
        st.lists(assistant_blocks, min_size=1, max_size=4).map(
            lambda blocks: {"role": "assistant", "content": blocks}
        ),
        tool_results,
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=40, deadline=None)
@given(history=histories)
def test_same_log_same_bytes_cached_or_not_as_the_log_grows(history: list[dict[str, Any]]) -> None:
    cache = BodyCache()
    for n in range(1, len(history) + 1):
        part = history[:n]
        request = make_request(part, reasoning_effort="low")
        straight = WIRE.encode_body(request)
        assert straight == encode(WIRE.build_body(request))
        assert WIRE.encode_body(request, cache=cache) == straight
        copy = make_request(thaw(freeze(part)), reasoning_effort="low")
        assert ResponsesWire().encode_body(copy) == straight
        body = decode(straight)
        expected = [item for i, m in enumerate(part) for item in WIRE.items(m, where=f"m{i}")]
        assert body["input"] == thaw(freeze(expected))
        assert body["store"] is False


@settings(max_examples=40, deadline=None)
@given(history=histories, data=st.data())
def test_held_messages_are_left_out_of_the_input_cached_or_not(
    history: list[dict[str, Any]], data: st.DataObject
) -> None:
    """``held`` (a request continuing a provider-stored response): the input is
    the items of the messages after the held ones, the rest of the body is the
    same, and the bytes are the same with or without the piece cache."""
    cache = BodyCache()
    for n in range(1, len(history) + 1):
        part = history[:n]
        held = data.draw(st.integers(0, n))
        wire = ResponsesWire(held=held)
        request = make_request(part, reasoning_effort="low")
        straight = wire.encode_body(request)
        assert straight == encode(wire.build_body(request))
        assert wire.encode_body(request, cache=cache) == straight
        body, whole = decode(straight), decode(WIRE.encode_body(request))
        kept = [item for i, m in enumerate(part[held:]) for item in WIRE.items(m, where=f"m{i}")]
        assert body.pop("input") == thaw(freeze(kept))
        whole.pop("input")
        assert body == whole
