"""Properties of both wires: determinism, and per-node cached assembly == straight encode."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.llm._api import AnthropicWire, BodyCache, OpenAIWire
from tapelog.log import encode
from tapelog.log._api import encode_str, freeze, thaw

from ._requests import make_request, text

WIRES = [
    OpenAIWire(dialect="openai"),
    OpenAIWire(dialect="deepseek"),
    OpenAIWire(dialect="compatible", send_back="tool_turns"),
    AnthropicWire(),
]

words = st.text(min_size=1, max_size=12)
arguments = st.dictionaries(
    st.text(max_size=5), st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=6)), max_size=3
).map(encode_str)
calls = st.builds(
    lambda i, args: {"type": "tool_call", "id": f"c{i}", "name": "read", "arguments": args},
    st.integers(0, 99),
    arguments,
)
assistant_blocks = st.one_of(
    words.map(lambda t: {"type": "text", "text": t}),
    st.builds(lambda t, s: {"type": "reasoning", "text": t, "signature": s}, words, words),
    calls,
)
messages = st.one_of(
    words.map(lambda t: text("user", t)),
    st.lists(assistant_blocks, min_size=1, max_size=3).map(
        lambda blocks: {"role": "assistant", "content": blocks}
    ),
    st.builds(
        lambda i, t, e: {
            "role": "tool",
            "content": [
                {"type": "tool_result", "tool_call_id": f"c{i}", "content": t, "is_error": e}
            ],
        },
        st.integers(0, 99),
        words,
        st.booleans(),
    ),
)
histories = st.lists(messages, min_size=1, max_size=8)


def _request(history: list[dict[str, Any]], wire: Any) -> Any:
    provider = "anthropic" if isinstance(wire, AnthropicWire) else "deepseek"
    return make_request(history, provider=provider, model="deepseek-chat", temperature=0.5)


@settings(max_examples=60, deadline=None)
@given(history=histories, wire_index=st.integers(0, len(WIRES) - 1))
def test_same_request_same_bytes(history: list[dict[str, Any]], wire_index: int) -> None:
    wire = WIRES[wire_index]
    again = type(wire)(
        **(
            {"dialect": wire.dialect, "send_back": wire.send_back}
            if isinstance(wire, OpenAIWire)
            else {}
        )
    )
    copy = thaw(freeze(history))
    assert wire.encode_body(_request(history, wire)) == again.encode_body(_request(copy, again))


@settings(max_examples=60, deadline=None)
@given(history=histories, wire_index=st.integers(0, len(WIRES) - 1))
def test_cached_assembly_equals_straight_encode_as_the_log_grows(
    history: list[dict[str, Any]], wire_index: int
) -> None:
    wire = WIRES[wire_index]
    cache = BodyCache()
    for end in range(1, len(history) + 1):
        # Each step sees re-frozen copies (not the same objects): equality must carry the hit.
        request = _request(thaw(freeze(history[:end])), wire)
        assembled = wire.encode_body(request, cache=cache)
        assert assembled == encode(wire.build_body(request))
        assert assembled == wire.encode_body(request)
    # No node is encoded twice: every later step reuses what earlier steps made.
    assert cache.misses <= len(history)


def test_a_node_whose_message_changed_is_encoded_again() -> None:
    wire = OpenAIWire()
    cache = BodyCache()
    first = make_request([text("user", "old")], seqs=[5])
    second = make_request([text("user", "new")], seqs=[5])
    assert b'"old"' in wire.encode_body(first, cache=cache)
    assert wire.encode_body(second, cache=cache) == wire.encode_body(second)
    assert cache.misses == 2


def test_a_new_replace_generation_clears_the_cache() -> None:
    wire = AnthropicWire()
    cache = BodyCache()
    cache.sync(0)
    wire.encode_body(make_request([text("user", "q")], provider="anthropic"), cache=cache)
    assert len(cache) == 1
    cache.sync(0)
    assert len(cache) == 1
    cache.sync(1)
    assert len(cache) == 0


def test_a_cache_moved_to_another_wire_starts_over() -> None:
    cache = BodyCache()
    request = make_request([text("user", "q")], provider="deepseek")
    OpenAIWire(dialect="deepseek").encode_body(request, cache=cache)
    body = OpenAIWire(dialect="openai").encode_body(request, cache=cache)
    assert body == OpenAIWire(dialect="openai").encode_body(request)
    assert cache.hits == 0


def test_the_joined_history_is_reused_within_one_session_only() -> None:
    wire = OpenAIWire(dialect="deepseek")
    cache = BodyCache()
    one = [text("user", "a"), text("assistant", "b")]
    first = replace(make_request(one, seqs=[1, 2]), session_id="s1")
    grown = replace(make_request([*one, text("user", "c")], seqs=[1, 2, 3]), session_id="s1")
    assert wire.encode_body(first, cache=cache) == wire.encode_body(first)
    assert wire.encode_body(grown, cache=cache) == wire.encode_body(grown)
    assert cache.misses == 3, "the grown request encoded only its new message"
    # Another session with the same seqs but other messages must not reuse those bytes.
    other = [text("user", "x"), text("assistant", "y"), text("user", "z")]
    foreign = replace(make_request(other, seqs=[1, 2, 3]), session_id="s2")
    assert wire.encode_body(foreign, cache=cache) == wire.encode_body(foreign)
    # A replace puts a new seq in the list: the run is not reused past it.
    compacted = replace(make_request([text("user", "sum"), *one[1:]], seqs=[9, 2]), session_id="s1")
    assert wire.encode_body(compacted, cache=cache) == wire.encode_body(compacted)
